"""Training a memory network: `fit(config)`, the run `fastsoftmax-memn2n train` and
bench/bench_memn2n.py drive, `evaluate`, and its checkpoints (kind 'memn2n').

The paper's recipe (Sukhbaatar et al. 2015, §4.2): gradient-norm clipping at 40, the learning
rate halved every `anneal_every` epochs, linear start (no softmax in the attention until the
validation loss stops falling, at most `linear_start` epochs) and random noise (about 10%
empty memories added to training stories, for the temporal encoding). Where the authors'
Matlab code departs from that text, TrainConfig switches between the two (noise_style,
position_weights, empty_slots, clip_style, punctuation).
"""

import functools
import logging
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from ...optim import make_optimizer
from .. import babi, checkpoints
from ..checkpoints import rng_state
from ..trainer import run_epoch
from ..skeleton import (CLIP, COUNT_OR_OFF, FRACTION, NON_NEGATIVE, POSITIVE, RUN_OPTIONS, Recipe,
                        HalvingOptions, check_fields, count_parameters, epoch_seed, finish_run,
                        halving_lr, one_of, restore_model)
from ..vocabulary import Vocabulary
from .babi_data import check_source, describe as describe_source, load_babi
from .clipping import CLIP_STYLES, clip_groups, clip_per_group
from .data import NOISE_STYLES, World, answer_words, batches, build_vocabulary, encode, make_task
from .model import POSITION_WEIGHTS, MemN2N

__all__ = [
    "MAY_CHANGE_ON_RESUME", "TrainConfig", "evaluate", "evaluate_checkpoint", "evaluate_tasks",
    "fit", "load_checkpoint", "load_data", "model_from_checkpoint", "save_checkpoint",
    "support_loss",
]
logger = logging.getLogger(__name__)
KIND = "memn2n"
MAY_CHANGE_ON_RESUME = ("epochs", "test_size")
MODEL_KEYS = ("embed_dim", "hops", "memory_size", "tying", "position_encoding",
              "temporal_encoding", "output", "num_sampled", "tie_answers", "position_weights")
WORLD_KEYS = ("entities", "locations", "objects", "distractors")
# Options newer than some checkpoints, with the value those were trained with.
NEWER_OPTIONS = dict(babi_dir=None, babi_task=None, linear_fixed=False, tie_answers=False,
                     position_weights="sentence", empty_slots=False, noise_style="memories",
                     clip_style="global", punctuation=True)


@dataclass
class TrainConfig(HalvingOptions):
    """Every option of a run (the command line's flags, with - for _). The checkpoint is
    written after every epoch; None picks a new memn2n-<output>-<time>.pt here."""

    # the stories: generated ones of `task`, in a world of `entities` people, `locations`
    # places, `objects` things and `distractors` non-supporting sentences per story; or, with
    # babi_dir (the folder holding en/) and babi_task ('1'..'20', or 'all' trained jointly),
    # the real bAbI v1.2 files (babi_data.py), `task` and the world's options then unused
    task: str = "single"
    babi_dir: Optional[str] = None
    babi_task: Optional[str] = None
    entities: int = 4
    locations: int = 6
    objects: int = 4
    distractors: int = 5
    train_size: int = 10000  # validation included
    test_size: int = 1000
    valid_fraction: float = 0.1
    # the model. answers: 'task' (the head's classes are the task's few answers) or
    # 'vocabulary' (every word: where the sampled heads and 'hs' pay off)
    answers: str = "task"
    output: str = "full"
    num_sampled: int = 16
    embed_dim: int = 20
    hops: int = 3  # K
    memory_size: int = 50
    tying: str = "adjacent"
    # the answer layer is the last hop's output embedding (W^T = C^K, the paper's adjacent
    # tying); needs answers='vocabulary' and tying 'adjacent'
    tie_answers: bool = False
    position_encoding: bool = True
    temporal_encoding: bool = True
    # add the attention-supervision loss, support_weight × the mean over hops of
    # -log(attention mass on the supporting facts)
    supporting_facts: bool = False
    support_weight: float = 1.0
    # its training (and HalvingOptions')
    lr: float = 0.01
    clip: float = 40.0
    epochs: int = 15
    batch_size: int = 32
    linear_start: int = 0  # at most this many first epochs without softmax (0: off)
    # linear start lasts exactly `linear_start` epochs and the learning-rate schedule starts
    # after it (the authors' released code), instead of ending when the validation loss
    # stalls (the paper's text)
    linear_fixed: bool = False
    noise: float = 0.1  # expected share of empty memories added to each training story
    # Where we departed from the authors' Matlab code (MemN2N-babi-matlab). Their choice is
    # the default where it measured better on bAbI tasks 6, 15, 16 and 18 (position
    # weights, empty slots, clipping, punctuation:
    # bench/results/memn2n-babi-departures-cpu.csv); ours where it made no difference (noise).
    # 'memories' (empty memories inserted, attended) or 'time' (their gaps in the time
    # indices only: data.time_noise)
    noise_style: str = "memories"
    # 'sentence' (each sentence's own length), 'longest' (the longest of the training data)
    # or 'authors' (their weights): model.POSITION_WEIGHTS
    position_weights: str = "authors"
    # their memory: min(memory_size, the longest training story) slots, the empty ones in
    # the softmax with score 0 (False: empty slots masked out)
    empty_slots: bool = True
    # 'global' (all gradients' norm together), or per weight matrix as their code clips:
    # 'tensor' (Frobenius) or 'spectral' (their Matlab norm()): clipping.py
    clip_style: str = "spectral"
    # real bAbI files: keep '.' and '?' as words (True), or drop them as their parser does
    # (the generated stories keep theirs either way)
    punctuation: bool = False
    plot: Optional[str] = None  # a PNG of the attention per hop on the first test story

    def world(self) -> World:
        return World(**{k: getattr(self, k) for k in WORLD_KEYS})


def save_checkpoint(path: str, *, model: MemN2N, vocab: Vocabulary, answers: list, counts,
                    optimizer, epoch: int, history: list, config: TrainConfig,
                    schedule: dict) -> str:
    """`counts`: the answers' training counts, which rebuild a sampled head's sampler."""
    return checkpoints.save_checkpoint(path, KIND, dict(
        model_config=model.config, model=model.state_dict(), vocab=vocab.state_dict(),
        answers=list(answers), counts=counts, optimizer=optimizer.state_dict(), epoch=epoch,
        history=history, train_config=config.to_dict(), schedule=dict(schedule), rng=rng_state()))


def check_numbers(config) -> None:
    """The numeric options no run can use, refused by name before anything is read or written."""
    check_fields(config, POSITIVE, "lr")
    check_fields(config, NON_NEGATIVE, "support_weight")
    check_fields(config, CLIP, "clip")
    check_fields(config, FRACTION, "noise", "valid_fraction")
    check_fields(config, COUNT_OR_OFF, "anneal_every", "linear_start")
    check_fields(config, one_of(("task", "vocabulary"), "'task' or 'vocabulary'"), "answers")
    check_fields(config, one_of(("sgd", "adam"), "'sgd' or 'adam'"), "optimizer")
    check_fields(config, one_of(NOISE_STYLES), "noise_style")
    check_fields(config, one_of(POSITION_WEIGHTS), "position_weights")
    check_fields(config, one_of(CLIP_STYLES), "clip_style")
    check_fields(config, one_of((True, False)), "empty_slots", "punctuation")


RECIPE = Recipe(KIND, TrainConfig, logger, check_numbers, MAY_CHANGE_ON_RESUME,
                RUN_OPTIONS + ("plot",), NEWER_OPTIONS)
load_checkpoint = RECIPE.load_checkpoint


def model_from_checkpoint(state: dict):
    """(model in eval mode, vocabulary, answer words) of a loaded checkpoint."""
    counts = None if state["model_config"]["output"] == "full" else state["counts"]
    return (restore_model(MemN2N, state, "vocab_size", "num_answers", counts=counts).eval(),
            Vocabulary.from_state_dict(state["vocab"]), list(state["answers"]))


def _settle(values: dict, state: Optional[dict]) -> None:
    """Refuse what the settled options cannot run (a resumed run's included)."""
    if values["tie_answers"] and values["answers"] != "vocabulary":
        raise ValueError("tie_answers needs answers 'vocabulary' (one answer per word)")
    check_source(values["babi_dir"], values["babi_task"])  # before a file is claimed


def load_data(config: TrainConfig, vocab: Optional[Vocabulary] = None,
              answers: Optional[list] = None) -> dict:
    """The run's stories (train / valid / test), vocabulary, answer words, encoded splits and
    answer counts (for the sampled heads and 'hs'), all from the configuration's seed; or,
    with config.babi_dir, those of the real bAbI files (babi_data.load_babi)."""
    if config.babi_dir is not None or config.babi_task is not None:
        return load_babi(config, vocab, answers)
    world = config.world()
    split = make_task(config.task, train_size=config.train_size, test_size=config.test_size,
                      seed=config.seed, world=world, valid_fraction=config.valid_fraction)
    if vocab is None:
        vocab = build_vocabulary(config.task, world)
    if answers is None:
        answers = (vocab.itos if config.answers == "vocabulary"
                   else answer_words(config.task, world))
    encoded = {k: encode(v, vocab, answers) for k, v in split.items()}
    return dict(split, vocab=vocab, answers=answers, encoded=encoded,
                counts=babi.answer_counts(encoded["train"], len(answers)))


def _build(config: TrainConfig, data: dict) -> MemN2N:
    """The model of a new run; its departures' sizes come from the training stories (train
    and valid: the training file), as the authors' code takes them."""
    seen = data["encoded"]["train"] + data["encoded"]["valid"]
    longest = max([len(x[1]) for x in seen] + [len(w) for x in seen for w in x[0]])
    slots = min(config.memory_size, max(len(x[0]) for x in seen))
    return MemN2N(len(data["vocab"]), len(data["answers"]),
                  counts=None if config.output == "full" else data["counts"],
                  sentence_length=longest if config.position_weights != "sentence" else 0,
                  empty_slots=slots if config.empty_slots else 0,
                  **{k: getattr(config, k) for k in MODEL_KEYS})


@torch.no_grad()
def evaluate(model: MemN2N, items: list, *, batch_size: int = 256, device="cpu",
             linear: bool = False) -> dict:
    """Exact cross entropy, accuracy (%) and supporting-fact hit rate (%: hops whose most
    attended memory is a supporting fact) over encoded stories; `linear`: of the model
    without the attention's softmax (the one linear start trains). A story whose answer the
    model cannot name (id -1, babi_data.UNKNOWN_ANSWER) is wrong and out of the loss."""
    was = model.training
    model.eval()
    sums, hops = [], 0  # [loss, correct, hits] per batch, added up on the device
    for b in batches(items, batch_size, memory_size=model.config["memory_size"]):
        b = b.to(device)
        u, attention = model.features(b.story, b.mask, b.query, linear)
        hit = sum((b.support.gather(1, p.argmax(1, keepdim=True)) > 0).sum() for p in attention)
        known = b.answer >= 0
        sums.append(torch.stack([model.head.full_loss(u[known], b.answer[known],
                                                      reduction="sum").double(),
                                 (model.head.predict(u) == b.answer).sum().double(),
                                 torch.as_tensor(hit, device=u.device).double()]))
        hops += len(b) * len(attention)
    loss, correct, hits = (torch.stack(sums).sum(0).tolist() if sums else (0.0, 0.0, 0.0))
    model.train(was)
    n = max(len(items), 1)
    return dict(loss=loss / n, accuracy=100.0 * correct / n,
                support_hits=100.0 * hits / max(hops, 1))


def support_loss(scores: list, support: torch.Tensor) -> torch.Tensor:
    """The supervised memory network's attention loss: mean over hops and stories of
    -log(attention mass on hop k's target facts), the attention being the softmax of the
    scores ([B, M] per hop, -inf on padding), also during linear start.

    support [B, M] holds each fact's rank in the reading order. Hop k's targets are the
    facts of rank min(k, last rank): along a chain (task two: the object's fact, then its
    carrier's move) hop 1 reads the first fact and later hops the next; facts of one rank
    (a single fact, counting's set) are every hop's target. Pulling every hop toward the
    whole set instead lets all hops settle on the fact easiest to find (the one naming the
    object) and never read the location (two: 16.8% test accuracy, chance). Stories whose
    facts fell out of memory do not count."""
    last = support.max(1).values  # [B]
    has = last > 0
    if not has.any():
        return scores[0].new_zeros(())
    total = 0.0
    for k, s in enumerate(scores, 1):
        target = support == torch.clamp(last, max=k)[:, None]  # [B, M]
        log_p = torch.log_softmax(s, dim=-1)
        mass = torch.logsumexp(log_p.masked_fill(~target, -math.inf), dim=-1)
        total = total + (-mass[has]).mean()
    return total / len(scores)


@RECIPE.restartable
def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a memory network; returns dict(model, history,
    test, data, config, checkpoint). The run checkpoints after every epoch (see
    TrainConfig.checkpoint); on resume the options in `given` (default: those differing from
    the defaults) must agree with the checkpoint except MAY_CHANGE_ON_RESUME. Progress goes to
    `log` (default: this module's logger, at INFO)."""
    config, state = RECIPE.start(config, given, _settle)
    model, data = RECIPE.model_and_data(config, state, data, restore=model_from_checkpoint,
                                        load_data=load_data, build=_build)
    model.to(config.device).train()
    opt = make_optimizer(model, config.optimizer, config.lr)
    schedule = dict(state["schedule"]) if state is not None else dict(
        linear=config.linear_start > 0, best=math.inf)
    trainer = RECIPE.trainer(model, opt, config, state, log=log, state=lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=data["vocab"].state_dict(),
        answers=list(data["answers"]), counts=data["counts"], schedule=dict(schedule)))
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    _log_start(trainer, config, data, model)

    def train_epoch(epoch: int) -> dict:
        # --linear-fixed: the schedule starts once linear start is over (the authors' code)
        after = epoch - 1 - (config.linear_start if config.linear_fixed else 0)
        lr = halving_lr(opt, config.lr, after, config.anneal_every)
        linear = schedule["linear"] and epoch <= config.linear_start
        stats = _train_pass(trainer, epoch, _step_loss(model, config, linear), batches(
            train, config.batch_size, memory_size=config.memory_size, shuffle=True,
            seed=epoch_seed(config.seed, epoch), noise=config.noise,
            noise_style=config.noise_style), len(train))
        # During linear start the model being trained, and so the one whose validation loss
        # says when to stop, has no softmax.
        ev = evaluate(model, valid, device=config.device, linear=linear) if valid else dict(
            loss=math.nan, accuracy=math.nan, support_hits=math.nan)
        if linear and not config.linear_fixed and not ev["loss"] < schedule["best"]:
            schedule["linear"] = False  # the paper: softmax back once valid loss stalls
        schedule["best"] = min(schedule["best"], ev["loss"])
        return dict(epoch=epoch, train_loss=stats["loss"], valid_loss=ev["loss"],
                    valid_accuracy=ev["accuracy"], support_hits=ev["support_hits"], lr=lr,
                    linear=linear, seconds=stats["seconds"])

    trainer.fit(config.epochs, train_epoch, _describe)
    return _finish(trainer, data)


def _log_start(trainer, config: TrainConfig, data: dict, model: MemN2N) -> None:
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    if "tasks" in data:
        trainer.log(describe_source(data))
    trainer.log(f"{config.babi_task or config.task}: {len(train)} train / {len(valid)} valid / "
                f"{len(data['encoded']['test'])} test stories, vocab {len(data['vocab'])}, "
                f"{len(data['answers'])} answers, {count_parameters(model)} "
                f"parameters, output {config.output}, {config.hops} hops, tying {config.tying}")
    trainer.log(f"checkpoint: {config.checkpoint}")


def _train_pass(trainer, epoch: int, step_loss: Callable, data, examples: int) -> dict:
    """One epoch's steps: the trainer's (all gradients clipped together) or, with
    clip_style 'tensor' / 'spectral', each weight matrix clipped on its own (clipping.py)."""
    model, config = trainer.model, trainer.config
    after_step = functools.partial(_zero_padding_rows, model)
    if config.clip_style == "global" or not config.clip > 0:
        return trainer.train_epoch(epoch, step_loss, data, examples, after_step=after_step)
    groups = clip_groups(model)
    return run_epoch(step_loss, data, trainer.optimizer, after_step=after_step,
                     before_step=lambda: clip_per_group(groups, config.clip, config.clip_style),
                     progress=trainer.epoch_bar(math.ceil(examples / config.batch_size), epoch,
                                                config.progress))


def _step_loss(model: MemN2N, config: TrainConfig, linear: bool) -> Callable:
    def step_loss(b):
        b = b.to(config.device)
        u, _, scores = model.hops_of(b.story, b.mask, b.query, linear, b.age)
        loss = model.head(u, b.answer)
        if config.supporting_facts:
            loss = loss + config.support_weight * support_loss(scores, b.support)
        return loss, len(b)
    return step_loss


def _zero_padding_rows(model: MemN2N) -> None:
    with torch.no_grad():  # the padding word stays the zero vector
        for e in model.embeddings:
            e.weight[0].zero_()


def _describe(row: dict) -> str:
    return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid loss "
            f"{row['valid_loss']:.4f} acc {row['valid_accuracy']:.1f}% | support hits "
            f"{row['support_hits']:.0f}% | lr {row['lr']:.3g}"
            f"{' linear' if row['linear'] else ''} | {row['seconds']:.1f} s")


def _finish(trainer, data: dict) -> dict:
    """fit's result: the trained model's test results, logged, per bAbI task too (by_task),
    and the attention plot written when asked for."""
    model, config = trainer.model, trainer.config
    test = evaluate(model, data["encoded"]["test"], device=config.device)
    by_task = evaluate_tasks(model, data, config.device)
    result = finish_run(trainer, data, test, f"test accuracy {test['accuracy']:.2f}% "
                        f"({len(data['encoded']['test'])} stories), support hits "
                        f"{test['support_hits']:.1f}%",
                        *(f"bAbI task {task}: test error {100 - res['accuracy']:.1f}%"
                          for task, res in by_task.items()))
    if config.plot:
        from .plots import plot_attention

        plot_attention(model, data["vocab"], data["answers"], data["test"][0], config.plot,
                       overwrite=True, device=config.device)
        trainer.log(f"wrote {config.plot}")
    return dict(result, by_task=by_task)


def evaluate_tasks(model: MemN2N, data: dict, device="cpu") -> dict:
    """{bAbI task: evaluate on its test stories} of a real-data run ({} otherwise)."""
    return {task: evaluate(model, split["test"], device=device)
            for task, split in data.get("by_task", {}).items()}


def evaluate_checkpoint(path: str, *, test_size: Optional[int] = None, seed: Optional[int] = None,
                        device: str = "cpu", babi_dir: Optional[str] = None) -> dict:
    """Test accuracy of a checkpoint on its run's test stories (or, with another `seed`, on
    new stories of the same world), with the story data it drew. A real-bAbI run rereads
    the files it trained on (from `babi_dir` if they moved), with `by_task` its per-task
    results."""
    state = load_checkpoint(path)
    model, vocab, answers = model_from_checkpoint(state)
    config = RECIPE.saved_config(state, babi_dir=babi_dir, test_size=test_size, seed=seed)
    if babi_dir is not None and config.babi_task is None:
        raise ValueError(f"{path} was trained on generated stories, not on bAbI files")
    if config.babi_task is not None and (test_size is not None or seed is not None):
        raise ValueError(f"{path} was trained on bAbI files, whose test set is fixed: "
                         f"test_size and seed apply to generated stories")
    data = load_data(config, vocab, answers)
    model.to(device)
    return dict(evaluate(model, data["encoded"]["test"], device=device), model=model,
                data=data, stories=len(data["test"]),
                by_task=evaluate_tasks(model, data, device))

"""Training a memory network: `fit(config)`, the run `fastsoftmax-memn2n train` and
bench/bench_memn2n.py drive, `evaluate`, and its checkpoints (kind 'memn2n').

The paper's recipe (Sukhbaatar et al. 2015, §4.2): gradient-norm clipping at 40, the learning
rate halved every `anneal_every` epochs, linear start (no softmax in the attention until the
validation loss stops falling, at most `linear_start` epochs) and random noise (about 10%
empty memories added to training stories, for the temporal encoding).
"""

import logging
import math
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import torch

from .. import checkpoints
from ..checkpoints import claim_files, rng_state, run_values
from ..trainer import RunOptions, Trainer, run_epoch
from ..vocabulary import Vocabulary
from .babi_data import check_source, describe as describe_source, load_babi
from .data import World, answer_words, batches, build_vocabulary, encode, make_task
from .model import MemN2N

logger = logging.getLogger(__name__)
KIND = "memn2n"
RUN_OPTIONS = ("resume", "force", "device", "progress", "checkpoint", "plot")
MAY_CHANGE_ON_RESUME = ("epochs", "test_size")
MODEL_KEYS = ("embed_dim", "hops", "memory_size", "tying", "position_encoding",
              "temporal_encoding", "output", "num_sampled", "tie_answers")
WORLD_KEYS = ("entities", "locations", "objects", "distractors")
# Options newer than some checkpoints, with the value those were trained with.
NEWER_OPTIONS = dict(babi_dir=None, babi_task=None, linear_fixed=False, tie_answers=False)


@dataclass
class TrainConfig(RunOptions):
    """Every option of a run (the command line's flags, with - for _). Notable ones:

    Args:
        answers: 'task' (the head's classes are the task's few answers) or 'vocabulary' (every
            word: where the sampled heads and 'hs' pay off).
        tie_answers: the answer layer is the last hop's output embedding (W^T = C^K, the
            paper's adjacent tying); needs answers='vocabulary' and tying 'adjacent'.
        supporting_facts: add the attention-supervision loss, support_weight × the mean over hops
            of -log(attention mass on the supporting facts).
        linear_start: at most this many first epochs without softmax (0: off).
        linear_fixed: linear start lasts exactly `linear_start` epochs and the learning-rate
            schedule starts after it (the authors' released code), instead of ending when
            the validation loss stalls (the paper's text).
        noise: expected share of empty memories added to each training story.
        checkpoint: written after every epoch; None picks a new memn2n-<output>-<time>.pt here.
        babi_dir, babi_task: train on the real bAbI v1.2 files (babi_data.py) of task '1'..'20'
            or 'all' (jointly) under babi_dir (the folder holding en/) instead of generated
            stories; `task` and the world's options are then unused.
    """

    # the stories
    task: str = "single"
    babi_dir: Optional[str] = None
    babi_task: Optional[str] = None
    entities: int = 4
    locations: int = 6
    objects: int = 4
    distractors: int = 5
    train_size: int = 10000
    test_size: int = 1000
    valid_fraction: float = 0.1
    # the model
    answers: str = "task"
    output: str = "full"
    num_sampled: int = 16
    embed_dim: int = 20
    hops: int = 3
    memory_size: int = 50
    tying: str = "adjacent"
    tie_answers: bool = False
    position_encoding: bool = True
    temporal_encoding: bool = True
    supporting_facts: bool = False
    support_weight: float = 1.0
    # its training
    optimizer: str = "adam"
    lr: float = 0.01
    anneal_every: int = 5
    clip: float = 40.0
    epochs: int = 15
    batch_size: int = 32
    linear_start: int = 0
    linear_fixed: bool = False
    noise: float = 0.1
    seed: int = 0
    plot: Optional[str] = None

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


def load_checkpoint(path: str, map_location="cpu") -> dict:
    """A checkpoint of this model (its kind checked), a ValueError naming the file
    otherwise."""
    return checkpoints.load_checkpoint(path, KIND, map_location)


def model_from_checkpoint(state: dict):
    """(model in eval mode, vocabulary, answer words) of a loaded checkpoint."""
    config = dict(state["model_config"])
    model = MemN2N(config.pop("vocab_size"), config.pop("num_answers"),
                   counts=None if config["output"] == "full" else state["counts"], **config)
    model.load_state_dict(state["model"])
    return model.eval(), Vocabulary.from_state_dict(state["vocab"]), list(state["answers"])


def _resolve(config: TrainConfig, state: Optional[dict], given: Optional[Iterable[str]]
             ) -> TrainConfig:
    values = run_values(config, state, given, may_change=MAY_CHANGE_ON_RESUME,
                        run_options=RUN_OPTIONS, added=NEWER_OPTIONS)
    if values["answers"] not in ("task", "vocabulary"):
        raise ValueError(f"answers must be 'task' or 'vocabulary', got {values['answers']!r}")
    if values["tie_answers"] and values["answers"] != "vocabulary":
        raise ValueError("tie_answers needs answers 'vocabulary' (one answer per word)")
    if values["optimizer"] not in ("sgd", "adam"):
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {values['optimizer']!r}")
    if values["device"] is None:
        values["device"] = "cuda" if torch.cuda.is_available() else "cpu"
    check_source(values["babi_dir"], values["babi_task"])  # before a file is claimed
    claim_files(values, KIND, config)
    return TrainConfig(**values)


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
    counts = torch.ones(len(answers), dtype=torch.float64)  # +1: every answer can be drawn
    for item in encoded["train"]:
        counts[item[2]] += 1
    return dict(split, vocab=vocab, answers=answers, encoded=encoded, counts=counts)


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


def check_numbers(config) -> None:
    """The numeric options no run can use, refused by name before anything is read or written."""
    def bad(name, rule):
        value = getattr(config, name)
        raise ValueError(f"{name} must be {rule}, got {value}")
    if not (math.isfinite(config.lr) and config.lr > 0):
        bad("lr", "a positive number")
    if not (math.isfinite(config.support_weight) and config.support_weight >= 0):
        bad("support_weight", "a number ≥ 0")
    if not (math.isfinite(config.clip) and config.clip >= 0):
        bad("clip", "a number ≥ 0 (0: off)")
    if not 0 <= config.noise < 1:
        bad("noise", "in [0, 1)")
    for name in ("anneal_every", "linear_start"):
        if getattr(config, name) < 0:
            bad(name, "an integer ≥ 0 (0: off)")


def fit(config, *, data: Optional[dict] = None, given=None, log: Optional[Callable] = None
        ) -> dict:
    """Train (or, with config.resume, continue) a memory network; returns dict(model, history,
    test, data, config, checkpoint). The run checkpoints after every epoch (see
    TrainConfig.checkpoint); on resume the options in `given` (default: those differing from
    the defaults) must agree with the checkpoint except MAY_CHANGE_ON_RESUME. Progress goes to
    `log` (default: this module's logger, at INFO)."""
    if isinstance(config, dict):
        config = TrainConfig(**config)
    check_numbers(config)
    state = load_checkpoint(config.resume) if config.resume else None
    config = _resolve(config, state, given)
    if state is not None:
        model, vocab, answers = model_from_checkpoint(state)
        data = data or load_data(config, vocab, answers)
    else:
        data = data or load_data(config)
        torch.manual_seed(config.seed)
        model = MemN2N(len(data["vocab"]), len(data["answers"]),
                       counts=None if config.output == "full" else data["counts"],
                       **{k: getattr(config, k) for k in MODEL_KEYS})
    model.to(config.device).train()
    opt_cls = torch.optim.Adam if config.optimizer == "adam" else torch.optim.SGD
    opt = opt_cls(model.parameters(), lr=config.lr)
    schedule = dict(linear=config.linear_start > 0, best=math.inf)
    trainer = Trainer(KIND, model, opt, config, log=log, module_logger=logger, state=lambda: dict(
        model_config=model.config, model=model.state_dict(), vocab=data["vocab"].state_dict(),
        answers=list(data["answers"]), counts=data["counts"], schedule=dict(schedule)))
    if state is not None:
        trainer.resume(state)
        schedule = state["schedule"]
        trainer.log(f"resuming {config.resume}: {trainer.epoch} epochs done, training to epoch "
                    f"{config.epochs}")
    train, valid = data["encoded"]["train"], data["encoded"]["valid"]
    if "tasks" in data:
        trainer.log(describe_source(data))
    trainer.log(f"{config.babi_task or config.task}: {len(train)} train / {len(valid)} valid / "
                f"{len(data['encoded']['test'])} test stories, vocab {len(data['vocab'])}, "
                f"{len(data['answers'])} answers, {sum(p.numel() for p in model.parameters())} "
                f"parameters, output {config.output}, {config.hops} hops, tying {config.tying}")
    trainer.log(f"checkpoint: {config.checkpoint}")

    def zero_padding_rows() -> None:
        with torch.no_grad():  # the padding word stays the zero vector
            for e in model.embeddings:
                e.weight[0].zero_()

    def train_epoch(epoch: int) -> dict:
        after = epoch - 1 - (config.linear_start if config.linear_fixed else 0)
        lr = config.lr * 0.5 ** (max(after, 0) // config.anneal_every) if config.anneal_every \
            else config.lr
        for group in opt.param_groups:
            group["lr"] = lr
        linear = schedule["linear"] and epoch <= config.linear_start

        def step_loss(b):
            b = b.to(config.device)
            u, _, scores = model.hops_of(b.story, b.mask, b.query, linear)
            loss = model.head(u, b.answer)
            if config.supporting_facts:
                loss = loss + config.support_weight * support_loss(scores, b.support)
            return loss, len(b)

        stats = run_epoch(step_loss, batches(train, config.batch_size,
                                             memory_size=config.memory_size, shuffle=True,
                                             seed=config.seed * 100003 + epoch - 1,
                                             noise=config.noise), opt,
                          parameters=list(model.parameters()), clip=config.clip,
                          after_step=zero_padding_rows, progress=trainer.epoch_bar(
                              math.ceil(len(train) / config.batch_size), epoch, config.progress))
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

    def describe(row: dict) -> str:
        return (f"epoch {row['epoch']:3d} | train loss {row['train_loss']:.4f} | valid loss "
                f"{row['valid_loss']:.4f} acc {row['valid_accuracy']:.1f}% | support hits "
                f"{row['support_hits']:.0f}% | lr {row['lr']:.3g}"
                f"{' linear' if row['linear'] else ''} | {row['seconds']:.1f} s")

    history = trainer.fit(config.epochs, train_epoch, describe)
    test = evaluate(model, data["encoded"]["test"], device=config.device)
    trainer.log(f"test accuracy {test['accuracy']:.2f}% ({len(data['encoded']['test'])} stories), "
        f"support hits {test['support_hits']:.1f}%")
    by_task = evaluate_tasks(model, data, config.device)
    for task, res in by_task.items():
        trainer.log(f"bAbI task {task}: test error {100 - res['accuracy']:.1f}%")
    trainer.log(f"saved {config.checkpoint}")
    if config.plot:
        from .plots import plot_attention

        plot_attention(model, data["vocab"], data["answers"], data["test"][0], config.plot,
                       overwrite=True, device=config.device)
        trainer.log(f"wrote {config.plot}")
    return dict(model=model, history=history, test=test, data=data, config=config,
                checkpoint=config.checkpoint, by_task=by_task)


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
    config = TrainConfig(**dict(state["train_config"], resume=None, checkpoint=None))
    if babi_dir is not None:
        if config.babi_task is None:
            raise ValueError(f"{path} was trained on generated stories, not on bAbI files")
        config.babi_dir = babi_dir
    if config.babi_task is not None and (test_size is not None or seed is not None):
        raise ValueError(f"{path} was trained on bAbI files, whose test set is fixed: "
                         f"test_size and seed apply to generated stories")
    if test_size is not None:
        config.test_size = test_size
    if seed is not None:
        config.seed = seed
    data = load_data(config, vocab, answers)
    model.to(device)
    return dict(evaluate(model, data["encoded"]["test"], device=device), model=model,
                data=data, stories=len(data["test"]),
                by_task=evaluate_tasks(model, data, device))

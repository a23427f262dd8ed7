"""A small Llama trained from scratch on WikiText-2 (word level, V = 33,278) through
fastsoftmax.integrations.transformers.patch: the exact softmax against the sampled one.

    python bench/bench_hf_pretrain.py equal-time --budget-s 60 --valid-tokens 65536 --jobs 6
    python bench/bench_hf_pretrain.py num-sampled --steps 150 --valid-tokens 65536 --jobs 3

equal-time: every (seed, head) trains for the same time budget, then the validation perplexity
is measured with the exact loss (model.eval()) on the whole validation split. Time is the
process's CPU time (time.process_time) with one torch thread: on a machine of its own that is
its wall time, and on a shared one it leaves out the time other work held the core (a
wall-clock budget of 300 s bought the exact loss 97 steps in one run and 42 in the next, at
load averages between 10 and 15).
Rows go to bench/results/hf-pretrain-cpu.csv.
num-sampled: one seed, a fixed number of steps per head (so step times compare), the same
evaluation; a head is `exact` or a number of sampled classes. Rows go to
bench/results/num-sampled-cpu.csv.

The model (transformers.LlamaConfig, random init from the seed, so both heads of a seed start
from the same weights): 2 layers, hidden 128, 4 heads, MLP 512, untied lm_head, float32.
Training: AdamW (lr 2e-3, weight decay 0.01), a linear warm-up over the first 30 steps then
a cosine decay to zero over the budget (its elapsed fraction of CPU time for `equal-time`, of the
steps for `num-sampled`), batches of 16 windows of 64 tokens read in order from 16 streams
of the training split (fastsoftmax.models.lm.data.batchify). The sampled head draws from the
training unigram counts to the power 0.75, from a generator seeded with the seed.
Evaluation: non-overlapping windows of 64 tokens, each predicting its 64 next tokens
(shift_labels): every validation token is scored once but the first and the tail that does
not fill a window (217,600 of WikiText-2's 217,646), or of its first `--valid-tokens`.

Each run is a process of its own with one torch thread, `--jobs` at a time; the machine's
1-minute load average at its start and end goes into its rows with the wall time, since even
CPU time stretches somewhat on a loaded machine (shared caches and memory bandwidth).
"""

import argparse
import concurrent.futures
import math
import multiprocessing
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.dirname(BENCH))

from common import DATA, RESULTS, write_results  # noqa: E402

MODEL = dict(hidden=128, layers=2, heads=4, mlp=512)
BATCH, SEQ = 16, 64
LR, WEIGHT_DECAY, WARMUP = 2e-3, 0.01, 30
EVAL_BATCH = 64


def load_corpus(data_dir):
    from fastsoftmax.models.lm.data import Corpus

    return Corpus(data_dir, splits=("train", "valid"))


def build_model(vocab_size, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab_size, hidden_size=MODEL["hidden"],
        intermediate_size=MODEL["mlp"], num_hidden_layers=MODEL["layers"],
        num_attention_heads=MODEL["heads"], num_key_value_heads=MODEL["heads"],
        max_position_embeddings=SEQ, tie_word_embeddings=False, attn_implementation="sdpa")
    return transformers.LlamaForCausalLM(config).float()


def patch_head(model, head, counts, seed):
    """`head`: "exact" or the number of sampled classes (a string of digits)."""
    import torch

    from fastsoftmax.integrations.transformers import patch

    if head == "exact":
        return patch(model, loss="exact")
    generator = torch.Generator().manual_seed(seed)
    return patch(model, loss="sampled", num_sampled=int(head), counts=counts,
                 generator=generator)


def learning_rate(step, fraction):
    """Warm-up over WARMUP steps, then a cosine from LR to 0 as `fraction` (of the budget
    spent) goes from 0 to 1."""
    warm = min(1.0, (step + 1) / WARMUP)
    return LR * warm * 0.5 * (1.0 + math.cos(math.pi * min(fraction, 1.0)))


def train(model, stream, budget_s=None, steps=None):
    """Trains until `budget_s` CPU seconds of training have passed or `steps` steps are
    done; returns (steps, CPU seconds, the median step's CPU seconds, wall seconds, the last
    50 steps' mean loss)."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    model.train()
    windows = (stream.size(1) - 1) // SEQ
    done, spent, step_times, losses = 0, 0.0, [], []
    wall_start = time.perf_counter()
    while (budget_s is None or spent < budget_s) and (steps is None or done < steps):
        fraction = spent / budget_s if budget_s else done / steps
        for group in opt.param_groups:
            group["lr"] = learning_rate(done, fraction)
        i = (done % windows) * SEQ
        inputs, targets = stream[:, i:i + SEQ], stream[:, i + 1:i + 1 + SEQ]
        start = time.process_time()
        loss = model(input_ids=inputs, labels=inputs, shift_labels=targets).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step_times.append(time.process_time() - start)
        spent += step_times[-1]
        losses.append(loss.item())
        done += 1
    return (done, spent, statistics.median(step_times), time.perf_counter() - wall_start,
            statistics.mean(losses[-50:]))


def validation_ppl(model, ids):
    """exp of the mean exact cross entropy over the validation tokens of whole windows."""
    import torch

    model.eval()
    windows = (ids.numel() - 1) // SEQ
    inputs = ids[:windows * SEQ].view(windows, SEQ)
    targets = ids[1:windows * SEQ + 1].view(windows, SEQ)
    total = 0.0
    with torch.no_grad():
        for i in range(0, windows, EVAL_BATCH):
            x, y = inputs[i:i + EVAL_BATCH], targets[i:i + EVAL_BATCH]
            # num_items_in_batch=1: the loss is the sum over the batch's tokens.
            total += model(input_ids=x, labels=x, shift_labels=y,
                           num_items_in_batch=1).loss.item()
    return math.exp(total / targets.numel()), targets.numel()


def run(job):
    """One (seed, head) in a fresh process; returns its result rows."""
    import torch

    from fastsoftmax.models.lm.data import batchify

    torch.set_num_threads(1)
    corpus = load_corpus(job["data"])
    vocab = len(corpus.vocab)
    model = build_model(vocab, job["seed"])
    patch_head(model, job["head"], corpus.vocab.counts, job["seed"])
    stream = batchify(corpus["train"], BATCH)
    load_start = os.getloadavg()[0]
    steps, seconds, step_s, wall_s, train_loss = train(model, stream, job["budget_s"],
                                                       job["steps"])
    eval_start = time.process_time()
    valid = corpus["valid"][:job["valid_tokens"]]
    ppl, tokens = validation_ppl(model, valid)
    eval_s = time.process_time() - eval_start
    provider = "exact" if job["head"] == "exact" else f"sampled/{job['head']}"
    shape = (f"seed={job['seed']} V={vocab} D={MODEL['hidden']} layers={MODEL['layers']} "
             f"B={BATCH} T={SEQ}" + (f" budget_cpu_s={job['budget_s']:g}" if job["budget_s"]
                                      else f" steps={job['steps']}"))
    metrics = dict(steps=steps, train_cpu_s=seconds, train_wall_s=wall_s,
                   median_step_cpu_s=step_s, tokens_per_cpu_s=steps * BATCH * SEQ / seconds,
                   train_loss_last50=train_loss, valid_ppl=ppl, valid_tokens=tokens,
                   eval_cpu_s=eval_s,
                   loadavg_1m_start=load_start, loadavg_1m_end=os.getloadavg()[0])
    print(f"{provider} seed {job['seed']}: {steps} steps in {seconds:.0f} CPU s "
          f"({wall_s:.0f} s wall), "
          f"valid ppl {ppl:.1f}", flush=True)
    return [dict(case="wikitext-2/llama-pretrain", provider=provider, shape=shape, metric=m,
                 value=v) for m, v in metrics.items()]


def check_head(text):
    if text == "exact" or (text.isdigit() and 0 < int(text) < 33278):
        return text
    raise argparse.ArgumentTypeError(
        f"a head is 'exact' or a number of sampled classes below V = 33,278, got {text!r}")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("equal-time", "num-sampled"))
    ap.add_argument("--heads", nargs="+", type=check_head,
                    help="'exact' and/or numbers of sampled classes (equal-time: exact 1024; "
                         "num-sampled: exact 4096 1024 256 64)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None,
                    help="equal-time: 0 1 2; num-sampled: 0")
    ap.add_argument("--budget-s", type=float, default=60.0,
                    help="equal-time: CPU seconds of training per run (default 60)")
    ap.add_argument("--steps", type=int, default=150,
                    help="num-sampled: steps per run (default 150)")
    ap.add_argument("--valid-tokens", type=int, default=None,
                    help="evaluate on this many first validation tokens (default: all)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    ap.add_argument("--data", default=os.path.join(DATA, "wikitext-2"),
                    help="the WikiText-2 folder (wiki.{train,valid}.tokens)")
    ap.add_argument("--out", default=None, help="the CSV to append to (default: the mode's)")
    args = ap.parse_args(argv)
    for name in ("budget_s", "steps", "jobs"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    if args.valid_tokens is not None and args.valid_tokens <= SEQ:
        ap.error(f"--valid-tokens must exceed one window of {SEQ} tokens")
    if not os.path.isdir(args.data):
        ap.error(f"no WikiText-2 folder at {args.data} (give --data)")
    timed = args.mode == "equal-time"
    # The slowest run first, so that it does not start last.
    args.heads = args.heads or (["exact", "1024"] if timed else ["exact", "4096", "1024", "256",
                                                                  "64"])
    args.seeds = args.seeds if args.seeds is not None else ([0, 1, 2] if timed else [0])
    name = "hf-pretrain-cpu.csv" if timed else "num-sampled-cpu.csv"
    args.out = args.out or os.path.join(RESULTS, name)
    return args


def main(argv=None):
    args = parse_args(argv)
    timed = args.mode == "equal-time"
    jobs = [dict(seed=s, head=h, data=args.data, budget_s=args.budget_s if timed else None,
                 steps=None if timed else args.steps, valid_tokens=args.valid_tokens)
            for s in args.seeds for h in args.heads]
    import torch

    torch.set_num_threads(1)  # the rows' device names the runs' thread count
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        for done in concurrent.futures.as_completed([pool.submit(run, j) for j in jobs]):
            # Each run's rows are written as it ends: a killed sweep keeps the runs done.
            write_results("hf-pretrain", "cpu", done.result(), path=args.out)
    print(f"rows appended to {os.path.relpath(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peak memory and time of training steps of a one-layer Hugging Face Llama on the CPU: the
unpatched loss (transformers' ForCausalLMLoss on [tokens, V] logits), fastsoftmax's
`patch(loss="exact")` (the exact loss streamed over class blocks) and
`patch(loss="sampled", num_sampled=...)`, Cut Cross-Entropy's `impl="torch_compile"` (the one
implementation of cut-cross-entropy that runs without CUDA: torch.compile of the plain loss),
optionally (--variants ...,exact_chunk) the exact patch with a smaller `chunk_bytes`
(--chunk-mib), and a no-head baseline (the decoder alone, its loss the mean square of the
last hidden states: no lm_head, so what the step costs beyond it is the head's).

    python bench/bench_hf_patch_memory.py --vocab 128256 --tokens 4096 --hidden 512

Each variant runs in a fresh subprocess, so that one's freed memory cannot hide the other's
peak. In the child, after the model, optimizer and batch exist, the kernel's peak-RSS mark is
reset (`echo 5 > /proc/self/clear_refs`); --repeat steps (zero_grad(set_to_none), forward,
backward, SGD step) then run, and VmHWM - VmRSS(before) is the peak beyond the model over
them: the logits, the activations and the gradients. Step time: the median of the steps (the
first includes torch.compile's compilation for cce, so the median, not the mean). The 1-minute
load average of the machine is recorded at the first and after the last step, since timings on
a shared machine move with it. Linux only.

Rows go to bench/results/hf-patch-cpu.csv (bench/common.py's schema; `commit` from
$FASTSOFTMAX_COMMIT), one set per variant as soon as its subprocess ends.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("no_head", "unpatched", "exact", "sampled", "cce", "exact_chunk")


def status_bytes(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(args) -> dict:
    import torch
    import transformers

    from fastsoftmax.integrations.transformers import patch

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
        num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=8,
        max_position_embeddings=args.seq, tie_word_embeddings=False,
        attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(config).train()
    if args.variant == "exact":
        patch(model, loss="exact")
    elif args.variant == "exact_chunk":
        patch(model, loss="exact", chunk_bytes=args.chunk_mib * 2**20)
    elif args.variant == "sampled":
        patch(model, loss="sampled", num_sampled=args.num_sampled)
    if args.variant == "cce":
        from cut_cross_entropy import linear_cross_entropy

        def step_loss(ids):
            hidden = model.model(input_ids=ids).last_hidden_state
            return linear_cross_entropy(hidden, model.lm_head.weight, ids, shift=True,
                                        impl="torch_compile")
    elif args.variant == "no_head":
        def step_loss(ids):
            return model.model(input_ids=ids).last_hidden_state.pow(2).mean()
    else:
        def step_loss(ids):
            return model(input_ids=ids, labels=ids).loss
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    ids = torch.randint(0, args.vocab, (args.tokens // args.seq, args.seq))
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    load_start = os.getloadavg()[0]
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS: the peak from here on
    before = status_bytes("VmRSS")
    times, losses = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = step_loss(ids)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return dict(variant=args.variant, loss_first_step=losses[0],
                median_step_s=statistics.median(times), min_step_s=min(times),
                max_step_s=max(times), steps=len(times),
                peak_beyond_model_mib=(status_bytes("VmHWM") - before) / 2**20,
                param_mib=params / 2**20, threads=torch.get_num_threads(),
                logits_fp32_mib=args.tokens * args.vocab * 4 / 2**20,
                loadavg_1m_start=load_start, loadavg_1m_end=os.getloadavg()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=1024, help="tokens per row of the batch")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--num-sampled", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=3, help="timed steps per variant")
    parser.add_argument("--chunk-mib", type=int, default=32,
                        help="exact_chunk's chunk_bytes, in MiB (exact: the patch's default)")
    parser.add_argument("--variants", default=",".join(VARIANTS[:5]),
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--no-write", action="store_true", help="print rows only")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(child(args)))
        return
    sys.path.insert(0, BENCH)
    import torch  # noqa: F401  (common.device_name reads its thread count)

    from common import write_results

    shape = (f"V={args.vocab} T={args.tokens} seq={args.seq} D={args.hidden} layers=1 "
             f"float32")
    for variant in args.variants.split(","):
        command = [sys.executable, __file__, "--variant", variant] + [
            f"--{k.replace('_', '-')}={getattr(args, k)}"
            for k in ("vocab", "tokens", "seq", "hidden", "num_sampled", "repeat",
                      "chunk_mib")]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(result), flush=True)
        provider = {"sampled": f"sampled/{args.num_sampled}",
                    "exact_chunk": f"exact/chunk_bytes={args.chunk_mib}MiB"}.get(variant,
                                                                                variant)
        rows = [dict(case="hf_llama_train_step", provider=provider, shape=shape,
                     metric=metric, value=result[metric])
                for metric in ("median_step_s", "min_step_s", "max_step_s", "steps",
                               "peak_beyond_model_mib", "param_mib", "loss_first_step",
                               "threads", "loadavg_1m_start", "loadavg_1m_end")]
        if not args.no_write:
            write_results("hf-patch", "cpu", rows)


if __name__ == "__main__":
    main()

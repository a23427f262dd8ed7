"""Peak memory and time of one training step of a one-layer Hugging Face Llama, with the
unpatched loss (transformers' ForCausalLMLoss on [tokens, V] logits) and with
fastsoftmax.integrations.transformers.patch (the exact loss streamed over class blocks).

Each variant runs in a fresh subprocess, so that one's freed memory cannot hide the other's
peak. In the child, after the model, optimizer and batch exist, the kernel's peak-RSS mark is
reset (`echo 5 > /proc/self/clear_refs`); the step (zero_grad, forward, backward, SGD step)
then runs and VmHWM - VmRSS(before) is the peak beyond the model: the logits, the
activations and the gradients (the last the same for both variants). Linux only.

    python bench/bench_hf_patch_memory.py --vocab 128256 --tokens 4096 --hidden 512
"""

import argparse
import json
import subprocess
import sys
import time


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
    if args.variant == "patched":
        patch(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    ids = torch.randint(0, args.vocab, (args.tokens // args.seq, args.seq))
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS: the peak from here on
    before = status_bytes("VmRSS")
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    seconds = time.perf_counter() - start
    return dict(variant=args.variant, loss=loss.item(), step_s=round(seconds, 2),
                peak_beyond_model_mib=round((status_bytes("VmHWM") - before) / 2**20),
                param_mib=round(params / 2**20), vocab=args.vocab, tokens=args.tokens,
                hidden=args.hidden, threads=torch.get_num_threads(),
                logits_fp32_mib=round(args.tokens * args.vocab * 4 / 2**20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=1024, help="tokens per row of the batch")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--variant", choices=["unpatched", "patched"])
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(child(args)))
        return
    for variant in ("unpatched", "patched"):
        command = [sys.executable, __file__, "--variant", variant] + [
            f"--{k}={getattr(args, k)}" for k in ("vocab", "tokens", "seq", "hidden")]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        print(out.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()

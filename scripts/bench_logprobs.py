"""Peak memory of the completion log-probabilities: the full float32 log-softmax against
the selective one (``uirl_agents.policies.hf.selective_log_softmax``).

One micro-batch's logits (``--tokens`` positions of a ``--vocab`` vocabulary, in
``--dtype``, as the model returns them under bf16) go through what
``completion_logprobs`` does with them in training: the chosen tokens' logprobs at
temperature 0.7 and the entropy (scoring pass), then a backward pass of their sum
(update). Each variant runs in a process of its own; on CPU the figure is the peak
resident memory above what the logits themselves take (``VmHWM`` minus ``VmRSS`` after
they are allocated), on CUDA ``torch.cuda.max_memory_allocated`` above them.

    python scripts/bench_logprobs.py                    # 1024 tokens, Qwen2.5-VL's 151,936 vocabulary, bf16
    python scripts/bench_logprobs.py --tokens 2048 --device cuda
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

FULL, SELECTIVE = "full float32 log_softmax (before)", "selective log-softmax (now)"


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure(variant: str, tokens: int, vocab: int, dtype: str, device: str) -> float:
    """Peak MiB above the logits for one variant (run in a fresh process)."""
    import torch

    from uirl_agents.policies.hf import selective_log_softmax
    from uirl_agents.trainers.forward import softmax_entropy

    torch.manual_seed(0)
    logits = torch.randn(1, tokens, vocab, device=device, dtype=getattr(torch, dtype))
    logits.mul_(3).requires_grad_(True)
    index = torch.randint(0, vocab, (1, tokens), device=device)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak (VmHWM) starts again from here
        before = _status_kb("VmRSS") * 1024
    if variant == FULL:
        full = torch.log_softmax(logits.float() / 0.7, dim=-1)
        logprobs = full.gather(-1, index.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            entropy = -(full.exp() * full).sum(-1)
    else:
        logprobs = selective_log_softmax(logits, index, 0.7)
        entropy = softmax_entropy(logits, 0.7)
    logprobs.sum().backward()
    del entropy
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _status_kb("VmHWM") * 1024
    return (peak - before) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:  # the child process
        print(json.dumps(measure(args.variant, args.tokens, args.vocab, args.dtype, args.device)))
        return
    logits_mib = args.tokens * args.vocab * (2 if "16" in args.dtype else 4) / 2**20
    print(
        f"{args.tokens} tokens x {args.vocab} vocabulary, {args.dtype} logits "
        f"({logits_mib:.0f} MiB), {args.device}; peak memory above the logits, forward "
        "(logprobs + entropy) and backward:"
    )
    results = {}
    for variant in (FULL, SELECTIVE):
        cmd = [sys.executable, __file__, "--variant", variant]
        cmd += ["--tokens", str(args.tokens), "--vocab", str(args.vocab)]
        cmd += ["--dtype", args.dtype, "--device", args.device]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[variant] = float(out.strip().splitlines()[-1])
        print(f"  {variant}: {results[variant]:.0f} MiB")
    print(f"  ratio: {results[FULL] / max(results[SELECTIVE], 1e-9):.1f}x")


if __name__ == "__main__":
    main()

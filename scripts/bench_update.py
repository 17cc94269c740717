"""The cost of a GRPO update at a shipped config's shapes, on CPU (issue 43, items 6-8).

    python scripts/bench_update.py                      # scripts/configs/uitars15_7b_lora.yaml
    python scripts/bench_update.py --groups 1 --steps 1-6 --publish

A tiny random Qwen2.5-VL (the tests' widths) with Qwen2.5-VL's own image-size limits, so
that a screenshot is 1288x812 and 1334 image tokens, as for the 7B models. The samples
are one process's share of an iteration of the config (``--processes`` of them): groups
of ``rollout.group_size`` episodes of ``--steps`` steps, whose members share their first
screenshot (one task instance); step t's prompt holds the last ``rollout.max_images``
screenshots and a text of ~500 + 100 * min(t, ``rollout.max_history``) tokens (UI-TARS's
system prompt and the history), its completion 50 to ``rollout.max_new_tokens`` tokens.

GRPO's scoring pass and update (``optim`` and ``grpo.kl_beta`` of the config) run on the
same samples from the same weights four ways: plain, ``optim.sort_by_length`` alone,
``optim.cache_image_features`` alone, both (the default). Per way: wall time, forward
passes, padding tokens (the model inputs' attention-mask zeros, scoring and update),
vision-tower calls and time, and the largest difference of the trained weights from
the plain way's. ``--publish``: the two-process FSDP test's bytes gathered onto the main
process for a weight publish (``tests/two_process_publish.py``), the adapter alone
against the whole model.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# Qwen2.5-VL's image-size limits (its preprocessor_config.json): 1288x812 stays whole.
QWEN25VL_MIN_PIXELS, QWEN25VL_MAX_PIXELS = 56 * 56, 28 * 28 * 16384
SCREEN = (812, 1288)  # the model images of a 1280x800 screen
WAYS = {
    "plain (before)": (False, False),
    "sorted by length": (True, False),
    "image features cached": (False, True),
    "both (now)": (True, True),
}
WORDS = "click the button type into field row submit form next page cell value name".split()


def build_model(out: Path) -> Path:
    """The tests' tiny Qwen2.5-VL with Qwen2.5-VL's image processor limits."""
    from transformers import Qwen2VLImageProcessorPil

    from uirl_agents.testing.tiny_model import build_tiny_qwen25vl

    build_tiny_qwen25vl(out)
    Qwen2VLImageProcessorPil(
        min_pixels=QWEN25VL_MIN_PIXELS, max_pixels=QWEN25VL_MAX_PIXELS
    ).save_pretrained(out)
    return out


def prompt(images: int, words: int, rng: np.random.Generator) -> list[dict]:
    text = " ".join(rng.choice(WORDS, size=words))
    return [
        {"role": "user", "content": [{"type": "image"}] * images + [{"type": "text", "text": text}]}
    ]


def iteration_samples(run: Any, groups: int, steps: tuple[int, int], seed: int) -> list[Any]:
    """One process's GRPO samples of an iteration at the config's shapes (see above)."""
    from uirl_agents.policies.hf import encode_prompts, vision_token_ids
    from uirl_agents.trainers.update import TokenSample

    r = run.config.rollout
    rng = np.random.default_rng(seed)
    tokenizer = run.processor.tokenizer
    blocked = vision_token_ids(run.model.config, tokenizer)
    ids = [i for i in range(200, len(tokenizer)) if i not in blocked]
    one = encode_prompts(run.processor, [prompt(1, 1, rng)], [[np.zeros((*SCREEN, 3), np.uint8)]])
    image_tokens = int(one["image_grid_thw"].prod()) // 4

    def screenshot() -> np.ndarray:
        return rng.integers(0, 256, (*SCREEN, 3), dtype=np.uint8)

    samples = []
    for _ in range(groups):
        first = screenshot()
        for _member in range(r.group_size):
            length = int(rng.integers(steps[0], steps[1] + 1))
            shots = [first.copy()] + [screenshot() for _ in range(length - 1)]
            advantage = float(rng.normal())
            for t in range(length):
                images = shots[max(0, t - r.max_images + 1) : t + 1]
                words = 500 + 100 * min(t, r.max_history)
                messages = prompt(len(images), words, rng)
                text = run.processor.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
                prompt_tokens = len(tokenizer(text)["input_ids"]) + len(images) * (image_tokens - 1)
                completion = rng.choice(ids, size=int(rng.integers(50, r.max_new_tokens + 1)))
                samples.append(
                    TokenSample(
                        messages,
                        images,
                        [int(i) for i in completion],
                        prompt_tokens + len(completion),
                        advantage=advantage,
                    )
                )
    return samples


def training_run(config: Any, model_dir: Path) -> SimpleNamespace:
    """What GRPO's update uses of a TrainingRun, one process (tests/model_fixtures.py's)."""
    import torch

    from uirl_agents.loading.pretrained import load_processor
    from uirl_agents.trainers.policy_model import build_model as build_policy
    from uirl_agents.trainers.policy_model import trainable_parameters

    torch.manual_seed(0)
    model = build_policy(config.model, str(model_dir), torch.device("cpu"))
    trainable = trainable_parameters(model)
    return SimpleNamespace(
        config=config,
        model=model,
        processor=load_processor(model_dir),
        rank=0,
        world_size=1,
        sharded=False,
        trainable=trainable,
        optimizer=torch.optim.AdamW(trainable, lr=config.optim.learning_rate),
        sum_all=float,
        sum_all_dict=dict,
        max_all=float,
        autocast=contextlib.nullcontext,
    )


def counters(run: Any) -> dict[str, float]:
    """Hooks that count forward passes, padding tokens and tower calls (and time)."""
    import torch

    counts: dict[str, float] = defaultdict(float)

    def before_model(_module: Any, _args: Any, kwargs: dict) -> None:
        phase = "update" if torch.is_grad_enabled() else "scoring"
        mask = kwargs["attention_mask"]
        counts[f"{phase}_passes"] += 1
        counts[f"{phase}_tokens"] += mask.numel()
        counts[f"{phase}_padding"] += mask.numel() - int(mask.sum())

    def tower_start(*_: Any) -> None:
        counts["tower_started"] = time.perf_counter()

    def tower_end(*_: Any) -> None:
        counts["tower_calls"] += 1
        counts["tower_s"] += time.perf_counter() - counts["tower_started"]

    run.model.get_base_model().register_forward_pre_hook(before_model, with_kwargs=True)
    tower = run.model.get_base_model().model.visual
    tower.register_forward_pre_hook(tower_start)
    tower.register_forward_hook(tower_end)
    return counts


def measure(args: argparse.Namespace, model_dir: Path) -> list[dict[str, Any]]:
    import torch

    from uirl_agents.trainers.algorithms.grpo import GRPO
    from uirl_agents.trainers.cli import load_config
    from uirl_agents.trainers.config import GRPOConfig
    from uirl_agents.trainers.loop import update_samples

    torch.set_num_threads(args.threads)
    base = {"model.name": str(model_dir), "model.dtype": "float32", "model.lora_rank": "8"}
    samples: list[Any] = []
    rows, plain = [], None
    for way, (sort, cache) in WAYS.items():
        overrides = {
            **base,
            "optim.sort_by_length": str(sort),
            "optim.cache_image_features": str(cache),
        }
        config = load_config(GRPOConfig, args.config, overrides)
        run = training_run(config, model_dir)
        if not samples:
            groups = args.groups or config.rollout.episodes_per_iteration // (
                config.rollout.group_size * args.processes
            )
            samples = iteration_samples(run, groups, args.steps, args.seed)
            images = [len(s.images) for s in samples]
            logging.info(
                "%d samples: %s screenshots each, prompt + completion %d-%d tokens",
                len(samples),
                {k: images.count(k) for k in sorted(set(images))},
                min(s.num_tokens for s in samples),
                max(s.num_tokens for s in samples),
            )
        if way == next(iter(WAYS)):  # the first pass of a process pays one-time set-ups
            update_samples(training_run(config, model_dir), GRPO(), copy.deepcopy(samples[:2]), 0)
        counts = counters(run)
        initial = torch.cat([p.detach().flatten() for p in run.trainable])
        start, cpu_start = time.perf_counter(), time.process_time()
        metrics = update_samples(run, GRPO(), copy.deepcopy(samples), iteration=0)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        weights = torch.cat([p.detach().flatten() for p in run.trainable])
        plain = weights if plain is None else plain
        rows.append(
            {
                "way": way,
                "seconds": round(seconds, 1),
                "cpu_seconds": round(cpu_seconds, 1),
                "optimizer_steps": metrics["train/optimizer_steps"],
                **{k: int(v) for k, v in counts.items() if k not in ("tower_s", "tower_started")},
                "tower_s": round(counts["tower_s"], 1),
                "max_weight_difference": float((weights - plain).abs().max()),
                "max_update": float((weights - initial).abs().max()),
            }
        )
        logging.info("%s", json.dumps(rows[-1]))
    rows.append({"way": "encoding", "processor_s": encoding_seconds(run, samples)})
    return rows


def encoding_seconds(run: Any, samples: list[Any]) -> float:
    """What the processor takes to prepare every sample's prompt once (every pass over
    the samples pays it, with or without cached image features)."""
    from uirl_agents.policies.hf import encode_prompts
    from uirl_agents.trainers.losses import token_budget_batches

    budget = run.config.optim.micro_batch_tokens
    start = time.perf_counter()
    for batch in token_budget_batches(samples, lambda s: s.num_tokens, budget):
        encode_prompts(run.processor, [s.messages for s in batch], [s.images for s in batch])
    return round(time.perf_counter() - start, 1)


def publish_bytes(model_dir: Path) -> dict[str, Any]:
    """The two-process FSDP test's bytes gathered for one weight publish."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
        cmd += [str(ROOT / "tests" / "two_process_publish.py"), str(model_dir), out]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
        return json.loads((Path(out) / "report.json").read_text())


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| way | wall s | CPU s | forward passes (scoring + update) | padding tokens "
        "(scoring + update) | tower calls | tower s | max weight diff (largest update) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows[:-1]:
        tokens = r["scoring_tokens"] + r["update_tokens"]
        padding = r["scoring_padding"] + r["update_padding"]
        lines.append(
            f"| {r['way']} | {r['seconds']} | {r['cpu_seconds']} | "
            f"{r['scoring_passes']} + {r['update_passes']} | "
            f"{r['scoring_padding']:,} + {r['update_padding']:,} ({padding / tokens:.0%}) | "
            f"{r.get('tower_calls', 0)} | {r['tower_s']} | "
            f"{r['max_weight_difference']:.1e} ({r['max_update']:.1e}) |"
        )
    lines.append(f"\nThe processor, every prompt once: {rows[-1]['processor_s']} s a pass.")
    return "\n".join(lines)


def steps_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "scripts/configs/uitars15_7b_lora.yaml"))
    parser.add_argument(
        "--processes", type=int, default=8, help="the config's GPUs: a process's share"
    )
    parser.add_argument("--groups", type=int, help="groups on this process (default: its share)")
    parser.add_argument(
        "--steps", type=steps_range, default=(1, 8), help="episode lengths, e.g. 1-8"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--publish", action="store_true", help="also the FSDP publish's bytes")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp) / "model")
        rows = measure(args, model_dir)
        report: dict[str, Any] = {"ways": rows}
        if args.publish:
            report["publish"] = publish_bytes(model_dir)
    print(table(rows))
    if args.publish:
        p = report["publish"]
        print(
            f"publish (2 processes, FSDP): {p['gathered_bytes']:,} bytes gathered "
            f"(the adapter), {p['whole_model_bytes']:,} before (the whole model)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

"""Held-out MiniWoB++ success of the SFT-then-RL recipe in miniature: random, SFT, SFT+RL.

    python scripts/generalisation_demo.py --seeds 100,101,102 --output-dir runs/generalisation
    python scripts/generalisation_demo.py --seeds 100,101,102 --output-dir runs/generalisation \\
        --report-only

Per seed S, with the real scripts on real sessions (every phase with one torch thread,
``OMP_NUM_THREADS=1`` unless set, so that a seed's runs repeat exactly):

1. **model**: a small random Qwen3-VL (:func:`uirl_agents.testing.tiny_model.build_small_qwen3vl`,
   weights seeded by S) in ``OUT/seed_S/model``;
2. **SFT**: ``train_rs.py --config scripts/configs/generalisation_sft.yaml``: one
   iteration of expert iteration whose update is SFT on the pixel expert's
   demonstrations of training instances (``rs.expert_episodes``); its evaluation at
   step 0 is the random model, at step 1 the SFT policy;
3. **RL**: ``train_grpo.py --config scripts/configs/generalisation.yaml`` from the SFT
   weights (``OUT/seed_S/sft_model``), on training instances; its last evaluation is
   SFT+RL.

Every evaluation is greedy, on the same held-out instances (``split: test``; the
config's ``eval.episodes``, drawn by seed S, the same for the three arms). Phases that
finished are skipped and an interrupted one resumes from its checkpoint, so seeds can be
gathered over several sittings; ``--jobs N`` runs N seeds at once.

Then writes ``report.md``, ``report.json`` and ``report.png`` in the output dir from
every ``seed_*`` folder there that finished (``--report-only``: only that): per seed
and per task the held-out success of each arm, the RL curves, and the line
``held-out success: random a%, SFT b%, SFT+RL c%; RL vs SFT over N seeds: sign-flip
p = X, paired t p = Y`` (both one-sided, RL > SFT, on the seeds' paired success rates).
Measured results: docs/training.md, "Generalisation demo".
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from learning_demo import seed_list

from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]
RL_CONFIG = REPO / "scripts" / "configs" / "generalisation.yaml"
SFT_CONFIG = REPO / "scripts" / "configs" / "generalisation_sft.yaml"
PROCESSOR_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "preprocessor_config.json",
    "processor_config.json",
)
ARMS = ("random", "SFT", "SFT+RL")
SUCCESS = "eval/success_rate"


# ---- running a seed ----------------------------------------------------------------------


def run(script: str, config: Path, out: Path, args: list[str]) -> tuple[float, float]:
    """Run a training script to the end (output to ``<out>.log``): its wall time and
    CPU time in seconds (the process's and its reaped children's: the session servers
    and their Chromium), which, unlike the wall time, does not depend on the load."""
    cmd = [sys.executable, str(REPO / "scripts" / script), "--config", str(config)]
    cmd += ["--output-dir", str(out), "--logging.progress", "false", *args]
    print("$", shlex.join(cmd[1:]), flush=True)
    env = {"OMP_NUM_THREADS": "1", **os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "a") as log:
        process = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            raise
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, cmd)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime


def finished(out: Path, iterations: int) -> bool:
    """Whether a run's checkpoint after its last iteration exists (its last evaluation is
    logged before it is written)."""
    latest = ckpt.latest_checkpoint(out)
    return latest is not None and ckpt.load_state(latest).get("iteration") == iterations


def config_iterations(config: Path, args: list[str]) -> int:
    """The iterations a run of ``config`` with ``args`` does (exits with the trainer's
    message on a bad override)."""
    from uirl_agents.trainers.cli import parse_args
    from uirl_agents.trainers.config import GRPOConfig, RSConfig

    cls = RSConfig if config == SFT_CONFIG else GRPOConfig
    parsed, _ = parse_args(cls, ["--config", str(config), "--output-dir", "unused", *args], "check")
    return parsed.iterations


def log_time(folder: Path, phase: str, seconds: float, cpu_seconds: float | None = None) -> None:
    """Append a phase's wall time, CPU time and the load it ran under to ``timings.jsonl``."""
    record = {"phase": phase, "seconds": round(seconds, 1), "load": round(os.getloadavg()[0], 1)}
    if cpu_seconds is not None:
        record["cpu_seconds"] = round(cpu_seconds, 1)
    with open(folder / "timings.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")


def run_seed(seed: int, out: Path, sft_args: list[str], rl_args: list[str]) -> None:
    """The three phases of one seed, skipping those already done."""
    from uirl_agents.testing.tiny_model import build_small_qwen3vl

    folder = out / f"seed_{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    model, sft, sft_model, rl = (folder / n for n in ("model", "sft", "sft_model", "rl"))
    common = ["--seed", str(seed)]
    if not (model / "config.json").is_file():
        t0 = time.perf_counter()
        build_small_qwen3vl(model.with_suffix(".tmp"), seed=seed)
        model.with_suffix(".tmp").rename(model)
        log_time(folder, "model", time.perf_counter() - t0)
    sft_run = [*common, "--model.name", str(model), *sft_args]
    if not finished(sft, config_iterations(SFT_CONFIG, sft_run)):
        print(f"seed {seed}: SFT on the expert's demonstrations", flush=True)
        log_time(folder, "sft", *run("train_rs.py", SFT_CONFIG, sft, sft_run))
    if not (sft_model / "config.json").is_file():
        # The SFT weights with the processor, as a checkpoint folder RL starts from.
        staging = sft_model.with_suffix(".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(ckpt.latest_checkpoint(sft) / ckpt.MODEL_DIR, staging)
        for name in PROCESSOR_FILES:
            if (model / name).is_file():
                shutil.copy(model / name, staging / name)
        staging.rename(sft_model)
    rl_run = [*common, "--model.name", str(sft_model), *rl_args]
    if not finished(rl, config_iterations(RL_CONFIG, rl_run)):
        print(f"seed {seed}: RL from the SFT weights", flush=True)
        log_time(folder, "rl", *run("train_grpo.py", RL_CONFIG, rl, rl_run))
    print(f"seed {seed}: done", flush=True)


# ---- statistics ------------------------------------------------------------------------


def sign_flip_p(differences: list[float]) -> float:
    """One-sided exact sign-flip (paired permutation) test: the share of the 2^N sign
    assignments whose mean difference is at least the observed one."""
    observed = sum(differences)
    tol = 1e-12 * max(1.0, abs(observed))
    count = sum(
        sum(s * d for s, d in zip(signs, differences, strict=True)) >= observed - tol
        for signs in itertools.product((1, -1), repeat=len(differences))
    )
    return count / 2 ** len(differences)


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Numerical Recipes' betacf)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(log_front + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def paired_t_p(differences: list[float]) -> float:
    """One-sided paired t-test (mean difference > 0), Student's t with N - 1 degrees of
    freedom; ``nan`` with fewer than 2 seeds."""
    n = len(differences)
    if n < 2:
        return math.nan
    mean = sum(differences) / n
    var = sum((d - mean) ** 2 for d in differences) / (n - 1)
    if var == 0:
        return 0.0 if mean > 0 else 1.0 if mean < 0 else 0.5
    t = mean / math.sqrt(var / n)
    df = n - 1
    tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + t * t))  # P(T >= |t|)
    return tail if t > 0 else 1.0 - tail


# ---- the report --------------------------------------------------------------------------


def eval_points(folder: Path) -> dict[int, dict[str, float]]:
    """``{step: eval metrics}`` of a run."""
    points: dict[int, dict[str, float]] = {}
    for record in read_metrics(folder):
        values = {k: v for k, v in record.items() if k.startswith("eval/")}
        if values:
            points.setdefault(int(record["step"]), {}).update(values)
    return points


def rollout_curve(folder: Path) -> dict[int, float]:
    """``{iteration: training rollouts' success rate}`` of a run."""
    return {
        int(r["step"]): r["rollout/success_rate"]
        for r in read_metrics(folder)
        if "rollout/success_rate" in r
    }


def arm_counts(metrics: dict[str, float]) -> dict[str, tuple[int, int]]:
    """``{"all" | task: (successes, episodes)}`` of one evaluation."""
    counts = {
        "all": (round(metrics[SUCCESS] * metrics["eval/episodes"]), int(metrics["eval/episodes"]))
    }
    for key, value in metrics.items():
        if key.startswith("eval/task/") and key.endswith("/success_rate"):
            task = key.removeprefix("eval/task/").removesuffix("/success_rate")
            n = int(metrics[f"eval/task/{task}/episodes"])
            counts[task] = (round(value * n), n)
    return counts


def load_seed(folder: Path) -> dict[str, Any] | None:
    """One finished seed's arms (held-out counts), RL curves and timings; None when
    the seed has not finished."""
    sft, rl = folder / "sft", folder / "rl"
    if not ((sft / "metrics.jsonl").is_file() and (rl / "metrics.jsonl").is_file()):
        return None
    import yaml

    last = yaml.safe_load((rl / "config_grpo.yaml").read_text())["iterations"]
    sft_eval, rl_eval = eval_points(sft), eval_points(rl)
    if not (finished(rl, last) and {0, 1} <= set(sft_eval) and last in rl_eval):
        return None
    timings: dict[str, float] = {}  # phase -> wall seconds; "phase cpu" -> CPU seconds
    if (folder / "timings.jsonl").is_file():
        for line in (folder / "timings.jsonl").read_text().splitlines():
            record = json.loads(line)
            for key, field in (
                (record["phase"], "seconds"),
                (f"{record['phase']} cpu", "cpu_seconds"),
            ):
                if field in record:
                    timings[key] = timings.get(key, 0.0) + record[field]
    return {
        "arms": {
            "random": arm_counts(sft_eval[0]),
            "SFT": arm_counts(sft_eval[1]),
            "SFT+RL": arm_counts(rl_eval[last]),
        },
        "held_out_curve": {0: sft_eval[1][SUCCESS], **{s: m[SUCCESS] for s, m in rl_eval.items()}},
        "rollout_curve": rollout_curve(rl),
        "timings": timings,
    }


def percent(count: tuple[int, int]) -> str:
    return f"{100 * count[0] / max(count[1], 1):.1f}%"


def pooled(seeds: dict[int, dict[str, Any]], arm: str, task: str = "all") -> tuple[int, int]:
    counts = [s["arms"][arm][task] for s in seeds.values() if task in s["arms"][arm]]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def rate(count: tuple[int, int]) -> float:
    return count[0] / max(count[1], 1)


def report_line(seeds: dict[int, dict[str, Any]]) -> tuple[str, dict[str, float]]:
    differences = [
        rate(s["arms"]["SFT+RL"]["all"]) - rate(s["arms"]["SFT"]["all"]) for s in seeds.values()
    ]
    stats = {"sign_flip_p": sign_flip_p(differences), "paired_t_p": paired_t_p(differences)}
    arms = ", ".join(f"{arm} {percent(pooled(seeds, arm))}" for arm in ARMS)
    line = (
        f"held-out success: {arms}; RL vs SFT over {len(seeds)} seeds: "
        f"sign-flip p = {stats['sign_flip_p']:.2g}, paired t p = {stats['paired_t_p']:.2g}"
    )
    return line, stats


def markdown(seeds: dict[int, dict[str, Any]], line: str) -> str:
    tasks = sorted({t for s in seeds.values() for t in s["arms"]["SFT"]} - {"all"})
    text = [
        "Held-out success (greedy, test split), the same episodes for the three arms of a seed; "
        "random: the seed's model before SFT.",
        "",
        "| seed | random | SFT | SFT+RL | RL - SFT (points) | wall minutes (SFT, RL) | CPU minutes (SFT, RL) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seed, s in seeds.items():
        a = s["arms"]
        gain = 100 * (rate(a["SFT+RL"]["all"]) - rate(a["SFT"]["all"]))
        cells = [f"{a[arm]['all'][0]}/{a[arm]['all'][1]}" for arm in ARMS]
        cells.append(f"{gain:+.1f}")
        for suffix in ("", " cpu"):
            t = [s["timings"].get(f"{phase}{suffix}") for phase in ("sft", "rl")]
            cells.append(", ".join("" if v is None else f"{v / 60:.1f}" for v in t))
        text.append(f"| {seed} | " + " | ".join(cells) + " |")
    text += ["", "Per task, pooled over the seeds:", "", "| task | " + " | ".join(ARMS) + " |"]
    text.append("|---|" + "---:|" * len(ARMS))
    for task in tasks:
        cells = [
            f"{pooled(seeds, arm, task)[0]}/{pooled(seeds, arm, task)[1]} ({percent(pooled(seeds, arm, task))})"
            for arm in ARMS
        ]
        text.append(f"| {task} | " + " | ".join(cells) + " |")
    text += ["", "Per seed and task (SFT -> SFT+RL):", ""]
    text.append("| seed | " + " | ".join(tasks) + " |")
    text.append("|---:|" + "---:|" * len(tasks))
    for seed, s in seeds.items():
        a = s["arms"]
        cells = [
            f"{a['SFT'][t][0]}/{a['SFT'][t][1]} -> {a['SFT+RL'][t][0]}/{a['SFT+RL'][t][1]}"
            if t in a["SFT"] and t in a["SFT+RL"]
            else ""
            for t in tasks
        ]
        text.append(f"| {seed} | " + " | ".join(cells) + " |")
    text += ["", line, ""]
    return "\n".join(text)


def plot(seeds: dict[int, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for s in seeds.values():
        xs = sorted(s["rollout_curve"])
        left.plot(xs, [s["rollout_curve"][x] for x in xs], color="tab:blue", alpha=0.2, lw=1)
        hs = sorted(s["held_out_curve"])
        left.plot(hs, [s["held_out_curve"][x] for x in hs], color="tab:green", alpha=0.2, lw=1)
    for key, color, label in (
        ("rollout_curve", "tab:blue", "training rollouts (sampled, train split)"),
        ("held_out_curve", "tab:green", "held out (greedy, test split; 0: SFT)"),
    ):
        steps = sorted({x for s in seeds.values() for x in s[key]})
        means = [
            sum(s[key][x] for s in seeds.values() if x in s[key])
            / sum(x in s[key] for s in seeds.values())
            for x in steps
        ]
        left.plot(
            steps, means, "o-", color=color, ms=3, label=f"{label}, mean of {len(seeds)} seeds"
        )
    left.set_xlabel("RL iterations (updates before the episodes)")
    left.set_ylabel("success rate")
    left.set_ylim(-0.03, 1.03)
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    left.set_title("RL from the SFT weights", fontsize=10)
    names = list(seeds)
    width = 0.27
    for i, (arm, color) in enumerate(zip(ARMS, ("grey", "tab:orange", "tab:green"), strict=True)):
        right.bar(
            [k + (i - 1) * width for k in range(len(names))],
            [rate(seeds[n]["arms"][arm]["all"]) for n in names],
            width,
            color=color,
            label=arm,
        )
    right.set_xticks(range(len(names)), [str(n) for n in names])
    right.set_xlabel("seed")
    right.set_ylabel("held-out success rate")
    right.set_ylim(0, 1.03)
    right.grid(alpha=0.3, axis="y")
    right.legend(fontsize=8)
    right.set_title("held-out instances, per seed", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def report(out: Path, wanted: list[int] | None) -> str:
    """``report.md``, ``.json`` and ``.png`` from the finished seeds in ``out`` (those of
    ``wanted`` when given); returns the report line."""
    folders = sorted(out.glob("seed_*"), key=lambda p: int(p.name.removeprefix("seed_")))
    seeds = {}
    for folder in folders:
        seed = int(folder.name.removeprefix("seed_"))
        if wanted is not None and seed not in wanted:
            continue
        loaded = load_seed(folder)
        if loaded is None:
            print(f"seed {seed}: not finished, left out of the report", flush=True)
            continue
        seeds[seed] = loaded
    if not seeds:
        sys.exit(f"no finished seed in {out}: run the demo first")
    line, stats = report_line(seeds)
    (out / "report.md").write_text(markdown(seeds, line))
    summary = {"seeds": seeds, "line": line, **stats}
    (out / "report.json").write_text(json.dumps(summary, indent=1))
    plot(seeds, out / "report.png")
    print(line, flush=True)
    return line


def parse_cli(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=None,
        help="comma-separated seeds, e.g. 100,101,102; --report-only: default every "
        "finished seed in --output-dir",
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once (one thread each)")
    parser.add_argument(
        "--sft-args", default="", help="extra arguments for every SFT run (train_rs.py), quoted"
    )
    parser.add_argument(
        "--rl-args", default="", help="extra arguments for every RL run (train_grpo.py), quoted"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="run nothing: report the finished seeds"
    )
    args = parser.parse_args(argv)
    if args.seeds is None and not args.report_only:
        parser.error("--seeds is required (unless --report-only)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_cli(argv)
    out = args.output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        sft_args, rl_args = shlex.split(args.sft_args), shlex.split(args.rl_args)
        # Fail on a bad override now, not after the first seed's SFT.
        config_iterations(SFT_CONFIG, sft_args)
        config_iterations(RL_CONFIG, rl_args)
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(lambda s: run_seed(s, out, sft_args, rl_args), args.seeds))
    report(out, args.seeds)


if __name__ == "__main__":
    main()

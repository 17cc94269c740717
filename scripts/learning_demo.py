"""SimpleDataEntry success of the tiny model: SFT cold start, GRPO, lr-~0 baseline.

    python scripts/learning_demo.py --output-dir runs/learning_demo

Runs the real scripts on real sessions with scripts/configs/tiny_task.yaml (one fixed
task instance: task seed 0, sheet row 2; sparse reward, success = the env's
``is_success``):

1. **cold start**: expert iteration's first iteration (``train_rs.py --iterations 1``):
   its rollouts come from the random model and earn nothing; its update is SFT on
   ``rs.expert_episodes`` scripted-expert demonstrations (click a field, type its
   value, x3, Submit);
2. **GRPO** from the cold-start adapter (``train_grpo.py --model.adapter_path``), with
   the failed episodes' negative advantages switched off
   (``grpo.negative_advantage_scale: 0`` in the config: at full weight they lower the
   success rate here);
3. **baseline**: the same GRPO command with a learning rate of 1e-12 (the optimizer
   must get a positive one): the cold-start policy sampled for as many iterations.

``--algorithm ppo`` runs phases 2 and 3 as PPO (a value head and GAE, ``train_grpo.py
--algorithm ppo``; the same config otherwise; it learns at ``-- --optim.learning_rate
0.0005``). ``--replay`` runs phase 2 twice, without and with ``grpo.replay``;
``--cold-start-epochs`` makes a weaker or stronger starting policy; arguments after
``--`` go to every run of phases 2 and 3. Every phase runs with one torch thread
(``OMP_NUM_THREADS=1`` unless set): the runs are then deterministic.

Then writes ``learning_curves.png`` and ``learning_curves.md`` (the numbers, and each
trained run against the baseline, and with ``--replay`` against each other, pooled
over the iterations after the first update, with a one-sided Fisher exact test) in
the output dir. Measured results: docs/training.md,
"Learning demo". Each run's log is ``<output dir>/<phase>.log``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from uirl_agents.trainers.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "scripts" / "configs" / "tiny_task.yaml"
# The cold start fine-tunes hard on the demonstrations (the task instance is fixed, so
# both are the same 7 steps): 160 epochs at lr 5e-3, ~7 steps per micro-batch and
# optimizer step (320 steps). Its rollouts (2 episodes of the random model, 4 tokens a
# step) only complete the iteration: they never succeed and are not trained on. The
# earlier 80 epochs at lr 1e-2 ended at an SFT loss of 0.61 and P(success) ~0.5 on one
# install and at 0.68 and 0/32 on another (newer packages): 5e-3 lands at ~0.55 and
# ~0.4 (docs/training.md, Learning demo).
COLD_START_EPOCHS = 160
COLD_START_LR = "0.005"


def cold_start_args(epochs: int = COLD_START_EPOCHS) -> list[str]:
    """``train_rs.py``'s arguments for the cold start."""
    return [
        "--iterations", "1",
        "--optim.learning_rate", COLD_START_LR,
        "--optim.epochs", str(epochs),
        "--optim.micro_batch_tokens", "4096",
        "--rollout.episodes_per_iteration", "2",
        "--rollout.group_size", "1",
        "--rollout.max_new_tokens", "4",
    ]  # fmt: skip


BASELINE_LR = "1e-12"
KEYS = ("rollout/success_rate", "rollout/reward_mean", "rollout/invalid_action_rate")
EPISODES = "rollout/episodes"


def run(script: str, out: Path, *args: str) -> float:
    """Run one training script to the end; its output goes to ``<out>.log``."""
    cmd = [sys.executable, str(REPO / "scripts" / script), "--config", str(CONFIG)]
    cmd += ["--output-dir", str(out), "--logging.progress", "false", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    # One torch thread unless the caller says otherwise: the tiny model gains nothing from
    # more, several at once oversubscribe the cores (a loaded 2-core machine ran 3 demos
    # 10x slower), and the thread count changes float sums, so the same one everywhere
    # gives the same cold start.
    env = {"OMP_NUM_THREADS": "1", **os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "a") as log:
        subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    seconds = time.perf_counter() - t0
    # Wall times depend on what else the machine runs: the 1-minute load average says.
    print(f"  done in {seconds / 60:.1f} min (load average {os.getloadavg()[0]:.1f})", flush=True)
    return seconds


def curve(out: Path) -> dict[int, dict[str, float]]:
    """``{iteration: {metric: value}}`` of a run's rollouts, from its metrics.jsonl."""
    steps: dict[int, dict[str, float]] = {}
    for record in read_metrics(out):
        values = {k: v for k, v in record.items() if k in (*KEYS, EPISODES)}
        if values:
            steps.setdefault(int(record["step"]), {}).update(values)
    return dict(sorted(steps.items()))


def table(name: str, points: dict[int, dict[str, float]], seconds: float) -> str:
    lines = [
        f"**{name}** ({seconds / 60:.1f} min)",
        "",
        "| iteration | success rate | mean return | invalid-action rate |",
        "|---:|---:|---:|---:|",
    ]
    for step, m in points.items():
        cells = [f"{m[k]:.3f}" if k in m else "" for k in KEYS]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def successes(points: dict[int, dict[str, float]], first: int) -> tuple[int, int]:
    """``(successful episodes, episodes)`` of the rollouts of iterations ``first``, ..."""
    kept = [m for step, m in points.items() if step >= first]
    wins = sum(round(m["rollout/success_rate"] * m[EPISODES]) for m in kept)
    return wins, sum(round(m[EPISODES]) for m in kept)


def fisher_one_sided(a: tuple[int, int], b: tuple[int, int]) -> float:
    """P(A's successes >= what was seen | both runs sample one success rate): Fisher's
    exact test, one-sided, on ``(successes, episodes)`` of runs A and B."""
    wins, total = a[0] + b[0], a[1] + b[1]
    denominator = math.comb(total, wins)
    tail = range(a[0], min(wins, a[1]) + 1)
    return sum(math.comb(a[1], k) * math.comb(b[1], wins - k) for k in tail) / denominator


def comparison(trained: dict, other: dict, name: str = "GRPO", other_name: str = "baseline") -> str:
    """A trained run (``name``) against another (the baseline, or a second trained run),
    pooled over the rollouts after the first update."""
    g, b = successes(trained, 2), successes(other, 2)
    return (
        f"Iterations 2-{max(trained)} (after the first update), pooled: {name} {g[0]}/{g[1]} "
        f"successes ({g[0] / max(g[1], 1):.2f}), {other_name} {b[0]}/{b[1]} "
        f"({b[0] / max(b[1], 1):.2f}); one-sided Fisher exact p = {fisher_one_sided(g, b):.2g}."
    )


def plot(cold: dict, runs: dict[str, dict], path: Path, updates: str = "updates") -> None:
    """Success and invalid-action rate of the rollouts, per iteration, of the cold start
    and of each run in ``runs`` (``{label: points}``; the baseline last)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    panels = [
        ("rollout/success_rate", "success rate (the env's is_success)"),
        ("rollout/invalid_action_rate", "invalid-action rate (per step)"),
    ]
    styles = ["o-", "s-", "^-", "d-"]
    for ax, (key, label) in zip(axes, panels, strict=True):
        # x = updates before the rollouts; the cold start's rollouts (the random
        # model, before its SFT update) sit at x = -1.
        ax.plot([-1], [cold[1][key]], "ks", label="random model (before cold-start SFT)")
        for i, (curve_label, points) in enumerate(runs.items()):
            style = "x--" if curve_label.startswith("baseline") else styles[i % len(styles)]
            xs = sorted(points)
            ax.plot([x - 1 for x in xs], [points[x][key] for x in xs], style, label=curve_label)
        ax.axvline(-0.5, color="grey", linestyle=":")
        ax.text(-0.45, 0.5, "cold-start SFT", rotation=90, color="grey", fontsize=8, va="center")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel(f"{updates} before the rollouts (0: the cold-start policy)")
        ax.set_title(f"training rollouts: {label}", fontsize=10)
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def trained_arms(algorithm: str, replay: bool, out: Path) -> dict[str, tuple[Path, list[str]]]:
    """Phases 2 and 3: ``{label: (output folder, arguments of its own)}``, the baseline
    last; every arm also gets the common arguments."""
    name = algorithm.upper()
    arms = {name: (out / algorithm, [])}
    if replay:
        arms[f"{name} + replay"] = (out / f"{algorithm}_replay", ["--grpo.replay", "true"])
    baseline = ["--optim.learning_rate", BASELINE_LR]
    arms[f"baseline (lr {BASELINE_LR})"] = (out / "baseline", baseline)
    return arms


def parse_cli(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    """The demo's own arguments, and the config overrides after ``--``, checked against
    the config now (a typo fails here, not after the cold start)."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Arguments after -- go to every run of phases 2 and 3, e.g. "
        "-- --ppo.normalize_advantages false",
    )
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument(
        "--grpo-iterations", type=int, default=None, help="default: tiny_task.yaml's iterations"
    )
    parser.add_argument(
        "--algorithm",
        choices=("grpo", "ppo"),
        default="grpo",
        help="phases 2 and 3: GRPO, or PPO (value head + GAE)",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="phase 2 twice: GRPO without and with grpo.replay (the replay of successes)",
    )
    parser.add_argument(
        "--cold-start-epochs",
        type=int,
        default=COLD_START_EPOCHS,
        help="SFT epochs of the cold start: fewer make a weaker starting policy",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args, overrides = parser.parse_args(argv[:split]), argv[split + 1 :]
    if args.replay and args.algorithm == "ppo":
        parser.error("--replay compares GRPO with and without it: PPO has no replay")
    from uirl_agents.trainers.cli import parse_args as parse_config_args
    from uirl_agents.trainers.config import GRPOConfig

    # Exits with the trainer's own message when an override names no field or is invalid.
    common = ["--config", str(CONFIG), "--output-dir", str(args.output_dir)]
    parse_config_args(
        GRPOConfig,
        [*common, "--algorithm", args.algorithm, *overrides],
        "learning demo overrides",
    )
    return args, overrides


def main() -> None:
    args, overrides = parse_cli()
    name = args.algorithm.upper()
    out = args.output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    common = [] if args.grpo_iterations is None else ["--iterations", str(args.grpo_iterations)]
    common += ["--algorithm", args.algorithm, *overrides]
    arms = trained_arms(args.algorithm, args.replay, out)

    cold_dir, warm = out / "cold_start", out / "cold_start_adapter"
    print("cold start: SFT on the expert's demonstrations", flush=True)
    cold_start = cold_start_args(args.cold_start_epochs)
    seconds = {"cold start": run("train_rs.py", cold_dir, *cold_start)}
    shutil.rmtree(warm, ignore_errors=True)
    shutil.copytree(cold_dir / "checkpoints" / "iter_000001" / "adapter", warm)
    for label, (folder, extra) in arms.items():
        print(f"{label} from the cold-start adapter", flush=True)
        seconds[label] = run(
            "train_grpo.py", folder, *common, "--model.adapter_path", str(warm), *extra
        )
    cold = curve(cold_dir)
    curves = {label: curve(folder) for label, (folder, _) in arms.items()}
    plot(cold, curves, out / "learning_curves.png", f"{name} updates")
    *trained, baseline = curves
    text = [
        f"Iteration k: the rollouts sampled with the weights after k - 1 updates ({name} "
        "iteration 1: the cold-start policy). The cold start's iteration 1 samples the "
        "random model; its update is SFT on the expert's demonstrations.",
        table("Cold start (expert iteration, 1 iteration)", cold, seconds["cold start"]),
        *(table(label, curves[label], seconds[label]) for label in curves),
        *(comparison(curves[t], curves[baseline], t) for t in trained),
    ]
    if args.replay:
        text.append(comparison(curves[trained[1]], curves[trained[0]], trained[1], trained[0]))
    text.append(f"Total: {sum(seconds.values()) / 60:.1f} min.")
    (out / "learning_curves.md").write_text("\n\n".join(text) + "\n")
    print("\n\n".join(text))
    print(f"\nwrote {out / 'learning_curves.png'} and {out / 'learning_curves.md'}")


if __name__ == "__main__":
    main()

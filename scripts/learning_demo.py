"""Learning curves of both trainers on a task the tiny model learns on CPU in minutes.

    python scripts/learning_demo.py --output-dir runs/learning_demo

Runs, with scripts/configs/tiny_learn.yaml (one-step episodes: click the target row's
cell; dense reward +0.05 for it, 0 for another valid action, -0.1 for unparseable
output):

1. a cold start shared by both trainers: expert iteration's iteration 0, i.e. a few SFT
   steps on 2 expert demonstrations (the random model's own episodes earn nothing);
2. expert iteration from there (the same run, resumed for more iterations);
3. GRPO from the same cold-start adapter.

Then writes ``learning_curves.png`` and ``learning_curves.md`` (the numbers) in the
output dir. Each run is a subprocess running the real scripts on real sessions.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from uirl_agents.trainers.metrics import read_metrics

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "scripts" / "configs" / "tiny_learn.yaml"
# Expert iteration fine-tunes to convergence on what it keeps (SFT); GRPO takes small
# steps (tiny_learn.yaml's optim section).
RS_OVERRIDES = ["--optim.learning_rate", "0.01", "--optim.epochs", "16"]
RS_OVERRIDES += ["--optim.micro_batch_tokens", "512"]  # one example per micro-batch
KEYS = ("rollout/reward_mean", "rollout/invalid_action_rate", "eval/reward_mean")


def run(script: str, out: Path, *args: str) -> float:
    cmd = [sys.executable, str(REPO / "scripts" / script), "--config", str(CONFIG)]
    cmd += ["--output-dir", str(out), "--logging.progress", "false", *args]
    print("$", " ".join(cmd[1:]), flush=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    with open(out.parent / f"{out.name}.log", "a") as log:
        subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t0


def curve(out: Path) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` from a run's metrics.jsonl."""
    steps: dict[int, dict[str, float]] = {}
    for record in read_metrics(out):
        steps.setdefault(int(record["step"]), {}).update(
            {k: v for k, v in record.items() if k in KEYS}
        )
    return dict(sorted(steps.items()))


def table(name: str, points: dict[int, dict[str, float]], seconds: float) -> str:
    lines = [
        f"**{name}** ({seconds / 60:.1f} min)",
        "",
        "| step | rollout reward | rollout invalid rate | eval reward |",
        "|---:|---:|---:|---:|",
    ]
    for step, m in points.items():
        cells = [f"{m[k]:+.4f}" if k in m else "" for k in KEYS]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(curves: dict[str, dict[int, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    panels = [("rollout/reward_mean", "training episodes"), ("eval/reward_mean", "held-out eval")]
    for ax, (key, title) in zip(axes, panels, strict=True):
        for name, points in curves.items():
            xs = [s for s, m in points.items() if key in m]
            ax.plot(xs, [points[s][key] for s in xs], marker="o", label=name)
        ax.axhline(0.05, color="grey", linestyle=":", label="max (+0.05)")
        ax.set_title(f"mean reward, {title}")
        ax.set_xlabel("step (iterations done)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean episode reward")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--rs-iterations", type=int, default=8)
    parser.add_argument("--grpo-iterations", type=int, default=12)
    args = parser.parse_args()
    out = args.output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    rs_dir, grpo_dir = out / "rs", out / "grpo"
    warm = out / "warm_start_adapter"

    seconds = {"cold start": run("train_rs.py", rs_dir, "--iterations", "1", *RS_OVERRIDES)}
    shutil.rmtree(warm, ignore_errors=True)
    shutil.copytree(rs_dir / "checkpoints" / "iter_000001" / "adapter", warm)
    seconds["expert iteration"] = seconds["cold start"] + run(
        "train_rs.py", rs_dir, "--iterations", str(args.rs_iterations), *RS_OVERRIDES
    )
    seconds["GRPO"] = run(
        "train_grpo.py",
        grpo_dir,
        "--iterations",
        str(args.grpo_iterations),
        "--model.adapter_path",
        str(warm),
    )
    curves = {"expert iteration": curve(rs_dir), "GRPO": curve(grpo_dir)}
    plot(curves, out / "learning_curves.png")
    text = "\n\n".join(
        [
            "Step k: the rollouts of iteration k (sampled with the weights after k - 1 "
            "updates) and the evaluation after its update; step 0: the evaluation before "
            "any update. Expert iteration's iteration 1 is the cold start (its rollouts come "
            "from the random model; its update is SFT on 2 expert demonstrations). GRPO "
            "starts from that cold-start adapter.",
            table("Expert iteration", curves["expert iteration"], seconds["expert iteration"]),
            table("GRPO", curves["GRPO"], seconds["GRPO"]),
        ]
    )
    (out / "learning_curves.md").write_text(text + "\n")
    print(text)
    print(f"\nwrote {out / 'learning_curves.png'} and {out / 'learning_curves.md'}")


if __name__ == "__main__":
    main()

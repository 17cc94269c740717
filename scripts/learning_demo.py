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
   success rate here) and the replay of successes on (``grpo.replay: true``: without
   it, GRPO sank to 0 on some seeds);
3. **baseline**: the same GRPO command with a learning rate of 1e-12 (the optimizer
   must get a positive one): the cold-start policy sampled for as many iterations.

``--seeds 0,1,2,3,4`` runs phases 2 and 3 once per seed (``--seed``; ``--jobs`` seeds at
once), all from the one cold start, and reports per seed and a test over the seeds.
``--algorithm ppo`` runs phases 2 and 3 as PPO (a value head and GAE, ``train_grpo.py
--algorithm ppo``; the same config otherwise, without the replay). ``--compare-replay``
runs phase 2 twice, with ``grpo.replay`` (the config's) and without;
``--compare-normalization`` runs it twice, with the config's ``grpo.loss_normalization``
and with the other one (token / episode); ``--cold-start-epochs`` makes a weaker or
stronger starting policy; arguments after ``--`` go to every run of phases 2 and 3.
Every phase runs with one torch thread (``OMP_NUM_THREADS=1`` unless set): the runs
are then deterministic. A run whose metrics already reach its last iteration is not
run again, and one cut short resumes from its last checkpoint, so the same command
picks up where an interrupted demo stopped.

Then writes ``learning_curves.png`` and ``learning_curves.md`` in the output dir: the
numbers, and each trained run against the baseline (and with ``--compare-*`` against
each other) at the level of the seeds: per seed, the difference of their successes
over iterations 2-last (after the first update); over the seeds, an exact one-sided
sign-flip test of those differences and a paired t-test. The seed is the unit: a
run's iterations share its update path, so its episodes are not independent draws.
Measured results: docs/training.md, "Learning demo". Each run's log is
``<output dir>/[seed_<s>/]<phase>.log``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


def finished(out: Path, iterations: int) -> bool:
    """Whether the run in ``out`` logged its last iteration's rollouts."""
    return (out / "metrics.jsonl").is_file() and max(curve(out), default=0) >= iterations


def run(script: str, out: Path, *args: str, iterations: int | None = None) -> float | None:
    """Run one training script to the end; its output goes to ``<out>.log``. With
    ``iterations``, a run already finished is skipped (None) and one cut short resumes
    from its last checkpoint (the trainers resume an output dir by themselves)."""
    if iterations is not None and finished(out, iterations):
        print(f"  {out} is done: skipped", flush=True)
        return None
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


def table(name: str, points: dict[int, dict[str, float]], seconds: float | None) -> str:
    lines = [
        f"**{name}**" + ("" if seconds is None else f" ({seconds / 60:.1f} min)"),
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


def sign_flip_p(differences: Sequence[int]) -> float:
    """The exact one-sided sign-flip test of paired differences: the share of the
    ``2**n`` ways to give each ``|d|`` a sign whose sum is at least the observed sum.
    Under "no effect" each seed's difference is as likely to be negative as positive;
    exact, assumption-free, and at least ``1 / 2**n`` (10 seeds: 0.00098).

    >>> sign_flip_p([3, 1, 2]), sign_flip_p([3, -1, 2]), sign_flip_p([0, 0])
    (0.125, 0.25, 1.0)
    """
    sums = {0: 1}  # sum of the signed |d| so far -> how many sign assignments give it
    for d in differences:
        step: dict[int, int] = {}
        for total, count in sums.items():
            for signed in (abs(d), -abs(d)):
                step[total + signed] = step.get(total + signed, 0) + count
        sums = step
    observed = sum(differences)
    return sum(c for total, c in sums.items() if total >= observed) / 2 ** len(differences)


def paired_t(differences: Sequence[int]) -> tuple[float, float]:
    """The paired t statistic of the differences and its one-sided p (Student's t with
    ``n - 1`` degrees of freedom; differences all equal: t = +-inf).

    >>> t, p = paired_t([1, 2, 3, 4]); round(t, 4), round(p, 4)
    (3.873, 0.0152)
    """
    n = len(differences)
    mean = sum(differences) / n
    if n < 2:
        return math.nan, math.nan
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    if sd == 0:
        return (math.inf, 0.0) if mean > 0 else (-math.inf, 1.0) if mean < 0 else (0.0, 0.5)
    t = mean / (sd / math.sqrt(n))
    return t, student_t_sf(t, n - 1)


def student_t_sf(t: float, df: int) -> float:
    """P(T >= t) for Student's t with an integer ``df`` (the closed forms of
    Abramowitz and Stegun 26.7.3-4: no scipy needed).

    >>> round(student_t_sf(2.262, 9), 4), student_t_sf(0.0, 5)
    (0.025, 0.5)
    """
    theta = math.atan(abs(t) / math.sqrt(df))
    c2, sin, cos = math.cos(theta) ** 2, math.sin(theta), math.cos(theta)
    if df % 2:  # odd: 2/pi (theta + sin cos (1 + 2/3 c2 + 2*4/(3*5) c2^2 + ...))
        term, series = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            series += term
        inside = 2 / math.pi * (theta + sin * cos * series)
    else:  # even: sin (1 + 1/2 c2 + 1*3/(2*4) c2^2 + ...)
        term, series = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            series += term
        inside = sin * series
    # inside = P(|T| < |t|)
    return (1 - inside) / 2 if t >= 0 else (1 + inside) / 2


def seed_differences(by_seed: dict[int, dict[str, dict]], name: str, other: str) -> dict[int, int]:
    """Per seed: ``name``'s successes minus ``other``'s, over iterations 2-last."""
    return {
        seed: successes(curves[name], 2)[0] - successes(curves[other], 2)[0]
        for seed, curves in by_seed.items()
    }


def seed_test(by_seed: dict[int, dict[str, dict]], name: str, other: str) -> str:
    """The seed-level comparison of two arms: per-seed differences, the exact sign-flip
    test, the paired t-test (both one-sided: ``name`` above ``other``)."""
    short = other.split(" (")[0]  # "baseline (lr 1e-12)" -> "baseline"
    diffs = seed_differences(by_seed, name, other)
    values = list(diffs.values())
    n = len(values)
    episodes = sum(successes(curves[name], 2)[1] for curves in by_seed.values()) // max(n, 1)
    t, p_t = paired_t(values)
    signs = [sum(d > 0 for d in values), sum(d == 0 for d in values), sum(d < 0 for d in values)]
    per_seed = ", ".join(f"{seed}: {d:+d}" for seed, d in diffs.items())
    return (
        f"{name} minus {short}, successes over iterations 2-last ({episodes} episodes a "
        f"seed), per seed: {per_seed}. Over {n} seeds: mean {sum(values) / max(n, 1):+.1f}, "
        f"above on {signs[0]}, equal on {signs[1]}, below on {signs[2]}; exact one-sided "
        f"sign-flip p = {sign_flip_p(values):.2g} (of 2^{n} sign assignments); paired t = "
        f"{t:.2f} (df {n - 1}), one-sided p = {p_t:.2g}."
    )


def comparison(trained: dict, other: dict, name: str = "GRPO", other_name: str = "baseline") -> str:
    """One seed: a trained run (``name``) against another (the baseline, or a second
    trained run), their successes after the first update."""
    g, b = successes(trained, 2), successes(other, 2)
    return (
        f"Iterations 2-{max(trained)} (after the first update): {name} {g[0]}/{g[1]} "
        f"successes, {other_name} {b[0]}/{b[1]} (difference {g[0] - b[0]:+d})."
    )


COMMON_RANDOM_NUMBERS = (
    "Both arms of a seed sample with the seed's stream (task instances, sampling), so "
    "their iteration 1 (the cold-start policy, before any update) is the same episodes: "
    "common random numbers. That makes each seed's difference less noisy, which a "
    "paired, seed-level test may use; it would be wrong to pool episodes across arms or "
    "seeds as independent draws (iterations of one run share its update path). So the "
    "test is over seeds, and it counts iterations 2-last."
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


def trained_arms(
    algorithm: str,
    out: Path,
    *,
    compare_replay: bool = False,
    compare_normalization: str | None = None,
) -> dict[str, tuple[Path, list[str]]]:
    """Phases 2 and 3: ``{label: (output folder, arguments of its own)}``, the baseline
    last; every arm also gets the common arguments (:func:`common_args`).
    ``compare_normalization``: the ``grpo.loss_normalization`` of a second trained arm
    (the other one than the config's)."""
    name = algorithm.upper()
    arms = {name: (out / algorithm, [])}
    if compare_replay:
        arms[f"{name} without replay"] = (
            out / f"{algorithm}_no_replay",
            ["--grpo.replay", "false"],
        )
    if compare_normalization is not None:
        arms[f"{name} per-{compare_normalization}"] = (
            out / f"{algorithm}_{compare_normalization}_norm",
            ["--grpo.loss_normalization", compare_normalization],
        )
    baseline = ["--optim.learning_rate", BASELINE_LR]
    arms[f"baseline (lr {BASELINE_LR})"] = (out / "baseline", baseline)
    return arms


def common_args(algorithm: str, iterations: int | None, overrides: list[str]) -> list[str]:
    """The arguments every run of phases 2 and 3 gets. tiny_task.yaml's GRPO replays
    successes (``grpo.replay: true``); PPO forms no groups to replay into, so its runs
    switch it off."""
    common = [] if iterations is None else ["--iterations", str(iterations)]
    common += ["--algorithm", algorithm]
    if algorithm == "ppo":
        common += ["--grpo.replay", "false"]
    return [*common, *overrides]


def seed_list(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``: distinct integers."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"a seed is repeated: {text!r}")
    return seeds


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
        "--compare-replay",
        action="store_true",
        help="phase 2 twice: GRPO as configured (grpo.replay on) and without the replay",
    )
    parser.add_argument(
        "--compare-normalization",
        action="store_true",
        help="phase 2 twice: with the config's grpo.loss_normalization and with the other "
        "one (token / episode)",
    )
    parser.add_argument(
        "--cold-start-epochs",
        type=int,
        default=COLD_START_EPOCHS,
        help="SFT epochs of the cold start: fewer make a weaker starting policy",
    )
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=[0],
        help="comma-separated run seeds for phases 2 and 3 (e.g. 100,101,...,109): per-seed "
        "tables, then the seed-level tests; default: 0",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="seeds run at once (one torch thread each)"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: write the report from the runs already in --output-dir",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args, overrides = parser.parse_args(argv[:split]), argv[split + 1 :]
    if args.compare_replay and args.algorithm == "ppo":
        parser.error("--compare-replay compares GRPO with and without it: PPO has no replay")
    from uirl_agents.trainers.cli import parse_args as parse_config_args
    from uirl_agents.trainers.config import GRPOConfig

    # Exits with the trainer's own message when an override names no field or is invalid.
    common = ["--config", str(CONFIG), "--output-dir", str(args.output_dir)]
    config, _ = parse_config_args(
        GRPOConfig,
        [*common, *common_args(args.algorithm, args.grpo_iterations, overrides)],
        "learning demo overrides",
    )
    args.iterations = config.iterations
    # The other normalisation than the one the runs get.
    other = {"token": "episode", "episode": "token"}[config.grpo.loss_normalization]
    args.other_normalization = other if args.compare_normalization else None
    return args, overrides


def run_seed(
    seed: int,
    arms: dict[str, tuple[Path, list[str]]],
    common: list[str],
    warm: Path,
    iterations: int,
) -> dict[Path, float | None]:
    """Phases 2 and 3 for one seed, from the shared cold-start adapter: each run's wall
    time (None: finished before), by output folder."""
    seconds = {}
    for label, (folder, extra) in arms.items():
        print(f"seed {seed}: {label} from the cold-start adapter", flush=True)
        args = ["--seed", str(seed), "--model.adapter_path", str(warm), *extra]
        seconds[folder] = run("train_grpo.py", folder, *common, *args, iterations=iterations)
    return seconds


def pooled_curve(per_seed: list[dict[int, dict[str, float]]]) -> dict[int, dict[str, float]]:
    """One arm's curve over seeds: per iteration, the success and invalid-action rates
    and the mean return averaged over the seeds that reached it (episodes summed)."""
    points: dict[int, dict[str, float]] = {}
    for step in sorted({s for points in per_seed for s in points}):
        at = [p[step] for p in per_seed if step in p]
        points[step] = {k: sum(m[k] for m in at) / len(at) for k in KEYS if all(k in m for m in at)}
        points[step][EPISODES] = sum(m.get(EPISODES, 0.0) for m in at)
    return points


def seed_summary(by_seed: dict[int, dict[str, dict]], trained: list[str], baseline: str) -> str:
    """A table, one row per seed: each arm's successes after the first update, and
    each trained arm's difference from that seed's baseline."""
    short = baseline.split(" (")[0]
    head = ["seed", *trained, baseline, *(f"{t} - {short}" for t in trained)]
    lines = ["| " + " | ".join(head) + " |", "|---:" * len(head) + "|"]
    for seed, curves in by_seed.items():
        counts = {label: successes(points, 2) for label, points in curves.items()}
        cells = [f"{counts[label][0]}/{counts[label][1]}" for label in (*trained, baseline)]
        cells += [f"{counts[t][0] - counts[baseline][0]:+d}" for t in trained]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seed_curves(by_seed: dict[int, dict[str, dict]]) -> str:
    """Every seed's and arm's successes per iteration in one table (``k/n`` cells), with
    the pooled count after the first update."""
    steps = sorted({s for curves in by_seed.values() for c in curves.values() for s in c})
    head = ["seed", "run", *map(str, steps), f"iterations 2-{steps[-1]}"]
    lines = ["| " + " | ".join(head) + " |", "|---:|---|" + "---:|" * (len(head) - 2)]
    for seed, curves in by_seed.items():
        for label, points in curves.items():
            cells = [
                f"{round(points[s]['rollout/success_rate'] * points[s][EPISODES])}"
                if s in points
                else ""
                for s in steps
            ]
            wins, total = successes(points, 2)
            lines.append(f"| {seed} | {label} | " + " | ".join(cells) + f" | {wins}/{total} |")
    return "\n".join(lines)


def main() -> None:
    args, overrides = parse_cli()
    out = args.output_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    common = common_args(args.algorithm, args.grpo_iterations, overrides)
    cold_dir, warm = out / "cold_start", out / "cold_start_adapter"
    seed_arms = {
        seed: trained_arms(
            args.algorithm,
            out / f"seed_{seed}",
            compare_replay=args.compare_replay,
            compare_normalization=args.other_normalization,
        )
        for seed in args.seeds
    }
    seconds: dict[Path, float | None] = {}
    if not args.report_only:
        print("cold start: SFT on the expert's demonstrations", flush=True)
        seconds[cold_dir] = run(
            "train_rs.py", cold_dir, *cold_start_args(args.cold_start_epochs), iterations=1
        )
        if seconds[cold_dir] is not None or not warm.is_dir():
            shutil.rmtree(warm, ignore_errors=True)
            shutil.copytree(cold_dir / "checkpoints" / "iter_000001" / "adapter", warm)

        # Seeds run --jobs at a time: one torch thread each, so the curves do not depend
        # on how many run together.
        def one(seed: int) -> dict[Path, float | None]:
            (out / f"seed_{seed}").mkdir(exist_ok=True)
            return run_seed(seed, seed_arms[seed], common, warm, args.iterations)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for times in pool.map(one, args.seeds):
                seconds.update(times)
    report(out, args, seed_arms, seconds)


def report(
    out: Path,
    args: argparse.Namespace,
    seed_arms: dict[int, dict[str, tuple[Path, list[str]]]],
    seconds: dict[Path, float | None],
) -> None:
    """``learning_curves.md`` and ``.png`` from the runs' metrics files."""
    name = args.algorithm.upper()
    cold_dir = out / "cold_start"
    folders = [cold_dir, *(f for arms in seed_arms.values() for f, _ in arms.values())]
    missing = [str(f) for f in folders if not (f / "metrics.jsonl").is_file()]
    if missing:
        sys.exit(f"no metrics.jsonl in {', '.join(missing)}: run the demo with these options")
    cold = curve(cold_dir)
    by_seed = {
        seed: {label: curve(folder) for label, (folder, _) in arms.items()}
        for seed, arms in seed_arms.items()
    }
    labels = list(next(iter(seed_arms.values())))
    *trained, baseline = labels
    pooled = {label: pooled_curve([c[label] for c in by_seed.values()]) for label in labels}
    many = len(args.seeds) > 1
    plot(
        cold,
        {
            f"{label} (mean of {len(args.seeds)} seeds)" if many else label: pooled[label]
            for label in labels
        },
        out / "learning_curves.png",
        f"{name} updates",
    )
    text = [
        f"Iteration k: the rollouts sampled with the weights after k - 1 updates ({name} "
        "iteration 1: the cold-start policy). The cold start's iteration 1 samples the "
        "random model; its update is SFT on the expert's demonstrations. Every seed starts "
        "from the same cold start.",
        table("Cold start (expert iteration, 1 iteration)", cold, seconds.get(cold_dir)),
    ]
    for seed, curves in by_seed.items():
        text.append(f"### Seed {seed}")
        arms = seed_arms[seed]
        text += [table(label, curves[label], seconds.get(arms[label][0])) for label in labels]
        text += [comparison(curves[t], curves[baseline], t) for t in trained]
        if len(trained) > 1:
            text.append(comparison(curves[trained[0]], curves[trained[1]], trained[0], trained[1]))
    text.append("### Over seeds")
    text.append("Successes per iteration (of the episodes each iteration sampled):")
    text.append(seed_curves(by_seed))
    text.append(seed_summary(by_seed, trained, baseline))
    text.append(COMMON_RANDOM_NUMBERS)
    text += [seed_test(by_seed, t, baseline) for t in trained]
    if len(trained) > 1:
        text.append(seed_test(by_seed, trained[0], trained[1]))
    known = [t for t in seconds.values() if t is not None]
    if known:
        text.append(f"Total: {sum(known) / 60:.1f} min of runs.")
    (out / "learning_curves.md").write_text("\n\n".join(text) + "\n")
    print("\n\n".join(text))
    print(f"\nwrote {out / 'learning_curves.png'} and {out / 'learning_curves.md'}")


if __name__ == "__main__":
    main()

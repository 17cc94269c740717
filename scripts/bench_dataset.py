"""The dataset export's time, size on disk and peak memory (docs/benchmarks.md).

Writes a synthetic run folder (``uirl_agents.testing.synthetic_runs``: the trajectory
writer's layout and PNGs, a distinct page-like screenshot per step, every step written
in UI-TARS's format with its model image, as a model policy's run has them), split over
``--workers`` run directories written in parallel, then exports it with
``python -m uirl_agents.dataset export`` in a process of its own and reports its wall
time, its peak resident memory (``wait4``'s ``ru_maxrss``) next to that of a process
that only imports the exporter, and the sizes of the run and of the dataset.

    python scripts/bench_dataset.py --screen 1280x800 --episodes 1000 --steps 15 --out /tmp/bench
    python scripts/bench_dataset.py --screen 160x210 --episodes 1000 --steps 15 --out /tmp/bench

The export's wall time depends on what else runs: the CPU seconds it used are reported
too, with the load average at its end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from uirl_agents.testing.synthetic_runs import write_synthetic_run

REPO = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--screen", default="1280x800", help="WIDTHxHEIGHT of the screenshots")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=15)
    p.add_argument("--workers", type=int, default=2, help="processes writing the run")
    p.add_argument("--out", type=Path, required=True, help="where the run and dataset go")
    p.add_argument("--keep", action="store_true", help="keep the run and the dataset")
    p.add_argument(
        "--export-only", action="store_true", help="export the run --keep left in --out again"
    )
    return p.parse_args()


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def generate(run: Path, episodes: int, steps: int, screen: tuple[int, int], workers: int) -> float:
    """Write the run (``workers`` run directories); returns the seconds it took."""
    t0 = time.perf_counter()
    shares = [episodes // workers + (w < episodes % workers) for w in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        jobs = [
            pool.submit(
                write_synthetic_run, run / f"run-{w}", episodes=n, steps=steps, screen=screen
            )
            for w, n in enumerate(shares)
        ]
        for job in jobs:
            job.result()
    return time.perf_counter() - t0


def measured(cmd: list[str]) -> tuple[float, float, float]:
    """Run ``cmd``; its wall seconds, CPU seconds (user + system) and peak resident MB."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # Linux: KB


def main() -> None:
    args = parse_args()
    width, height = map(int, args.screen.split("x"))
    run, dataset = args.out / f"run-{args.screen}", args.out / f"dataset-{args.screen}"
    shutil.rmtree(dataset, ignore_errors=True)
    generation_s = None
    if not args.export_only:
        shutil.rmtree(run, ignore_errors=True)
        print(f"writing {args.episodes} episodes of {args.steps} steps at {args.screen} ...")
        generation_s = generate(run, args.episodes, args.steps, (width, height), args.workers)
    _, _, baseline_mb = measured([sys.executable, "-c", "import uirl_agents.dataset.export"])
    export = [sys.executable, "-m", "uirl_agents.dataset", "export", str(run), str(dataset)]
    seconds, cpu_s, peak_mb = measured([*export, "--no-progress"])
    summary = json.loads((dataset / "uirl_export.json").read_text())
    episodes = summary["configs"]["episodes"]["num_rows"]
    result = {
        "screen": args.screen,
        "episodes": episodes,
        "step_rows": summary["configs"]["steps"]["num_rows"],
        "generation_s": None if generation_s is None else round(generation_s, 1),
        "run_mb": round(du_mb(run), 1),
        "export_s": round(seconds, 1),
        "export_cpu_s": round(cpu_s, 1),
        "load_average": round(os.getloadavg()[0], 1),
        "episodes_per_s": round(episodes / seconds, 1),
        "peak_rss_mb": round(peak_mb, 1),
        "import_only_rss_mb": round(baseline_mb, 1),
        "dataset_mb": round(du_mb(dataset), 1),
        "episodes_mb": round(summary["configs"]["episodes"]["download_size"] / 1e6, 1),
        "steps_mb": round(summary["configs"]["steps"]["download_size"] / 1e6, 1),
        "files": {k: len(v["files"]) for k, v in summary["configs"].items()},
    }
    print(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(run, ignore_errors=True)
        shutil.rmtree(dataset, ignore_errors=True)


if __name__ == "__main__":
    main()

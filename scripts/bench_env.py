"""Benchmark the env on local sessions; print a markdown report, write docs/benchmarks.md.

Measures, in one run:
- cold start: a new session server until it answers ``GET /`` (browser launch included);
- the protocol's raw step over HTTP (``/act`` left_click + settled PNG, bytes only);
- ``UIEnv.step`` (left_click, decoded screenshot, reward from ``/progress``) and
  ``UIEnv.reset`` after a few steps, p50 and p95;
- aggregate steps/s for N sessions, each UIEnv driven from its own thread, and the same
  through ``SessionVectorEnv`` and Gymnasium's ``AsyncVectorEnv`` (one process per env);
- memory per session: PSS (``/proc/PID/smaps_rollup``) of server + Chromium processes.

    python scripts/bench_env.py                 # full run, updates docs/benchmarks.md
    python scripts/bench_env.py --quick --no-write
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np
import requests

import uirl_gym
from uirl_gym.actions import Action, ActionType
from uirl_gym.env import UIEnv
from uirl_gym.runtimes.base import session_headers
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.vector import SessionVectorEnv

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START, END = "<!-- bench_env:start -->", "<!-- bench_env:end -->"


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def click_at(i: int) -> Action:
    """A click on a different sheet cell each time (each changes the screen)."""
    return Action(ActionType.LEFT_CLICK, 100 + 150 * (i % 3), 125 + 24 * (i % 25))


def pss_mb(pids: list[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def bench_cold_start(runtime: LocalRuntime, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        session = runtime.acquire()
        times.append(time.perf_counter() - t0)
        runtime.release(session, healthy=False)
    return times


def bench_http_step(base_url: str, steps: int) -> list[float]:
    http = requests.Session()
    http.headers.update(session_headers(base_url))  # /reset needs the session token
    http.post(f"{base_url}/reset", json={"seed": 0}).raise_for_status()
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        r = http.get(f"{base_url}/act", params=click_at(i).to_query())
        r.raise_for_status()
        times.append(time.perf_counter() - t0)
    return times


def bench_env_step_reset(env: UIEnv, steps: int, resets: int) -> tuple[list[float], list[float]]:
    env.reset(seed=0)
    step_times = []
    for i in range(steps):
        t0 = time.perf_counter()
        env.step(click_at(i))
        step_times.append(time.perf_counter() - t0)
    reset_times = []
    for seed in range(resets):
        for i in range(3):  # a reset follows an episode, not another reset
            env.step(click_at(i))
        t0 = time.perf_counter()
        env.reset(seed=seed)
        reset_times.append(time.perf_counter() - t0)
    return step_times, reset_times


def threaded_throughput(envs: list[UIEnv], seconds: float) -> float:
    for env in envs:
        env.reset(seed=0)
    counts = [0] * len(envs)
    stop = time.perf_counter() + seconds

    def drive(k: int) -> None:
        i = 0
        while time.perf_counter() < stop:
            envs[k].step(click_at(i))
            i += 1
        counts[k] = i

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(len(envs))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def vector_throughput(envs: gym.vector.VectorEnv, seconds: float) -> float:
    n = envs.num_envs
    envs.reset(seed=0)
    steps, i = 0, 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        batch = [click_at(i + k).to_space_sample() for k in range(n)]
        actions = {key: np.array([b[key] for b in batch]) for key in batch[0]}
        actions["text"] = tuple(b["text"] for b in batch)
        actions["keys"] = tuple(b["keys"] for b in batch)
        envs.step(actions)
        steps += n
        i += 1
    return steps / (time.perf_counter() - t0)


def measure(label: str, fn: Callable[[], float]) -> float:
    value = fn()
    print(f"  {label}: {value:.1f}", file=sys.stderr, flush=True)
    return value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, N up to 4")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument("--seconds", type=float, default=8.0, help="per throughput point")
    args = p.parse_args()
    sizes = [1, 2, 4] if args.quick else [1, 2, 4, 8]
    seconds = 3.0 if args.quick else args.seconds
    steps = 40 if args.quick else 150
    resets = 8 if args.quick else 25

    lines: list[str] = []
    with LocalRuntime() as runtime:
        print("cold start ...", file=sys.stderr, flush=True)
        cold = bench_cold_start(runtime, 2 if args.quick else 5)
        env = UIEnv(runtime=runtime)
        env.reset(seed=0)
        http = bench_http_step(env.session.base_url, steps)
        step_t, reset_t = bench_env_step_reset(env, steps, resets)
        by_format = {}
        for fmt in ("raw", "jpeg"):
            env.image_format = env._client.image_format = fmt
            by_format[fmt] = bench_env_step_reset(env, steps, 0)[0]
        env.close()
        lines += [
            "| measure | p50 | p95 | n |",
            "| --- | --- | --- | --- |",
            f"| cold start (server + Chromium until `GET /` is 200) | {pct(cold, 50):.2f} s "
            f"| {pct(cold, 95):.2f} s | {len(cold)} |",
            f"| HTTP step: `/act` left_click + settled PNG (bytes) | {pct(http, 50) * 1e3:.1f} ms "
            f"| {pct(http, 95) * 1e3:.1f} ms | {len(http)} |",
            f"| `UIEnv.step` (png, the default): left_click, screenshot array, reward | "
            f"{pct(step_t, 50) * 1e3:.1f} ms | {pct(step_t, 95) * 1e3:.1f} ms | {len(step_t)} |",
            *(
                f"| `UIEnv.step` with `image_format={fmt}` | {pct(t, 50) * 1e3:.1f} ms "
                f"| {pct(t, 95) * 1e3:.1f} ms | {len(t)} |"
                for fmt, t in by_format.items()
            ),
            f"| `UIEnv.reset` (after an episode) | {pct(reset_t, 50) * 1e3:.1f} ms "
            f"| {pct(reset_t, 95) * 1e3:.1f} ms | {len(reset_t)} |",
            "",
            "| N sessions | threads over UIEnv (steps/s) | SessionVectorEnv (steps/s) "
            "| AsyncVectorEnv (steps/s) | PSS per session (MB) | PSS, SessionVectorEnv total (MB) "
            "| PSS, AsyncVectorEnv total (MB) |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for n in sizes:
            print(f"N={n} ...", file=sys.stderr, flush=True)
            envs = [UIEnv(runtime=runtime) for _ in range(n)]
            threaded = measure("threads", lambda: threaded_throughput(envs, seconds))  # noqa: B023
            for e in envs:
                e.close()
            vec = SessionVectorEnv(n, runtime=runtime)
            vector = measure("SessionVectorEnv", lambda: vector_throughput(vec, seconds))  # noqa: B023
            me = os.getpid()
            vec_pss = pss_mb([me, *descendant_pids(me)])
            per_session = statistics.median(
                pss_mb([runtime.pid(e.session), *descendant_pids(runtime.pid(e.session))])
                for e in vec.envs
            )
            vec.close()
            async_env = gym.make_vec(uirl_gym.ENV_ID, num_envs=n, vectorization_mode="async")
            async_rate = measure("AsyncVectorEnv", lambda: vector_throughput(async_env, seconds))  # noqa: B023
            async_pss = pss_mb([me, *descendant_pids(me)])
            async_env.close()
            lines.append(
                f"| {n} | {threaded:.1f} | {vector:.1f} | {async_rate:.1f} | {per_session:.0f} "
                f"| {vec_pss:.0f} | {async_pss:.0f} |"
            )
    facts = (
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}. PSS totals count this "
        "process and every process under it (servers, Chromium, AsyncVectorEnv workers)."
    )
    command = "python scripts/bench_env.py" + (" --quick" if args.quick else "")
    report = "\n".join([f"Command: `{command}`", "", facts, "", *lines])
    print(report)
    if not args.no_write:
        text = DOCS.read_text() if DOCS.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        DOCS.write_text(f"{head}{START}\n{report}\n{END}{tail}")
        print(f"wrote {DOCS}", file=sys.stderr)


if __name__ == "__main__":
    main()

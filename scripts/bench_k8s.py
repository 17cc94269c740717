"""Reset latency with the Kubernetes runtime: warm pool vs a pod created from scratch.

Runs against the stand-in API server of the tests (``tests/k8s_standin.py``): real
kubernetes client, real session servers (Chromium), real routing proxy; pods are local
processes, so "from scratch" here is process start + browser launch + readiness, without
a real cluster's scheduling and image pull (add those on a cluster).

    python scripts/bench_k8s.py --iterations 5 --cold-iterations 3
    python scripts/bench_k8s.py --lookups-only --unknown-ids 300

Prints a markdown table (milliseconds), the memory (PSS) of one session, and what the
proxy's session lookups cost the API server: made-up session ids (each new) and
requests to a live session, with the API calls the stand-in served for them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import requests  # noqa: E402
from k8s_standin import PodStandIn, serve_app  # noqa: E402

from uirl_gym.client import SessionClient  # noqa: E402
from uirl_gym.runtimes.k8s_api import PodApi, load_api_client  # noqa: E402
from uirl_gym.runtimes.kubernetes import KubernetesRuntime, KubernetesRuntimeConfig  # noqa: E402
from uirl_gym.runtimes.local import descendant_pids  # noqa: E402
from uirl_gym.server.proxy import ProxyConfig, create_proxy_app  # noqa: E402

NS = "bench"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=5, help="warm-pool resets per route")
    p.add_argument("--cold-iterations", type=int, default=3, help="pods created per route")
    p.add_argument("--gap-s", type=float, default=1.0, help="between resets of a kept session")
    p.add_argument("--port", type=int, default=18080, help="session port inside the 'pods'")
    p.add_argument(
        "--unknown-ids", type=int, default=300, help="made-up session ids sent to the proxy"
    )
    p.add_argument("--session-requests", type=int, default=100, help="to a live session")
    p.add_argument("--lookups-only", action="store_true", help="only the proxy lookup costs (fast)")
    return p.parse_args()


def settle(runtime: KubernetesRuntime, timeout_s: float = 120) -> None:
    """Wait until no pod starts in the background, so it does not skew the next timing."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = runtime.stats()
        if stats["starting"] == 0 and stats["ready"] >= runtime.config.pool_size:
            return
        time.sleep(0.05)
    raise TimeoutError(f"pool did not settle: {runtime.stats()}")


def timed_reset(runtime: KubernetesRuntime, seed: int) -> tuple[float, float, str]:
    """(acquire ms, acquire + POST /reset ms, session id); the session goes back healthy."""
    t0 = time.perf_counter()
    session = runtime.acquire()
    t1 = time.perf_counter()
    client = SessionClient(session.base_url)
    client.reset(seed=seed)
    t2 = time.perf_counter()
    client.close()
    runtime.release(session, healthy=True)
    return (t1 - t0) * 1000, (t2 - t0) * 1000, session.session_id


def reset_only(runtime: KubernetesRuntime, n: int, gap_s: float) -> list[float]:
    """POST /reset on a held session, ``gap_s`` apart (an episode's worth of time)."""
    session = runtime.acquire()
    settle(runtime)  # let the replacement start first: it competes for the CPU
    client = SessionClient(session.base_url)
    out = []
    for seed in range(n):
        time.sleep(gap_s)  # the server finishes the previous reset's background work
        t0 = time.perf_counter()
        client.reset(seed=seed)
        out.append((time.perf_counter() - t0) * 1000)
    client.close()
    runtime.release(session, healthy=True)
    return out


def pss_mb(pid: int) -> float:
    """PSS of a process and its descendants (server, Playwright driver, Chromium)."""
    total_kb = 0
    for p in (pid, *descendant_pids(pid)):
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def row(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return (
        f"| {name} | {len(values)} | {statistics.median(values):.1f} | {p90:.1f} | "
        f"{max(values):.1f} |"
    )


def measure(
    standin: PodStandIn, proxy_url: str | None, args: argparse.Namespace, emit: Callable
) -> None:
    route = "proxy" if proxy_url else "direct (pod IP)"
    common = {"namespace": NS, "api_server": standin.url, "container_port": args.port}
    with KubernetesRuntime(
        KubernetesRuntimeConfig(pool_size=1, proxy_url=proxy_url, **common)
    ) as runtime:
        runtime.wait_pool_ready(timeout_s=120)
        acquires, resets = [], []
        for i in range(args.iterations):
            settle(runtime)
            acquire_ms, total_ms, _ = timed_reset(runtime, seed=i)
            acquires.append(acquire_ms)
            resets.append(total_ms)
        settle(runtime)
        emit(row(f"warm pool, {route}: acquire", acquires))
        emit(row(f"warm pool, {route}: acquire + POST /reset", resets))
        kept = reset_only(runtime, args.iterations, args.gap_s)
        emit(row(f"session kept, {route}: POST /reset", kept))
    with KubernetesRuntime(
        KubernetesRuntimeConfig(pool_size=0, proxy_url=proxy_url, **common)
    ) as runtime:
        colds = [timed_reset(runtime, seed=i)[1] for i in range(args.cold_iterations)]
        emit(row(f"pool_size=0, {route}: create pod + acquire + POST /reset", colds))


def api_lookups(standin: PodStandIn) -> int:
    """Pod reads and lists the stand-in served so far (watches are counted apart)."""
    return standin.calls["list"] + standin.calls["read"]


def lookup_costs(
    standin: PodStandIn, proxy_url: str, args: argparse.Namespace, emit: Callable
) -> None:
    """What the proxy's lookups cost: made-up ids, then requests to a live session."""
    emit("| proxied requests | n | API lookups (list/read) | watches opened | wall s |")
    emit("|---|---|---|---|---|")

    def measure_requests(name: str, urls: list[str]) -> None:
        lookups, watches = api_lookups(standin), standin.calls["watch"]
        t0 = time.perf_counter()
        with requests.Session() as http:
            statuses = {http.get(url, timeout=30).status_code for url in urls}
        wall = time.perf_counter() - t0
        emit(
            f"| {name} (HTTP {', '.join(map(str, sorted(statuses)))}) | {len(urls)} | "
            f"{api_lookups(standin) - lookups} | {standin.calls['watch'] - watches} | "
            f"{wall:.2f} |"
        )

    made_up = [
        f"{proxy_url}/proxy/nosuch-{uuid.uuid4().hex[:12]}/" for _ in range(args.unknown_ids)
    ]
    measure_requests("made-up session ids, each new", made_up)
    config = KubernetesRuntimeConfig(
        namespace=NS, api_server=standin.url, pool_size=0, container_port=args.port,
        proxy_url=proxy_url,
    )  # fmt: skip
    with KubernetesRuntime(config) as runtime:
        session = runtime.acquire(timeout_s=120)
        progress = [f"{session.base_url}/progress"] * args.session_requests
        measure_requests("GET /progress of a live session", progress)
        runtime.release(session)


def main() -> None:
    args = parse_args()
    lines = [
        "| path | n | median ms | p90 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp, PodStandIn(Path(tmp)) as standin:
        api = PodApi(load_api_client(api_server=standin.url), NS)
        with serve_app(create_proxy_app(ProxyConfig(), api)) as proxy_url:
            if args.lookups_only:
                lookup_costs(standin, proxy_url, args, print)
                return
            for url in (None, proxy_url):
                measure(standin, url, args, lines.append)
                print(lines[-1], file=sys.stderr, flush=True)
            with KubernetesRuntime(
                KubernetesRuntimeConfig(
                    namespace=NS, api_server=standin.url, pool_size=1, container_port=args.port
                )
            ) as runtime:
                runtime.wait_pool_ready(timeout_s=120)
                session = runtime.acquire()
                SessionClient(session.base_url).reset(seed=0)
                process = standin.kubelet_process(NS, f"uirl-session-{session.session_id}")
                memory = pss_mb(process.pid) if process else float("nan")
            print("\n".join(lines))
            print(f"\nPSS of one session (server + Chromium, after a reset): {memory:.0f} MB\n")
            lookup_costs(standin, proxy_url, args, print)


if __name__ == "__main__":
    main()

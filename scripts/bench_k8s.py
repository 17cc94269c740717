"""The Kubernetes runtime on this machine: reset latency (warm pool vs a new pod),
throughput as sessions are added (--scale), and what failures cost (--failures).

Runs against the stand-in API server of the tests (``tests/k8s_standin.py``): real
kubernetes client, real session servers (Chromium), real routing proxy; pods are local
processes, so "from scratch" here is process start + browser launch + readiness, without
a real cluster's scheduling and image pull (add those on a cluster).

    python scripts/bench_k8s.py --iterations 5 --cold-iterations 3
    python scripts/bench_k8s.py --lookups-only --unknown-ids 300
    python scripts/bench_k8s.py --scale 1,2,4,8 --rounds 20
    python scripts/bench_k8s.py --failures --sessions 4

The default prints a markdown table (milliseconds), the memory (PSS) of one session, and
what the proxy's session lookups cost the API server: made-up session ids (each new) and
requests to a live session, with the API calls the stand-in served for them.

``--scale``: for each N, N sessions (pods), each reached both ways in alternate rounds:
at its pod IP and through the routing proxy (its own process, ``python -m
uirl_gym.runtimes.kubernetes.proxy``, as in a cluster). Per route: resets/s (reset + screenshot, as
``UIEnv.reset``) and steps/s (a click + PNG screenshot, as ``UIEnv.step``) with all N at
once and no policy in between (the most N sessions give), the median step; what the
proxy adds to it and the proxy's CPU per request; PSS per session. The machine's load
average is printed with every row: timings are only comparable on a quiet machine.

``--failures``: N sessions play short episodes through the proxy while a fault is
injected mid-run: a pod evicted (deleted through the API), a node lost (half the pods'
processes killed at once), the proxy restarted (its process stopped and started again).
For each: the episodes that ended as session failures (``episode.error``), and the
run's wall time against the same run without the fault.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import requests  # noqa: E402
from k8s_standin import PodStandIn, serve_app  # noqa: E402

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes  # noqa: E402
from uirl_agents.policies.base import PolicyStep  # noqa: E402
from uirl_gym.actions import Action, ActionType  # noqa: E402
from uirl_gym.client import SessionClient  # noqa: E402
from uirl_gym.runtimes.kubernetes import KubernetesRuntime, KubernetesRuntimeConfig  # noqa: E402
from uirl_gym.runtimes.kubernetes.api import PodApi, load_api_client  # noqa: E402
from uirl_gym.runtimes.kubernetes.proxy import ProxyConfig, create_proxy_app  # noqa: E402
from uirl_gym.runtimes.local import descendant_pids  # noqa: E402
from uirl_gym.vector import SessionVectorEnv  # noqa: E402

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
    p.add_argument("--scale", help="N1,N2,...: throughput with N sessions, direct and proxied")
    p.add_argument("--rounds", type=int, default=20, help="--scale: resets and steps per session")
    p.add_argument("--failures", action="store_true", help="what a lost pod, node, proxy costs")
    p.add_argument("--sessions", type=int, default=4, help="--failures: sessions running")
    p.add_argument("--episodes", type=int, default=16, help="--failures: episodes per run")
    p.add_argument("--max-steps", type=int, default=8, help="--failures: steps per episode")
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
    client = SessionClient(session)
    client.reset(seed=seed)
    t2 = time.perf_counter()
    client.close()
    runtime.release(session, healthy=True)
    return (t1 - t0) * 1000, (t2 - t0) * 1000, session.session_id


def reset_only(runtime: KubernetesRuntime, n: int, gap_s: float) -> list[float]:
    """POST /reset on a held session, ``gap_s`` apart (an episode's worth of time)."""
    session = runtime.acquire()
    settle(runtime)  # let the replacement start first: it competes for the CPU
    client = SessionClient(session)
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
    """PSS of a process and its descendants (server, Chromium)."""
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


# -- --scale and --failures ------------------------------------------------------------------

CLICK = Action(ActionType.LEFT_CLICK, x=200, y=300)  # a sheet cell: never ends an episode


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


@contextmanager
def proxy_process(standin: PodStandIn, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The routing proxy in a process of its own, as its Deployment runs it."""
    process = start_proxy(standin, port)
    try:
        yield process
    finally:
        stop(process)


def start_proxy(standin: PodStandIn, port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "uirl_gym.runtimes.kubernetes.proxy", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--namespace", NS, "--api-server", standin.url]
    process = subprocess.Popen(command + ["--log-level", "warning"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return process
        except requests.RequestException:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError("the proxy did not start")
        time.sleep(0.05)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def session_pss_mb(standin: PodStandIn) -> float:
    pids = [
        p.pid for n in standin.pods(NS) if (p := standin.kubelet_process(NS, n["metadata"]["name"]))
    ]
    return statistics.mean(pss_mb(pid) for pid in pids) if pids else float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(
    standin: PodStandIn, n: int, proxy_url: str, proxy_pid: int, args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """``n`` sessions (pods), each reached both ways: straight at its pod IP and through
    the proxy, in alternate rounds on the same sessions (so the routes see the same pods
    and the same load). Per route: resets/s and steps/s with all ``n`` at once, the
    median step; for the proxy, its CPU per request."""
    config = KubernetesRuntimeConfig(
        namespace=NS, api_server=standin.url, pool_size=0, container_port=args.port,
        proxy_url=proxy_url, max_parallel_starts=4,
    )  # fmt: skip
    with KubernetesRuntime(config) as runtime, ThreadPoolExecutor(n) as pool:
        sessions = list(pool.map(lambda _: runtime.acquire(timeout_s=300), range(n)))
        clients: dict[str, list[SessionClient]] = {"direct": [], "proxy": []}
        ips = {p["metadata"]["name"]: p["status"]["podIP"] for p in standin.pods(NS)}
        for session in sessions:
            ip = ips[f"uirl-session-{session.session_id}"]
            headers = dict(session.headers)
            clients["direct"].append(SessionClient(f"http://{ip}:{args.port}", headers=headers))
            clients["proxy"].append(SessionClient(session, headers=headers))
        try:
            for route in clients:  # connections open, first episode loaded: not timed
                list(pool.map(lambda c: c.reset(seed=0, options={"num_rows": 1}), clients[route]))
            out: dict[str, dict[str, Any]] = {
                r: {"reset_s": 0.0, "step_s": 0.0, "step_ms": [], "proxy_cpu_s": 0.0}
                for r in clients
            }

            def reset(client: SessionClient) -> None:  # as UIEnv.reset: reset + screenshot
                client.reset(seed=1, options={"num_rows": 1})
                client.act_with_progress(Action(ActionType.SCREENSHOT))

            def step(client: SessionClient) -> float:
                t0 = time.perf_counter()
                client.act_with_progress(CLICK)
                return (time.perf_counter() - t0) * 1000

            for _ in range(args.rounds):
                for route, group in clients.items():
                    cpu0 = cpu_s(proxy_pid)
                    t0 = time.perf_counter()
                    list(pool.map(reset, group))
                    t1 = time.perf_counter()
                    out[route]["step_ms"] += list(pool.map(step, group))
                    t2 = time.perf_counter()
                    out[route]["reset_s"] += t1 - t0
                    out[route]["step_s"] += t2 - t1
                    out[route]["proxy_cpu_s"] += cpu_s(proxy_pid) - cpu0
        finally:
            for group in clients.values():
                for client in group:
                    client.close()
        pss = session_pss_mb(standin)
        for session in sessions:
            runtime.release(session)
    done = n * args.rounds
    return {
        route: {
            "resets": done / r["reset_s"],
            "steps": done / r["step_s"],
            "step_ms": statistics.median(r["step_ms"]),
            # resets (a reset + a screenshot) and steps: 3 proxied requests per round each
            "proxy_cpu_ms": r["proxy_cpu_s"] * 1000 / (3 * done),
            "pss": pss,
        }
        for route, r in out.items()
    }


def scale(standin: PodStandIn, args: argparse.Namespace) -> None:
    sizes = [int(n) for n in args.scale.split(",")]
    port = free_port()
    print(f"load average before: {load()} (1/5/15 min, {os.cpu_count()} CPUs)")
    print(
        "| N | route | resets/s | steps/s | median step ms | proxy adds ms/step | proxy CPU "
        "ms/request | PSS MB/session | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with proxy_process(standin, port) as proxy:
        for n in sizes:
            result = throughput(standin, n, f"http://127.0.0.1:{port}", proxy.pid, args)
            for route, r in result.items():
                added = cpu = ""
                if route == "proxy":
                    added = f"{r['step_ms'] - result['direct']['step_ms']:+.1f}"
                    cpu = f"{r['proxy_cpu_ms']:.2f}"
                print(
                    f"| {n} | {route} | {r['resets']:.1f} | {r['steps']:.1f} | "
                    f"{r['step_ms']:.1f} | {added} | {cpu} | {r['pss']:.0f} | {load()} |",
                    flush=True,
                )


class FaultPolicy:
    """Clicks; before its ``at``-th call it runs ``fault`` once."""

    name = "click"

    def __init__(self, at: int, fault: Callable[[], None] | None) -> None:
        self.at, self.fault, self.calls = at, fault, 0

    def begin_episode(self, env_index: int) -> None:
        pass

    def act(self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]) -> list:
        self.calls += 1
        if self.calls == self.at and self.fault is not None:
            self.fault()
        return [PolicyStep(action=CLICK) for _ in env_indices]


def failures(standin: PodStandIn, args: argparse.Namespace) -> None:
    api = PodApi(load_api_client(api_server=standin.url), NS)
    port = free_port()
    proxy = {"process": start_proxy(standin, port)}

    def leased(envs: SessionVectorEnv) -> list[str]:
        return [f"uirl-session-{env.session.session_id}" for env in envs.envs if env.session]

    def evict(envs: SessionVectorEnv) -> None:
        api.delete(leased(envs)[0])

    def lose_node(envs: SessionVectorEnv) -> None:  # its pods' processes die at once
        for name in leased(envs)[: max(1, args.sessions // 2)]:
            process = standin.kubelet_process(NS, name)
            if process is not None:
                os.killpg(process.pid, signal.SIGKILL)

    def restart_proxy(envs: SessionVectorEnv) -> None:
        # Down now, up again as soon as a new process starts (a one-replica Deployment):
        # the steps run meanwhile.
        stop(proxy["process"])
        threading.Thread(target=lambda: proxy.update(process=start_proxy(standin, port))).start()

    faults: dict[str, Callable[[SessionVectorEnv], None] | None] = {
        "none (baseline)": None,
        "pod evicted": evict,
        "node lost (half the pods)": lose_node,
        "proxy restarted": restart_proxy,
    }
    print(f"load average before: {load()}; {args.sessions} sessions, {args.episodes} episodes "
          f"of {args.max_steps} steps, fault at the middle step of the run")  # fmt: skip
    print("| fault | episodes | session failures | wall s | vs baseline s | load |")
    print("|---|---|---|---|---|---|")
    baseline = None
    try:
        for name, fault in faults.items():
            config = KubernetesRuntimeConfig(
                namespace=NS, api_server=standin.url, pool_size=1, container_port=args.port,
                proxy_url=f"http://127.0.0.1:{port}",
            )  # fmt: skip
            with KubernetesRuntime(config) as runtime:
                runtime.wait_pool_ready(timeout_s=120)
                envs = SessionVectorEnv(args.sessions, runtime=runtime)
                try:
                    envs.reset_envs({i: (i, {"num_rows": 1}) for i in range(args.sessions)})
                    rounds = args.episodes * args.max_steps // args.sessions
                    policy = FaultPolicy(
                        rounds // 2, None if fault is None else lambda f=fault, e=envs: f(e)
                    )
                    specs = [
                        EpisodeSpec(seed=s, options={"num_rows": 1}) for s in range(args.episodes)
                    ]
                    t0 = time.perf_counter()
                    episodes = collect_episodes(
                        policy, envs, specs, max_steps=args.max_steps, progress=False
                    )
                    wall = time.perf_counter() - t0
                finally:
                    envs.close()
            lost = sum(e.error is not None for e in episodes)
            baseline = wall if baseline is None else baseline
            print(
                f"| {name} | {len(episodes)} | {lost} | {wall:.1f} | {wall - baseline:+.1f} | "
                f"{load()} |",
                flush=True,
            )
    finally:
        stop(proxy["process"])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> None:
    args = parse_args()
    if args.scale or args.failures:
        with tempfile.TemporaryDirectory() as tmp, PodStandIn(Path(tmp)) as standin:
            if args.scale:
                scale(standin, args)
            if args.failures:
                failures(standin, args)
        return
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
                SessionClient(session).reset(seed=0)
                process = standin.kubelet_process(NS, f"uirl-session-{session.session_id}")
                memory = pss_mb(process.pid) if process else float("nan")
            print("\n".join(lines))
            print(f"\nPSS of one session (server + Chromium, after a reset): {memory:.0f} MB\n")
            lookup_costs(standin, proxy_url, args, print)


if __name__ == "__main__":
    main()

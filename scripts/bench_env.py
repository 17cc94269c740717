"""Benchmark the env on local sessions, the two browsers side by side in one run.

Each measure runs once per configuration, back to back, so that both see the same load:
- the full Chromium (what ``--headed`` runs; frames at 60 Hz);
- the headless shell (the default when installed: frames on demand; the report names
  the browser used).

(Until issue 34 the first configuration was the Playwright backend on the full
Chromium; docs/benchmarks.md keeps that run and says how to repeat it.)

Measures:
- cold start: a new session server until it answers ``GET /`` (browser launch included);
- the protocol's raw step over HTTP (``/act`` left_click + settled PNG, bytes only);
- ``UIEnv.step`` (left_click, decoded screenshot, reward from ``/progress``), PNG and JPEG;
- ``UIEnv.reset`` after 10-step episodes, and back to back (reset after reset);
- aggregate steps/s of ``gym.make_vec`` (``SessionVectorEnv``, lock-step) with N sessions,
  clicks and random actions, and the CPU time per step of every process involved (this
  client, the servers, Chromium: ``/proc/PID/stat``);
- memory per session: PSS (``/proc/PID/smaps_rollup``) of server + browser processes.

    python scripts/bench_env.py                 # full run, updates docs/benchmarks.md
    python scripts/bench_env.py --quick --no-write
    python scripts/bench_env.py --profile       # CPU and PSS by process, one session each
    python scripts/bench_env.py --text          # the page as text: CPU per step (issue 41)

``--text`` measures what the text observations add to a step (issue 41): CPU ms per step
of the client, the server and the browser, and the median wall time, on a MiniWoB++ page
(160x210) and on SimpleDataEntry (1280x800, 100 rows), pixels only against the AXTree and
the elements' properties on (and every text observation), beside BrowserGym's own
extraction of the same pages (browsergym-core on Playwright, when installed).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import requests

from uirl_gym.actions import Action, ActionType, ScrollDirection
from uirl_gym.env import TEXT_OBSERVATIONS, UIEnv
from uirl_gym.protocol import Route, SessionInfo, act_query
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig, descendant_pids
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.tasks.base import BRIDGE_PATH
from uirl_gym.vector import SessionVectorEnv

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
START, END = "<!-- bench_env:start -->", "<!-- bench_env:end -->"
CLK_TCK = os.sysconf("SC_CLK_TCK")
RANDOM_KEYS = ("Enter", "Tab", "shift+Tab", "Backspace", "ctrl+a", "ctrl+c", "ctrl+v", "Escape")
TEXT_CHARS = list(string.ascii_letters + string.digits + "@. ")


@dataclass
class Config:
    name: str
    short: str  # in column headers
    browser: str

    def runtime(self) -> LocalRuntime:
        return LocalRuntime(
            LocalRuntimeConfig(
                browser=self.browser,
                # A busy 2-core machine starts 8 sessions slowly.
                startup_timeout_s=180.0,
            )
        )


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def click_at(i: int) -> Action:
    """A click on a different sheet cell each time (each changes the screen)."""
    return Action(ActionType.LEFT_CLICK, 100 + 150 * (i % 3), 125 + 24 * (i % 25))


def random_action(rng: np.random.Generator) -> Action:
    """What ``RandomPolicy`` samples: clicks, short text, key presses, scrolls."""
    kind = rng.choice(5, p=[0.45, 0.05, 0.2, 0.15, 0.15])
    x, y = int(rng.integers(1280)), int(rng.integers(800))
    if kind == 0:
        return Action(ActionType.LEFT_CLICK, x, y)
    if kind == 1:
        return Action(ActionType.DOUBLE_CLICK, x, y)
    if kind == 2:
        return Action(ActionType.TYPE, text="".join(rng.choice(TEXT_CHARS, rng.integers(1, 13))))
    if kind == 3:
        return Action(ActionType.KEYS, keys=str(rng.choice(RANDOM_KEYS)))
    direction = ScrollDirection.UP if rng.random() < 0.5 else ScrollDirection.DOWN
    return Action(ActionType.SCROLL, x, y, direction=direction, amount=int(rng.integers(1, 6)))


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


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (all their threads)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def session_pids(runtime: LocalRuntime, envs: list[UIEnv]) -> list[int]:
    pids = [os.getpid()]
    for env in envs:
        server = runtime.pid(env.session)
        pids += [server, *descendant_pids(server)]
    return pids


def bench_cold_start(runtime: LocalRuntime, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        session = runtime.acquire()
        times.append(time.perf_counter() - t0)
        runtime.release(session, healthy=False)
    return times


def bench_http_step(session: SessionInfo, steps: int) -> list[float]:
    base_url = session.base_url
    http = requests.Session()
    http.headers.update(session.headers)  # /reset needs the session token
    http.post(f"{base_url}{Route.RESET}", json={"seed": 0}).raise_for_status()
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        r = http.get(f"{base_url}{Route.ACT}", params=act_query(click_at(i)))
        r.raise_for_status()
        times.append(time.perf_counter() - t0)
    return times


def bench_steps(env: UIEnv, steps: int, image_format: str) -> list[float]:
    env.image_format = env._client.image_format = image_format
    env.reset(seed=0)
    times = []
    for i in range(steps):
        t0 = time.perf_counter()
        env.step(click_at(i))
        times.append(time.perf_counter() - t0)
    env.image_format = env._client.image_format = "png"
    return times


def bench_resets(env: UIEnv, resets: int, episode_steps: int) -> list[float]:
    env.reset(seed=0)
    times = []
    for seed in range(resets):
        for i in range(episode_steps):
            env.step(click_at(i))
        t0 = time.perf_counter()
        env.reset(seed=seed)
        times.append(time.perf_counter() - t0)
    return times


@dataclass
class Throughput:
    steps_per_s: float
    cpu_ms_per_step: float


def vector_throughput(
    runtime: LocalRuntime, vec: SessionVectorEnv, seconds: float, actions: str
) -> Throughput:
    n = vec.num_envs
    vec.reset(seed=0)
    pids = session_pids(runtime, list(vec.envs))
    rng = np.random.default_rng(0)
    steps, i = 0, 0
    cpu0, t0 = cpu_s(pids), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if actions == "clicks":
            batch = [click_at(i + k).to_space_sample() for k in range(n)]
        else:
            batch = [random_action(rng).to_space_sample() for _ in range(n)]
        stacked = {key: np.array([b[key] for b in batch]) for key in batch[0]}
        stacked["text"] = tuple(b["text"] for b in batch)
        stacked["keys"] = tuple(b["keys"] for b in batch)
        vec.step(stacked)
        steps += n
        i += 1
    elapsed, cpu = time.perf_counter() - t0, cpu_s(pids) - cpu0
    return Throughput(steps / elapsed, cpu / steps * 1e3)


def interleaved(
    names: list[str], measure: Callable[[str], list[float]], rounds: int = 4
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(rounds):
        for n in names:
            out[n] += measure(n)
    return out


def process_kind(pid: int, client_pid: int) -> str:
    """client, server, or the Chromium process type."""
    if pid == client_pid:
        return "client (this process)"
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return "gone"
    name = Path(argv[0].decode()).name if argv else "?"
    if name.startswith("python"):
        return "session server (Python)"
    kind = next((a.decode()[7:] for a in argv if a.startswith(b"--type=")), "browser")
    sub = next((a.decode()[19:] for a in argv if a.startswith(b"--utility-sub-type=")), "")
    return f"Chromium {kind}" + (f" ({sub.split('.')[0]})" if sub else "")


def profile(config: Config, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """CPU ms per click step and PSS MB by process kind, one session of ``config``."""
    runtime = config.runtime()
    try:
        env = UIEnv(runtime=runtime)
        env.reset(seed=0)
        for i in range(5):
            env.step(click_at(i))
        pids = session_pids(runtime, [env])
        before = {p: cpu_s([p]) for p in pids}
        for i in range(steps):
            env.step(click_at(i))
        cpu: dict[str, float] = {}
        pss: dict[str, float] = {}
        for p in pids:
            kind = process_kind(p, os.getpid())
            cpu[kind] = cpu.get(kind, 0.0) + (cpu_s([p]) - before[p]) * 1e3 / steps
            pss[kind] = pss.get(kind, 0.0) + (0.0 if p == os.getpid() else pss_mb([p]))
        env.close()
    finally:
        runtime.close()
    return cpu, pss


def profile_report(configs: list[Config], steps: int) -> list[str]:
    lines = [
        "| process | "
        + " | ".join(f"CPU ms/step, {c.name}" for c in configs)
        + " | "
        + " | ".join(f"PSS MB, {c.name}" for c in configs)
        + " |",
        "| --- |" + " --- |" * (2 * len(configs)),
    ]
    results = [profile(c, steps) for c in configs]
    kinds = sorted(
        {k for cpu, _ in results for k in cpu}, key=lambda k: -max(r[0].get(k, 0) for r in results)
    )
    for kind in kinds:
        cells = [f"{cpu.get(kind, 0):.1f}" if kind in cpu else "-" for cpu, _ in results]
        cells += [
            f"{pss.get(kind, 0):.0f}" if kind in pss and pss[kind] else "-" for _, pss in results
        ]
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    totals = [f"{sum(cpu.values()):.1f}" for cpu, _ in results]
    totals += [f"{sum(pss.values()):.0f}" for _, pss in results]
    lines.append("| **all** | " + " | ".join(totals) + " |")
    return lines


@dataclass(frozen=True)
class TextPage:
    """A page the text observations are measured on (``--text``)."""

    name: str
    task: str
    screen: tuple[int, int]


TEXT_PAGES = (
    TextPage("MiniWoB++ click-checkboxes, 160x210", "miniwob.click-checkboxes", (160, 210)),
    TextPage("SimpleDataEntry, 1280x800, 100 rows", "simple_data_entry", (1280, 800)),
)
TEXT_MODES: dict[str, tuple[str, ...]] = {
    "pixels only": (),
    "axtree + elements": ("axtree", "elements"),
    "every text observation": TEXT_OBSERVATIONS,
}


def page_action(page: TextPage, i: int, rng: np.random.Generator) -> Action:
    """A sheet cell (SimpleDataEntry), or a random point of the task area (MiniWoB++)."""
    if page.task == "simple_data_entry":
        return click_at(i)
    return Action(
        ActionType.LEFT_CLICK, int(rng.integers(page.screen[0])), int(rng.integers(page.screen[1]))
    )


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    return {p: cpu_s([p]) for p in pids}


def text_steps(
    runtime: LocalRuntime, env: UIEnv, page: TextPage, steps: int
) -> tuple[float, list[float]]:
    """CPU ms per step (this client, the server, its browser) and each step's wall time,
    over windows of steps that end where an episode ends: the resets between windows
    are not counted. A process started within a window counts from zero."""
    rng = np.random.default_rng(0)
    cpu, walls, i = 0.0, [], 0
    while len(walls) < steps:
        before = cpu_by_pid(session_pids(runtime, [env]))
        ended = False
        while len(walls) < steps and not ended:
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(page_action(page, i, rng))
            walls.append(time.perf_counter() - t0)
            i += 1
            ended = terminated or truncated
        after = cpu_by_pid(session_pids(runtime, [env]))
        cpu += sum(after[p] - before.get(p, 0.0) for p in after)
        if ended:
            env.reset(seed=i)
    return cpu / steps * 1e3, walls


def open_text_page(tab: Any, page: TextPage) -> None:
    """The page of ``page``'s first episode in a Playwright tab, as uirl serves it: the
    MiniWoB++ page from the wheel, started; SimpleDataEntry's app, loaded with seed 0's data."""
    if page.task == "simple_data_entry":
        from uirl_gym.tasks.base import bridge_script
        from uirl_gym.tasks.simple_data_entry.task import SimpleDataEntryTask

        task = SimpleDataEntryTask()
        bridge = bridge_script().replace("</script>", "<\\/script>")
        tab.set_content(
            task.page_html().replace(
                f'<script src="{BRIDGE_PATH}"></script>', f"<script>{bridge}</script>"
            )
        )
        tab.evaluate("(state) => window.uirlLoad(state)", task.reset(0, {})["app_state"])
        return
    from uirl_gym.tasks.miniwob.wheel import html_root, miniwob_tasks

    tab.goto(f"file://{html_root()}/{miniwob_tasks()[page.task].page}")
    tab.evaluate("core.startEpisodeReal()")


def browsergym_extraction(page: TextPage, steps: int) -> tuple[float, list[float], str] | None:
    """BrowserGym's own extraction of the page as text (browsergym-core's functions, on
    Playwright and the same headless shell) after each click on the same page: CPU ms
    per step (this process, Playwright's driver, the browser) and the wall times; None
    when browsergym-core is not installed."""
    try:
        from browsergym.core import observation as bgo
        from playwright.sync_api import sync_playwright
    except ImportError:
        log("browsergym-core is not installed: no BrowserGym row")
        return None
    rng = np.random.default_rng(0)
    cpu, walls = 0.0, []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_browser(), args=["--no-sandbox"])
        tab = browser.new_page(viewport={"width": page.screen[0], "height": page.screen[1]})
        open_text_page(tab, page)
        for i in range(steps + 5):
            action = page_action(page, i, rng)
            tab.mouse.click(action.x, action.y)
            if page.task != "simple_data_entry" and tab.evaluate("WOB_DONE_GLOBAL"):
                tab.evaluate("core.startEpisodeReal()")
            pids = descendant_pids(os.getpid())
            cpu0, t0 = cpu_s(pids) + time.process_time(), time.perf_counter()
            bgo._pre_extract(tab)
            dom = bgo.extract_dom_snapshot(tab)
            bgo.extract_merged_axtree(tab)
            bgo.extract_focused_element_bid(tab)
            bgo.extract_dom_extra_properties(dom, 1.0)
            bgo._post_extract(tab)
            if i >= 5:  # the first extractions warm the page's caches
                walls.append(time.perf_counter() - t0)
                cpu += cpu_s(pids) + time.process_time() - cpu0
        browser.close()
    return cpu / steps * 1e3, walls, version("browsergym-core")


def text_report(steps: int) -> list[str]:
    """CPU ms and wall ms per step by page and observations, BrowserGym's extraction of
    the same pages beside them (rounds alternate the modes: each sees the same load)."""
    lines = [
        "| page | observations | CPU ms/step | extra CPU ms/step | wall ms/step (median) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for page in TEXT_PAGES:
        runtime = LocalRuntime(LocalRuntimeConfig(task=page.task, startup_timeout_s=180.0))
        try:
            envs = {
                mode: UIEnv(
                    runtime=runtime, task=page.task, screen_size=page.screen, observations=obs
                )
                for mode, obs in TEXT_MODES.items()
            }
            cpu: dict[str, list[float]] = {mode: [] for mode in envs}
            walls: dict[str, list[float]] = {mode: [] for mode in envs}
            for env in envs.values():
                env.reset(seed=0)
                text_steps(runtime, env, page, 5)  # warm: the page's first layout, caches
            for _ in range(4):
                for mode, env in envs.items():
                    log(f"{page.name}: {mode} ...")
                    ms, w = text_steps(runtime, env, page, steps // 4)
                    cpu[mode].append(ms)
                    walls[mode] += w
            for env in envs.values():
                env.close()
        finally:
            runtime.close()
        pixels = statistics.median(cpu["pixels only"])
        for mode in envs:
            ms = statistics.median(cpu[mode])
            extra = "-" if mode == "pixels only" else f"{ms - pixels:+.1f}"
            lines.append(
                f"| {page.name} | {mode} | {ms:.1f} | {extra} | {pct(walls[mode], 50) * 1e3:.1f} |"
            )
            log(lines[-1])
        bg = browsergym_extraction(page, steps)
        if bg is not None:
            lines.append(
                f"| {page.name} | BrowserGym's extraction alone (browsergym-core "
                f"{bg[2]}: marking, AX tree, DOM snapshot, extra properties, unmarking) "
                f"| {bg[0]:.1f} | - | {pct(bg[1], 50) * 1e3:.1f} |"
            )
            log(lines[-1])
    return lines


TEXT_START, TEXT_END = "<!-- bench_env_text:start -->", "<!-- bench_env_text:end -->"


def write_text_report(lines: list[str], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    command = "python scripts/bench_env.py --text" + (" --quick" if args.quick else "")
    facts = (
        f"Command: `{command}`; {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, load "
        f"average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}. CPU ms/step: user "
        "+ system time of this client, the session server and its browser over the steps "
        "(medians of 4 rounds, the modes alternating); extra: over pixels only."
    )
    report = "\n".join([facts, "", *lines])
    print(report)
    if not args.no_write:
        text = DOCS.read_text()
        head, rest = text.split(TEXT_START, 1)
        _, tail = rest.split(TEXT_END, 1)
        DOCS.write_text(f"{head}{TEXT_START}\n{report}\n{TEXT_END}{tail}")
        log(f"wrote {DOCS}")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ms_row(label: str, by_config: dict[str, list[float]], names: list[str]) -> str:
    cells = [
        f"{pct(by_config[n], 50) * 1e3:.1f} ms (p95 {pct(by_config[n], 95) * 1e3:.0f})"
        for n in names
    ]
    old, new = (statistics.median(by_config[n]) for n in names[:2])
    return f"| {label} | {' | '.join(cells)} | {old / new:.2f}x |"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, N in 1, 4")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument("--seconds", type=float, default=10.0, help="per throughput point")
    p.add_argument(
        "--profile",
        action="store_true",
        help="only print where CPU (per click step) and memory go, by process, one session each",
    )
    p.add_argument(
        "--text",
        action="store_true",
        help="only the text observations' cost per step (issue 41); with --no-write, print it",
    )
    args = p.parse_args()
    sizes = [1, 4] if args.quick else [1, 8]
    seconds = 4.0 if args.quick else args.seconds
    steps = 40 if args.quick else 120
    resets = 6 if args.quick else 20

    configs = [
        Config("full chromium", "full", find_browser(headless=False)),
        Config("headless shell (the default)", "shell", find_browser()),
    ]
    if args.profile:
        print("\n".join(profile_report(configs, steps)))
        return
    if args.text:
        write_text_report(text_report(steps), args)
        return
    names = [c.name for c in configs]
    runtimes = {c.name: c.runtime() for c in configs}
    try:
        log("cold start ...")
        cold = {c.name: bench_cold_start(runtimes[c.name], 3 if args.quick else 7) for c in configs}
        envs = {c.name: UIEnv(runtime=runtimes[c.name]) for c in configs}
        for env in envs.values():
            env.reset(seed=0)
        log("steps ...")
        # In rounds, alternating configurations: both see the same (shared, busy) machine.
        http = interleaved(names, lambda n: bench_http_step(envs[n].session, steps // 4))
        png = interleaved(names, lambda n: bench_steps(envs[n], steps // 4, "png"))
        jpeg = interleaved(names, lambda n: bench_steps(envs[n], steps // 4, "jpeg"))
        log("resets ...")
        reset10 = interleaved(names, lambda n: bench_resets(envs[n], resets // 4, 10))
        reset0 = interleaved(names, lambda n: bench_resets(envs[n], resets // 4, 0))
        for env in envs.values():
            env.close()
        header = " | ".join(names)
        lines = [
            f"| measure | {header} | ratio |",
            "| --- | --- | --- | --- |",
            "| cold start (server + Chromium until `GET /` is 200) | "
            + " | ".join(f"{pct(cold[n], 50):.2f} s (p95 {pct(cold[n], 95):.2f})" for n in names)
            + f" | {statistics.median(cold[names[0]]) / statistics.median(cold[names[1]]):.2f}x |",
            ms_row("HTTP step: `/act` left_click + settled PNG (bytes)", http, names),
            ms_row("`UIEnv.step` (png, the default): left_click, array, reward", png, names),
            ms_row("`UIEnv.step` with `image_format=jpeg`", jpeg, names),
            ms_row("`UIEnv.reset` after a 10-step episode", reset10, names),
            ms_row("`UIEnv.reset` back to back (reset after reset)", reset0, names),
        ]
        log("\n".join(lines))
        lines += [
            "",
            "| N sessions | actions | steps/s ({0}) | steps/s ({1}) | ratio "
            "| CPU ms/step ({0}) | CPU ms/step ({1}) | PSS MB/session ({0}) "
            "| PSS MB/session ({1}) |".format(*(c.short for c in configs)),
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for n in sizes:
            rows: dict[str, dict[str, Throughput]] = {"clicks": {}, "random": {}}
            pss: dict[str, float] = {}
            for c in names:  # started before the clock runs, both configurations
                runtimes[c].start_many(max(0, n - len(runtimes[c]._idle)))
            vecs = {c: SessionVectorEnv(n, runtime=runtimes[c]) for c in names}
            for actions in ("clicks", "random"):
                for c in names:
                    log(f"N={n} {actions} {c} ...")
                    rows[actions][c] = vector_throughput(runtimes[c], vecs[c], seconds, actions)
                    log(f"  {rows[actions][c]}")
            for c in names:
                vecs[c].reset(seed=1)  # PSS after a reset: both contexts as in use
                pss[c] = statistics.median(
                    pss_mb(
                        [runtimes[c].pid(e.session), *descendant_pids(runtimes[c].pid(e.session))]
                    )
                    for e in vecs[c].envs
                )
                vecs[c].close()
            for actions, by in rows.items():
                old, new = by[names[0]], by[names[1]]
                lines.append(
                    f"| {n} | {actions} | {old.steps_per_s:.1f} | {new.steps_per_s:.1f} "
                    f"| {new.steps_per_s / old.steps_per_s:.2f}x | {old.cpu_ms_per_step:.0f} "
                    f"| {new.cpu_ms_per_step:.0f} | {pss[names[0]]:.0f} | {pss[names[1]]:.0f} |"
                )
                log(lines[-1])
    finally:
        for rt in runtimes.values():
            rt.close()
    load = os.getloadavg()
    facts = (
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python "
        f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}, load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min). Browsers: "
        + "; ".join(f"{c.name}: `{c.browser}`" for c in configs)
        + ". CPU ms/step: user + system time of the client, the servers and every browser "
        "process over the throughput window, per step. PSS per session: server + browser "
        "processes (median over the N sessions)."
    )
    command = "python scripts/bench_env.py" + (" --quick" if args.quick else "")
    report = "\n".join([f"Command: `{command}`", "", facts, "", *lines])
    print(report)
    if not args.no_write:
        text = DOCS.read_text() if DOCS.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        DOCS.write_text(f"{head}{START}\n{report}\n{END}{tail}")
        log(f"wrote {DOCS}")


if __name__ == "__main__":
    main()

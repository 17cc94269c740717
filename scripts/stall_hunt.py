"""Stall hunt: seeded random actions of every kind on every registered task, timed.

    python scripts/stall_hunt.py --steps 100000 --out runs/stall_hunt   # resumes
    python scripts/stall_hunt.py --report --out runs/stall_hunt         # the table
    python scripts/stall_hunt.py --replay 316                           # one unit again

The work is cut into units (one task, one seed, ``--unit-steps`` steps in episodes of
``--episode-steps``), dealt to the tasks in turn, so that any number of steps covers
every task evenly. Each unit is seeded by its number alone and written to
``<out>/units.jsonl`` once done: a crashed or stopped run loses at most the units in
flight, and the same command resumes it (the same units, the same actions).

The actions: clicks (left, double, triple, right), moves, drags and wheel scrolls at
random points, at the centre of the task's elements (their boxes in ``/oracle``), on
the right and bottom edges of those boxes (where scrollbars are) and on the window's
edges; drags between any two of those; keys (Enter, Shift/Ctrl/Meta+Enter on whatever
is focused, Tab, arrows, space, F4, Alt+Down, Escape, history and reload keys,
clipboard keys); typing (ASCII, Unicode, newlines, up to 512 characters) after a click
on an element; screenshots. MiniWoB++ tasks alternate between gym.make's 1280x800
screen (zoom 3, a fresh page per episode) and a 160x210 one (zoom 1, episodes restarted
in their page).

Recorded for every ``GET /act``: its wall time at the client, the server's time for the
action and for the capture (``X-Action-Ms``, ``X-Capture-Ms``), the 1-minute load
average; every error in full, and every session replaced (a session that failed).
A slow action with a short server time and a high load is the machine; one whose
server time is long on an idle machine is a stall (a page or CDP wait).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import queue
import statistics
import sys
import threading
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, DEFAULT_SCREEN, Action, ActionType
from uirl_gym.client import ActionTimeoutError, InvalidActionError, SessionClient, SessionError
from uirl_gym.protocol import SessionInfo
from uirl_gym.runtimes.base import Runtime
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks import TASKS, expand_tasks, split_range

logger = logging.getLogger("stall_hunt")

MINIWOB_SMALL_SCREEN = (160, 210)
# An action slower than this is reported (the bar: 0 over 2 s).
SLOW_S = 2.0
KEYS = (
    "enter", "shift+enter", "ctrl+enter", "meta+enter", "alt+enter", "tab", "shift+tab",
    "space", "escape", "backspace", "delete", "up", "down", "left", "right", "pageup",
    "pagedown", "home", "end", "ctrl+a", "ctrl+c", "ctrl+v", "ctrl+x", "ctrl+z", "f4",
    "alt+down", "alt+up", "alt+left", "alt+right", "f5", "ctrl+r", "browserback",
    "browserforward", "ctrl+w", "ctrl+t", "ctrl+n", "ctrl+shift+n", "ctrl+l", "f6", "f11",
    "shift+space", "ctrl+enter", "shift+f10", "contextmenu",
)  # fmt: skip
TEXTS = (
    "a", "hello", "Hello, World!", "42", "3.14", "  ", "line one\nline two", "tab\tstop",
    "Ünïcödé ÖK", "点击确定", "emoji 😀👍", "<b>bold</b>", "' OR 1=1 --", "\r\n", "x" * 512,
)  # fmt: skip
# (action type, weight)
ACTION_WEIGHTS = (
    (ActionType.LEFT_CLICK, 20), (ActionType.DOUBLE_CLICK, 4), (ActionType.TRIPLE_CLICK, 2),
    (ActionType.RIGHT_CLICK, 3), (ActionType.MOUSE_MOVE, 5), (ActionType.DRAG, 14),
    (ActionType.SCROLL, 9), (ActionType.KEYS, 18), (ActionType.TYPE, 15),
    (ActionType.SCREENSHOT, 3),
)  # fmt: skip


@dataclass
class HuntConfig:
    """What to hunt over.

    Attributes:
        steps: actions in all (spread over the units).
        tasks: task ids, groups or globs (``uirl_gym.tasks.expand_tasks``); default:
            every registered task.
        unit_steps, episode_steps: actions per unit (one task, one seed) and per episode.
        sessions: units played at once, one session each.
        seed: the hunt's seed (a unit's own seed is derived from it and its number).
        step_timeout_s: each action's deadline (``GET /act``'s ``timeout``).
    """

    steps: int = 100_000
    tasks: str | None = None
    unit_steps: int = 40
    episode_steps: int = 10
    sessions: int = 2
    seed: int = 0
    step_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S

    def task_ids(self) -> list[str]:
        return expand_tasks(self.tasks) if self.tasks else sorted(TASKS)

    def units(self) -> int:
        return math.ceil(self.steps / self.unit_steps)


@dataclass
class Unit:
    """One unit's plan: which task, screen, seed."""

    number: int
    task: str
    screen: tuple[int, int]
    seed: int


def plan(config: HuntConfig) -> list[Unit]:
    """The units, in order: task ``number % len(tasks)``; MiniWoB++ alternates screens."""
    tasks = config.task_ids()
    units = []
    for number in range(config.units()):
        task = tasks[number % len(tasks)]
        block = number // len(tasks)
        small = TASKS[task].family == "miniwob" and block % 2 == 1
        seed = zlib.crc32(f"{config.seed}:{number}".encode())
        units.append(Unit(number, task, MINIWOB_SMALL_SCREEN if small else DEFAULT_SCREEN, seed))
    return units


@dataclass
class StepRecord:
    action: str
    wall_ms: float
    action_ms: float | None
    capture_ms: float | None
    load1: float
    outcome: str = "ok"  # ok | invalid | error

    def row(self) -> list[Any]:
        return [
            self.action,
            self.wall_ms,
            self.action_ms,
            self.capture_ms,
            self.load1,
            self.outcome,
        ]


@dataclass
class UnitResult:
    number: int
    task: str
    screen: tuple[int, int]
    steps: list[StepRecord] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    slow: list[dict[str, Any]] = field(default_factory=list)
    replaced: int = 0
    open_pages: int | None = None
    popups_closed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.number,
            "task": self.task,
            "screen": list(self.screen),
            "steps": [s.row() for s in self.steps],
            "errors": self.errors,
            "slow": self.slow,
            "replaced": self.replaced,
            "open_pages": self.open_pages,
            "popups_closed": self.popups_closed,
        }


def collect_boxes(value: Any, out: list[list[int]] | None = None) -> list[list[int]]:
    """Every ``[x, y, w, h]`` box anywhere in an oracle (element boxes, cells, buttons),
    in screen pixels."""
    out = [] if out is None else out
    if _is_box(value):
        out.append([int(v) for v in value])
    elif isinstance(value, dict):
        for item in value.values():
            collect_boxes(item, out)
    elif isinstance(value, list):
        for item in value:
            collect_boxes(item, out)
    return out


def _is_box(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 4
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        and value[0] >= 0
        and value[1] >= 0
        and value[2] > 0
        and value[3] > 0
    )


class ActionSampler:
    """Seeded random actions of every kind, aimed at the screen's interesting places."""

    def __init__(self, rng: np.random.Generator, screen: tuple[int, int]) -> None:
        self.rng = rng
        self.screen = screen
        self.boxes: list[list[int]] = []
        self._types = [t for t, _ in ACTION_WEIGHTS]
        weights = np.array([w for _, w in ACTION_WEIGHTS], dtype=float)
        self._p = weights / weights.sum()

    def point(self) -> tuple[int, int]:
        w, h = self.screen
        kind = self.rng.random()
        if self.boxes and kind < 0.35:  # an element's centre
            x, y, bw, bh = self.boxes[self.rng.integers(len(self.boxes))]
            return self._clip(x + bw // 2, y + bh // 2)
        if self.boxes and kind < 0.5:  # where a scroller's scrollbars are
            x, y, bw, bh = self.boxes[self.rng.integers(len(self.boxes))]
            inset = int(self.rng.integers(1, 9))
            if self.rng.random() < 0.7:
                return self._clip(x + bw - inset, y + int(self.rng.integers(max(bh, 1))))
            return self._clip(x + int(self.rng.integers(max(bw, 1))), y + bh - inset)
        if kind < 0.65:  # the window's edges and corners
            edge_x = [0, 1, w - 2, w - 1][self.rng.integers(4)]
            edge_y = [0, 1, h - 2, h - 1][self.rng.integers(4)]
            if self.rng.random() < 0.5:
                return edge_x, int(self.rng.integers(h))
            return int(self.rng.integers(w)), edge_y
        return int(self.rng.integers(w)), int(self.rng.integers(h))

    def _clip(self, x: int, y: int) -> tuple[int, int]:
        return min(max(int(x), 0), self.screen[0] - 1), min(max(int(y), 0), self.screen[1] - 1)

    def actions(self) -> Iterator[Action]:
        """An endless stream; ``type`` comes after a click on an element half the time."""
        while True:
            kind = self._types[self.rng.choice(len(self._types), p=self._p)]
            if kind is ActionType.TYPE:
                if self.boxes and self.rng.random() < 0.5:
                    x, y, bw, bh = self.boxes[self.rng.integers(len(self.boxes))]
                    yield Action(ActionType.LEFT_CLICK, *self._clip(x + bw // 2, y + bh // 2))
                text = TEXTS[self.rng.integers(len(TEXTS))]
                yield Action(ActionType.TYPE, text=text)
            elif kind is ActionType.KEYS:
                yield Action(ActionType.KEYS, keys=KEYS[self.rng.integers(len(KEYS))])
            elif kind is ActionType.SCROLL:
                direction = ("up", "down", "left", "right")[self.rng.integers(4)]
                at = self.point() if self.rng.random() < 0.8 else (None, None)
                amount = int(self.rng.integers(1, 6))
                yield Action(ActionType.SCROLL, *at, direction=direction, amount=amount)
            elif kind is ActionType.DRAG:
                (x0, y0), (x1, y1) = self.point(), self.point()
                yield Action(ActionType.DRAG, x0, y0, end_x=x1, end_y=y1)
            elif kind is ActionType.SCREENSHOT:
                yield Action(ActionType.SCREENSHOT)
            else:
                yield Action(kind, *self.point())


class SessionSlot:
    """One worker's session: acquired from the runtime, replaced when it fails."""

    def __init__(self, runtime: Runtime, step_timeout_s: float) -> None:
        self.runtime = runtime
        self.step_timeout_s = step_timeout_s
        self.info: SessionInfo | None = None
        self.client: SessionClient | None = None

    def get(self) -> SessionClient:
        if self.client is None:
            self.info = self.runtime.acquire()
            self.client = SessionClient(
                self.info.base_url,
                headers=dict(self.info.headers) or None,
                action_timeout_s=self.step_timeout_s,
                max_retries=0,
            )
        return self.client

    def release(self, *, healthy: bool = True) -> None:
        """Give the session back (unhealthy: the runtime stops it; the next ``get``
        starts or takes another, which is a session replaced)."""
        if self.client is not None:
            self.client.close()
        if self.info is not None:
            self.runtime.release(self.info, healthy=healthy)
        self.info, self.client = None, None


def play_unit(
    unit: Unit,
    config: HuntConfig,
    slot: SessionSlot,
    on_step: Callable[[int, Action, StepRecord], None] | None = None,
) -> UnitResult:
    """Play one unit; every action timed, every error kept (``on_step(step, action,
    record)`` sees each as it is played)."""
    rng = np.random.default_rng(unit.seed)
    result = UnitResult(unit.number, unit.task, unit.screen)
    seeds = split_range("train")
    done = 0
    while done < config.unit_steps:
        client = slot.get()
        try:
            client.reset(
                int(seeds.start + rng.integers(1 << 30)),
                {},
                task=unit.task,
                screen=None if unit.screen == DEFAULT_SCREEN else unit.screen,
            )
            sampler = ActionSampler(rng, unit.screen)
            sampler.boxes = collect_boxes(client.oracle())
        except SessionError as exc:
            result.errors.append({"step": done, "action": "reset", "error": str(exc)[:500]})
            result.replaced += 1
            slot.release(healthy=False)
            done += config.episode_steps  # a unit that cannot reset must still end
            continue
        stream = sampler.actions()
        for _ in range(min(config.episode_steps, config.unit_steps - done)):
            action = next(stream)
            record, fatal = _timed_act(client, action, unit, done, result)
            result.steps.append(record)
            if on_step is not None:
                on_step(done, action, record)
            done += 1
            if fatal is not None:
                if fatal == "replace":
                    result.replaced += 1
                    slot.release(healthy=False)
                break  # a new episode (a fresh page) after any error
    try:
        health = slot.get().health()
        result.open_pages = health.get("open_pages")
        result.popups_closed = int(health.get("popups_closed") or 0)
    except SessionError as exc:
        result.errors.append({"step": done, "action": "health", "error": str(exc)[:500]})
    return result


def _timed_act(
    client: SessionClient, action: Action, unit: Unit, step: int, result: UnitResult
) -> tuple[StepRecord, str | None]:
    """(the record, None | "reset" | "replace": what the error calls for)."""
    t0 = time.perf_counter()
    server_ms: dict[str, float] = {}
    outcome, fatal, error = "ok", None, None
    try:
        client.act_with_progress(action)
        server_ms = client.last_server_ms
    except InvalidActionError as exc:
        outcome, error = "invalid", exc
    except ActionTimeoutError as exc:
        outcome, fatal, error = "error", "reset", exc
    except SessionError as exc:
        outcome, fatal, error = "error", "replace", exc
    wall_ms = (time.perf_counter() - t0) * 1000
    load1 = os.getloadavg()[0]
    record = StepRecord(
        action.type.value,
        round(wall_ms, 1),
        server_ms.get("action"),
        server_ms.get("capture"),
        round(load1, 2),
        outcome,
    )
    described = action.to_dict()
    if len(described.get("text", "")) > 40:  # a 512-character text says little more
        described["text"] = f"{described['text'][:20]}... ({len(described['text'])} chars)"
    detail = {
        "step": step,
        "action": described,
        "wall_ms": record.wall_ms,
        "action_ms": record.action_ms,
        "capture_ms": record.capture_ms,
        "load1": record.load1,
    }
    if outcome == "error":
        result.errors.append({**detail, "error": f"{type(error).__name__}: {error}"[:800]})
    elif wall_ms > SLOW_S * 1000 / 2:  # kept from 1 s on, to see the near misses
        result.slow.append(detail)
    return record, fatal


def run(
    config: HuntConfig,
    out: Path,
    runtime: Runtime,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Play every unit not yet in ``out/units.jsonl`` (appending each when done); return
    all units' results (the file's)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "units.jsonl"
    done = {row["unit"] for row in read_units(path)}
    todo: queue.Queue[Unit] = queue.Queue()
    units = plan(config)
    for unit in units:
        if unit.number not in done:
            todo.put(unit)
    lock = threading.Lock()
    finished = len(done)
    failures: list[BaseException] = []

    def worker() -> None:
        nonlocal finished
        slot = SessionSlot(runtime, config.step_timeout_s)
        try:
            while not failures:
                try:
                    unit = todo.get_nowait()
                except queue.Empty:
                    return
                result = play_unit(unit, config, slot)
                line = json.dumps(result.to_json(), separators=(",", ":"))
                with lock:
                    with path.open("a") as f:
                        f.write(line + "\n")
                        f.flush()
                        os.fsync(f.fileno())
                    finished += 1
                    if progress is not None:
                        progress(finished, len(units))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            failures.append(exc)
        finally:
            slot.release()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(config.sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return read_units(path)


def read_units(path: Path) -> list[dict[str, Any]]:
    """The units written so far (a line cut short by a crash is skipped)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("a unit's line was cut short (a crash?): skipped, it is played again")
    return rows


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Steps, wall-time percentiles, slow actions and errors, per task family."""
    walls: list[float] = []
    by_family: dict[str, list[float]] = defaultdict(list)
    slowest: dict[str, tuple[float, str, str]] = {}
    loads: list[float] = []
    outcomes: Counter[str] = Counter()
    errors, slow, replaced, extra_pages, popups = [], [], 0, 0, 0
    for row in rows:
        family = TASKS[row["task"]].family or row["task"] if row["task"] in TASKS else row["task"]
        for action, wall_ms, _a, _c, load1, outcome in row["steps"]:
            walls.append(wall_ms)
            by_family[family].append(wall_ms)
            loads.append(load1)
            outcomes[outcome] += 1
            if wall_ms > slowest.get(family, (-1.0, "", ""))[0]:
                slowest[family] = (wall_ms, row["task"], action)
        errors += [{**e, "task": row["task"]} for e in row["errors"]]
        slow += [{**s, "task": row["task"]} for s in row["slow"]]
        replaced += row["replaced"]
        popups += row.get("popups_closed") or 0
        if (row.get("open_pages") or 0) > 2:
            extra_pages += 1
    walls_sorted = sorted(walls)

    def pct(p: float) -> float:
        if not walls_sorted:
            return math.nan
        return walls_sorted[min(len(walls_sorted) - 1, int(p / 100 * len(walls_sorted)))]

    return {
        "units": len(rows),
        "tasks": len({row["task"] for row in rows}),
        "steps": len(walls),
        "outcomes": dict(outcomes),
        "wall_ms": {
            "p50": pct(50),
            "p99": pct(99),
            "p99.9": pct(99.9),
            "max": walls_sorted[-1] if walls_sorted else math.nan,
        },
        "over_2s": sum(w > SLOW_S * 1000 for w in walls),
        "load1": {
            "median": statistics.median(loads) if loads else math.nan,
            "max": max(loads, default=math.nan),
        },
        "families": {
            family: {
                "steps": len(values),
                "p99_ms": sorted(values)[int(0.99 * (len(values) - 1))],
                "max_ms": slowest[family][0],
                "slowest": f"{slowest[family][1]} {slowest[family][2]}",
            }
            for family, values in sorted(by_family.items())
        },
        "errors": errors,
        "slow": sorted(slow, key=lambda s: -s["wall_ms"])[:20],
        "sessions_replaced": replaced,
        "units_with_extra_pages": extra_pages,
        "popups_closed": popups,
    }


def markdown(summary: dict[str, Any]) -> str:
    """The table for docs/benchmarks.md."""
    wall = summary["wall_ms"]
    lines = [
        f"{summary['steps']} steps over {summary['tasks']} tasks ({summary['units']} units); "
        f"outcomes {summary['outcomes']}; errors {len(summary['errors'])}; sessions replaced "
        f"{summary['sessions_replaced']}; actions over 2 s: {summary['over_2s']}; new tabs "
        f"closed {summary['popups_closed']}.",
        f"Wall time per `/act` (client side): p50 {wall['p50']:.0f} ms, p99 {wall['p99']:.0f} "
        f"ms, p99.9 {wall['p99.9']:.0f} ms, max {wall['max']:.0f} ms; 1-minute load average "
        f"median {summary['load1']['median']:.1f}, max {summary['load1']['max']:.1f}.",
        "",
        "| family / task | steps | p99 (ms) | slowest (ms) | slowest action |",
        "|---|---:|---:|---:|---|",
    ]
    for family, row in summary["families"].items():
        lines.append(
            f"| {family} | {row['steps']} | {row['p99_ms']:.0f} | {row['max_ms']:.0f} | "
            f"{row['slowest']} |"
        )
    return "\n".join(lines)


def write_doc(doc: Path, summary: dict[str, Any], *, config_steps: int) -> None:
    """Replace what stands between the ``stall_hunt`` markers of ``doc``."""
    start, end = "<!-- stall_hunt:start -->", "<!-- stall_hunt:end -->"
    text = doc.read_text("utf-8")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    when = time.strftime("%Y-%m-%d")
    done = (
        ""
        if summary["steps"] >= config_steps
        else (f" (in progress: {summary['steps']} of {config_steps} steps when written)")
    )
    body = (
        f"Command: `python scripts/stall_hunt.py --steps {config_steps}`; {when}, "
        f"{os.cpu_count()} cores (the load below is the machine's, the hunt's own sessions "
        f"included){done}.\n\n{markdown(summary)}\n"
    )
    doc.write_text(f"{head}{start}\n{body}{end}{tail}", "utf-8")


def replay(config: HuntConfig, numbers: Sequence[int], runtime: Runtime) -> None:
    """Play the units ``numbers`` of ``config``'s plan again on one session of
    ``runtime``, printing every action with its wall, action and capture times and the
    load."""
    units = plan(config)
    for number in numbers:
        if not 0 <= number < len(units):
            raise SystemExit(f"--replay: unit {number} is not in 0..{len(units) - 1}")

    def show(step: int, action: Action, record: StepRecord) -> None:
        print(
            f"  step {step:3d} {record.outcome:7s} wall {record.wall_ms:7.0f} ms, action "
            f"{record.action_ms} ms, capture {record.capture_ms} ms, load {record.load1:.1f}: "
            f"{json.dumps(action.to_dict())[:160]}",
            flush=True,
        )

    slot = SessionSlot(runtime, config.step_timeout_s)
    try:
        for number in numbers:
            unit = units[number]
            print(f"unit {number}: {unit.task}, screen {unit.screen}, seed {unit.seed}")
            result = play_unit(unit, config, slot, on_step=show)
            for error in result.errors:
                print("  ERROR", json.dumps(error))
    finally:
        slot.release()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = HuntConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("runs/stall_hunt"), help="units.jsonl here")
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--tasks", help="task ids, groups or globs (default: every task)")
    p.add_argument("--unit-steps", type=int, default=defaults.unit_steps)
    p.add_argument("--episode-steps", type=int, default=defaults.episode_steps)
    p.add_argument("--sessions", type=int, default=defaults.sessions)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--step-timeout-s", type=float, default=defaults.step_timeout_s)
    p.add_argument("--report", action="store_true", help="only summarize what --out holds")
    p.add_argument(
        "--replay",
        type=int,
        nargs="+",
        metavar="UNIT",
        help="play these units again on one session, each action printed with its times "
        "(a slow action alone: the machine's load or the page?); nothing is written",
    )
    p.add_argument(
        "--doc",
        type=Path,
        help="write the table between the stall_hunt markers of this file (docs/benchmarks.md)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = HuntConfig(
        steps=args.steps,
        tasks=args.tasks,
        unit_steps=args.unit_steps,
        episode_steps=args.episode_steps,
        sessions=args.sessions,
        seed=args.seed,
        step_timeout_s=args.step_timeout_s,
    )
    if args.replay:
        with LocalRuntime(LocalRuntimeConfig(startup_timeout_s=120)) as runtime:
            replay(config, args.replay, runtime)
        return 0
    if not args.report:
        from tqdm import tqdm

        bar = tqdm(total=config.units(), unit="unit", desc="stall hunt")

        def progress(finished: int, total: int) -> None:
            bar.n = finished
            bar.refresh()

        with LocalRuntime(LocalRuntimeConfig(startup_timeout_s=120)) as runtime:
            runtime.start_many(config.sessions)
            run(config, args.out, runtime, progress=progress)
        bar.close()
    summary = summarize(read_units(args.out / "units.jsonl"))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(markdown(summary))
    if args.doc:
        write_doc(args.doc, summary, config_steps=args.steps)
    for error in summary["errors"][:50]:
        print("ERROR", json.dumps(error))
    for slow in summary["slow"][:20]:
        print("SLOW", json.dumps(slow))
    return 0


if __name__ == "__main__":
    sys.exit(main())

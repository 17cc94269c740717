"""The leaderboard: result folders of ``evaluate.py`` merged into one ranked table.

``evaluate.py --leaderboard DIR`` finds every result folder under ``DIR`` (a folder
with ``results.json``, ``DIR`` itself included), pools each agent's episodes over the
folders per task (successes and episodes add up; an agent in two folders is one row),
and writes ``DIR/leaderboard.md``, ``DIR/leaderboard.json`` and ``DIR/leaderboard.html``:
per agent what it sees (``pixels``, ``axtree``: the page as text, ``som``: the
set-of-marks screenshot, ``elements``: the scripted expert acting by element), its
success rate with the Wilson 95% interval, episodes, mean steps, tokens, cost per
episode and per success, and per task a cell linking to that agent's replay
at that task. Rows are ranked by success rate, then by cost per success.
"""

from __future__ import annotations

import html
import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from uirl_agents.episodes.viewer import STYLE, task_anchor
from uirl_agents.evaluation.benchmark import agent_run_dir, wilson_interval

logger = logging.getLogger(__name__)

RESULTS_FILE = "results.json"


@dataclass
class TaskCell:
    """One agent on one task, pooled: counts, mean steps, and the replays to link."""

    episodes: int = 0
    successes: int = 0
    steps: float = 0.0  # summed over episodes (mean = steps / episodes)
    replays: list[str] = field(default_factory=list)  # index.html paths, relative to DIR


@dataclass
class Entry:
    """One leaderboard row (an agent pooled over the folders it appears in)."""

    agent: str
    format: str | None = None
    observation: str = "pixels"  # results written before issue 41 saw pixels
    tasks: dict[str, TaskCell] = field(default_factory=dict)
    cost_usd: float | None = None
    priced: bool = True  # False once a folder has no cost for it: the cost is unknown
    tokens_in: int = 0
    tokens_out: int = 0
    sources: list[str] = field(default_factory=list)

    @property
    def episodes(self) -> int:
        return sum(c.episodes for c in self.tasks.values())

    @property
    def successes(self) -> int:
        return sum(c.successes for c in self.tasks.values())

    @property
    def success_rate(self) -> float:
        return self.successes / self.episodes if self.episodes else 0.0

    @property
    def mean_steps(self) -> float:
        return sum(c.steps for c in self.tasks.values()) / max(1, self.episodes)

    @property
    def cost(self) -> float | None:
        return self.cost_usd if self.priced else None

    @property
    def cost_per_success(self) -> float | None:
        return self.cost / self.successes if self.cost is not None and self.successes else None

    def summary(self) -> dict[str, Any]:
        lo, hi = wilson_interval(self.successes, self.episodes)
        cost = self.cost
        return {
            "agent": self.agent,
            "format": self.format,
            "observation": self.observation,
            "episodes": self.episodes,
            "successes": self.successes,
            "success_rate": self.success_rate,
            "success_ci95": [lo, hi],
            "mean_steps": self.mean_steps,
            "tokens_in_per_episode": self.tokens_in / max(1, self.episodes),
            "tokens_out_per_episode": self.tokens_out / max(1, self.episodes),
            "cost_usd": cost,
            "cost_per_episode_usd": cost / self.episodes
            if cost is not None and self.episodes
            else None,
            "cost_per_success_usd": self.cost_per_success,
            "tasks": {t: asdict(c) for t, c in sorted(self.tasks.items())},
            "sources": self.sources,
        }


def find_result_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` (itself included) with a ``results.json``, sorted."""
    return sorted(p.parent for p in root.rglob(RESULTS_FILE))


def collect(root: Path) -> list[Entry]:
    """The pooled entries of every result folder under ``root``, ranked.

    Raises:
        FileNotFoundError: no result folder under ``root``.
    """
    folders = find_result_folders(root)
    if not folders:
        raise FileNotFoundError(
            f"{root}: no {RESULTS_FILE} under it; point --leaderboard at a folder holding "
            "evaluate.py --out folders"
        )
    entries: dict[str, Entry] = {}
    for folder in folders:
        try:
            agents = json.loads((folder / RESULTS_FILE).read_text(encoding="utf-8"))["agents"]
        except (json.JSONDecodeError, KeyError) as exc:
            logger.warning("%s: skipped, not an evaluate.py results file (%s)", folder, exc)
            continue
        for result in agents:
            _add(entries, root, folder, result)
    return sorted(
        entries.values(),
        key=lambda e: (
            -e.success_rate,
            e.cost_per_success if e.cost_per_success is not None else float("inf"),
            e.agent,
        ),
    )


def _add(entries: dict[str, Entry], root: Path, folder: Path, result: dict[str, Any]) -> None:
    entry = entries.setdefault(
        result["agent"],
        Entry(result["agent"], result.get("format"), result.get("observation", "pixels")),
    )
    source = os.path.relpath(folder, root)
    entry.sources.append(source)
    page = agent_run_dir(folder, result["agent"]) / "index.html"
    # A folder copied without its replays still counts; its cells are just not links.
    replay = os.path.relpath(page, root) if page.is_file() else None
    # Results written before several tasks per run hold no per_task: SimpleDataEntry's.
    per_task = result.get("per_task") or {
        "simple_data_entry": {
            "episodes": result["episodes"],
            "successes": round(result["success_rate"] * result["episodes"]),
            "mean_steps": result["mean_steps"],
        }
    }
    for task, row in per_task.items():
        cell = entry.tasks.setdefault(task, TaskCell())
        cell.episodes += int(row["episodes"])
        cell.successes += int(row["successes"])
        cell.steps += float(row["mean_steps"]) * int(row["episodes"])
        if replay is not None:
            cell.replays.append(replay)
    tokens = result.get("tokens") or {}
    entry.tokens_in += sum(
        tokens.get(k, 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    entry.tokens_out += tokens.get("output_tokens", 0)
    if result.get("cost_usd") is None:
        entry.priced = False
    else:
        entry.cost_usd = (entry.cost_usd or 0.0) + result["cost_usd"]


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}" if value < 1 else f"${value:.2f}"


def markdown(entries: list[Entry]) -> str:
    tasks = sorted({t for e in entries for t in e.tasks})
    lines = [
        "| # | agent | observation | episodes | success (95% CI) | steps/episode | cost/episode "
        "| cost/success | " + " | ".join(tasks) + " |",
        "| --- " * (8 + len(tasks)) + "|",
    ]
    for rank, e in enumerate(entries, 1):
        s = e.summary()
        lo, hi = s["success_ci95"]
        cells = [
            f"{e.tasks[t].successes}/{e.tasks[t].episodes}" if t in e.tasks else "-" for t in tasks
        ]
        lines.append(
            f"| {rank} | {e.agent} | {e.observation} | {e.episodes} "
            f"| {e.success_rate:.0%} ({lo:.0%}-{hi:.0%}) "
            f"| {e.mean_steps:.1f} | {_usd(s['cost_per_episode_usd'])} "
            f"| {_usd(e.cost_per_success)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


PAGE_STYLE = """
table { border-collapse: collapse; margin-top: 12px; }
td, th { padding: 4px 10px; border: 1px solid #dadce0; text-align: right; }
td.agent, th.agent { text-align: left; }
.ci { position: relative; display: inline-block; width: 120px; height: 10px;
      background: #eee; margin-left: 6px; vertical-align: middle; }
.ci .range { position: absolute; top: 0; height: 10px; background: #b39ddb; }
.ci .rate { position: absolute; top: -2px; width: 2px; height: 14px; background: #4527a0; }
"""


def render_html(root: Path, entries: list[Entry]) -> str:
    tasks = sorted({t for e in entries for t in e.tasks})
    parts = [
        "<!doctype html><meta charset=utf-8><title>uirl leaderboard</title>",
        f"<style>{STYLE}{PAGE_STYLE}</style>",
        f"<h1>Leaderboard: {html.escape(root.name or str(root))}</h1>",
        f"<p>{len(entries)} agents, {len(tasks)} tasks; success with its Wilson 95% interval; "
        "each task cell links to the agent's replay of that task.</p>",
        '<table id="leaderboard"><tr><th>#</th><th class="agent">agent</th>'
        "<th>observation</th><th>episodes</th>"
        "<th>success (95% CI)</th><th>steps/episode</th><th>tokens/episode (in/out)</th>"
        "<th>cost/episode</th><th>cost/success</th>",
    ]
    parts += [f"<th>{html.escape(t)}</th>" for t in tasks]
    parts.append("</tr>")
    for rank, e in enumerate(entries, 1):
        s = e.summary()
        lo, hi = s["success_ci95"]
        bar = (
            f'<span class="ci" title="{lo:.0%}-{hi:.0%}"><span class="range" '
            f'style="left:{lo * 100:.1f}%;width:{(hi - lo) * 100:.1f}%"></span>'
            f'<span class="rate" style="left:{e.success_rate * 100:.1f}%"></span></span>'
        )
        tokens = (
            f"{s['tokens_in_per_episode']:,.0f} / {s['tokens_out_per_episode']:,.0f}"
            if e.tokens_in or e.tokens_out
            else "-"
        )
        parts.append(
            f'<tr class="entry"><td>{rank}</td><td class="agent">{html.escape(e.agent)}</td>'
            f'<td class="observation">{html.escape(e.observation)}</td><td>{e.episodes}</td>'
            f"<td>{e.success_rate:.0%} ({lo:.0%}-{hi:.0%}){bar}</td>"
            f"<td>{e.mean_steps:.1f}</td><td>{tokens}</td>"
            f"<td>{_usd(s['cost_per_episode_usd'])}</td><td>{_usd(e.cost_per_success)}</td>"
        )
        for task in tasks:
            cell = e.tasks.get(task)
            if cell is None:
                parts.append("<td>-</td>")
                continue
            counts = f"{cell.successes}/{cell.episodes}"
            links = (
                counts
                if not cell.replays
                else " ".join(
                    f'<a class="replay" href="{html.escape(r)}#{task_anchor(task)}">{counts}</a>'
                    if k == 0
                    else f'<a class="replay" href="{html.escape(r)}#{task_anchor(task)}">[{k + 1}]</a>'
                    for k, r in enumerate(dict.fromkeys(cell.replays))
                )
            )
            parts.append(f"<td>{links}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def write_leaderboard(root: Path) -> list[Path]:
    """Merge the result folders under ``root``; write the leaderboard files there.

    Returns:
        ``[leaderboard.md, leaderboard.json, leaderboard.html]``.

    Raises:
        FileNotFoundError: no result folder under ``root``.
    """
    entries = collect(root)
    out = [root / "leaderboard.md", root / "leaderboard.json", root / "leaderboard.html"]
    out[0].write_text(markdown(entries) + "\n", encoding="utf-8")
    out[1].write_text(
        json.dumps({"agents": [e.summary() for e in entries]}, indent=2), encoding="utf-8"
    )
    out[2].write_text(render_html(root, entries), encoding="utf-8")
    return out

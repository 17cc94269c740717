"""An HTML replay of a run directory: ``python -m uirl_agents.episodes.viewer RUN_DIR``.

Writes ``RUN_DIR/index.html``: per task, per episode, each step's screenshot with the
action's point drawn on it, the model's output, the action, the reward and any error.
The page references the run's ``images/`` folder, so it opens offline from the file
system. :func:`write_index` writes the page above several runs (evaluate.py's
``--out``): a table of agents by tasks, each cell a link to that agent's episodes of
that task.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uirl_agents.episodes.trajectories import EPISODES_FILE

STYLE = """
body { font: 14px/1.4 sans-serif; margin: 16px; color: #202124; }
details { border: 1px solid #dadce0; border-radius: 6px; margin: 8px 0; padding: 6px 10px; }
summary { cursor: pointer; font-weight: bold; }
.ok { color: #188038; } .fail { color: #d93025; }
.step { display: flex; gap: 12px; margin: 10px 0; border-top: 1px solid #eee; padding-top: 8px; }
.shot { position: relative; width: 640px; flex: none; }
.shot img { width: 640px; display: block; border: 1px solid #ccc; }
.mark { position: absolute; width: 14px; height: 14px; margin: -9px 0 0 -9px;
        border: 2px solid #d93025; border-radius: 50%; background: rgba(217,48,37,.25); }
pre { white-space: pre-wrap; background: #f8f9fa; padding: 6px; margin: 4px 0; }
"""
SCALE = 0.5  # screenshots shown at 640 px wide
# An API request's input, whatever the cache did with it (uirl_agents.policies.usage's keys).
_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _step_html(n: int, step: dict[str, Any]) -> str:
    action = step.get("action") or {}
    marker = ""
    if "x" in action and "y" in action:
        marker = (
            f'<div class="mark" style="left:{action["x"] * SCALE:.0f}px;'
            f'top:{action["y"] * SCALE:.0f}px"></div>'
        )
    shot = step.get("screenshot")
    image = (
        f'<img loading="lazy" src="images/{html.escape(shot)}">' if shot else "<i>no screenshot</i>"
    )
    error = f'<div class="fail">{html.escape(step["error"])}</div>' if step.get("error") else ""
    usage = step.get("usage") or {}
    tokens = (
        f" · tokens in {sum(usage.get(k, 0) for k in _INPUT_KEYS):,} / out "
        f"{usage.get('output_tokens', 0):,}"
        if usage
        else ""
    )
    return (
        f'<div class="step"><div class="shot">{image}{marker}</div><div>'
        f"<b>step {n}</b> reward {step.get('reward', 0):+.2f}{tokens}"
        f"{' terminated' if step.get('terminated') else ''}"
        f"{' truncated' if step.get('truncated') else ''}"
        f"<pre>{html.escape(step.get('text') or '')}</pre>"
        f"<div>action: <code>{html.escape(json.dumps(action) if action else 'none')}</code></div>"
        f"{error}</div></div>"
    )


def render_html(run_dir: Path) -> str:
    episodes = []
    with open(run_dir / EPISODES_FILE, encoding="utf-8") as f:
        for line in f:
            try:
                episodes.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # an episode cut short by a crash
    parts = [f"<!doctype html><meta charset=utf-8><title>{html.escape(run_dir.name)}</title>"]
    parts.append(
        f"<style>{STYLE}</style><h1>{html.escape(run_dir.name)}: {len(episodes)} episodes</h1>"
    )
    current_task = None
    # Runs written before multi-task runs name no task: SimpleDataEntry's.
    for e in sorted(episodes, key=lambda e: e.get("task", "simple_data_entry")):
        task = e.get("task", "simple_data_entry")
        if task != current_task:
            current_task = task
            parts.append(f'<h2 id="{task_anchor(task)}">{html.escape(task)}</h2>')
        status = (
            '<span class="ok">success</span>'
            if e["success"]
            else '<span class="fail">failure</span>'
        )
        parts.append(
            f"<details><summary>{html.escape(e['episode_id'])} · {html.escape(e['agent'])} · "
            f"{status} · reward {e['total_reward']:+.2f} · {len(e['steps'])} steps</summary>"
            f"<p>{html.escape(e['instruction'])}</p>"
            + (f'<p class="fail">{html.escape(e["error"])}</p>' if e.get("error") else "")
            + "".join(_step_html(n, s) for n, s in enumerate(e["steps"]))
            + "</details>"
        )
    return "\n".join(parts)


def task_anchor(task: str) -> str:
    return "task-" + "".join(c if c.isalnum() else "-" for c in task)


def write_index(
    out_dir: Path, rows: Sequence[tuple[str, Path, dict[str, tuple[int, int]]]]
) -> Path:
    """``out_dir/index.html``: agents by tasks, success counts linking to the replays.

    Args:
        rows: per agent, ``(label, its run dir, {task: (successes, episodes)})``.
    """
    tasks = sorted({t for _, _, counts in rows for t in counts})
    parts = [f"<!doctype html><meta charset=utf-8><title>{html.escape(out_dir.name)}</title>"]
    parts.append(f"<style>{STYLE} td, th {{ padding: 4px 10px; border: 1px solid #dadce0; }}")
    parts.append(
        f"table {{ border-collapse: collapse; }}</style><h1>{html.escape(out_dir.name)}</h1>"
    )
    parts.append("<table><tr><th>agent</th>")
    parts += [f"<th>{html.escape(t)}</th>" for t in tasks]
    parts.append("</tr>")
    for label, run_dir, counts in rows:
        page = os.path.relpath(run_dir / "index.html", out_dir)
        parts.append(f'<tr><td><a href="{html.escape(page)}">{html.escape(label)}</a></td>')
        for task in tasks:
            if task not in counts:
                parts.append("<td>-</td>")
                continue
            won, n = counts[task]
            link = f"{html.escape(page)}#{task_anchor(task)}"
            parts.append(f'<td><a href="{link}">{won}/{n}</a></td>')
        parts.append("</tr>")
    parts.append("</table>")
    out = out_dir / "index.html"
    out.write_text("\n".join(parts), encoding="utf-8")
    return out


def write_viewer(run_dir: str | os.PathLike[str]) -> Path:
    """Write ``RUN_DIR/index.html`` and return its path."""
    run_dir = Path(run_dir)
    out = run_dir / "index.html"
    out.write_text(render_html(run_dir), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m uirl_agents.episodes.viewer", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "run_dir", help="a folder with episodes.jsonl (written by evaluate.py or a trainer)"
    )
    args = p.parse_args(argv)
    if not (Path(args.run_dir) / EPISODES_FILE).exists():
        p.error(f"{args.run_dir}: no {EPISODES_FILE} there")
    sys.stdout.write(f"{write_viewer(args.run_dir)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark agents on the env: runs, metrics, reports, resume.

``scripts/evaluate.py`` is the command line; this module is the library behind it. Which
agents there are, and how a spec string becomes a policy, is the agent registry's
business (:mod:`uirl_agents.evaluation.agents`).

Every agent plays the same episode specs (same seeds, same rows), collected with
:func:`uirl_agents.episodes.rollout.collect_episodes` and written as replayable trajectories.

A run folder holds ``run.json`` (the settings), per agent a run directory with
``episodes.jsonl`` (appended as each episode ends), ``summary.json`` (written when the
agent finishes) and ``index.html``, and the reports over all agents finished so far.
:func:`run_agent` continues an interrupted agent from its finished episodes;
:func:`run_lock` keeps a second live run off the folder (``run.lock``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes
from uirl_agents.episodes.trajectories import (
    EPISODES_FILE,
    Episode,
    TrajectoryWriter,
    iter_episodes,
)
from uirl_agents.episodes.viewer import write_index, write_viewer
from uirl_agents.evaluation.agents import AGENTS, AgentSpec, build_policy
from uirl_agents.evaluation.cost import DEFAULT_PRICES, ModelPrice, find_price
from uirl_agents.policies.usage import add_usage
from uirl_gym.vector import SessionVectorEnv

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
LOCK_FILE = "run.lock"
# Settings that change which episodes are played: a resumed run must keep them.
EPISODE_SETTINGS = ("tasks", "episodes", "rows", "seed", "split", "max_steps")


class RunMismatchError(ValueError):
    """A run folder that cannot be continued: it was made with other settings, or it
    holds episodes and neither resume nor overwrite was asked for."""


class RunInUseError(RuntimeError):
    """Another live process runs in the run folder (it holds ``run.lock``)."""


@dataclass
class AgentResult:
    """What a report says about one agent (``format``: the model format, None for
    scripted agents; ``observation``: what it sees, :attr:`AgentSpec.mode`)."""

    agent: str
    episodes: int
    success_rate: float
    success_ci95: tuple[float, float]
    mean_reward: float
    mean_steps: float
    invalid_action_rate: float
    policy_s_per_step: float
    env_s_per_step: float
    session_errors: int
    format: str | None = None
    observation: str = "pixels"
    # task -> {"episodes", "successes", "success_rate", "mean_reward", "mean_steps"}
    per_task: dict[str, dict[str, float]] | None = None
    # API agents: tokens summed over the episodes (uirl_agents.policies.usage.USAGE_KEYS), their
    # price (None: no usage recorded, or the model is not in the price table).
    tokens: dict[str, int] | None = None
    cost_usd: float | None = None
    cost_per_episode_usd: float | None = None
    cost_per_success_usd: float | None = None


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a success rate (sane at 0% and 100%).

    The bounds always satisfy ``0 <= low <= successes / n <= high <= 1``: rounding makes
    the formula give 0.9999999999999999 for 6/6 (and 7e-18 for 0/11), which would put
    the rate outside its own interval and make an error bar negative.

    >>> wilson_interval(6, 6)[1], wilson_interval(0, 11)[0]
    (1.0, 0.0)
    """
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (min(max(0.0, centre - half), p), max(min(1.0, centre + half), p))


def summarise(
    agent: str,
    episodes: Sequence[Episode],
    format: str | None = None,
    price: ModelPrice | None = None,
    observation: str = "pixels",
) -> AgentResult:
    """An agent's numbers over ``episodes`` (``price``: its model's, for the cost;
    ``observation``: what it sees, ``pixels``, ``axtree``, ``som``, ``elements``)."""
    steps = [s for e in episodes for s in e.steps]
    successes = sum(e.success for e in episodes)
    tokens = add_usage(s.usage for s in steps)
    cost = price.cost_usd(tokens) if price is not None and tokens is not None else None
    return AgentResult(
        agent=agent,
        format=format,
        observation=observation,
        episodes=len(episodes),
        success_rate=successes / max(1, len(episodes)),
        success_ci95=wilson_interval(successes, len(episodes)),
        mean_reward=statistics.fmean(e.total_reward for e in episodes) if episodes else 0.0,
        mean_steps=statistics.fmean(e.length for e in episodes) if episodes else 0.0,
        invalid_action_rate=sum(s.error is not None for s in steps) / max(1, len(steps)),
        policy_s_per_step=statistics.fmean(s.policy_time_s for s in steps) if steps else 0.0,
        env_s_per_step=statistics.fmean(s.env_time_s for s in steps) if steps else 0.0,
        session_errors=sum(e.error is not None for e in episodes),
        per_task=_per_task(episodes),
        tokens=tokens,
        cost_usd=cost,
        cost_per_episode_usd=cost / len(episodes) if cost is not None and episodes else None,
        cost_per_success_usd=cost / successes if cost is not None and successes else None,
    )


def _per_task(episodes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    table = {}
    for task in sorted({e.task for e in episodes}):
        mine = [e for e in episodes if e.task == task]
        table[task] = {
            "episodes": len(mine),
            "successes": sum(e.success for e in mine),
            "success_rate": sum(e.success for e in mine) / len(mine),
            "mean_reward": statistics.fmean(e.total_reward for e in mine),
            "mean_steps": statistics.fmean(e.length for e in mine),
        }
    return table


def markdown_table(results: Sequence[AgentResult]) -> str:
    lines = [
        "| agent | format | episodes | success (95% CI) | mean reward | steps/episode "
        "| invalid actions | policy s/step | env s/step | tokens/episode (in/out) "
        "| cost/episode | cost/success |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lo, hi = r.success_ci95
        lines.append(
            f"| {r.agent} | {r.format or '-'} | {r.episodes} "
            f"| {r.success_rate:.0%} ({lo:.0%}-{hi:.0%}) "
            f"| {r.mean_reward:.2f} | {r.mean_steps:.1f} | {r.invalid_action_rate:.1%} "
            f"| {r.policy_s_per_step:.3f} | {r.env_s_per_step:.3f} "
            f"| {_tokens_cell(r)} | {_usd(r.cost_per_episode_usd)} "
            f"| {_usd(r.cost_per_success_usd)} |"
        )
    tasks = sorted({t for r in results for t in (r.per_task or {})})
    if len(tasks) > 1:
        # Per task, and their mean (each task counts the same, whatever its episodes).
        lines += ["", "Success (mean steps) per task:", ""]
        lines.append("| agent | " + " | ".join(tasks) + " | mean |")
        lines.append("| --- " * (len(tasks) + 2) + "|")
        for r in results:
            cells, rates = [], []
            for task in tasks:
                row = (r.per_task or {}).get(task)
                if row is None:
                    cells.append("-")
                    continue
                rates.append(row["success_rate"])
                cells.append(f"{row['success_rate']:.0%} ({row['mean_steps']:.1f})")
            mean = f"{statistics.fmean(rates):.0%}" if rates else "-"
            lines.append(f"| {r.agent} | " + " | ".join(cells) + f" | {mean} |")
    return "\n".join(lines)


def _tokens_cell(r: AgentResult) -> str:
    if not r.tokens or not r.episodes:
        return "-"
    t = r.tokens
    inputs = t["input_tokens"] + t["cache_read_input_tokens"] + t["cache_creation_input_tokens"]
    return f"{inputs / r.episodes:,.0f} / {t['output_tokens'] / r.episodes:,.0f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}" if value < 1 else f"${value:.2f}"


def price_of(spec: AgentSpec, prices: Mapping[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of an API agent's model (None for local and scripted agents, and for
    models missing from the table: a warning says how to add them)."""
    kind = AGENTS[spec.kind]
    if not kind.priced:
        return None
    price = find_price(spec.target, DEFAULT_PRICES if prices is None else prices)
    if price is None and kind.warn_unpriced:
        logger.warning(
            "no price for %s: its cost is not reported; add it to a --prices file "
            '({"%s": {"input": USD, "output": USD}} per million tokens)',
            spec.target,
            spec.target,
        )
    return price


def write_reports(
    out_dir: Path, results: Sequence[AgentResult], settings: dict[str, Any]
) -> list[Path]:
    """``results.json``, ``results.md`` and ``results.png`` (success rates with CIs).

    Returns:
        The files written (no plot without matplotlib).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": settings,
        "agents": [asdict(r) for r in results],
    }
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2))
    (out_dir / "results.md").write_text(markdown_table(results) + "\n")
    written = [out_dir / "results.json", out_dir / "results.md"]
    rows = [
        (
            r.agent,
            agent_run_dir(out_dir, r.agent),
            {t: (int(v["successes"]), int(v["episodes"])) for t, v in (r.per_task or {}).items()},
        )
        for r in results
    ]
    written.append(write_index(out_dir, rows))
    if _plot(out_dir / "results.png", results):
        written.append(out_dir / "results.png")
    return written


def _plot(path: Path, results: Sequence[AgentResult]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (pip install -e '.[train]')", path.name)
        return False
    costs = [r.cost_per_episode_usd for r in results]
    priced = any(c is not None for c in costs)
    fig, axes = plt.subplots(
        1, 2 if priced else 1, figsize=((1.6 + 1.4 * len(results)) * (2 if priced else 1), 3.2)
    )
    ax = axes[0] if priced else axes
    rates = [r.success_rate * 100 for r in results]
    errors = [
        [(r.success_rate - r.success_ci95[0]) * 100 for r in results],
        [(r.success_ci95[1] - r.success_rate) * 100 for r in results],
    ]
    ax.bar([r.agent for r in results], rates, yerr=errors, capsize=4, color="#673ab7")
    ax.set_ylim(0, 105)
    ax.set_ylabel("success rate (%)")
    ax.set_title("success rate, 95% CI")
    if priced:
        # The cost column of results.md: USD per episode ("-" agents drawn as 0, unlabelled).
        bars = axes[1].bar([r.agent for r in results], [c or 0.0 for c in costs], color="#00897b")
        axes[1].bar_label(bars, labels=[_usd(c) for c in costs], fontsize=8)
        axes[1].set_ylabel("cost per episode (USD)")
        axes[1].set_title("cost per episode")
    for a in axes if priced else [ax]:
        a.tick_params(axis="x", labelrotation=15, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def append_leaderboard(
    path: Path, results: Sequence[AgentResult], settings: dict[str, Any]
) -> None:
    """Append one row per agent to a markdown leaderboard (created with a header)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "# Leaderboard: uirl/SimpleDataEntry-v0\n\n"
            "| date | agent | episodes | rows | success (95% CI) | mean reward | steps/episode |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n"
        )
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    with open(path, "a") as f:
        for r in results:
            lo, hi = r.success_ci95
            agent = f"{r.agent} ({r.format})" if r.format else r.agent
            f.write(
                f"| {date} | {agent} | {r.episodes} | {settings['rows']} "
                f"| {r.success_rate:.0%} ({lo:.0%}-{hi:.0%}) | {r.mean_reward:.2f} "
                f"| {r.mean_steps:.1f} |\n"
            )


def agent_run_dir(out_dir: Path, label: str) -> Path:
    """An agent's run directory under ``out_dir`` (its label made file-name safe)."""
    return out_dir / re.sub(r"[^A-Za-z0-9_.+-]", "_", label)


def load_finished(run_dir: Path) -> list[Episode]:
    """The episodes an earlier attempt finished in ``run_dir`` (none if it has no file).

    A line cut short by a kill and a repeated episode id are dropped from the file
    itself (with a warning), so that appending goes on from a clean line.
    """
    path = run_dir / EPISODES_FILE
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    kept, seen = [], set()
    for line in lines:
        try:
            episode_id = json.loads(line)["episode_id"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        if episode_id not in seen:
            seen.add(episode_id)
            kept.append(line)
    if len(kept) != len(lines) or (text and not text.endswith("\n")):
        logger.warning(
            "%s: dropped %d incomplete or repeated line(s)", path, len(lines) - len(kept)
        )
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        os.replace(tmp, path)
    return list(iter_episodes(run_dir, load_images=False))


@contextlib.contextmanager
def run_lock(out_dir: Path) -> Iterator[None]:
    """Hold ``out_dir`` for this run: another run on it fails at once, until this one ends.

    Two runs on one folder (a scheduler restarting a job while the first still runs)
    would play every episode twice, interleave the lines of ``episodes.jsonl`` and
    overwrite each other's ``results.json``. The lock is the OS's (``flock`` on
    ``run.lock``, which records the holder's pid): the kernel drops it when the process
    ends, however it ends, so a run that was killed never blocks its ``--resume``.

    Raises:
        RunInUseError: a live process holds the folder (the message names its pid).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    # os.open's descriptors are not inherited (PEP 446): a session server outliving a
    # killed run does not keep the folder locked.
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            raise RunInUseError(
                f"{out_dir} is in use by another evaluate.py run (pid {holder}): two runs "
                "on one folder would play its episodes twice and overwrite each other's "
                "results; wait for that run to end (then --resume continues it), or use "
                "another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def prepare_run(
    out_dir: Path,
    settings: dict[str, Any],
    labels: Sequence[str],
    *,
    resume: bool = False,
    overwrite: bool = False,
) -> None:
    """Check that ``out_dir`` can take this run, then write its ``run.json``.

    Args:
        out_dir: the run folder.
        settings: the run's settings (:data:`EPISODE_SETTINGS` must match to resume).
        labels: the agents' labels.
        resume: continue the run already there.
        overwrite: start afresh over a run already there.

    Raises:
        RunMismatchError: resuming a run made with other settings, or a folder that
            already holds episodes and neither ``resume`` nor ``overwrite``.
    """
    run_file = out_dir / RUN_FILE
    if resume and run_file.exists():
        before = json.loads(run_file.read_text(encoding="utf-8"))["settings"]
        changed = [k for k in EPISODE_SETTINGS if before.get(k) != settings[k]]
        if changed:
            diff = ", ".join(f"{k} {before.get(k)!r} then, {settings[k]!r} now" for k in changed)
            raise RunMismatchError(
                f"Cannot resume {out_dir}: it was run with other settings ({diff}); pass the "
                f"same ones, or --overwrite to start afresh"
            )
    busy = [
        label
        for label in labels
        if (agent_run_dir(out_dir, label) / EPISODES_FILE).exists()
        and (agent_run_dir(out_dir, label) / EPISODES_FILE).stat().st_size > 0
    ]
    if busy and not (resume or overwrite):
        raise RunMismatchError(
            f"{out_dir} already holds episodes of {busy}: pass --resume to continue that run, "
            f"or --overwrite to start afresh (or another --out)"
        )
    if overwrite:
        for stale in [
            out_dir / n for n in ("results.json", "results.md", "results.png", "index.html")
        ] + [agent_run_dir(out_dir, label) / SUMMARY_FILE for label in labels]:
            stale.unlink(missing_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(run_file, {"settings": settings, "agents": list(labels)})


def run_agent(
    spec: AgentSpec,
    envs: SessionVectorEnv,
    specs: Sequence[EpisodeSpec],
    out_dir: Path,
    *,
    max_steps: int,
    seed: int,
    settings: dict[str, Any],
    resume: bool = False,
    prices: Mapping[str, ModelPrice] | None = None,
) -> AgentResult:
    """Play ``specs`` with one agent and write its run directory; return its summary.

    Episode ``k`` of ``specs`` is ``ep-k``. With ``resume``, the episodes already in the
    run directory are kept and only the others are played (none twice); an agent that
    had finished is not even loaded. ``summary.json`` and ``index.html`` are written as
    soon as the agent is done, so an interrupted run keeps the agents it finished.

    Args:
        prices: the price table for the cost columns (None: :data:`DEFAULT_PRICES`).

    Raises:
        RunMismatchError: a finished episode was played on another task instance.
    """
    run_dir = agent_run_dir(out_dir, spec.label)
    finished = {e.episode_id: e for e in load_finished(run_dir)} if resume else {}
    ids = [f"ep-{k}" for k in range(len(specs))]
    for k, episode_id in enumerate(ids):
        done = finished.get(episode_id)
        if done is not None and (done.seed, done.options) != (specs[k].seed, specs[k].options):
            raise RunMismatchError(
                f"Cannot resume {run_dir}: {episode_id} was played with seed {done.seed} and "
                f"options {done.options}, this run asks for {specs[k].seed} and "
                f"{specs[k].options}; use --overwrite or another --out"
            )
    todo = [k for k, episode_id in enumerate(ids) if episode_id not in finished]
    summary_path = run_dir / SUMMARY_FILE
    if finished:
        logger.info(
            "%s: %d of %d episodes already done", spec.label, len(ids) - len(todo), len(ids)
        )

    def oracle(i: int) -> dict[str, Any]:  # the expert's privileged view of sub-env i
        return envs.envs[i].oracle()

    def task_of(i: int) -> str:
        return envs.envs[i].episode_task or "simple_data_entry"

    if todo:
        policy, format_name = build_policy(spec, oracle, out_dir, seed, task_of)
        with TrajectoryWriter(run_dir, append=resume) as writer:
            played = collect_episodes(
                policy,
                envs,
                [specs[k] for k in todo],
                max_steps=max_steps,
                writer=writer,
                keep_screenshots=False,
                progress=spec.label,
                episode_ids=[ids[k] for k in todo],
            )
        finished.update((e.episode_id, e) for e in played)
    elif summary_path.exists():
        format_name = json.loads(summary_path.read_text(encoding="utf-8"))["result"]["format"]
    else:
        # Killed after its last episode but before its summary: the format needs the model.
        _, format_name = build_policy(spec, oracle, out_dir, seed)
    write_viewer(run_dir)
    result = summarise(
        spec.label, [finished[i] for i in ids], format_name, price_of(spec, prices), spec.mode
    )
    _write_json(summary_path, {"settings": settings, "result": asdict(result)})
    return result


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``path`` whole or not at all: a resumed run reads it back."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    os.replace(tmp, path)

"""Benchmark agents on the env: agent specs, metrics, reports.

``scripts/evaluate.py`` is the command line; this module is the library behind it.
Every agent plays the same episode specs (same seeds, same rows), collected with
:func:`uirl_agents.rollout.collect_episodes` and written as replayable trajectories.
"""

from __future__ import annotations

import json
import logging
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from uirl_agents.policies.base import Policy
from uirl_agents.trajectories import Episode

logger = logging.getLogger(__name__)

AGENT_SYNTAX = (
    "random | expert | hf:PATH[,lora=PATH][,format=NAME] | openai:MODEL@URL[,format=NAME]"
)


class AgentSpecError(ValueError):
    """An ``--agent`` value that does not follow :data:`AGENT_SYNTAX`."""


@dataclass(frozen=True)
class AgentSpec:
    """A parsed ``--agent`` value.

    Attributes:
        kind: ``random``, ``expert``, ``hf`` or ``openai``.
        target: the checkpoint path (hf; ``tiny`` builds the tiny test model) or the model
            name (openai).
        url: the server's base URL (openai).
        lora: a LoRA adapter path (hf).
        format: the model format (``ui-tars`` or ``qwen2.5-vl``).
        max_tokens: the longest completion (model agents).
        label: the name in reports.
    """

    kind: str
    target: str = ""
    url: str = ""
    lora: str | None = None
    format: str = "ui-tars"
    max_tokens: int = 256
    label: str = ""


def parse_agent(text: str) -> AgentSpec:
    """Parse an ``--agent`` value.

    Raises:
        AgentSpecError: with the expected syntax.
    """
    if text in ("random", "expert"):
        return AgentSpec(kind=text, label=text)
    kind, sep, rest = text.partition(":")
    if not sep or kind not in ("hf", "openai") or not rest:
        raise AgentSpecError(f"--agent {text!r}: expected {AGENT_SYNTAX}")
    target, *extras = rest.split(",")
    options = {}
    for extra in extras:
        key, eq, value = extra.partition("=")
        if not eq or key not in ("lora", "format", "max_tokens"):
            raise AgentSpecError(
                f"--agent {text!r}: unknown option {extra!r}; expected lora=, format=, max_tokens="
            )
        if key == "max_tokens" and not (value.isdigit() and int(value) > 0):
            raise AgentSpecError(f"--agent {text!r}: max_tokens must be a positive integer")
        options[key] = int(value) if key == "max_tokens" else value
    url = ""
    if kind == "openai":
        target, at, url = target.partition("@")
        if not at or not re.match(r"https?://", url):
            raise AgentSpecError(f"--agent {text!r}: expected openai:MODEL@http://HOST:PORT/v1")
    if kind == "openai" and "lora" in options:
        raise AgentSpecError(f"--agent {text!r}: serve the adapter with the server, not lora=")
    label = f"{kind}:{Path(target).name or target}" + (
        f"+{Path(options['lora']).name}" if "lora" in options else ""
    )
    return AgentSpec(kind=kind, target=target, url=url, label=label, **options)


def build_policy(
    spec: AgentSpec, oracle: Callable[[int], dict[str, Any]], work_dir: Path, seed: int
) -> Policy:
    """The policy for an agent spec (model weights are loaded here)."""
    if spec.kind == "random":
        from uirl_agents.policies.random import RandomPolicy

        return RandomPolicy(seed=seed)
    if spec.kind == "expert":
        from uirl_agents.policies.expert import ExpertPolicy

        return ExpertPolicy(oracle)
    if spec.kind == "openai":
        from uirl_agents.policies.openai_compat import OpenAIPolicy, OpenAIPolicyConfig

        return OpenAIPolicy(
            OpenAIPolicyConfig(
                base_url=spec.url, model=spec.target, format=spec.format, max_tokens=spec.max_tokens
            )
        )
    from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig

    path = spec.target
    if path == "tiny":
        from uirl_agents.tiny_model import build_tiny_qwen25vl

        path = str(build_tiny_qwen25vl(work_dir / "tiny-model"))
    config = HFPolicyConfig(max_new_tokens=spec.max_tokens)
    policy = HFPolicy.from_pretrained(path, spec.format, config, adapter_path=spec.lora)
    policy.name = spec.label
    return policy


@dataclass
class AgentResult:
    """What a report says about one agent."""

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


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a success rate (sane at 0% and 100%)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarise(agent: str, episodes: Sequence[Episode]) -> AgentResult:
    steps = [s for e in episodes for s in e.steps]
    successes = sum(e.success for e in episodes)
    return AgentResult(
        agent=agent,
        episodes=len(episodes),
        success_rate=successes / max(1, len(episodes)),
        success_ci95=wilson_interval(successes, len(episodes)),
        mean_reward=statistics.fmean(e.total_reward for e in episodes) if episodes else 0.0,
        mean_steps=statistics.fmean(e.length for e in episodes) if episodes else 0.0,
        invalid_action_rate=sum(s.error is not None for s in steps) / max(1, len(steps)),
        policy_s_per_step=statistics.fmean(s.policy_time_s for s in steps) if steps else 0.0,
        env_s_per_step=statistics.fmean(s.env_time_s for s in steps) if steps else 0.0,
        session_errors=sum(e.error is not None for e in episodes),
    )


def markdown_table(results: Sequence[AgentResult]) -> str:
    lines = [
        "| agent | episodes | success (95% CI) | mean reward | steps/episode | invalid actions "
        "| policy s/step | env s/step |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lo, hi = r.success_ci95
        lines.append(
            f"| {r.agent} | {r.episodes} | {r.success_rate:.0%} ({lo:.0%}-{hi:.0%}) "
            f"| {r.mean_reward:.2f} | {r.mean_steps:.1f} | {r.invalid_action_rate:.1%} "
            f"| {r.policy_s_per_step:.3f} | {r.env_s_per_step:.3f} |"
        )
    return "\n".join(lines)


def write_reports(out_dir: Path, results: Sequence[AgentResult], settings: dict[str, Any]) -> None:
    """``results.json``, ``results.md`` and ``results.png`` (success rates with CIs)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "settings": settings,
        "agents": [asdict(r) for r in results],
    }
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2))
    (out_dir / "results.md").write_text(markdown_table(results) + "\n")
    _plot(out_dir / "results.png", results)


def _plot(path: Path, results: Sequence[AgentResult]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (pip install 'uirl[train]')", path.name)
        return
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(results), 3.2))
    rates = [r.success_rate * 100 for r in results]
    errors = [
        [(r.success_rate - r.success_ci95[0]) * 100 for r in results],
        [(r.success_ci95[1] - r.success_rate) * 100 for r in results],
    ]
    ax.bar([r.agent for r in results], rates, yerr=errors, capsize=4, color="#673ab7")
    ax.set_ylim(0, 105)
    ax.set_ylabel("success rate (%)")
    ax.set_title("SimpleDataEntry-v0: success rate, 95% CI")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
            f.write(
                f"| {date} | {r.agent} | {r.episodes} | {settings['rows']} "
                f"| {r.success_rate:.0%} ({lo:.0%}-{hi:.0%}) | {r.mean_reward:.2f} "
                f"| {r.mean_steps:.1f} |\n"
            )

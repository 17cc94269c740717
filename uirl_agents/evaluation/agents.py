"""The agent registry: an ``--agent`` spec string -> the policy that plays it.

Every agent type is one :class:`AgentKind` in :data:`AGENTS`: its syntax (the help of
``scripts/evaluate.py --agent`` is their list), how a spec of it is parsed into an
:class:`AgentSpec`, how its policy is built, and whether its model has a price. A new
agent type is one ``register_agent(AgentKind(...))``; nothing else names the types.

    >>> parse_agent("hf:Qwen/Qwen2.5-VL-3B-Instruct,load_in_4bit=1").label
    'hf:Qwen2.5-VL-3B-Instruct@4bit'
    >>> sorted(AGENTS)
    ['anthropic', 'expert', 'expert-elements', 'gemini-cua', 'hf', 'openai', 'openai-cua', 'random']

A model agent's format says what the env shows it (``format=axtree``: the page as text,
``format=som``: the set-of-marks screenshot; :attr:`AgentSpec.observations`), so the
env of each agent is made with the observations it reads:

    >>> spec = parse_agent("openai:Qwen3-8B@http://127.0.0.1:8000/v1,format=axtree")
    >>> spec.label, spec.mode, spec.observations
    ('openai:Qwen3-8B@axtree', 'axtree', ('axtree', 'last_action_error'))
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uirl_agents.formats import FORMATS
from uirl_agents.loading.quantization import quantization_mode
from uirl_agents.policies.base import Policy
from uirl_agents.policies.element_expert import ELEMENT_OBSERVATIONS

logger = logging.getLogger(__name__)

# Claude writes text and several tool calls a turn: 256 tokens would cut turns short.
ANTHROPIC_MAX_TOKENS = 1024
# Options of `hf:` agents that load the language model quantized (bitsandbytes).
QUANT_OPTIONS = ("load_in_8bit", "load_in_4bit")


class AgentSpecError(ValueError):
    """An ``--agent`` value that does not follow :func:`agent_syntax`."""


@dataclass(frozen=True)
class AgentSpec:
    """A parsed ``--agent`` value.

    Attributes:
        kind: the agent type, a key of :data:`AGENTS` (``random``, ``expert``,
            ``expert-elements``, ``hf``, ``openai``, ``anthropic``, ``openai-cua``,
            ``gemini-cua``).
        target: the checkpoint path (hf; ``tiny`` builds the tiny test Qwen2.5-VL,
            ``tiny-FAMILY`` the tiny model of another family, e.g. ``tiny-llava``; write
            ``./tiny-x`` for a folder of that name) or the model name (the others).
        url: the server's base URL (openai).
        lora: a LoRA adapter path (hf).
        format: the model format (``ui-tars``, ``qwen2.5-vl``, ``axtree``, ``som``, ...:
            ``uirl_agents.formats.FORMATS``); None: picked from the model (hf: its
            config; openai: its name, else ``ui-tars``).
        max_tokens: the longest completion (model agents).
        quantization: ``"8bit"`` / ``"4bit"``: the model's language weights loaded
            quantized (hf; bitsandbytes); None: in full precision.
        label: the name in reports.
        options: vendor agent options (``display``, ``safety_checks``, ...).
        observations: what the env must add to the screenshot for the agent
            (``UIEnv(observations=...)``): its format's, or the element expert's.
        mode: what the agent sees, for the reports: ``pixels``, ``axtree``, ``som``
            (its format's :attr:`~uirl_agents.formats.ModelFormat.mode`), or
            ``elements`` (the scripted expert acting by element).
    """

    kind: str
    target: str = ""
    url: str = ""
    lora: str | None = None
    format: str | None = None
    max_tokens: int = 256
    quantization: str | None = None
    label: str = ""
    options: tuple[tuple[str, str], ...] = ()
    observations: tuple[str, ...] = ()
    mode: str = "pixels"


@dataclass(frozen=True)
class AgentContext:
    """What building a policy may need besides its spec.

    Attributes:
        oracle: sub-env index -> its privileged page state (the scripted expert).
        work_dir: where a policy may write (the tiny test models are built there).
        seed: the run's seed (the random agent).
        task_of: sub-env index -> the task of its episode (the scripted expert); None:
            SimpleDataEntry.
    """

    oracle: Callable[[int], dict[str, Any]]
    work_dir: Path
    seed: int
    task_of: Callable[[int], str] | None = None


@dataclass(frozen=True)
class AgentKind:
    """One agent type.

    Attributes:
        name: the spec's prefix (``hf`` in ``hf:PATH``).
        syntax: its spec's syntax, for help and error messages.
        parse: ``(spec text, what follows "name:" or None without a colon)`` -> the
            spec; raises :class:`AgentSpecError`.
        build: ``(spec, context)`` -> ``(policy, format name or None)``; model weights
            are loaded (or a vendor's API key read) here.
        priced: reports look the model up in the price table (API agents).
        warn_unpriced: a model missing from the price table is warned about (vendor
            models always have a price; a self-served model usually has none).
        reads_oracle: the agent reads the task's privileged state (a scripted expert),
            which some runtimes keep to themselves (OpenEnv).
    """

    name: str
    syntax: str
    parse: Callable[[str, str | None], AgentSpec]
    build: Callable[[AgentSpec, AgentContext], tuple[Policy, str | None]]
    priced: bool = False
    warn_unpriced: bool = False
    reads_oracle: bool = False


AGENTS: dict[str, AgentKind] = {}


def register_agent(kind: AgentKind) -> AgentKind:
    """Add an agent type (``ValueError``: the name is taken)."""
    if kind.name in AGENTS:
        raise ValueError(f"agent type {kind.name!r} is already registered")
    AGENTS[kind.name] = kind
    return kind


def agent_syntax() -> str:
    """Every registered agent type's syntax, ``|``-separated."""
    return " | ".join(kind.syntax for kind in AGENTS.values())


def parse_agent(text: str) -> AgentSpec:
    """Parse an ``--agent`` value.

    Raises:
        AgentSpecError: an unknown agent type, or a spec its type refuses (the message
            gives the expected syntax).
    """
    name, sep, rest = text.partition(":")
    kind = AGENTS.get(name)
    if kind is None:
        raise AgentSpecError(f"--agent {text!r}: expected {agent_syntax()}")
    return kind.parse(text, rest if sep else None)


def build_policy(
    spec: AgentSpec,
    oracle: Callable[[int], dict[str, Any]],
    work_dir: Path,
    seed: int,
    task_of: Callable[[int], str] | None = None,
) -> tuple[Policy, str | None]:
    """The policy for an agent spec (model weights are loaded here) and its format.

    Returns:
        ``(policy, format)``: the format name the model is prompted and parsed with
        (chosen from the model when the spec has none), None for scripted and vendor
        agents.
    """
    return AGENTS[spec.kind].build(spec, AgentContext(oracle, work_dir, seed, task_of))


def _fail(text: str, why: str) -> AgentSpecError:
    return AgentSpecError(f"--agent {text!r}: {why}")


# -- scripted agents ------------------------------------------------------------------


def _parse_scripted(text: str, rest: str | None) -> AgentSpec:
    if rest is not None:
        raise _fail(text, f"{text.partition(':')[0]} takes no options")
    if text == "expert-elements":
        return AgentSpec(kind=text, label=text, observations=ELEMENT_OBSERVATIONS, mode="elements")
    return AgentSpec(kind=text, label=text)


def _build_random(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.random import RandomPolicy

    return RandomPolicy(seed=ctx.seed), None


def _build_expert(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.expert import ExpertPolicy

    policy = ExpertPolicy(
        ctx.oracle,
        task=ctx.task_of or "simple_data_entry",
        by_element=spec.kind == "expert-elements",
    )
    policy.name = spec.label
    return policy, None


# -- model agents: a local checkpoint, an OpenAI-compatible server -------------------


def _parse_model(text: str, rest: str | None) -> AgentSpec:
    kind = text.partition(":")[0]
    if not rest:
        raise _fail(text, f"expected {AGENTS[kind].syntax}")
    target, *extras = rest.split(",")
    options: dict[str, Any] = {}
    quant_flags = dict.fromkeys(QUANT_OPTIONS, False)
    for extra in extras:
        key, eq, value = extra.partition("=")
        if not eq or key not in ("lora", "format", "max_tokens", *QUANT_OPTIONS):
            raise _fail(
                text,
                f"unknown option {extra!r}; expected lora=, format=, max_tokens=, "
                "load_in_8bit=1, load_in_4bit=1",
            )
        if key == "max_tokens" and not (value.isdigit() and int(value) > 0):
            raise _fail(text, "max_tokens must be a positive integer")
        if key == "format" and value not in FORMATS:
            raise _fail(text, f"unknown format {value!r}; expected one of {', '.join(FORMATS)}")
        if key in QUANT_OPTIONS:
            if kind != "hf" or value not in ("0", "1"):
                raise _fail(
                    text,
                    f"{key} takes 0 or 1 and goes with hf: agents (a served model is "
                    "quantized by its server)",
                )
            quant_flags[key] = value == "1"
            continue
        options[key] = int(value) if key == "max_tokens" else value
    try:
        options["quantization"] = quantization_mode(
            load_in_8bit=quant_flags["load_in_8bit"], load_in_4bit=quant_flags["load_in_4bit"]
        )
    except ValueError as exc:
        raise _fail(text, str(exc)) from None
    url = ""
    if kind == "openai":
        target, at, url = target.partition("@")
        if not at or not re.match(r"https?://", url):
            raise _fail(text, "expected openai:MODEL@http://HOST:PORT/v1")
        if "lora" in options:
            raise _fail(text, "serve the adapter with the server, not lora=")
    label = f"{kind}:{Path(target).name or target}" + (
        f"+{Path(options['lora']).name}" if "lora" in options else ""
    )
    if options["quantization"]:  # a quantized model is another agent in the reports
        label += f"@{options['quantization']}"
    page = FORMATS[options["format"]] if "format" in options else None
    if page is not None and page.mode != "pixels":  # so is a model shown the page as text
        label += f"@{page.mode}"
        options.update(observations=page.observations, mode=page.mode)
    return AgentSpec(kind=kind, target=target, url=url, label=label, **options)


def _build_hf(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig
    from uirl_agents.testing.tiny_model import build_tiny_model, tiny_family

    path = spec.target
    family = tiny_family(path)
    if family is not None:
        import torch

        path = str(build_tiny_model(family, ctx.work_dir / "tiny-model" / family))
        # Its matrices are too small to gain from threads, and a second thread spinning
        # beside the sessions' Chromium made a step 10-20x slower on a busy 2-core box.
        torch.set_num_threads(1)
    config = HFPolicyConfig(max_new_tokens=spec.max_tokens)
    policy = HFPolicy.from_pretrained(
        path, spec.format, config, adapter_path=spec.lora, quantization=spec.quantization
    )
    policy.name = spec.label
    return policy, policy.format.name


def _build_openai(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.formats import infer_format
    from uirl_agents.policies.openai_compat import OpenAIPolicy, OpenAIPolicyConfig

    format_name = spec.format
    if format_name is None:
        # A served model's config is out of reach; its name is all there is.
        format_name = infer_format(spec.target)
        logger.info("format for %s: %s (from its name)", spec.target, format_name)
    config = OpenAIPolicyConfig(
        base_url=spec.url, model=spec.target, format=format_name, max_tokens=spec.max_tokens
    )
    return OpenAIPolicy(config), format_name


# -- vendor computer-use agents (their own protocols; API keys from the environment) --


def _check_vendor_option(kind: str, key: str, value: str) -> str | None:
    """Why ``key=value`` is refused for vendor agent ``kind`` (None: it is fine)."""
    if key == "display" and not re.fullmatch(r"[1-9]\d{1,4}x[1-9]\d{1,4}", value):
        return "display must be WIDTHxHEIGHT, e.g. 1024x640"
    if key == "max_tokens" and not (value.isdigit() and int(value) > 0):
        return "max_tokens must be a positive integer"
    if key == "prompt_caching" and value not in ("0", "1"):
        return "prompt_caching takes 0 or 1"
    if key == "safety_checks" and value not in ("acknowledge", "refuse"):
        return "safety_checks is acknowledge or refuse"
    if key == "tool" and value not in _vendor_tools(kind):
        return f"tool is one of {', '.join(_vendor_tools(kind))}"
    return None


def _vendor_tools(kind: str) -> tuple[str, ...]:
    """The computer tools a vendor agent can be given with ``tool=``."""
    if kind == "anthropic":
        from uirl_agents.policies.anthropic import TOOL_BETAS

        return tuple(TOOL_BETAS)
    from uirl_agents.policies.openai_cua import TOOLS

    return TOOLS


def _vendor_parser(allowed: tuple[str, ...]) -> Callable[[str, str | None], AgentSpec]:
    """The parser of a vendor agent's spec, ``KIND:MODEL[,key=value...]``, that takes
    the options ``allowed``."""

    def parse(text: str, rest: str | None) -> AgentSpec:
        kind = text.partition(":")[0]
        model, *extras = (rest or "").split(",")
        options: dict[str, str] = {}
        max_tokens = ANTHROPIC_MAX_TOKENS if kind == "anthropic" else AgentSpec.max_tokens
        for extra in extras:
            key, eq, value = extra.partition("=")
            if not eq or key not in allowed:
                expected = ", ".join(f"{k}=" for k in allowed)
                raise _fail(text, f"unknown option {extra!r}; expected {expected}")
            why = _check_vendor_option(kind, key, value)
            if why is not None:
                raise _fail(text, why)
            if key == "max_tokens":
                max_tokens = int(value)
            else:
                options[key] = value
        if not model:
            raise _fail(text, f"expected {kind}:MODEL")
        return AgentSpec(
            kind=kind,
            target=model,
            label=f"{kind}:{model}",
            max_tokens=max_tokens,
            options=tuple(sorted(options.items())),
        )

    return parse


def _display(options: dict[str, str]) -> tuple[int, int] | None:
    if "display" not in options:
        return None
    width, height = options["display"].split("x")
    return int(width), int(height)


def _build_anthropic(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.anthropic import AnthropicPolicy, AnthropicPolicyConfig

    options = dict(spec.options)
    config = AnthropicPolicyConfig(
        model=spec.target,
        tool_version=options.get("tool"),
        display=_display(options),
        max_tokens=spec.max_tokens,
        prompt_caching=options.get("prompt_caching") == "1",
    )
    return AnthropicPolicy(config), None


def _build_openai_cua(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.openai_cua import OpenAICUAPolicy, OpenAICUAPolicyConfig

    options = dict(spec.options)
    config = OpenAICUAPolicyConfig(
        model=spec.target,
        tool=options.get("tool"),
        display=_display(options),
        safety_checks=options.get("safety_checks", "acknowledge"),
    )
    return OpenAICUAPolicy(config), None


def _build_gemini_cua(spec: AgentSpec, ctx: AgentContext) -> tuple[Policy, str | None]:
    from uirl_agents.policies.gemini_cua import GeminiCUAPolicy, GeminiCUAPolicyConfig

    config = GeminiCUAPolicyConfig(
        model=spec.target, safety_checks=dict(spec.options).get("safety_checks", "acknowledge")
    )
    return GeminiCUAPolicy(config), None


for _kind in (
    AgentKind("random", "random", _parse_scripted, _build_random),
    AgentKind("expert", "expert", _parse_scripted, _build_expert, reads_oracle=True),
    AgentKind(
        "expert-elements", "expert-elements", _parse_scripted, _build_expert, reads_oracle=True
    ),
    AgentKind(
        "hf",
        "hf:PATH[,lora=PATH][,format=NAME][,max_tokens=N][,load_in_8bit=1|load_in_4bit=1]",
        _parse_model,
        _build_hf,
    ),
    AgentKind(
        "openai",
        "openai:MODEL@URL[,format=NAME (axtree, som: the page as text)][,max_tokens=N]",
        _parse_model,
        _build_openai,
        priced=True,
    ),
    AgentKind(
        "anthropic",
        "anthropic:MODEL[,tool=VERSION][,display=WxH][,max_tokens=N][,prompt_caching=1]",
        _vendor_parser(("tool", "display", "max_tokens", "prompt_caching")),
        _build_anthropic,
        priced=True,
        warn_unpriced=True,
    ),
    AgentKind(
        "openai-cua",
        "openai-cua:MODEL[,tool=computer|computer_use_preview][,display=WxH]"
        "[,safety_checks=acknowledge|refuse]",
        _vendor_parser(("tool", "display", "safety_checks")),
        _build_openai_cua,
        priced=True,
        warn_unpriced=True,
    ),
    AgentKind(
        "gemini-cua",
        # Its coordinates are a 1000x1000 grid: no display.
        "gemini-cua:MODEL[,safety_checks=acknowledge|refuse]",
        _vendor_parser(("safety_checks",)),
        _build_gemini_cua,
        priced=True,
        warn_unpriced=True,
    ),
):
    register_agent(_kind)

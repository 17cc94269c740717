"""A cold start for tool calling: a few SFT steps on rendered tool calls.

A random (tiny) model never writes a parseable tool call, so TRL's multi-turn loop
would run no tool and GRPO would have nothing to compare. :func:`teach_tool_calls`
fits the model, on the environment's own prompts (tool schemas, first screenshot,
instruction) and on later turns (after a tool response with a screenshot), to answer
with one of ``calls``: the same idea as the learning demo's SFT cold start, for
TRL's chat layout. Real checkpoints that already call tools skip it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch

logger = logging.getLogger(__name__)


def tools_of(environment: object) -> list[Any]:
    """The tool methods TRL finds on ``environment`` (public, not reset/get_reward)."""
    return [
        getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def _tool_call(call: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}


def teach_tool_calls(
    model: torch.nn.Module,
    processor: Any,
    environment: Any,
    calls: Sequence[Mapping[str, Any]],
    *,
    steps: int = 200,
    learning_rate: float = 1e-2,
    episodes: int = 8,
    depth: int = 2,
    seed: int = 0,
) -> list[float]:
    """Fit ``model`` to answer each turn with one of ``calls`` (SFT on the answer only).

    The conversations are real: first turns are the environment's resets (seeds
    ``0..episodes-1``: screenshots and instructions vary, so the model learns the call,
    not one prompt), later turns follow calls run through the environment's own tools.

    Args:
        model: the model, trained in place (all its trainable parameters).
        processor: its processor, with a tool-calling chat template.
        environment: an instance of the environment class (reset and stepped here).
        calls: ``{"name": ..., "arguments": {...}}`` answers, drawn uniformly per step.
        steps: optimizer steps (one conversation each).
        learning_rate: AdamW's.
        episodes: how many task instances the conversations come from.
        depth: how many calls deep the later turns go (2: the model learns to call in
            turns 1 to 3); the environment's ``max_steps`` must allow ``depth`` calls.
        seed: seeds the draws.

    Returns:
        The loss of each step.
    """
    tools = tools_of(environment)
    generator = torch.Generator().manual_seed(seed)

    def draw(items: Sequence[Any]) -> Any:
        return items[int(torch.randint(len(items), (1,), generator=generator))]

    # conversations[k]: the turns after k earlier calls, one per episode. The first turn
    # is drawn half of the time (the model must start calling), later ones share the rest.
    conversations: list[list[list[dict[str, Any]]]] = [[] for _ in range(depth + 1)]
    for episode in range(episodes):
        conversation = [{"role": "user", "content": environment.reset(seed=episode)}]
        conversations[0].append(list(conversation))
        for k in range(1, depth + 1):
            earlier = draw(calls)
            response = getattr(environment, earlier["name"])(**earlier["arguments"])
            conversation += [
                {"role": "assistant", "content": "", "tool_calls": [_tool_call(earlier)]},
                {"role": "tool", "name": earlier["name"], "content": response},
            ]
            conversations[k].append(list(conversation))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], learning_rate)
    model.train()
    losses = []
    for _ in range(steps):
        answer = {"role": "assistant", "content": "", "tool_calls": [_tool_call(draw(calls))]}
        later = depth > 0 and bool(torch.rand((), generator=generator) < 0.5)
        turns = (
            conversations[int(torch.randint(1, depth + 1, (1,), generator=generator))]
            if later
            else conversations[0]
        )
        losses.append(_sft_step(model, processor, tools, draw(turns), answer, optimizer))
    model.eval()
    logger.info("tool-call cold start: loss %.3f -> %.3f", losses[0], losses[-1])
    return losses


def _sft_step(
    model: torch.nn.Module,
    processor: Any,
    tools: list[Any],
    prefix: list[dict[str, Any]],
    answer: dict[str, Any],
    optimizer: torch.optim.Optimizer,
) -> float:
    render = {"tools": tools, "tokenize": True, "return_dict": True, "return_tensors": "pt"}
    prompt = processor.apply_chat_template(prefix, add_generation_prompt=True, **render)
    full = processor.apply_chat_template([*prefix, answer], **render)
    # The answer's tokens (up to its end-of-turn); the template's trailing newline is not.
    start = prompt["input_ids"].shape[1]
    labels = full["input_ids"].clone()
    labels[:, :start] = -100
    end_of_turn = processor.tokenizer.eos_token_id
    ends = (full["input_ids"][0, start:] == end_of_turn).nonzero()
    if len(ends):
        labels[:, start + int(ends[0]) + 1 :] = -100
    loss = model(**full, labels=labels).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return float(loss)

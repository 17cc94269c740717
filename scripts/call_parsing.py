"""How often a model's actions parse through uirl's trainers and through TRL's tool calls.

    python scripts/call_parsing.py --model runs/learning_demo/cold_start/tiny_model \
        --adapter runs/learning_demo/cold_start_adapter --format ui-tars

The same model, the same task instances (SimpleDataEntry, the learning demo's: task seed
0, row 2), sampled at temperature 1 with the vision tokens blocked, two ways:

- **uirl** (``train_grpo.py``, ``train_rs.py``): the model's own format (``--format``:
  UI-TARS-1.5's ``Thought: ... Action: click(start_box='(x,y)')``), parsed by
  :mod:`uirl_agents.formats`; every step of ``--episodes`` episodes on real sessions.
- **TRL** (``GRPOTrainer(environment_factory=...)``): the tool-calling prompt
  (:func:`~uirl_agents.integrations.tool_templates.use_tool_chat_template`, the tool
  schemas, the first screenshot), parsed by TRL's own ``parse_response`` (the
  ``<tool_call>`` JSON parser); the first turn of ``--episodes`` episodes (later turns
  follow only from a call that parsed). A turn counts when it holds a call of one of the
  tools, with arguments.

Prints one line per path: calls that parse, of those sampled. Results:
docs/integrations.md, "Which path for which model".
"""

from __future__ import annotations

import argparse
import os

import torch
from trl.chat_template_utils import parse_response

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes
from uirl_agents.formats import get_format
from uirl_agents.integrations.tool_templates import use_tool_chat_template
from uirl_agents.integrations.tool_warmup import tools_of
from uirl_agents.integrations.trl import close_environments, make_environment
from uirl_agents.loading.pretrained import load_model_and_processor
from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig, format_config_from_processor
from uirl_gym.vector import SessionVectorEnv

OPTIONS = {"rows": [2]}
TASK_SEED = 0


def uirl_path(model, processor, fmt: str, episodes: int, max_steps: int) -> tuple[int, int]:
    """(steps whose output parsed, steps) of ``episodes`` episodes through HFPolicy."""
    policy = HFPolicy(
        model,
        processor,
        get_format(fmt, format_config_from_processor(processor)),
        HFPolicyConfig(temperature=1.0, max_new_tokens=40),
    )
    envs = SessionVectorEnv(4, task="simple_data_entry")
    try:
        specs = [EpisodeSpec(seed=TASK_SEED, options=OPTIONS) for _ in range(episodes)]
        done = collect_episodes(policy, envs, specs, max_steps=max_steps, progress=False)
    finally:
        envs.close()
    steps = [s for e in done for s in e.steps]
    unparsed = sum(bool(s.error) and s.error.startswith("ParseError") for s in steps)
    return len(steps) - unparsed, len(steps)


def trl_path(model, processor, episodes: int, max_steps: int) -> tuple[int, int]:
    """(first turns with a tool call TRL runs, first turns) through the TRL class."""
    processor = use_tool_chat_template(processor)
    env_class = make_environment(
        "uirl/SimpleDataEntry-v0",
        max_steps=max_steps,
        processor=processor,
        max_completion_length=4096,
    )
    env = env_class()
    tools = tools_of(env)  # the methods TRL exposes as tools
    names = {t.__name__ for t in tools}
    kwargs = env_class.generation_kwargs()
    parsed = 0
    try:
        first = env.reset(seed=TASK_SEED, options=OPTIONS)
        inputs = processor.apply_chat_template(
            [{"role": "user", "content": first}],
            tools=tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            return_tensors="pt",
        )
        for _ in range(episodes):
            out = model.generate(
                **inputs, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, **kwargs
            )
            prompt = inputs["input_ids"][0].tolist()
            ids = out[0, len(prompt) :].tolist()
            message = parse_response(processor.tokenizer, ids, prefix=prompt, tools=tools)
            calls = message.get("tool_calls") or []
            parsed += bool(calls) and all(c.get("function", c).get("name") in names for c in calls)
    finally:
        close_environments()
    return parsed, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a checkpoint folder")
    parser.add_argument("--adapter", default=None, help="a LoRA adapter on it")
    parser.add_argument("--format", default="ui-tars", help="the model's own format")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-steps", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(args.seed)
    model, processor = load_model_and_processor(args.model, adapter_path=args.adapter)
    ok, total = uirl_path(model, processor, args.format, args.episodes, args.max_steps)
    print(f"uirl ({args.format} format): {ok}/{total} steps parse ({ok / max(total, 1):.0%})")
    torch.manual_seed(args.seed)
    ok, total = trl_path(model, processor, args.episodes, args.max_steps)
    print(f"TRL (<tool_call> JSON): {ok}/{total} first turns parse ({ok / max(total, 1):.0%})")


if __name__ == "__main__":
    main()

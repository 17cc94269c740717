"""A model's click without coordinates, from its text to a real session (Qwen2.5-VL)."""

from __future__ import annotations

import json

import gymnasium as gym

from uirl_agents.formats import get_format
from uirl_agents.policies.context import EpisodeContexts
from uirl_gym.runtimes.local import LocalRuntime

ENV_ID = "uirl/SimpleDataEntry-v0"


def _call(args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': args})}\n</tool_call>"


def test_qwen_click_without_coordinate_lands_where_the_pointer_is(runtime: LocalRuntime) -> None:
    """mouse_move, then a bare left_click (the cookbook's schema allows it), then type."""
    qwen = get_format("qwen2.5-vl")  # 1280x800 seen as 1288x812: coordinates are mapped
    contexts = EpisodeContexts(qwen)
    env = gym.make(ENV_ID, runtime=runtime)
    try:
        obs, _ = env.reset(seed=0)
        contexts.begin_episode(0)
        x, y, w, h = env.unwrapped.oracle()["inputs"]["first_name"]["box"]
        ix, iy = qwen.geometry().to_image(x + w // 2, y + h // 2)
        replies = [
            _call({"action": "mouse_move", "coordinate": [ix, iy]}),
            _call({"action": "left_click"}),
            _call({"action": "type", "text": "Zed"}),
        ]
        for reply in replies:
            prompt = contexts.observe(0, obs)
            parsed = qwen.parse(reply, prompt.geometry)
            assert parsed.error is None, parsed
            obs, _, _, _, info = env.step(parsed.action)
            assert "invalid_action" not in info, info
            contexts.record(0, reply)
        assert env.unwrapped.oracle()["inputs"]["first_name"]["value"] == "Zed"
    finally:
        env.close()

"""uirl tasks inside TRL's GRPOTrainer (uirl_agents/integrations/trl.py), on real sessions.

Tiny Qwen3-VL (its own tool-calling template) and tiny Qwen2.5-VL (uirl's template),
taught the tool-call syntax by the cold start, train 2 GRPO steps with the factory: every
screenshot the environments returned reaches the vision tower in the training forward
pass, the logged reward is the environments' episode reward, the weights change, and no
browser is left once the trainer is gone. Also: the tools' own behaviour, the token
budget (counted as TRL counts, refused when it cannot fit, an episode ended before a
result could be dropped), the shipped tiny config training every screenshot it returns,
vision tokens blocked in generation, session failures, the tool template's layout, a
dict factory mixing tasks, an OpenEnv URL behind the same class, 2 processes with equal
weights, and scripts/train_trl.py from the command line.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from processes import browser_pids, running, session_processes

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from uirl_agents.integrations.tool_templates import use_tool_chat_template  # noqa: E402
from uirl_agents.integrations.tool_warmup import teach_tool_calls  # noqa: E402
from uirl_agents.integrations.trl import (  # noqa: E402
    UirlEnvironment,
    close_environments,
    log_episode_metrics,
    make_environment,
    seed_dataset,
)
from uirl_agents.loading.pretrained import load_model_and_processor  # noqa: E402
from uirl_agents.testing.tiny_model import build_tiny_model  # noqa: E402
from uirl_gym.runtimes.local import descendant_pids  # noqa: E402

pytestmark = [pytest.mark.train, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
# Two scrolls that differ in one word: "down" runs, "sideways" is refused with the env's
# invalid-action penalty. The taught model picks either at temperature 1, so a group's
# rollouts earn different rewards (a GRPO update then has something to move).
CALLS = [
    {"name": "scroll", "arguments": {"x": 40, "y": 30, "direction": direction}}
    for direction in ("down", "sideways")
]
# Cold-start steps that make each tiny model write parseable calls most of the time.
COLD_START_STEPS = {"qwen3-vl": 300, "qwen2.5-vl": 300}
ENV_OPTIONS = {"max_steps": 3, "screenshot_size": (320, 200), "task_options": {"num_rows": 1}}


def session_pids(env: UirlEnvironment) -> list[int]:
    """The pids of an instance's session server and its browser."""
    uienv = env._holder["backend"].env  # the local runtime's UIEnv
    pid = uienv._runtime.pid(uienv.session)
    return [pid, *descendant_pids(pid)]


@pytest.fixture(scope="module", params=["qwen3-vl", "qwen2.5-vl"])
def taught_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A tiny model of the family, with a tool-calling template, taught the call syntax."""
    torch.set_num_threads(1)
    model_dir = build_tiny_model(request.param, tmp_path_factory.mktemp(request.param))
    model, processor = load_model_and_processor(model_dir, device="cpu")
    use_tool_chat_template(processor)
    probe = make_environment(**ENV_OPTIONS)()
    losses = teach_tool_calls(model, processor, probe, CALLS, steps=COLD_START_STEPS[request.param])
    probe._close()
    assert losses[-1] < losses[0] / 10
    return request.param, model, processor


def test_grpo_trainer_trains_on_every_screenshot_with_the_envs_reward(taught_model) -> None:
    family, model, processor = taught_model
    env_class = make_environment("uirl/SimpleDataEntry-v0", **ENV_OPTIONS)
    # What the environments did, read when TRL scores each batch (after its tool loop).
    episodes: list[dict[str, Any]] = []
    pids: set[int] = set()

    def record(environments: list[UirlEnvironment], **_: Any) -> list[None]:
        episodes.append(
            {
                "images": sum(e.images_returned for e in environments),
                "calls": sum(e.steps for e in environments),
                "rewards": [e.get_reward() for e in environments],
            }
        )
        for env in environments:
            pids.update(session_pids(env))
        return [None] * len(environments)

    # The vision tower's inputs during the training forward pass (generation runs
    # without gradients): one grid_thw row per image.
    trained_images: list[int] = []

    def count_images(module: Any, args: tuple, kwargs: dict) -> None:
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        if torch.is_grad_enabled() and grid is not None:
            trained_images.append(int(grid.shape[0]))

    hook = model.model.visual.register_forward_pre_hook(count_images, with_kwargs=True)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = trl.GRPOConfig(
        output_dir=str(ROOT / "runs" / "unused"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=512,
        max_steps=2,
        learning_rate=1e-3,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
    )
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=processor,
        args=args,
        train_dataset=seed_dataset(8, options={"num_rows": 1}),
        reward_funcs=[log_episode_metrics, record],
        environment_factory=env_class,
    )
    try:
        trainer.train()
    finally:
        hook.remove()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(episodes) == len(logs) == 2

    # Every screenshot the envs returned (the reset's, one per tool call) is a row the
    # vision tower saw with gradients on; tool calls did run.
    calls = sum(e["calls"] for e in episodes)
    images = sum(e["images"] for e in episodes)
    assert calls > 0, f"{family}: the taught model made no tool call"
    # 8 rollouts: one reset screenshot each, then one per call (also calls after the end)
    assert images >= 8 + calls
    assert sum(trained_images) == images, (trained_images, episodes)
    # TRL also counts the calls made after an episode ended (they run nothing).
    assert all(
        h["tools/call_frequency"] >= e["calls"] / 4 for h, e in zip(logs, episodes, strict=True)
    )

    # TRL's logged reward is the environments' own episode reward.
    name = env_class.__name__
    for h, e in zip(logs, episodes, strict=True):
        assert h[f"rewards/{name}/mean"] == pytest.approx(np.mean(e["rewards"]), abs=1e-6)
        assert h["uirl/steps"] == pytest.approx(e["calls"] / 4)
    assert min(min(e["rewards"]) for e in episodes) < 0  # the refused key's penalty counted

    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert len(changed) > len(before) / 2, f"{len(changed)} of {len(before)} tensors changed"

    # Deleting the trainer closes every session: no server or browser left.
    assert pids and any(running(p) for p in pids)
    del trainer
    gc.collect()
    assert not [p for p in pids if running(p)]


@pytest.fixture(scope="module")
def environment() -> Iterator[UirlEnvironment]:
    env = make_environment("uirl/SimpleDataEntry-v0", **ENV_OPTIONS)()
    yield env
    env._close()


def test_tools_map_the_frame_report_errors_and_end_the_episode(environment) -> None:
    env = environment
    first = env.reset(seed=3)
    assert [p["type"] for p in first] == ["image", "text"]
    assert first[0]["image"].size == (320, 200)
    assert "320x200" in first[1]["text"] and "Copy" in first[1]["text"]
    # Screenshot pixel (x, y) is the centre of the screen's 4x4 block.
    assert env._screen_point(0, 0) == (2, 2)
    assert env._screen_point(319, 199) == (1278, 798)
    assert env._screen_point("10", 5.0) == (42, 22)

    out = env.click(x=400, y=10)  # off the screenshot: an error, the unchanged screen
    assert out[1]["text"].startswith("Error: x: 400 is outside the 320x200 screenshot")
    # The same mistake costs what it costs through gym and OpenEnv: the task's charge.
    assert env.get_reward() == pytest.approx(-0.1)
    out = env.scroll(x=10, y=10, direction="sideways")
    assert "Error" in out[1]["text"] and "direction" in out[1]["text"]
    out = env.click(x=40, y=30)  # the third call: the limit
    assert out[1]["text"].startswith("Clicked at (40, 30).")
    assert "limit of 3 actions" in out[1]["text"]
    out = env.type(text="late")  # after the end: text only, nothing runs
    assert out == [
        {
            "type": "text",
            "text": "The episode has ended (the limit of 3 actions); no action runs now. "
            "Stop calling tools.",
        }
    ]
    assert env.steps == 3 and env.images_returned == 4  # the reset's and each step's
    assert env.get_reward() == pytest.approx(-0.2)  # the two refused calls

    env.reset(seed=3)
    assert env.get_reward() == 0.0 and env.steps == 0
    # A wrong argument name (TRL calls tool(**arguments)) is a message, not a TypeError,
    # and costs the invalid-action charge too.
    out = env.click(x=1, z=2)
    assert out[0]["type"] == "image" and out[1]["text"].startswith("Error: click: missing")
    assert env.get_reward() == pytest.approx(-0.1)
    out = env.finish()
    assert out[0]["type"] == "image" and out[1]["text"] == "Finished."
    assert env.ended == "finish" and env.images_returned == 3 and env.steps == 2


def test_a_failed_session_ends_the_episode_without_a_reward(environment) -> None:
    # The session server dies mid-episode: the env ends the episode (truncated) and the
    # rollout gets no reward (None: TRL leaves it out of its group's baseline).
    env = environment
    env.reset(seed=4)
    env.click(x=1, y=1)
    os.kill(session_pids(env)[0], signal.SIGKILL)
    out = env.click(x=2, y=2)
    assert env.session_error and env.ended.startswith("the session failed")
    assert "The episode has ended (the session failed" in out[1]["text"]
    assert env.get_reward() is None
    metrics: dict[str, float] = {}
    log_episode_metrics([env], lambda k, v: metrics.__setitem__(k, v))
    assert metrics["uirl/session_failures"] == 1.0
    env.reset(seed=4)  # a new session; the next episode scores again
    assert env.get_reward() == 0.0 and env.session_error is None


def test_tool_schemas_state_the_frame() -> None:
    from transformers.utils import get_json_schema

    env = make_environment("form_fill", screenshot_size=(640, 400))()
    env._close()  # its session starts with it; only the schemas are needed here
    tools = {
        name: get_json_schema(getattr(env, name))["function"]
        for name in ("click", "double_click", "right_click", "type", "keys", "scroll", "drag")
    }
    assert "639 (right edge)" in tools["click"]["parameters"]["properties"]["x"]["description"]
    assert "399 (bottom edge)" in tools["scroll"]["parameters"]["properties"]["y"]["description"]
    assert tools["drag"]["parameters"]["required"] == ["x", "y", "end_x", "end_y"]
    assert tools["type"]["parameters"]["properties"]["text"]["type"] == "string"


@pytest.fixture(scope="module")
def qwen25vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model("qwen2.5-vl", tmp_path_factory.mktemp("qwen25vl"))


@pytest.fixture(scope="module")
def qwen25vl_processor(qwen25vl_dir: Path) -> Any:
    from uirl_agents.loading.pretrained import load_processor

    return use_tool_chat_template(load_processor(qwen25vl_dir))


def test_the_budget_counts_as_trl_does_and_refuses_steps_that_do_not_fit(
    qwen25vl_processor: Any,
) -> None:
    from PIL import Image

    from uirl_agents.integrations.trl import TokenBudget

    # The frame is the processor's: the tiny Qwen2.5-VL passes 140x84 on (15 image
    # tokens); 320x200 would reach the model resized, and the tools would name a frame
    # it never saw.
    env_class = make_environment(
        processor=qwen25vl_processor, max_completion_length=512, max_steps=3, turn_tokens=64
    )
    budget = env_class.config.budget
    assert env_class.config.screenshot_size == (140, 84)
    assert budget.screenshot_tokens == 15 + 2  # image pads and the vision markers
    # A result's count is the suffix TRL appends for it: its template, image and text.
    content = [
        {"type": "image", "image": Image.new("RGB", (140, 84))},
        {"type": "text", "text": "Clicked at (1, 2)."},
    ]
    rendered = qwen25vl_processor.apply_chat_template(
        [{"role": "tool", "name": "click", "content": content}], tokenize=False
    )
    assert "<tool_response>" in rendered
    assert budget.result_tokens(content) == TokenBudget.from_processor(
        qwen25vl_processor, (140, 84), 512
    ).result_tokens(content)
    assert budget.tokens_for(3) <= 512 < budget.tokens_for(budget.max_steps() + 1)

    fits = budget.max_steps()
    with pytest.raises(ValueError, match=rf"at most {fits} fit\. Set max_steps <= {fits}") as err:
        make_environment(
            processor=qwen25vl_processor, max_completion_length=512, max_steps=fits + 1,
            turn_tokens=64,
        )  # fmt: skip
    assert f"{budget.screenshot_tokens} for the 140x84 screenshot" in str(err.value)
    assert (
        make_environment(
            processor=qwen25vl_processor, max_completion_length=512, max_steps=fits, turn_tokens=64
        ).config.budget.tokens_for(fits)
        <= 512
    )
    with pytest.raises(ValueError, match="not even one fits"):
        make_environment(processor=qwen25vl_processor, max_completion_length=60, max_steps=1)
    with pytest.raises(ValueError, match="give processor= too"):
        make_environment(max_completion_length=512)


def test_an_episode_ends_before_a_result_would_overflow_the_budget(
    qwen25vl_processor: Any,
) -> None:
    # Room for exactly 3 planned steps; wrong argument names make long reports, which eat
    # the room: the env ends the episode itself, and no result it returned overflows.
    options = {"processor": qwen25vl_processor, "max_steps": 3, "turn_tokens": 64}
    room = make_environment(max_completion_length=512, **options).config.budget.tokens_for(3)
    env_class = make_environment(max_completion_length=room, **options)
    budget = env_class.config.budget
    env = env_class()
    try:
        env.reset(seed=1)
        long_name = "the_coordinates_of_the_first_name_field_in_the_form_" * 2
        used = 0
        results = []
        while env.ended is None:
            out = env.click(x=1, y=2, **{long_name: 3})
            results.append(out)
            used += budget.turn_tokens + budget.result_tokens(out)
            assert used == env.tokens_used <= room
        assert env.steps == 2 < env.config.max_steps
        assert env.ended == f"the budget of {room} completion tokens"
        assert results[-1][1]["text"].endswith(
            f"The episode has ended (the budget of {room} completion tokens): do not call "
            "more tools."
        )
        # Every report fits the size the budget keeps room for.
        assert all(budget.report_tokens(r[1]["text"]) <= 64 for r in results)
        assert env.images_returned == 3
        metrics: dict[str, float] = {}
        log_episode_metrics([env], lambda k, v: metrics.__setitem__(k, v))
        assert metrics["uirl/budget_ends"] == 1.0 and metrics["uirl/session_failures"] == 0
    finally:
        env._close()


def test_generation_kwargs_cap_turns_and_block_vision_tokens(
    qwen25vl_dir: Path, qwen25vl_processor: Any
) -> None:
    env_class = make_environment(
        processor=qwen25vl_processor, max_completion_length=512, max_steps=2, turn_tokens=48
    )
    vision = {qwen25vl_processor.tokenizer.convert_tokens_to_ids(t) for t in (
        "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"
    )}  # fmt: skip
    hf = env_class.generation_kwargs()
    assert hf == {"max_new_tokens": 48, "suppress_tokens": sorted(vision)}
    # vLLM's SamplingParams field names (TRL passes generation_kwargs to them as they
    # are, in colocate mode, and into the request body of its server's completions).
    vllm = env_class.generation_kwargs(use_vllm=True)
    assert vllm == {"max_tokens": 48, "logit_bias": dict.fromkeys(sorted(vision), -100.0)}
    assert json.loads(json.dumps(vllm))["logit_bias"] == {str(i): -100.0 for i in sorted(vision)}
    with pytest.raises(ValueError, match="token budget"):
        make_environment(max_steps=2).generation_kwargs()

    # For real, through GRPOTrainer's HF generation config: a model that prefers the
    # vision tokens by far (+30 on their logits) never generates one.
    model, _ = load_model_and_processor(qwen25vl_dir, device="cpu")
    index = torch.tensor(sorted(vision))
    model.lm_head.register_forward_hook(
        lambda _m, _a, logits: logits.index_add(
            -1, index, torch.full_like(logits[..., index], 30.0)
        )
    )
    args = trl.GRPOConfig(
        output_dir=str(ROOT / "runs" / "unused"), per_device_train_batch_size=2,
        num_generations=2, max_completion_length=512, report_to="none", use_cpu=True,
        bf16=False, generation_kwargs=hf,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=qwen25vl_processor,
        args=args,
        train_dataset=seed_dataset(2),
        reward_funcs=[log_episode_metrics],
        environment_factory=env_class,
    )
    env = trainer._environment_pool[None][0]
    prompt = qwen25vl_processor.apply_chat_template(
        [{"role": "user", "content": env.reset(seed=0)}],
        add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt",
    )  # fmt: skip
    torch.manual_seed(0)
    out = model.generate(**prompt, generation_config=trainer.generation_config)
    generated = out[0, prompt["input_ids"].shape[1] :].tolist()
    assert len(generated) == 48 and not vision.intersection(generated)
    del trainer
    close_environments()


class _ScriptedTurns:
    """Forces a model's turns through its logits (hooks): every turn is exactly
    ``length`` tokens, ended by the end-of-turn token: a tool call, or, once the last
    tool result says that the episode has ended, a closing text."""

    def __init__(self, model: Any, tokenizer: Any, call: dict[str, Any], length: int) -> None:
        self.tokenizer = tokenizer
        user = [{"role": "user", "content": "Go."}]
        prompt = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
        answer = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": call}],
        }
        full = tokenizer.apply_chat_template([*user, answer], tokenize=False)
        end = tokenizer.eos_token
        turn = full[len(prompt) : full.index(end, len(prompt))]
        self.call = self._padded(turn, length)
        self.closing = self._padded("Done.", length)
        self.turns: list[list[int]] = []
        self.position = 0
        model.register_forward_pre_hook(self._start, with_kwargs=True)
        model.lm_head.register_forward_hook(self._force)

    def _padded(self, text: str, length: int) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        filler = self.tokenizer(" x", add_special_tokens=False)["input_ids"][:1]
        return filler * (length - len(ids) - 1) + ids + [self.tokenizer.eos_token_id]

    def _start(self, _module: Any, _args: tuple, kwargs: dict) -> None:
        ids = kwargs["input_ids"]
        if ids.shape[1] == 1:  # a decoding step
            self.position += 1
            return
        self.position = 0
        texts = self.tokenizer.batch_decode(ids)
        ended = ["The episode has ended" in t.rsplit("<tool_response>", 1)[-1] for t in texts]
        self.turns = [self.closing if e else self.call for e in ended]

    def _force(self, _module: Any, _args: tuple, logits: torch.Tensor) -> torch.Tensor | None:
        if logits.shape[1] != 1 or torch.is_grad_enabled():
            return None  # not generation
        forced = torch.full_like(logits, -1e4)
        for row, turn in enumerate(self.turns):
            forced[row, 0, turn[min(self.position, len(turn) - 1)]] = 0.0
        return forced


def test_the_budget_keeps_room_for_the_closing_turn(
    qwen25vl_dir: Path, qwen25vl_processor: Any
) -> None:
    # Two steps of full-length turns, the episode ended at max_steps, then the closing
    # turn TRL generates after the last result: at the budget's own length it fits, so
    # with mask_truncated_completions no rollout is masked (cut to fit, it ended without
    # an end-of-turn token and TRL masked the whole rollout).
    options = {"processor": qwen25vl_processor, "max_steps": 2, "turn_tokens": 96,
               "task_options": {"num_rows": 1}}  # fmt: skip
    room = make_environment(max_completion_length=4096, **options).config.budget.tokens_for(2)
    env_class = make_environment(max_completion_length=room, **options)
    model, _ = load_model_and_processor(qwen25vl_dir, device="cpu")
    call = {"name": "scroll", "arguments": {"x": 40, "y": 30, "direction": "down"}}
    _ScriptedTurns(model, qwen25vl_processor.tokenizer, call, length=96)
    ended: list[str | None] = []

    def record(environments: list[UirlEnvironment], **_: Any) -> list[float]:
        ended.extend(e.ended for e in environments)
        return [0.0] * len(environments)

    args = trl.GRPOConfig(
        output_dir=str(ROOT / "runs" / "unused"), per_device_train_batch_size=2,
        num_generations=2, max_completion_length=room, max_steps=1, report_to="none",
        use_cpu=True, bf16=False, logging_steps=1, save_strategy="no",
        mask_truncated_completions=True, generation_kwargs=env_class.generation_kwargs(),
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=model,
        processing_class=qwen25vl_processor,
        args=args,
        train_dataset=seed_dataset(2, options={"num_rows": 1}),
        reward_funcs=[record],
        environment_factory=env_class,
    )
    try:
        trainer.train()
        logs = trainer.state.log_history
    finally:
        del trainer
        close_environments()
    assert ended == ["the limit of 2 actions"] * 2  # both rollouts took both steps
    (logged,) = [h for h in logs if "completions/clipped_ratio" in h]
    assert logged["completions/clipped_ratio"] == 0.0


def test_make_environment_refuses_bad_options() -> None:
    with pytest.raises(ValueError, match="unknown option"):
        make_environment(max_step=3)
    with pytest.raises(ValueError, match="unknown task 'form_fil'.*Did you mean 'form_fill'"):
        make_environment("form_fil")
    with pytest.raises(ValueError, match="screenshot_size"):
        make_environment(screenshot_size=(2000, 10))
    with pytest.raises(ValueError, match="one of runtime, base_url, openenv_url"):
        make_environment(base_url="http://127.0.0.1:1", openenv_url="http://127.0.0.1:2")


def test_a_dict_factory_mixes_tasks_by_the_environment_column() -> None:
    classes = make_environment(["uirl/FormFill-v0", "settings_nav"], max_steps=2)
    assert set(classes) == {"uirl/FormFill-v0", "uirl/SettingsNav-v0"}
    rows = seed_dataset(4, tasks=list(classes))
    assert rows["environment"] == ["uirl/FormFill-v0", "uirl/SettingsNav-v0"] * 2
    env = classes[rows[1]["environment"]]()
    try:
        row = {k: v for k, v in rows[1].items() if k != "environment"}
        first = env.reset(**row)
        assert env.last_info["task"] == "settings_nav" and env.last_info["task_seed"] >= 0
        assert first[0]["image"].size == (644, 392)  # the default: Qwen2.5-VL keeps it
    finally:
        assert close_environments() >= 1


@pytest.fixture(scope="module")
def openenv_url() -> Iterator[str]:
    pytest.importorskip("openenv")
    import uvicorn

    from uirl_gym.openenv import make_app

    server = uvicorn.Server(
        uvicorn.Config(make_app(), host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = 60.0
    import time

    start = time.monotonic()
    while not server.started:
        assert time.monotonic() - start < deadline, "the OpenEnv server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


def test_the_same_class_plays_through_an_openenv_server(openenv_url: str) -> None:
    env = make_environment("uirl/SettingsNav-v0", openenv_url=openenv_url, max_steps=2)()
    local = make_environment("uirl/SettingsNav-v0", max_steps=2)()
    try:
        first = env.reset(seed=5)
        same = local.reset(seed=5)
        # The same task instance whichever way the session is reached.
        assert first[1]["text"] == same[1]["text"]
        assert np.array_equal(np.asarray(first[0]["image"]), np.asarray(same[0]["image"]))
        out = env.keys(keys="nosuchkey")
        assert out[1]["text"].startswith("Error:") and env.get_reward() == pytest.approx(-0.1)
        # A tool argument the class refuses costs the same charge through OpenEnv too.
        out = env.click(x=9999, y=10)
        assert out[1]["text"].startswith("Error: x: 9999") and env.get_reward() == pytest.approx(
            -0.2
        )
        assert out[0]["type"] == "image" and env.ended == "the limit of 2 actions"
    finally:
        env._close()
        local._close()


def test_two_processes_train_with_their_own_sessions_to_equal_weights(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "scripts/configs/trl_tiny_cpu.yaml").read_text())
    config["tool_call_cold_start"] = {"steps": 300, "calls": CALLS}
    config["grpo"]["max_steps"] = 2
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
        str(ROOT / "tests/trl_ranks.py"), str(tmp_path / "config.yaml"), str(tmp_path / "run"),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((tmp_path / "run" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["world_size"] == ranks[1]["world_size"] == 2
    # Each process played its own sessions...
    assert ranks[0]["sessions"] and not set(ranks[0]["sessions"]) & set(ranks[1]["sessions"])
    # ...and the ranks end with the same weights, which training changed.
    weights = [torch.load(tmp_path / "run" / f"rank{r}.pt") for r in (0, 1)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert ranks[0]["changed"] > 0
    # TRL gathers the rewards of both processes before logging: the same on each rank.
    rewards = [[h["reward"] for h in r["log_history"] if "reward" in h] for r in ranks]
    assert len(rewards[0]) == 2 and rewards[0] == rewards[1]


def test_train_trl_script_runs_and_writes_trainer_state(tmp_path: Path) -> None:
    config = yaml.safe_load((ROOT / "scripts/configs/trl_tiny_cpu.yaml").read_text())
    config["grpo"]["max_steps"] = 2
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/train_trl.py"), "--config", str(tmp_path / "config.yaml"),
         "--output-dir", str(tmp_path / "run")],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "reward" in h]
    assert len(steps) == 2 and state["global_step"] == 2
    # The tiny model gets most calls wrong after its short cold start; some run.
    assert sum(h["tools/call_frequency"] for h in steps) > 0
    assert sum(h["uirl/images"] for h in steps) > 2
    assert all(h["uirl/images_dropped"] == 0 for h in steps)
    assert "closed 4 browser sessions" in done.stderr
    assert (tmp_path / "run" / "model.safetensors").exists()


def test_the_shipped_tiny_config_trains_every_screenshot_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # scripts/train_trl.py's trainer at trl_tiny_cpu.yaml's own budget (512 completion
    # tokens, 3 steps): every screenshot the environments return during training is an
    # image the vision tower sees with gradients on. (TRL 1.16 drops a tool result that
    # would overflow the budget; before the budget, this config returned 14 screenshots
    # and trained 12.)
    config = yaml.safe_load((ROOT / "scripts/configs/trl_tiny_cpu.yaml").read_text())
    config["grpo"]["max_steps"] = 2
    script = runpy.run_path(str(ROOT / "scripts/train_trl.py"))
    torch.set_num_threads(1)
    trainer = script["build_trainer"](config, tmp_path)
    budget = trainer.environment_factories[None].config.budget
    assert budget.max_completion_length == trainer.args.max_completion_length == 512
    assert trainer.generation_config.max_new_tokens == budget.turn_tokens
    assert set(trainer.generation_config.suppress_tokens) >= {
        trainer.model.config.image_token_id,
        trainer.model.config.vision_start_token_id,
    }
    returned: list[int] = []
    for name in ("reset", "_result"):
        original = getattr(UirlEnvironment, name)

        def counted(self: UirlEnvironment, *args: Any, _original: Any = original, **kw: Any):
            out = _original(self, *args, **kw)
            returned.append(sum(part["type"] == "image" for part in out))
            return out

        monkeypatch.setattr(UirlEnvironment, name, counted)
    trained: list[int] = []

    def count_images(module: Any, args: tuple, kwargs: dict) -> None:
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        if torch.is_grad_enabled() and grid is not None:
            trained.append(int(grid.shape[0]))

    hook = trainer.model.model.visual.register_forward_pre_hook(count_images, with_kwargs=True)
    try:
        trainer.train()
    finally:
        hook.remove()
        close_environments()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    assert sum(returned) > 2 * 4  # the resets' and the tool results'
    assert sum(trained) == sum(returned)
    assert all(h["uirl/images_dropped"] == 0 for h in logs)
    assert sum(h["uirl/images"] for h in logs) * 4 == sum(returned)


CTRL_C_SCRIPT = """
import json, sys, time
from uirl_agents.integrations.trl import make_environment
envs = [make_environment("uirl/FormFill-v0")() for _ in range(2)]
servers = []
for env in envs:
    env.reset(seed=1)
    uienv = env._holder["backend"].env
    servers.append(uienv._runtime.pid(uienv.session))
print(json.dumps(servers), flush=True)
time.sleep(120)
"""


def test_ctrl_c_leaves_no_browser_behind() -> None:
    """Ctrl-C stops both sessions: nothing of the process tree at the moment of the
    signal (servers, browsers, renderers) runs afterwards, nor anything started later in
    the servers' process sessions. A short-lived child that exits on its own before
    the signal (a closed context's renderer) is not asked for: the tree is read at the
    signal, where it was read after the resets and failed the test on a busy machine."""
    process = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        servers = json.loads(process.stdout.readline())
        trees = [[server, *descendant_pids(server)] for server in servers]
        browsers = [browser_pids(tree) for tree in trees]
        process.send_signal(signal.SIGINT)
        # Each server had its browser at the signal: the check below is not vacuous.
        assert len(servers) == 2 and all(browsers), trees
        process.wait(timeout=60)
    finally:
        process.kill()
    left = [p for tree in trees for p in tree if running(p)]
    assert left + session_processes(servers) == []


def test_tool_template_renders_tool_free_chats_as_the_stock_one(tmp_path: Path) -> None:
    from PIL import Image
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    from uirl_agents.loading.pretrained import load_processor

    processor = load_processor(build_tiny_model("qwen2.5-vl", tmp_path))
    assert not supports_tool_calling(processor)  # the stock Qwen2.5-VL template
    image = Image.new("RGB", (56, 56))
    chats = [
        [
            {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "click(1, 2)"}]},
        ],
        [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": [{"type": "text", "text": "c"}, {"type": "image", "image": image}]},
        ],
    ]  # fmt: skip

    def renders() -> list[str]:
        return [
            processor.apply_chat_template(chat, tokenize=False, add_generation_prompt=prompt)
            for chat in chats
            for prompt in (False, True)
        ]

    stock = renders()
    use_tool_chat_template(processor)
    assert renders() == stock
    assert supports_tool_calling(processor) and is_chat_template_prefix_preserving(processor)
    parsed = processor.tokenizer.parse_response(
        '<tool_call>\n{"name": "click", "arguments": {"x": 3, "y": 4}}\n</tool_call><|im_end|>',
        prefix="",
    )
    assert parsed["tool_calls"][0]["function"] == {"name": "click", "arguments": {"x": 3, "y": 4}}

    processor.chat_template = "{{ messages[0]['content'] }}"  # some other tool-less template
    with pytest.raises(ValueError, match="cannot render tool calls"):
        use_tool_chat_template(processor)


def test_a_lone_surrogate_in_type_is_an_error_message(environment) -> None:
    """The type() tool raised UnicodeEncodeError on "\\ud800" (a model's JSON can carry
    half a UTF-16 pair), though bad arguments never raise: now the env refuses it, as
    any invalid action (issue 30, one validation: Action.validate)."""
    environment.reset(seed=3)
    out = environment.type(text="ok\ud800")
    assert out[0]["type"] == "image" and out[1]["text"].startswith("Error:")
    assert "lone surrogate" in out[1]["text"]


def test_tool_calls_are_laid_out_as_qwen_lays_them_out(qwen25vl_processor: Any) -> None:
    # Qwen2.5's own template (TRL ships a copy) with the same turn as a string: one
    # newline after "assistant", then the content if any, then "\n<tool_call>". List
    # content (what TRL and processors pass) renders the same bytes: an empty text part
    # used to add a second newline ("assistant\n\n<tool_call>").
    from trl.chat_template_utils import _CHAT_TEMPLATES_DIR

    qwen25 = (_CHAT_TEMPLATES_DIR / "qwen2_5.jinja").read_text(encoding="utf-8")
    calls = [{"type": "function", "function": {"name": "click", "arguments": {"x": 1, "y": 2}}}]
    tools = [{"type": "function", "function": {"name": "click", "description": "Click.",
              "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}]  # fmt: skip
    for text, contents in (
        ("", ["", [], [{"type": "text", "text": ""}]]),
        ("On it.", ["On it.", [{"type": "text", "text": "On it."}]]),
    ):
        expected = qwen25vl_processor.tokenizer.apply_chat_template(
            [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": text, "tool_calls": calls + calls},
                {"role": "tool", "name": "click", "content": "ok"},
            ],
            tools=tools,
            tokenize=False,
            chat_template=qwen25,
        )
        for content in contents:
            rendered = qwen25vl_processor.apply_chat_template(
                [
                    {"role": "system", "content": [{"type": "text", "text": "S"}]},
                    {"role": "user", "content": "go"},
                    {"role": "assistant", "content": content, "tool_calls": calls + calls},
                    {"role": "tool", "name": "click", "content": [{"type": "text", "text": "ok"}]},
                ],
                tools=tools,
                tokenize=False,
            )
            assert rendered == expected, content
        layout = "<|im_start|>assistant\n" + (f"{text}\n" if text else "") + "<tool_call>\n"
        assert layout in expected

"""uirl tasks inside TRL's GRPOTrainer (uirl_agents/integrations/trl.py), on real sessions.

Tiny Qwen3-VL (its own tool-calling template) and tiny Qwen2.5-VL (uirl's template),
taught the tool-call syntax by the cold start, train 2 GRPO steps with the factory: every
screenshot the environments returned reaches the vision tower in the training forward
pass, the logged reward is the environments' episode reward, the weights change, and no
browser is left once the trainer is gone. Also: the tools' own behaviour, a dict factory
mixing tasks, an OpenEnv URL behind the same class, 2 processes with equal weights, and
scripts/train_trl.py from the command line.
"""

from __future__ import annotations

import gc
import json
import os
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
from processes import running

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
from uirl_agents.models import load_model_and_processor  # noqa: E402
from uirl_agents.tiny_model import build_tiny_model  # noqa: E402
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
    out = env.scroll(x=10, y=10, direction="sideways")
    assert "Error" in out[1]["text"] and "direction" in out[1]["text"]
    out = env.click(x=40, y=30)  # the third call: the limit
    assert out[1]["text"].startswith("Clicked at (40, 30).")
    assert "limit of 3 actions" in out[1]["text"]
    out = env.type(text="late")
    assert out[1]["text"] == (
        "The episode has ended (the limit of 3 actions); no action runs now. Stop calling tools."
    )
    assert env.steps == 3 and env.images_returned == 5  # every tool result shows the screen
    assert env.get_reward() == pytest.approx(-0.1)  # the bad direction reached the env

    env.reset(seed=3)
    assert env.get_reward() == 0.0 and env.steps == 0
    # A wrong argument name (TRL calls tool(**arguments)) is a message, not a TypeError.
    out = env.click(x=1, z=2)
    assert out[0]["type"] == "image" and out[1]["text"].startswith("Error: click: missing")
    out = env.finish()
    assert out[0]["type"] == "image" and out[1]["text"] == "Finished."
    assert env.ended == "finish" and env.images_returned == 3 and env.steps == 2


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
        assert first[0]["image"].size == (640, 400)
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
        out = env.click(x=10, y=10)
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
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    state = json.loads((tmp_path / "run" / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "reward" in h]
    assert len(steps) == 2 and state["global_step"] == 2
    assert all(h["tools/call_frequency"] > 0 and h["uirl/images"] > 1 for h in steps)
    assert "closed 4 browser sessions" in done.stderr
    assert (tmp_path / "run" / "model.safetensors").exists()


CTRL_C_SCRIPT = """
import json, sys, time
from uirl_agents.integrations.trl import make_environment
from uirl_gym.runtimes.local import descendant_pids
envs = [make_environment("uirl/FormFill-v0")() for _ in range(2)]
pids = []
for env in envs:
    env.reset(seed=1)
    uienv = env._holder["backend"].env
    pid = uienv._runtime.pid(uienv.session)
    pids += [pid, *descendant_pids(pid)]
print(json.dumps(pids), flush=True)
time.sleep(120)
"""


def test_ctrl_c_leaves_no_browser_behind() -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_SCRIPT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        pids = json.loads(process.stdout.readline())
        assert len(pids) >= 4 and all(running(p) for p in pids)  # 2 servers, their browsers
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert not [p for p in pids if running(p)]


def test_tool_template_renders_tool_free_chats_as_the_stock_one(tmp_path: Path) -> None:
    from PIL import Image
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    from uirl_agents.models import load_processor

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

"""UIEnv through gym.make, on real local sessions."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.passive_env_checker import data_shares_objects
from gymnasium.wrappers import (
    RecordEpisodeStatistics,
    ResizeObservation,
    TimeLimit,
    TransformObservation,
)
from processes import wait_gone

import uirl_gym
from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, Action, ActionType
from uirl_gym.env import ClosedEnvironmentError, ResetNeededError, UIEnv
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.tasks.simple_data_entry.expert import SimpleDataEntryExpert

ENV_ID = "uirl/SimpleDataEntry-v0"
SHOT = Action(ActionType.SCREENSHOT)


@pytest.fixture
def env(runtime: LocalRuntime) -> Iterator[gym.Env]:
    e = gym.make(ENV_ID, runtime=runtime)
    try:
        yield e
    finally:
        e.close()


def run_expert(env: gym.Env, seed: int, options: dict, mode: str = "type") -> tuple[float, dict]:
    obs, info = env.reset(seed=seed, options=options)
    expert = SimpleDataEntryExpert(mode=mode)
    total = 0.0
    while True:
        action = expert.next_action(env.unwrapped.oracle())
        obs, reward, terminated, truncated, info = env.step(action)
        assert "invalid_action" not in info, info
        total += reward
        if terminated or truncated:
            return total, info


def test_make(runtime: LocalRuntime) -> None:
    """(``check_env`` runs on every task in tests/test_task_contract.py.)"""
    env = gym.make(ENV_ID, runtime=runtime)
    assert isinstance(env.unwrapped, UIEnv)
    assert env.spec.max_episode_steps == uirl_gym.MAX_EPISODE_STEPS
    env.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"rewards": "x"}, ValueError, "rewards: expected None or a RewardConfig"),
        ({"step_timeout_s": -1}, ValueError, "step_timeout_s: expected seconds in 0.5..120"),
        ({"step_timeout_s": float("nan")}, ValueError, "step_timeout_s: expected seconds"),
        ({"step_timeout_s": True}, ValueError, "step_timeout_s: expected seconds"),
        ({"image_format": "gif"}, ValueError, "image_format: expected one of png, jpeg, raw"),
        ({"render_mode": "human"}, ValueError, "render_mode: expected None or 'rgb_array'"),
        ({"render_mode": "rgb_array_list"}, ValueError, "render_mode: expected None or"),
        ({"options": "str"}, TypeError, "unknown argument(s) 'options'"),
        ({"options": [1]}, TypeError, "reset options go to reset(options=...)"),
        ({"task": 5}, ValueError, "task: expected a task id such as 'simple_data_entry'"),
        ({"task": "simple_data_entyr"}, ValueError, "task: unknown task"),
        ({"default_options": "str"}, ValueError, "default_options: expected a dict"),
        ({"default_options": {"rows": "x"}}, ValueError, "default_options: rows:"),
        ({"tasks": "x"}, ValueError, "tasks: expected a dict"),
        ({"task_options": {"form_fill": 3}}, ValueError, "task_options['form_fill']: expected"),
        ({"split": 3}, ValueError, "split: expected 'train' or 'test'"),
        ({"stepp_timeout_s": 3}, TypeError, "did you mean 'step_timeout_s'"),
    ],
)
def test_make_refuses_bad_arguments_naming_them(
    kwargs: dict, error: type[Exception], message: str
) -> None:
    """At gym.make, before any session: each used to be accepted and fail later (every
    step raised on rewards='x'; requests raised at reset on a negative timeout)."""
    with pytest.raises(error, match=re.escape(message)):
        gym.make(ENV_ID, **kwargs)


def test_the_instruction_space_holds_any_unicode_text() -> None:
    space = UIEnv().observation_space["instruction"]
    assert isinstance(space, gym.spaces.Text)
    for text in ['Click on the "ÖK" button.', "Klicke auf „Weiter“ 😀", "点击确定", ""]:
        assert space.contains(text), text
    assert not space.contains("a\ud800") and not space.contains(3)
    assert space.contains(space.sample())


def test_make_without_importing_uirl_gym() -> None:
    """Gymnasium's module prefix imports the package (no session starts before reset)."""
    code = (
        "import sys, gymnasium as gym\n"
        "assert 'uirl_gym' not in sys.modules\n"
        f"env = gym.make('uirl_gym:{ENV_ID}')\n"
        "print(type(env.unwrapped).__name__, env.spec.max_episode_steps)\n"
        "env.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["UIEnv", str(uirl_gym.MAX_EPISODE_STEPS)]


@pytest.mark.slow  # 20 episodes: about 40 s on 2 cores, more under load
def test_expert_solves_seeded_episodes(env: gym.Env) -> None:
    """1 to 3 rows, rows below the fold included, both ways of filling fields."""
    scrolled = 0
    for seed in range(20):
        num_rows = 1 + seed % 3
        options = {"num_rows": num_rows}
        if seed % 4 == 0:
            options = {"rows": [80 + seed % 15, *range(num_rows - 1)]}  # far below the fold
        mode = "copy_paste" if seed % 5 == 0 else "type"
        total, info = run_expert(env, seed, options, mode)
        assert info["is_success"], (seed, info)
        assert total == pytest.approx(len(info["progress"]["target_rows"]))
        scrolled += max(info["progress"]["target_rows"]) > 27
    assert scrolled >= 5


def test_same_seed_same_episode(env: gym.Env) -> None:
    obs1, info1 = env.reset(seed=123, options={"num_rows": 2})
    env.step(Action(ActionType.LEFT_CLICK, 100, 200))
    obs2, info2 = env.reset(seed=123, options={"num_rows": 2})
    assert info1["target_rows"] == info2["target_rows"]
    assert obs1["instruction"] == obs2["instruction"]
    assert np.array_equal(obs1["screenshot"], obs2["screenshot"])
    obs3, info3 = env.reset(seed=124, options={"num_rows": 2})
    assert not np.array_equal(obs1["screenshot"], obs3["screenshot"])


def test_rewards_agree_with_progress(env: gym.Env) -> None:
    """Wrong, repeated and correct submissions: the return equals what /progress implies."""
    obs, info = env.reset(seed=7, options={"rows": [2, 5]})
    expert = SimpleDataEntryExpert()
    total = 0.0
    oracle = env.unwrapped.oracle()
    # A wrong submission first: a near-miss of the target's email.
    first, last, email = oracle["target_values"][0]
    for field, value in zip(
        ("first_name", "last_name", "email"), (first, last, email + "x"), strict=True
    ):
        x, y, w, h = oracle["inputs"][field]["box"]
        total += env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))[1]
        total += env.step(Action(ActionType.TYPE, text=value))[1]
    x, y, w, h = oracle["submit_button"]
    _, reward, *_ = env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
    assert reward == -1.0
    total += reward
    # Then the expert finishes the job.
    while True:
        _, reward, terminated, truncated, info = env.step(
            expert.next_action(env.unwrapped.oracle())
        )
        total += reward
        if terminated or truncated:
            break
    progress = env.unwrapped._client.progress()
    targets = set(progress["target_rows"])
    expected = len(targets & set(progress["submitted_row_indices"])) - (
        progress["num_incorrect_submissions"]
        + len(progress["submitted_row_indices"])
        - len(targets & set(progress["submitted_row_indices"]))
    )
    assert total == pytest.approx(expected) == pytest.approx(1.0)
    assert terminated and not info["is_success"]  # all in, but one wrong on the way


def test_invalid_and_finish_actions(env: gym.Env) -> None:
    first, _info = env.reset(seed=1)
    seen = [first]
    obs, reward, terminated, truncated, info = env.step({"type": "left_click", "x": 5000, "y": 1})
    assert reward == -0.1 and not terminated and not truncated
    assert "x: 5000 is off" in info["invalid_action"]
    seen.append(obs)
    obs, reward, *_, info = env.step({"type": "keys", "keys": "ctrl+nope"})
    assert "unknown key" in info["invalid_action"]
    seen.append(obs)
    seen.append(env.step({"type": "send_msg_to_user", "text": "done?"})[0])
    obs, reward, terminated, _, info = env.step(Action(ActionType.FINISH))
    assert terminated and reward == 0.0 and info["is_success"] is False
    seen.append(obs)
    # The page did not change, but each observation is the caller's own (check_env's
    # rule: the caller may keep and modify them; a random bid is an invalid action).
    assert all(np.array_equal(o["screenshot"], first["screenshot"]) for o in seen)
    for one, other in itertools.combinations(seen, 2):
        assert not data_shares_objects(one, other)


def test_a_lone_surrogate_is_an_invalid_action(env: gym.Env) -> None:
    """ "\\ud800" (half a UTF-16 pair, as a model's JSON can carry) raised
    UnicodeEncodeError from step; now it is refused like any bad field."""
    env.reset(seed=1)
    for action in ({"type": "type", "text": "ok\ud800"}, {"type": "keys", "keys": "\udfff"}):
        _, reward, terminated, truncated, info = env.step(action)
        assert "lone surrogate" in info["invalid_action"] and reward == -0.1
        assert not (terminated or truncated)
    assert "invalid_action" not in env.step({"type": "type", "text": "😀 ÖK"})[4]


def test_random_agent_rewards_stay_in_bounds(runtime: LocalRuntime) -> None:
    env = gym.make(ENV_ID, runtime=runtime, max_episode_steps=25)
    env.action_space.seed(0)
    env.reset(seed=0, options={"num_rows": 1})
    steps = 0
    while True:
        sample = env.action_space.sample()
        if sample["action_type"] == list(ActionType).index(ActionType.FINISH):
            continue
        _, reward, terminated, truncated, info = env.step(sample)
        assert -1.1 <= reward <= 1.0
        steps += 1
        if terminated or truncated:
            break
    assert steps == 25 or terminated
    env.close()


def test_dense_reward_pays_for_verified_progress(runtime: LocalRuntime) -> None:
    env = gym.make(ENV_ID, runtime=runtime, reward_mode="dense")
    env.reset(seed=3, options={"rows": [1]})
    oracle = env.unwrapped.oracle()
    first = oracle["target_values"][0][0]
    x, y, w, h = oracle["inputs"]["first_name"]["box"]
    assert env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))[1] == 0.0
    assert env.step(Action(ActionType.TYPE, text=first))[1] == pytest.approx(0.1)
    assert env.step(Action(ActionType.KEYS, keys="Backspace"))[1] == pytest.approx(-0.1)
    row = next(r for r in oracle["visible_rows"] if r["data_index"] == 1)
    cx, cy, cw, ch = row["cells"][2]
    assert env.step(Action(ActionType.LEFT_CLICK, cx + cw // 2, cy + ch // 2))[1] == pytest.approx(
        0.05
    )
    env.close()


def test_gymnasium_wrappers(runtime: LocalRuntime) -> None:
    env = gym.make(ENV_ID, runtime=runtime, max_episode_steps=3)
    screenshot_space = env.observation_space["screenshot"]
    env = TransformObservation(env, lambda obs: obs["screenshot"], screenshot_space)
    env = ResizeObservation(env, (200, 320))
    env = RecordEpisodeStatistics(env)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (200, 320, 3)
    for _ in range(3):
        obs, _, terminated, truncated, info = env.step(Action(ActionType.SCREENSHOT))
    assert truncated and info["episode"]["l"] == 3
    assert isinstance(TimeLimit(env, 10), TimeLimit)
    env.close()


@pytest.mark.parametrize("victim", ["server", "chromium"])
def test_session_failure_truncates_and_next_reset_recovers(
    runtime: LocalRuntime, victim: str
) -> None:
    env = gym.make(ENV_ID, runtime=runtime)
    env.reset(seed=0)
    inner: UIEnv = env.unwrapped
    server_pid = runtime.pid(inner.session)
    if victim == "server":
        os.killpg(server_pid, signal.SIGKILL)
    else:
        killed = 0
        for pid in descendant_pids(server_pid):
            try:  # short-lived helpers (a zygote's fork) may be gone already
                cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            except FileNotFoundError:
                continue
            # Chromium's children rewrite their command line into one string: the
            # browser process is the one without a --type switch anywhere.
            if b"chrom" in cmd.split(b"\0")[0] and b"--type=" not in cmd:
                os.kill(pid, signal.SIGKILL)
                killed += 1
        assert killed == 1
    obs, reward, terminated, truncated, info = env.step(Action(ActionType.LEFT_CLICK, 10, 10))
    assert truncated and not terminated and "error" in info
    assert obs["screenshot"].shape == (800, 1280, 3)
    # The episode is over: stepping on would act on the replacement session with the
    # old episode's target rows.
    with pytest.raises(ResetNeededError, match=re.escape("ended (truncated)")):
        env.step(Action(ActionType.LEFT_CLICK, 10, 10))
    obs, info = env.reset(seed=1)
    assert obs["screenshot"].shape == (800, 1280, 3)
    _, _, terminated, truncated, _ = env.step(Action(ActionType.LEFT_CLICK, 10, 10))
    assert not truncated
    env.close()


def test_a_frozen_session_costs_a_step_its_deadline_and_is_stopped(
    runtime: LocalRuntime,
) -> None:
    """A session server that answers nothing, not even its 504 (stopped with SIGSTOP):
    the step is truncated once the action's deadline (10 s by default) and the client's
    margin have passed, and the server and its Chromium are gone soon after. It took
    20 s: a 15 s read timeout, then the runtime's 5 s SIGTERM grace in the step's thread."""
    env = gym.make(ENV_ID, runtime=runtime)
    try:
        env.reset(seed=0)
        server_pid = runtime.pid(env.unwrapped.session)
        family = [server_pid, *descendant_pids(server_pid)]
        os.kill(server_pid, signal.SIGSTOP)
        t0 = time.monotonic()
        _, _, terminated, truncated, info = env.step(Action(ActionType.LEFT_CLICK, 100, 130))
        elapsed = time.monotonic() - t0
        assert truncated and not terminated and "SessionUnavailableError" in info["error"]
        # The deadline plus ACTION_READ_MARGIN_S (2 s), with room for a busy machine.
        assert DEFAULT_ACTION_TIMEOUT_S <= elapsed < DEFAULT_ACTION_TIMEOUT_S + 5, elapsed
        # A stopped process cannot answer SIGTERM: it is killed, its Chromium with it.
        assert wait_gone(family, timeout_s=10) == []
    finally:
        env.close()


def test_step_after_the_episode_ended_raises(env: gym.Env) -> None:
    """One rule for every episode end: terminated or truncated, reset before stepping."""
    env.reset(seed=1)
    _, _, terminated, _, _ = env.step(Action(ActionType.FINISH))
    assert terminated
    with pytest.raises(gym.error.ResetNeeded, match=re.escape("ended (terminated)")):
        env.step(SHOT)
    with pytest.raises(ResetNeededError, match=re.escape("call reset()")):
        env.step({"type": "left_click", "x": 5000, "y": 1})  # even an invalid action
    env.reset(seed=2)
    _, _, terminated, truncated, _ = env.step(SHOT)
    assert not terminated and not truncated


def test_a_closed_env_refuses_to_act(runtime: LocalRuntime) -> None:
    """A step after close() used to acquire a new session (and, when the env owned its
    runtime, start a new runtime and Chromium) behind the caller's back."""
    env = gym.make(ENV_ID, runtime=runtime)
    env.reset(seed=0)
    env.close()
    inner: UIEnv = env.unwrapped
    for call in (lambda: env.step(SHOT), lambda: env.reset(seed=0), inner.oracle):
        with pytest.raises(ClosedEnvironmentError, match=re.escape("make a new env")):
            call()
    assert inner.session is None
    env.close()  # closing again is allowed
    assert isinstance(ClosedEnvironmentError("x"), gym.error.ClosedEnvironmentError)


def test_rows_option_is_capped_like_num_rows(env: gym.Env) -> None:
    """More target rows than num_rows allows would overflow the instruction's space."""
    rows = list(range(970, 991))
    with pytest.raises(ValueError, match=re.escape("rows: at most 20 target rows, got 21")):
        env.reset(seed=0, options={"rows": rows, "num_data_rows": 1000})
    with pytest.raises(ResetNeededError):  # a refused reset leaves no episode to step
        env.step(SHOT)
    obs, info = env.reset(seed=0, options={"rows": rows[:20], "num_data_rows": 1000})
    assert info["target_rows"] == rows[:20]
    assert env.observation_space.contains(obs)


def test_space_sample_with_an_out_of_range_index_is_an_invalid_action(env: gym.Env) -> None:
    env.reset(seed=0)
    env.action_space.seed(0)
    scroll = list(ActionType).index(ActionType.SCROLL)
    for field, value, message in [
        ("action_type", len(ActionType), f"action_type: index {len(ActionType)} is out of range"),
        ("action_type", -1, "action_type: index -1 is out of range"),  # was FINISH
        ("action_type", 2**40, "out of range"),
        ("direction", 4, "direction: index 4 is out of range"),
    ]:
        sample = env.action_space.sample()
        if field == "direction":
            sample["action_type"] = np.int64(scroll)
        sample[field] = np.int64(value)
        _, reward, terminated, truncated, info = env.step(sample)
        assert reward == pytest.approx(-0.1) and not terminated and not truncated, info
        assert message in info["invalid_action"]
    _, _, terminated, truncated, _ = env.step(SHOT)  # the episode goes on
    assert not terminated and not truncated


# ---- the task scores, not the env ----------------------------------------------------


def test_every_task_has_a_gym_id_that_makes_its_env() -> None:
    from uirl_gym.tasks import TASKS

    for spec in TASKS.values():
        assert gym.spec(spec.env_id).kwargs == {"task": spec.name}
    with pytest.raises(ValueError, match="unknown task 'simple_data_entri'.*'simple_data_entry'"):
        UIEnv(task="simple_data_entri")


def test_the_env_pays_what_the_tasks_scorer_says(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rewards, termination and info come from the task's scorer: a scorer with other
    rules changes them without touching the env."""
    from uirl_gym import tasks
    from uirl_gym.tasks.base import EpisodeScorer

    class PerAction(EpisodeScorer):
        def __init__(self, progress: dict, rewards: object) -> None:
            self.actions = 0

        def reset_info(self) -> dict:
            return {"scorer": "per-action"}

        def reward(self, progress: dict) -> float:
            self.actions += 1
            return 0.5

        def potential(self, oracle: dict) -> float:
            return 0.0

        @property
        def done(self) -> bool:
            return self.actions == 2

        def status(self) -> dict:
            return {"is_success": self.done, "actions": self.actions}

    spec = dataclasses.replace(tasks.TASKS["simple_data_entry"], scorer=PerAction)
    monkeypatch.setitem(tasks.TASKS, "simple_data_entry", spec)
    env = UIEnv(runtime=runtime)
    try:
        _, info = env.reset(seed=0)
        assert info["scorer"] == "per-action" and "target_rows" not in info
        _, reward, terminated, _, info = env.step(SHOT)
        assert (reward, terminated, info["actions"], info["is_success"]) == (0.5, False, 1, False)
        _, reward, terminated, _, info = env.step(SHOT)
        assert (reward, terminated, info["is_success"]) == (0.5, True, True)
    finally:
        env.close()


def test_an_env_asks_the_session_for_its_task_and_a_session_refuses_one_it_lacks(
    runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uirl_gym import tasks

    spec = tasks.TASKS["simple_data_entry"]
    other = dataclasses.replace(spec, name="other_task", env_id="uirl/Other-v0")
    monkeypatch.setitem(tasks.TASKS, "other_task", other)
    env = UIEnv(runtime=runtime, task="other_task")  # the servers do not know it
    try:
        with pytest.raises(ValueError, match="reset refused: task: unknown task 'other_task'"):
            env.reset(seed=0)
    finally:
        env.close()


def test_splits_draw_disjoint_task_instances(runtime: LocalRuntime) -> None:
    from uirl_gym.tasks import SPLITS

    env = UIEnv(runtime=runtime)
    test_env = UIEnv(runtime=runtime, split="test")
    try:
        _, train = env.reset(seed=3)
        # Before splits the env drew np_random(seed).integers(2**31): the same instance.
        assert train["task_seed"] == int(np.random.default_rng(3).integers(2**31))
        assert train["split"] == "train" and train["task_seed"] in SPLITS["train"]
        _, test = env.reset(seed=3, options={"split": "test"})
        assert test["split"] == "test" and test["task_seed"] in SPLITS["test"]
        _, same = test_env.reset(seed=3)
        assert same["task_seed"] == test["task_seed"]
        assert same["target_rows"] == test["target_rows"]  # the instance is the seed's
        with pytest.raises(ValueError, match="unknown split 'dev'"):
            env.reset(seed=3, options={"split": "dev"})
    finally:
        env.close()
        test_env.close()
    with pytest.raises(ValueError, match="unknown split"):
        UIEnv(split="validation")


def test_drag_selects_text_like_a_person(runtime: LocalRuntime) -> None:
    """A drag presses, moves and releases: across a field's text it selects it, and
    typing then replaces the selection."""
    env = UIEnv(runtime=runtime)
    try:
        env.reset(seed=0)
        x, y, w, h = env.oracle()["inputs"]["first_name"]["box"]
        env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
        env.step(Action(ActionType.TYPE, text="hello world"))
        drag = Action(ActionType.DRAG, x + w - 4, y + h // 2, end_x=x + 1, end_y=y + h // 2)
        _, _, _, _, info = env.step(drag)
        assert "invalid_action" not in info
        env.step(Action(ActionType.TYPE, text="X"))
        assert env.oracle()["inputs"]["first_name"]["value"] == "X"
    finally:
        env.close()


HANGING_TASK = """
import dataclasses
import itertools
from importlib import resources

from uirl_gym.tasks.simple_data_entry import TASK_SPEC as _BASE


class HangingTask(_BASE.task):
    \"\"\"SimpleDataEntry, but a click in the top-left corner runs an endless loop.\"\"\"

    name = "hanging_demo"

    def page_html(self):
        hang = (
            "<script>addEventListener('mousedown', (e) => {"
            " if (e.clientX < 4 && e.clientY < 4) { while (true) {} } }, true);</script>"
        )
        app = resources.files("uirl_gym.tasks.simple_data_entry") / "static" / "app.html"
        return app.read_text("utf-8").replace("</body>", hang + "</body>")


TASK_SPEC = dataclasses.replace(
    _BASE, name="hanging_demo", env_id="uirl/HangingDemo-v0", task=HangingTask, doc=None
)
"""


@pytest.fixture(scope="module")
def hanging_task(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A plug-in task whose page hangs on demand, found by this process and by the
    session servers (its folder on their PYTHONPATH); undone afterwards."""
    from uirl_gym.tasks import TASKS, discover_tasks

    root = tmp_path_factory.mktemp("plugin")
    (root / "uirl_hanging_demo.py").write_text(HANGING_TASK)
    dist = root / "uirl_hanging_demo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: uirl-hanging-demo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[uirl.tasks]\nhang = uirl_hanging_demo:TASK_SPEC\n")
    old_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), old_path]))
    sys.path.insert(0, str(root))
    try:
        discover_tasks()
        yield "hanging_demo"
    finally:
        sys.path.remove(str(root))
        if old_path is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old_path
        TASKS.pop("hanging_demo", None)
        gym.registry.pop("uirl/HangingDemo-v0", None)


def test_a_page_that_hangs_costs_its_deadline_and_one_episode(hanging_task: str) -> None:
    """An endless loop in the page: the step answers after step_timeout_s (not 30 s),
    the episode ends truncated with the error, the session is kept (no replacement),
    and the next reset gets a fresh page that works."""
    with LocalRuntime() as runtime:
        env = gym.make("uirl/HangingDemo-v0", runtime=runtime, step_timeout_s=2.0)
        try:
            env.reset(seed=0)
            session = env.unwrapped.session
            _, reward, terminated, truncated, info = env.step(Action(ActionType.LEFT_CLICK, 1, 1))
            assert truncated and not terminated and reward == 0.0
            assert "ActionTimeoutError" in info["error"] and "within 2s" in info["error"]
            # What the deadline was waiting on, so that a rare timeout can be traced.
            assert (
                "stuck in the action, waiting on CDP: Input.dispatchMouseEvent (" in info["error"]
            )
            assert env.unwrapped.timings == {} or env.unwrapped.timings.get("act_s", 0) < 10
            obs, _ = env.reset(seed=0)
            assert env.unwrapped.session == session  # the same session, a fresh page
            _, _, terminated, truncated, info = env.step(Action(ActionType.LEFT_CLICK, 100, 130))
            assert not (terminated or truncated) and "error" not in info
            assert env.unwrapped.oracle()["selected_cell"] is not None
        finally:
            env.close()

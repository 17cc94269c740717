"""MiniWoB++ as a task family: every registered task resets seeded and repeatably, the
scripted expert earns the page's full reward through pixel actions, a wrong action
earns what the page says, options are checked, and MiniWoB++ mixes with uirl's own
tasks in one vector env.

Skipped when the ``miniwob`` wheel is not installed (``pip install 'uirl[miniwob]'``).
Two sessions serve every task (a session serves any task).
"""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import SessionClient, SessionError
from uirl_gym.env import UIEnv
from uirl_gym.protocol import SessionInfo
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks import TASK_GROUPS, TASKS, expand_tasks, task_spec
from uirl_gym.tasks.base import BRIDGE_PATH
from uirl_gym.tasks.miniwob.expert import SOLVED_TASKS
from uirl_gym.tasks.miniwob.wheel import miniwob_tasks

pytestmark = pytest.mark.skipif(not miniwob_tasks(), reason="the miniwob wheel is not installed")

SEED = 11
SOLVER_SEEDS = (0, 1)
# Every task the expert knows, of every kind: clicks, checkboxes and radios, typing and
# multi-field forms, a select, drags, a slider, scrolling, multi-step tab search.
SOLVED = sorted(SOLVED_TASKS)


@pytest.fixture(scope="module")
def mw_runtime() -> Iterator[LocalRuntime]:
    """This module's own sessions: they end on MiniWoB++ tasks, which other tests that
    reset without naming a task must not inherit from the shared pool."""
    rt = LocalRuntime(LocalRuntimeConfig(startup_timeout_s=120))
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture(scope="module")
def sessions(mw_runtime: LocalRuntime) -> Iterator[list[SessionInfo]]:
    mw_runtime.start_many(2)
    infos = [mw_runtime.acquire(), mw_runtime.acquire()]
    try:
        yield infos
    finally:
        for info in infos:
            mw_runtime.release(info, healthy=True)


@pytest.fixture(scope="module")
def env(sessions: list[SessionInfo]) -> Iterator[UIEnv]:
    e = UIEnv(base_url=sessions[0], task="miniwob.click-test")
    try:
        yield e
    finally:
        e.close()


def test_every_registered_task_is_a_task() -> None:
    import gymnasium as gym

    import uirl_gym  # noqa: F401  (registers the ids)

    wheel = [i for i in gym.registry if i.startswith("miniwob/")]
    assert len(TASK_GROUPS["miniwob"]) == len(wheel) >= 120
    spec = task_spec("miniwob.book-flight")
    assert spec.nondeterministic and spec.family == "miniwob"
    assert gym.spec("uirl/miniwob.book-flight-v0").nondeterministic
    assert not gym.spec("uirl/miniwob.click-test-v0").nondeterministic
    assert miniwob_tasks()["miniwob.use-colorwheel"].third_party_license.startswith("GPL")
    # "all": uirl's own tasks, by package name.
    assert expand_tasks("miniwob.click-test,all")[:2] == ["miniwob.click-test", "calendar_booking"]
    assert "miniwob.enter-text" in expand_tasks("miniwob.enter-*")


def _sweep(info: SessionInfo, names: list[str]) -> list[str]:
    """Reset each task twice with one seed, a few random actions between: what went
    wrong, one line per task. The first reset is a fresh page (the task before was
    another); the second restarts in that page where the task allows it."""
    problems = []
    client = SessionClient(info, image_format="jpeg")
    rng = np.random.default_rng(SEED)
    try:
        for name in names:
            shots, instructions = [], []
            try:
                for attempt in range(2):
                    # Zoom 1: the page is what the test checks (the default zoom is the
                    # expert's), and a small raster keeps 256 resets cheap.
                    started = client.reset(SEED, {"zoom": 1}, task=name)
                    instructions.append(started["instruction"])
                    shots.append(client.screenshot())
                    if attempt == 0:
                        _random_actions(client, rng)
            except SessionError as exc:
                problems.append(f"{name}: {exc}")
                continue
            area = shots[0] if "flight." in name else shots[0][:210, :160]
            if len(np.unique(area.reshape(-1, 3), axis=0)) < 3:
                problems.append(f"{name}: a blank screen")
            if not instructions[0].strip() or instructions[0] != instructions[1]:
                problems.append(f"{name}: instructions {instructions}")
            if not np.array_equal(shots[0], shots[1]) and not TASKS[name].nondeterministic:
                problems.append(f"{name}: the same seed gave another screen")
    finally:
        client.close()
    return problems


def _random_actions(client: SessionClient, rng: np.random.Generator) -> None:
    """Clicks and typing in the task area: what a restarted page must forget. (No drag:
    a drag that starts on a scroller's scrollbar stalls frames on demand, see
    docs/benchmarks.md.)"""
    x, y = rng.integers([0, 50], [160, 210], size=(2, 2))
    for action in (
        Action(ActionType.LEFT_CLICK, int(x[0]), int(x[1])),
        Action(ActionType.TYPE, text="ab1"),
        Action(ActionType.LEFT_CLICK, int(y[0]), int(y[1])),
    ):
        client.act(action)


def test_every_task_resets_seeded_and_repeats(sessions: list[SessionInfo]) -> None:
    """Every MiniWoB++ task: a non-blank screen, an instruction, and the same screen and
    instruction again for the same seed after a few random actions, whether the page
    restarted in place or is a fresh one (the screen: except the tasks the wheel flags
    nondeterministic, which mostly repeat too, a fresh page per episode)."""
    before = [SessionClient(i).health()["in_page_episodes"] for i in sessions]
    names = list(TASK_GROUPS["miniwob"])
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(sessions)) as pool:
        halves = pool.map(_sweep, sessions, [names[0::2], names[1::2]])
        problems = [p for half in halves for p in half]
    print(f"{len(names)} MiniWoB++ tasks reset twice in {time.perf_counter() - t0:.1f}s")
    assert not problems, "\n".join(problems)
    # The second reset of each task that allows it restarted in its page.
    in_page = sum(SessionClient(i).health()["in_page_episodes"] for i in sessions)
    assert in_page - sum(before) == sum(i.restarts_in_page for i in miniwob_tasks().values())


def _solve(env: UIEnv, subdomain: str, seed: int) -> tuple[float, dict]:
    expert = task_spec(f"miniwob.{subdomain}").expert()
    env.reset(seed=seed, options={"task": f"miniwob.{subdomain}"})
    expert.reset()
    total, info = 0.0, {}
    for _ in range(40):
        action = expert.next_action(env.oracle() if expert.needs_oracle else None)
        assert action.type is not ActionType.FINISH, "the expert gave up"
        _, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            break
    return total, info


@pytest.mark.parametrize("subdomain", SOLVED)
def test_expert_earns_the_full_reward_through_pixels(env: UIEnv, subdomain: str) -> None:
    for seed in SOLVER_SEEDS:
        total, info = _solve(env, subdomain, seed)
        assert total == 1.0 and info["is_success"], (subdomain, seed, info)
        assert info["raw_reward"] == 1.0 and info["progress"]["done"]


def test_a_wrong_action_earns_what_the_page_says(env: UIEnv) -> None:
    env.reset(seed=SEED, options={"task": "miniwob.click-button"})
    oracle = env.oracle()
    wanted = oracle["utterance"].split('"')[1]
    wrong = [e for e in oracle["elements"] if e["tag"] == "button" and e["text"] != wanted]
    x, y, w, h = wrong[0]["box"]
    _, reward, terminated, _, info = env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
    assert terminated and reward == -1.0 and not info["is_success"]
    assert env.oracle()["raw_reward"] == info["raw_reward"] == -1.0  # the page's own globals
    # A click on nothing ends nothing and pays nothing.
    env.reset(seed=SEED, options={"task": "miniwob.click-button"})
    _, reward, terminated, _, _ = env.step(Action(ActionType.LEFT_CLICK, 1000, 700))
    assert reward == 0.0 and not terminated


def test_reward_kinds(env: UIEnv) -> None:
    """binary pays -1 for a partial reward, time_discounted scales the full one down."""
    task = "miniwob.click-checkboxes"
    env.reset(seed=SEED, options={"task": task, "reward": "binary"})
    submit = next(e for e in env.oracle()["elements"] if e["id"] == "subbtn")
    x, y, w, h = submit["box"]
    _, reward, terminated, _, info = env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
    assert terminated and reward == (1.0 if info["raw_reward"] >= 1.0 else -1.0)
    env.reset(seed=SEED, options={"task": "miniwob.click-test", "reward": "time_discounted"})
    total, info = _solve_from_here(env)
    assert 0.0 < total < 1.0 and info["raw_reward"] == 1.0


def _solve_from_here(env: UIEnv) -> tuple[float, dict]:
    button = next(e for e in env.oracle()["elements"] if e["id"] == "subbtn")
    x, y, w, h = button["box"]
    _, reward, _, _, info = env.step(Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2))
    return reward, info


def test_zoom_and_time_limit_options(env: UIEnv) -> None:
    obs, _ = env.reset(seed=SEED, options={"task": "miniwob.click-test", "zoom": 1})
    oracle = env.oracle()
    assert oracle["page_scale"] == 1 and oracle["task_area"] == [0, 0, 160, 210]
    assert (obs["screenshot"][300:, 300:] == obs["screenshot"][799, 1279]).all()  # outside
    total, _ = _solve_from_here(env)
    assert total == 1.0
    env.reset(seed=SEED, options={"task": "miniwob.click-test", "time_limit_s": 0.2})
    deadline = time.monotonic() + 10
    while not env.oracle()["done"] and time.monotonic() < deadline:
        time.sleep(0.05)
    _, reward, terminated, _, info = env.step(Action(ActionType.SCREENSHOT))
    assert terminated and reward == -1.0 and info["progress"]["reason"] == "timed out"
    # The next episode restarts in that page: with the page's own 10 s again, not 0.2 s
    # (the time-discounted reward scales by it: 0 after 0.3 s of a 0.2 s episode).
    env.reset(seed=SEED, options={"task": "miniwob.click-test", "reward": "time_discounted"})
    time.sleep(0.3)
    total, info = _solve_from_here(env)
    assert info["raw_reward"] == 1.0 and 0.5 < total < 1.0


def test_a_small_screen_through_the_crop_wrapper(sessions: list[SessionInfo]) -> None:
    """zoom 2 and TopLeftCrop: 320x420 observations, the same pixels as the screen."""
    import gymnasium as gym

    from uirl_gym.wrappers import TopLeftCrop

    inner = gym.make(
        "uirl/miniwob.click-test-v0", base_url=sessions[1], default_options={"zoom": 2}
    )
    env = TopLeftCrop(inner, 320, 420)
    try:
        obs, _ = env.reset(seed=SEED)
        assert obs["screenshot"].shape == (420, 320, 3) and env.observation_space.contains(obs)
        sample = env.action_space.sample()
        assert sample["x"] < 320 and sample["y"] < 420
        button = next(e for e in env.unwrapped.oracle()["elements"] if e["id"] == "subbtn")
        x, y, w, h = button["box"]
        assert x + w <= 320 and y + h <= 420
        _, reward, terminated, _, _ = env.step(
            Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2)
        )
        assert reward == 1.0 and terminated
    finally:
        env.close()


def test_the_task_area_as_the_whole_screen(sessions: list[SessionInfo]) -> None:
    """``screen_size=(160, 210)``: the session's screen is MiniWoB++'s task area (zoom 1
    by default), observations and actions are in its pixels, Gymnasium's checker passes,
    and the next env on the session gets the default screen back."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from uirl_gym.client import SessionHTTPError

    env = gym.make(
        "uirl/miniwob.click-test-v0", base_url=sessions[1], screen_size=(160, 210)
    ).unwrapped
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env, skip_render_check=False)
        obs, _ = env.reset(seed=SEED)
        assert obs["screenshot"].shape == (210, 160, 3) and env.observation_space.contains(obs)
        assert env.action_space["x"].n == 160 and env.action_space["y"].n == 210
        oracle = env.oracle()
        assert oracle["page_scale"] == 1 and oracle["task_area"] == [0, 0, 160, 210]
        _, reward, _, _, info = env.step(Action(ActionType.LEFT_CLICK, 200, 100))
        assert "off the 160x210 screen" in info["invalid_action"]
        x, y, w, h = next(e for e in oracle["elements"] if e["id"] == "subbtn")["box"]
        _, reward, terminated, _, _ = env.step(
            Action(ActionType.LEFT_CLICK, x + w // 2, y + h // 2)
        )
        assert reward == 1.0 and terminated
        with pytest.raises(ValueError, match=r"zoom: expected an integer in 1\.\.1"):
            env.reset(seed=SEED, options={"zoom": 2})
    finally:
        env.close()
    client = SessionClient(sessions[1])
    try:
        with pytest.raises(SessionHTTPError, match=r"screen: expected \[width, height\]"):
            client.reset(SEED, {}, task="miniwob.click-test", screen=(8, 8))
        assert client.reset(SEED, {}, task="miniwob.click-test")["screen"] == [1280, 800]
        assert client.screenshot().shape == (800, 1280, 3)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reward": "shaped"}, "reward: expected one of"),
        ({"zoom": 4}, r"zoom: expected an integer in 1\.\.3"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"data_mode": "dev"}, "data_mode"),
        ({"rows": [1]}, "unknown option"),
    ],
)
def test_bad_options_are_refused_before_any_round_trip(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TASKS["miniwob.click-test"].check_options(options)


def test_flight_zoom_is_checked_by_task() -> None:
    with pytest.raises(ValueError, match=r"1\.\.1"):
        TASKS["miniwob.flight.AA"].check_options({"zoom": 2})


def test_the_page_is_served_from_the_wheel(sessions: list[SessionInfo]) -> None:
    import requests

    base = sessions[0].base_url
    page = requests.get(f"{base}/task/files/miniwob.click-test/miniwob/click-test.html", timeout=10)
    # One bridge: the page loads uirl's (as every task app does), then MiniWoB++'s script.
    assert page.ok and f'<script src="{BRIDGE_PATH}"></script>' in page.text
    assert "Click Me!" in page.text
    assert requests.get(f"{base}{BRIDGE_PATH}", timeout=10).text.count("window.uirlLoad") >= 1
    core = requests.get(f"{base}/task/files/miniwob.click-test/core/core.js", timeout=10)
    assert core.ok and "core.startEpisodeReal" in core.text
    for bad in ("../../../etc/passwd", "core/nope.js", "%2e%2e/%2e%2e/setup.py"):
        r = requests.get(f"{base}/task/files/miniwob.click-test/{bad}", timeout=10)
        assert r.status_code == 404, bad


def test_miniwob_and_own_tasks_mix_in_one_vector_env(mw_runtime: LocalRuntime) -> None:
    from uirl_gym.vector import SessionVectorEnv

    envs = SessionVectorEnv(
        2, runtime=mw_runtime, tasks={"simple_data_entry": 1.0, "miniwob.click-test": 1.0}
    )
    try:
        seen = set()
        for seed in range(3):
            obs, infos = envs.reset(seed=seed)
            seen.update(infos["task"])
            assert obs["screenshot"].shape == (2, 800, 1280, 3)
            shot = Action(ActionType.SCREENSHOT)
            _, rewards, _, _, _ = envs.step([shot, shot])
            assert rewards.shape == (2,)
        assert seen == {"simple_data_entry", "miniwob.click-test"}
    finally:
        envs.close()


# (task, seed, the text of the element both sides click)
PARITY = [
    ("click-button", 5, "wanted"),
    ("click-button", 6, "another button"),
    ("click-link", 3, "wanted"),
    ("click-checkboxes", 4, "Submit"),
]


def _pick(elements: list[dict], utterance: str, rule: str, text_key: str) -> dict:
    clickable = [e for e in elements if e["tag"] in ("button", "span") and e[text_key]]
    wanted = utterance.split('"')[1] if '"' in utterance else None
    if rule == "wanted":
        return next(e for e in clickable if e[text_key] == wanted)
    if rule == "another button":
        return next(e for e in clickable if e["tag"] == "button" and e[text_key] != wanted)
    return next(e for e in clickable if e[text_key] == rule)


@pytest.mark.skipif(
    shutil.which("chromedriver") is None, reason="needs chromedriver (Debian: chromium-driver)"
)
def test_rewards_match_the_miniwob_package(env: UIEnv) -> None:
    """The same seed gives the same problem (utterance, element places) as the wheel's
    own Selenium env, and the same click earns the same raw reward."""
    import gymnasium as gym
    import miniwob  # noqa: F401
    from miniwob.action import ActionTypes

    os.environ.setdefault("MINIWOB_CHROME_BINARY", shutil.which("chromium") or "chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", shutil.which("chromedriver") or "")
    theirs = {}
    try:
        for task, seed, rule in PARITY:
            if task not in theirs:
                theirs[task] = gym.make(f"miniwob/{task}-v1")
            _, ours_info = env.reset(seed=seed, options={"task": f"miniwob.{task}"})
            # The page's seed: the env draws it from its split (its own seed seeds that).
            obs, _ = theirs[task].reset(seed=ours_info["task_seed"])
            oracle = env.oracle()
            assert oracle["utterance"] == obs["utterance"], task
            element = _pick(list(obs["dom_elements"]), obs["utterance"], rule, "text")
            mine = _pick(oracle["elements"], oracle["utterance"], rule, "own_text")
            left, top = float(element["left"][0]), float(element["top"][0])
            assert (abs(mine["box"][0] / 3 - left), abs(mine["box"][1] / 3 - top)) < (1, 1)
            w, h = float(element["width"][0]), float(element["height"][0])
            x, y = left + w / 2, top + h / 2
            action = theirs[task].unwrapped.create_action(
                ActionTypes.CLICK_COORDS, coords=np.array([x, y], dtype=np.float32)
            )
            _, _, done, _, their_info = theirs[task].step(action)
            _, _, terminated, _, info = env.step(
                Action(ActionType.LEFT_CLICK, round(x * 3), round(y * 3))
            )
            assert done == terminated, (task, seed)
            assert info["raw_reward"] == their_info["raw_reward"], (task, seed, info)
    finally:
        for e in theirs.values():
            e.close()

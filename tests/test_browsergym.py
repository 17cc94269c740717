"""The BrowserGym contract (``browsergym/uirl.<name>``), checked with browsergym-core's
own renderers, action set and observation space on real sessions (one for the module).

browsergym-core is installed by scripts/install.sh (``--no-deps``: its playwright pin
would downgrade uirl's); the ``importorskip`` calls only guard a checkout without it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import task_play
from gymnasium.utils.env_checker import check_env

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.browsergym import GREETING, BrowserGymEnv, make_browsergym_env
from uirl_gym.env import UIEnv
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks import TASKS, browsergym_env_id

ENV_ID = "browsergym/uirl.miniwob.click-button"
OBSERVATION_KEYS = {
    "chat_messages", "goal", "goal_object", "open_pages_urls", "open_pages_titles",
    "active_page_index", "url", "screenshot", "dom_object", "axtree_object",
    "extra_element_properties", "focused_element_bid", "last_action", "last_action_error",
    "elapsed_time",
}  # fmt: skip
STEP_INFO_KEYS = {
    "action_exec_start", "action_exec_stop", "action_exec_timeout",
    "wait_for_page_loading_start", "wait_for_page_loading_stop", "validation_start",
    "validation_stop", "get_observation_start", "get_observation_stop", "task_info",
}  # fmt: skip


@pytest.fixture(scope="module")
def runtime() -> Iterator[LocalRuntime]:
    """This module's own session server: its session ends on MiniWoB++ tasks, which
    the shared pool's tests (resetting without naming a task) must not inherit."""
    with task_play.task_runtime("miniwob.click-button") as rt:
        yield rt


@pytest.fixture(scope="module")
def env(runtime: LocalRuntime) -> Iterator[gym.Env]:
    """``browsergym/uirl.miniwob.click-button`` with uirl's reading of the strings; other
    tasks are reset on the same session (``options={"task": ...}``)."""
    e = gym.make(ENV_ID, runtime=runtime, image_format="raw")
    try:
        yield e
    finally:
        e.close()


@pytest.fixture(scope="module")
def bgym() -> Any:
    """browsergym-core's modules the tests call."""
    pytest.importorskip("browsergym.core")
    from browsergym.core.action.highlevel import HighLevelActionSet
    from browsergym.utils import obs

    return type("BrowserGym", (), {"obs": obs, "HighLevelActionSet": HighLevelActionSet})


def on(env: gym.Env, mapping: Any) -> BrowserGymEnv:
    """A BrowserGym env over the module env's UIEnv (its session) with another action set."""
    uienv = env.unwrapped.env
    assert isinstance(uienv, UIEnv)
    return BrowserGymEnv(uienv, action_mapping=mapping)


def bid_of(axtree_text: str, role: str, name: str = "") -> str:
    """The bid of the first ``role`` node named ``name`` in flatten_axtree_to_str's text
    (what a text agent reads)."""
    match = re.search(rf"\[(\w+)\] {role} '{re.escape(name)}'", axtree_text)
    assert match, f"no {role} {name!r} in:\n{axtree_text}"
    return match.group(1)


def test_every_uirl_id_has_a_browsergym_id() -> None:
    for spec in TASKS.values():
        bg = gym.spec(browsergym_env_id(spec.env_id))
        assert bg.kwargs == {"task": spec.name} and bg.nondeterministic
    assert browsergym_env_id("uirl/SimpleDataEntry-v0") == "browsergym/uirl.SimpleDataEntry"
    assert gym.spec("browsergym/uirl.miniwob.click-button").kwargs["task"] == (
        "miniwob.click-button"
    )


def test_the_observation_has_browsergyms_keys_in_its_formats(env: gym.Env) -> None:
    """Every key of BrowserGym's observation space, each value in BrowserGym's own space
    (browsergym-core's BrowserEnv builds its spaces without starting a browser)."""
    obs, info = env.reset(seed=3)
    assert set(obs) == OBSERVATION_KEYS and set(info) == {"task_info"}
    assert env.observation_space.contains(obs)
    assert obs["goal_object"] == ({"type": "text", "text": obs["goal"]},)
    assert [(m["role"], m["message"]) for m in obs["chat_messages"]] == [
        ("assistant", GREETING),
        ("user", obs["goal"]),
    ]
    assert obs["url"] == obs["open_pages_urls"][0] and obs["active_page_index"][0] == 0
    assert (obs["last_action"], obs["last_action_error"]) == ("", "")
    assert obs["axtree_object"]["nodes"][0]["role"]["value"] == "RootWebArea"
    assert set(obs["dom_object"]) >= {"documents", "strings"}
    pytest.importorskip("browsergym.core")
    from browsergym.core.env import BrowserEnv

    theirs = BrowserEnv(task_entrypoint=None).observation_space  # type: ignore[arg-type]
    assert set(theirs.spaces) == OBSERVATION_KEYS
    for key, space in theirs.spaces.items():
        assert space.contains(obs[key]), key


def test_browsergyms_renderers_read_the_page(env: gym.Env, bgym: Any) -> None:
    obs, _ = env.reset(seed=3)
    axtree, dom = obs["axtree_object"], obs["dom_object"]
    extra = obs["extra_element_properties"]
    text = bgym.obs.flatten_axtree_to_str(axtree)
    goal_word = re.search(r'"(.+)"', obs["goal"]).group(1)  # type: ignore[union-attr]
    bid = bid_of(text, "button", goal_word)
    assert extra[bid]["set_of_marks"] and extra[bid]["clickable"]
    options: list[dict[str, Any]] = [
        {"with_visible": True, "with_clickable": True, "with_center_coords": True},
        {"with_bounding_box_coords": True, "with_som": True, "coord_decimals": 1},
        {"filter_visible_only": True, "filter_with_bid_only": True},
        {"filter_som_only": True, "hide_bid_if_invisible": True},
    ]
    for kwargs in options:
        rendered = bgym.obs.flatten_axtree_to_str(axtree, extra_properties=extra, **kwargs)
        assert bid_of(rendered, "button", goal_word) == bid, kwargs
    rich = bgym.obs.flatten_axtree_to_str(axtree, extra_properties=extra, **options[0])
    assert re.search(
        rf"\[{bid}\] button '{goal_word}', center=\"\(\d+,\d+\)\", clickable, visible", rich
    )
    html = bgym.obs.prune_html(
        bgym.obs.flatten_dom_to_str(dom, extra_properties=extra, with_visible=True, with_som=True)
    )
    assert re.search(rf'<button bid="{bid}"[^>]*>\s*{goal_word}\s*</button>', html), html
    assert bgym.obs.prune_html(bgym.obs.flatten_dom_to_str(dom))


def test_set_of_marks_overlay_marks_the_elements(env: gym.Env, bgym: Any) -> None:
    obs, _ = env.reset(seed=3)
    extra = obs["extra_element_properties"]
    marked = bgym.obs.overlay_som(obs["screenshot"], extra)
    assert marked.shape == obs["screenshot"].shape and marked.dtype == np.uint8
    for props in extra.values():
        if props["set_of_marks"]:
            x, y, w, h = (round(v) for v in props["bbox"])
            box = (slice(y, y + h), slice(x, x + w))
            assert not np.array_equal(marked[box], obs["screenshot"][box])


def test_a_browsergym_agent_clicks_by_bid_and_earns_the_reward(env: gym.Env, bgym: Any) -> None:
    """BrowserGym's demo agent's loop: its action set (strict, one action), the AXTree
    through its renderer, ``click('<bid>')``: the task's reward, the episode ends."""
    action_set = bgym.HighLevelActionSet(
        subsets=["chat", "bid", "coord"], strict=True, multiaction=False
    )
    benv = on(env, action_set.to_python_code)
    assert (benv.strict, benv.multiaction) == (True, False)
    obs, _ = benv.reset(seed=5)
    word = re.search(r'"(.+)"', obs["goal"]).group(1)  # type: ignore[union-attr]
    bid = bid_of(bgym.obs.flatten_axtree_to_str(obs["axtree_object"]), "button", word)
    obs, reward, terminated, truncated, info = benv.step(f"click('{bid}')")
    assert (reward, terminated, truncated) == (1.0, True, False), info
    assert obs["last_action"] == f"click('{bid}')" and obs["last_action_error"] == ""
    assert set(info) == STEP_INFO_KEYS and info["task_info"]["raw_reward"] == 1.0
    assert info["action_exec_start"] <= info["action_exec_stop"] <= info["get_observation_stop"]
    # The set's own limits: goto is not in it, two calls are refused.
    obs, *_ = benv.reset(seed=6)
    assert benv.step("goto('http://example.com')")[0]["last_action_error"] == (
        "ValueError: goto: not in this action set; allowed: noop, send_msg_to_user, scroll, "
        "fill, select_option, click, dblclick, hover, press, focus, clear, drag_and_drop, "
        "scroll_at, mouse_move, mouse_click, mouse_dblclick, mouse_drag_and_drop, "
        "keyboard_press, keyboard_type, keyboard_insert_text"
    )


@pytest.mark.parametrize("task", ["miniwob.enter-text", "miniwob.login-user"])
def test_fill_then_click_earns_the_reward(env: gym.Env, bgym: Any, task: str) -> None:
    """Text fields filled by bid (``fill``), then the button clicked: the reward."""
    obs, _ = env.reset(seed=7, options={"task": task})
    text = bgym.obs.flatten_axtree_to_str(obs["axtree_object"])
    fields = re.findall(r"\[(\w+)\] textbox ''", text)
    values = re.findall(r'"([^"]+)"', obs["goal"])
    assert len(fields) == len(values), (text, obs["goal"])
    for field, value in zip(fields, values, strict=True):
        obs, reward, terminated, _, info = env.step(f"fill('{field}', {value!r})")
        assert obs["last_action_error"] == "" and not terminated, info
    button = re.search(r"\[(\w+)\] button '(Submit|Login)'", text).group(1)  # type: ignore[union-attr]
    obs, reward, terminated, _, info = env.step(f"click('{button}')")
    assert (reward, terminated) == (1.0, True), info


def test_several_actions_in_one_string_with_a_multiaction_set(env: gym.Env, bgym: Any) -> None:
    """BrowserGym's default reading (loose, several calls) when its action set says so:
    prose and fences skipped, the calls run in order."""
    benv = on(env, bgym.HighLevelActionSet(subsets=["bid"]).to_python_code)
    assert (benv.strict, benv.multiaction) == (False, True)
    obs, _ = benv.reset(seed=8, options={"task": "miniwob.enter-text"})
    text = bgym.obs.flatten_axtree_to_str(obs["axtree_object"])
    field, button = bid_of(text, "textbox"), bid_of(text, "button", "Submit")
    value = re.search(r'"([^"]+)"', obs["goal"]).group(1)  # type: ignore[union-attr]
    answer = f"I fill it, then submit:\n```\nfill('{field}', {value!r})\nclick('{button}')\n```"
    _, reward, terminated, _, info = benv.step(answer)
    assert (reward, terminated) == (1.0, True), info


# What uirl refuses: the parser (two calls, an unknown name, code, nothing, a point off
# the screen) or the page (a bid it does not have).
REFUSED = {
    "click('1') click('2')": "ValueError: 2 actions (click, click): give exactly one action",
    "open_door()": "ValueError: open_door: unknown action; allowed: noop, send_msg_to_user,",
    "click(__import__('os'))": "ValueError: click: \"__import__('os')\" is not a literal",
    "": "ValueError: empty action: expected one call such as click('12') or noop()",
    "mouse_click(5000, 10)": "ValueError: mouse_click: x: 5000 is off the 1280x800 screen",
    "click('999')": "ValueError: bid '999'",
}


def test_a_refused_action_is_an_observation(env: gym.Env) -> None:
    """A refused action is the next observation's ``last_action_error`` (and
    ``task_info["invalid_action"]``); the page is untouched, the episode goes on."""
    obs0, _ = env.reset(seed=3)
    for action, error in REFUSED.items():
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs["last_action_error"].startswith(error), obs["last_action_error"]
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["task_info"]["invalid_action"] in obs["last_action_error"]
        assert obs["last_action"] == action
        assert np.array_equal(obs["screenshot"], obs0["screenshot"])
    obs, *_ = env.step("noop(0)")
    assert obs["last_action_error"] == ""


def test_a_refused_string_costs_an_invalid_action(env: gym.Env) -> None:
    """SimpleDataEntry charges 0.1 per refused action: a refused string pays it too."""
    env.reset(seed=0, options={"task": "simple_data_entry"})
    _, reward, terminated, _, info = env.step("click(")
    assert reward == -0.1 and not terminated, info


def test_the_chat_carries_the_agents_messages(env: gym.Env) -> None:
    env.reset(seed=3)
    env.unwrapped.chat.add_message(role="info", msg="thinking...")  # AgentLab's loop: not kept
    obs, *_ = env.step("send_msg_to_user('Done, I think.')")
    assert [m["role"] for m in obs["chat_messages"]] == ["assistant", "user", "assistant"]
    assert obs["chat_messages"][-1]["message"] == "Done, I think."
    obs, reward, terminated, _, _ = env.step("report_infeasible('There is no such button.')")
    assert obs["chat_messages"][-1]["role"] == "infeasible" and terminated and reward == 0.0


# BrowserGym's elapsed_time space is Box(0, inf), which the checker warns about.
@pytest.mark.filterwarnings("ignore:.*maximum value is infinity")
def test_gymnasiums_checker_passes(env: gym.Env) -> None:
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"use_raw_page_output": True}, "use_raw_page_output=True: not supported, uirl gives no"),
        ({"wait_for_user_message": True}, "wait_for_user_message=True: not supported"),
        ({"record_video_dir": "/tmp/v"}, "record_video_dir='/tmp/v': not supported"),
        (
            {"viewport": {"width": 500, "height": 500}},
            "viewport={'width': 500, 'height': 500}: the",
        ),
        ({"action_mapping": str.upper}, "action_mapping: uirl reads BrowserGym's action strings"),
        ({"screen": (160, 210)}, "unknown argument(s) 'screen' for a uirl env"),
    ],
)
def test_arguments_uirl_cannot_honour_are_refused(kwargs: dict[str, Any], error: str) -> None:
    """BrowserGym's arguments that would change nothing are taken; the others fail at
    gym.make, before any session starts."""
    with pytest.raises((ValueError, TypeError), match=re.escape(error)):
        gym.make(ENV_ID, **kwargs)
    made = make_browsergym_env(
        task="miniwob.click-button",
        headless=False,
        slow_mo=100,
        timeout=5000,
        pre_observation_delay=0.5,
        tags_to_mark="all",
        use_raw_page_output=False,
        viewport={"width": 160, "height": 210},
        screen_size=(160, 210),
        task_kwargs={"split": "test"},
    )
    assert made.env.default_options == {"split": "test"} and made.env.screen == (160, 210)
    made.close()

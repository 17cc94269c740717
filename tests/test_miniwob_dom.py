"""MiniWoB++'s own DOM observation (issue 41 item 4): ``observations=["dom_elements"]`` on
a MiniWoB++ id gives the ``miniwob`` package's ``dom_elements``, in its own space, made
from the page's own ``core.getDOMInfo()``; other tasks refuse it with a clear error.

Skipped when the ``miniwob`` wheel is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import SessionClient, SessionHTTPError
from uirl_gym.env import UIEnv
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.miniwob.wheel import miniwob_tasks

pytestmark = pytest.mark.skipif(not miniwob_tasks(), reason="the miniwob wheel is not installed")

SEED = 5
SCREEN = (160, 210)
# Forms, checkboxes, tabs, an inbox of hidden messages, and a FlightWoB page (its form in
# an iframe: its getDOMInfo reads the frame's document).
SAMPLE = ("enter-text", "click-checkboxes", "click-tab-2", "email-inbox", "flight.AA")


@pytest.fixture(scope="module")
def dom_env(runtime: LocalRuntime) -> Iterator[UIEnv]:
    env = UIEnv(
        runtime=runtime,
        task="miniwob.enter-text",
        screen_size=SCREEN,
        observations=["dom_elements", "axtree"],
    )
    try:
        yield env
    finally:
        env.close()


def _by(elements: tuple[dict, ...], **fields: str) -> dict:
    found = [e for e in elements if all(e[k] == v for k, v in fields.items())]
    assert len(found) == 1, (fields, [(e["tag"], e["id"], e["text"]) for e in elements])
    return found[0]


def test_dom_elements_are_the_miniwob_packages_in_its_own_space(dom_env: UIEnv) -> None:
    from miniwob.observation import get_observation_space

    theirs = get_observation_space(*SCREEN)["dom_elements"]
    for name in SAMPLE:
        obs, _ = dom_env.reset(seed=SEED, options={"task": f"miniwob.{name}"})
        elements = obs["dom_elements"]
        assert theirs.contains(elements), name
        assert dom_env.observation_space.contains(obs), name
        refs = [e["ref"] for e in elements]
        assert len(set(refs)) == len(refs) and elements[0]["parent"] == 0, name
        assert {e["parent"] for e in elements[1:]} <= set(refs), name
        assert elements[0]["tag"] == "body", name
    # The same seed, the same elements (refs restart with each episode).
    again, _ = dom_env.reset(seed=SEED, options={"task": f"miniwob.{SAMPLE[-1]}"})
    assert data_equivalence(again["dom_elements"], elements)


def test_dom_elements_follow_the_page(dom_env: UIEnv) -> None:
    obs, _ = dom_env.reset(seed=SEED, options={"task": "miniwob.enter-text"})
    field = _by(obs["dom_elements"], tag="input_text")
    button = _by(obs["dom_elements"], tag="button", text="Submit")
    assert field["value"] == "" and list(field["flags"]) == [0, 0, 0, 1]
    assert button["id"] == "subbtn" and float(button["width"][0]) > 0
    x = float(field["left"][0] + field["width"][0] / 2)
    y = float(field["top"][0] + field["height"][0] / 2)
    dom_env.step(Action(ActionType.LEFT_CLICK, int(x), int(y)))
    obs, *_ = dom_env.step(Action(ActionType.TYPE, text="hello"))
    field = _by(obs["dom_elements"], tag="input_text")
    # Focused, tampered with (the page saw the click), a leaf holding the typed text.
    assert field["value"] == "hello" and list(field["flags"]) == [1, 1, 0, 1]
    # The texts the instruction quotes are the page's own text pseudo-elements' or leaves'.
    texts = {e["text"] for e in obs["dom_elements"]}
    assert "Submit" in texts


def test_dom_elements_are_for_miniwob_tasks_only(runtime: LocalRuntime, dom_env: UIEnv) -> None:
    message = re.escape("'dom_elements' (the miniwob package's own DOM elements) exist for ")
    with pytest.raises(ValueError, match=message + ".*'simple_data_entry' is not one"):
        UIEnv(task="simple_data_entry", observations=["dom_elements"])
    with pytest.raises(ValueError, match=message + ".*'form_fill' is not one"):
        UIEnv(task="miniwob.click-button", tasks={"form_fill": 1.0}, observations=["dom_elements"])
    with pytest.raises(ValueError, match=message):
        dom_env.reset(seed=0, options={"task": "simple_data_entry"})
    with pytest.raises(ValueError, match=re.escape("(and, for MiniWoB++ tasks, dom_elements)")):
        UIEnv(task="miniwob.click-button", observations=["dom_element"])
    # The session refuses a page that is not a MiniWoB++ page, and says why.
    session = runtime.acquire()
    client = SessionClient(session)
    try:
        client.reset(seed=0, task="simple_data_entry")
        with pytest.raises(SessionHTTPError, match="only MiniWoB\\+\\+ pages") as refused:
            client.page(["dom_elements"])
        assert refused.value.status_code == 409
    finally:
        client.close()
        runtime.release(session, healthy=True)


@pytest.mark.skipif(
    shutil.which("chromedriver") is None, reason="needs chromedriver (Debian: chromium-driver)"
)
def test_dom_elements_match_the_miniwob_packages_env(dom_env: UIEnv) -> None:
    """The same seed, the same elements as the wheel's own Selenium env (boxes within a
    pixel: another Chromium build may place text a fraction apart)."""
    import gymnasium as gym

    os.environ.setdefault("MINIWOB_CHROME_BINARY", shutil.which("chromium") or "chromium")
    os.environ.setdefault("MINIWOB_CHROMEDRIVER", shutil.which("chromedriver") or "")
    for name in SAMPLE[:4]:
        theirs = gym.make(f"miniwob/{name}-v1")
        try:
            ours, info = dom_env.reset(seed=SEED, options={"task": f"miniwob.{name}"})
            obs, _ = theirs.reset(seed=info["task_seed"])
        finally:
            theirs.close()
        assert len(ours["dom_elements"]) == len(obs["dom_elements"]), name
        for mine, their in zip(ours["dom_elements"], obs["dom_elements"], strict=True):
            for key in ("ref", "parent", "tag", "text", "value", "id", "classes"):
                assert mine[key] == their[key], (name, key, mine, their)
            for key in ("left", "top", "width", "height"):
                assert np.abs(mine[key] - their[key]).max() <= 1.0, (name, key)

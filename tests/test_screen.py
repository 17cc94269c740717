"""The episode's screen size (``POST /reset``'s ``screen``, ``UIEnv(screen_size=...)``): the
viewport, the screenshot, where actions may point; 1280x800 whenever not given."""

from __future__ import annotations

import numpy as np
import pytest
import requests

from uirl_gym.actions import Action, ActionType, check_screen
from uirl_gym.client import SessionClient, SessionHTTPError
from uirl_gym.env import UIEnv
from uirl_gym.protocol import SessionInfo

SMALL = (640, 400)


def test_check_screen() -> None:
    assert check_screen([160, 210]) == (160, 210)
    for bad in ([8, 210], [160], "160x210", [160.0, 210], [True, 210], [4000, 800]):
        with pytest.raises(ValueError, match=r"screen: expected \[width, height\]"):
            check_screen(bad)
    action = Action(ActionType.LEFT_CLICK, 700, 100)
    action.validate()
    with pytest.raises(ValueError, match="off the 640x400 screen"):
        action.validate(screen=SMALL)


def test_a_reset_sets_the_screen_and_the_next_one_restores_it(session: SessionInfo) -> None:
    client = SessionClient(session)
    raw = SessionClient(session, image_format="raw")
    try:
        started = client.reset(0, {"num_rows": 1}, task="simple_data_entry", screen=SMALL)
        assert started["screen"] == list(SMALL)
        assert client.screenshot().shape == (400, 640, 3)
        assert raw.screenshot().shape == (400, 640, 3)  # raw bytes shaped by X-Width/Height
        answer = requests.get(
            f"{session.base_url}/act",
            params={"action_type": "left_click", "x": 900, "y": 500},
            timeout=30,
        )
        assert answer.ok and answer.headers["X-Clamped"] == "x=900->639, y=500->399"
        assert (answer.headers["X-Width"], answer.headers["X-Height"]) == ("640", "400")
        with pytest.raises(SessionHTTPError, match="screen: expected"):
            client.reset(0, {}, task="simple_data_entry", screen=(10, 10))
        # Not given: the default screen, not the last episode's.
        assert client.reset(0, {"num_rows": 1}, task="simple_data_entry")["screen"] == [1280, 800]
        assert client.screenshot().shape == (800, 1280, 3)
    finally:
        client.close()
        raw.close()


def test_the_env_observes_and_acts_on_its_screen(session: SessionInfo) -> None:
    env = UIEnv(base_url=session, task="simple_data_entry", screen_size=SMALL)
    try:
        obs, _ = env.reset(seed=3, options={"num_rows": 1})
        assert obs["screenshot"].shape == (400, 640, 3) and env.observation_space.contains(obs)
        assert env.action_space["x"].n == 640 and env.action_space["end_y"].n == 400
        again, _ = env.reset(seed=3, options={"num_rows": 1})
        assert np.array_equal(obs["screenshot"], again["screenshot"])
        _, _, _, _, info = env.step(Action(ActionType.LEFT_CLICK, 1000, 10))
        assert "off the 640x400 screen" in info["invalid_action"]
        obs, _, _, _, info = env.step(Action(ActionType.LEFT_CLICK, 600, 10))
        assert "invalid_action" not in info and obs["screenshot"].shape == (400, 640, 3)
    finally:
        env.close()
    with pytest.raises(ValueError, match="screen"):
        UIEnv(base_url=session, screen_size=(1280, 9000))

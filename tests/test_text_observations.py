"""The page as text in gym.make's env (issue 41): opt-in observations, checked names, a
size cap said in the text, the element actions' errors as an observation."""

from __future__ import annotations

import re
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.env import TEXT_OBSERVATIONS, UIEnv
from uirl_gym.page_text import CUT_MARKER, _cut


def test_a_bad_observation_name_fails_at_gym_make_with_the_valid_names() -> None:
    with pytest.raises(ValueError) as refused:
        gym.make("uirl/miniwob.click-button-v0", observations=["axtre"])
    message = str(refused.value)
    assert "unknown 'axtre'" in message and "did you mean 'axtree'?" in message
    assert all(name in message for name in TEXT_OBSERVATIONS)
    with pytest.raises(ValueError, match="text_limit"):
        gym.make("uirl/miniwob.click-button-v0", observations=["axtree"], text_limit=10)


def test_a_text_is_cut_at_a_line_with_the_marker_within_its_limit() -> None:
    lines = [f"line {i:03d} " + "x" * 20 for i in range(100)]
    text = _cut(lines, 500)
    assert len(text) <= 500
    kept, marker = text.rsplit("\n", 1)
    assert kept.split("\n") == lines[: len(kept.split("\n"))]  # whole lines, in order
    cut = 100 - len(kept.split("\n"))
    assert marker == CUT_MARKER.format(lines=cut, limit=500)
    assert _cut(lines[:3], 500) == "\n".join(lines[:3])  # short texts are left whole


@pytest.fixture(scope="module")
def sheet_env() -> Iterator[UIEnv]:
    env = gym.make(
        "uirl/SimpleDataEntry-v0",
        observations=list(TEXT_OBSERVATIONS),
        text_limit=4000,
    )
    try:
        yield env.unwrapped
    finally:
        env.close()


def test_every_text_observation_on_the_sheet_in_its_space(sheet_env: UIEnv) -> None:
    obs, info = sheet_env.reset(seed=0)
    assert sheet_env.observation_space.contains(obs)
    # The sheet is longer than the limit: cut, and said.
    for name in ("axtree", "html"):
        assert len(obs[name]) <= 4000
        assert re.search(
            r"\[\.\.\. \d+ more lines cut: this text stops at 4000 characters\]$", obs[name]
        )
    assert "[" in obs["axtree"] and "] columnheader 'A'" in obs["axtree"]
    assert obs["focused"] == "" or obs["focused"].isalnum()
    assert obs["url"].startswith("http://127.0.0.1:")
    assert obs["last_action_error"] == ""
    assert not np.array_equal(obs["som"], obs["screenshot"])
    # Every element listed is rendered, with a box in screen pixels.
    for element in obs["elements"]:
        assert element["bbox"].shape == (4,) and element["bbox"][2] >= 0
    # A refused element action is the next observation's error, and the episode goes on.
    obs, reward, terminated, truncated, info = sheet_env.step(
        {"action_type": "fill", "bid": "zz9", "text": "Ann"}
    )
    assert "is not on the page" in info["invalid_action"]
    assert obs["last_action_error"] == info["invalid_action"]
    assert not (terminated or truncated)
    # A message to the user is the env's: nothing is sent to the page.
    obs, reward, *_, info = sheet_env.step({"action_type": "send_msg_to_user", "text": "Done?"})
    assert info["message_to_user"] == "Done?" and reward == 0.0
    first = sheet_env.step({"action_type": "screenshot"})[0]
    assert first["last_action_error"] == ""


def test_the_same_seed_gives_the_same_text_and_bids(sheet_env: UIEnv) -> None:
    first, _ = sheet_env.reset(seed=5)
    again, _ = sheet_env.reset(seed=5)
    for name in ("axtree", "html", "focused", "url"):
        assert first[name] == again[name], name
    assert [e["bid"] for e in first["elements"]] == [e["bid"] for e in again["elements"]]


def test_a_text_in_a_nameless_box_carries_the_box_bid() -> None:
    """A menu item that is a <div> around its text (SpreadsheetEdit's) is left out as a
    nameless box; its text shows with the box's bid, so a text agent can click it. A
    box of several children passes its bid to none (which would it name?)."""
    from uirl_gym.page_text import axtree_text

    def node(node_id: str, role: str, name: str = "", bid: str | None = None, kids=()):
        n = {"nodeId": node_id, "role": {"value": role}, "childIds": list(kids)}
        if name:
            n["name"] = {"value": name}
        if bid is not None:
            n["browsergym_id"] = bid
        return n

    nodes = [
        node("1", "RootWebArea", "Sheet", kids=["2", "4"]),
        node("2", "generic", bid="57", kids=["3"]),
        node("3", "StaticText", "Archive"),
        node("4", "generic", bid="58", kids=["5", "6"]),
        node("5", "StaticText", "Cut"),
        node("6", "StaticText", "Copy"),
    ]
    assert axtree_text(nodes).split("\n") == [
        "RootWebArea 'Sheet'",
        "\t[57] StaticText 'Archive'",
        "\tStaticText 'Cut'",
        "\tStaticText 'Copy'",
    ]

"""``GET /act`` as a ui-verifiers (pyautogui) client uses it: what upstream accepts works.

Upstream passes ``/act`` parameters to pyautogui: X clamps the pointer to the screen,
``hotkey`` takes any of pyautogui's key names, ``typewrite`` presses Tab and Enter for
``\\t`` and ``\\n``, FastAPI ignores unknown query parameters.
"""

from __future__ import annotations

import json
import time

import h11
import pytest
import requests
from key_names import PYAUTOGUI_KEYBOARD_KEYS

from uirl_gym.actions import Action, ActionType, key_sequence
from uirl_gym.client import InvalidActionError, SessionClient
from uirl_gym.protocol import SessionInfo, encode_json_header
from uirl_gym.session.app import safe_headers

TIMEOUT_S = 30
FIELDS = ("first_name", "last_name", "email")


def act(base: str, **params: object) -> requests.Response:
    return requests.get(f"{base}/act", params=params, timeout=TIMEOUT_S)


def centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


@pytest.mark.parametrize("keys", ["é", "😀", "你", "ctrl+é"])
def test_a_non_ascii_key_is_a_400_and_the_session_is_kept(
    session: SessionInfo, client: SessionClient, keys: str
) -> None:
    launches = client.health()["browser_launches"]
    t0 = time.monotonic()
    response = act(session.base_url, action_type="keys", keys=keys)
    assert response.status_code == 400, response.text
    assert "not a key on the keyboard" in response.json()["detail"]
    assert "action_type=type" in response.json()["detail"]
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(InvalidActionError):  # an agent's mistake, not a dead session
        client.act(Action(ActionType.KEYS, keys=keys))
    health = client.health()
    assert health["browser_alive"] and health["browser_launches"] == launches
    # What the agent meant works with `type`.
    assert act(session.base_url, action_type="type", text=keys).status_code == 200


def test_off_screen_coordinates_are_clamped_and_reported(client: SessionClient) -> None:
    client.reset(seed=0, options={"rows": [0]})
    base = client.base_url
    for params, clamped in [
        ({"x": 5000, "y": -3}, "x=5000->1279, y=-3->0"),
        ({"x": -1, "y": 800}, "x=-1->0, y=800->799"),
        ({"x": 10**30, "y": 5}, "x="),
    ]:
        response = act(base, action_type="mouse_move", **params)
        assert response.status_code == 200, response.text
        assert response.headers["X-Clamped"].startswith(clamped)
    email = client.oracle()["inputs"]["email"]["box"]
    x, y = centre(email)
    response = act(base, action_type="left_click", x=x, y=y)
    assert "X-Clamped" not in response.headers
    response = act(base, action_type="type", text="edge", delay=-1)
    assert response.status_code == 200 and response.headers["X-Clamped"] == "delay=-1->0"
    assert client.oracle()["inputs"]["email"]["value"] == "edge"


def test_unknown_and_unused_parameters_are_ignored_and_named(client: SessionClient) -> None:
    client.reset(seed=0, options={"rows": [0]})
    base = client.base_url
    x, y = centre(client.oracle()["inputs"]["first_name"]["box"])
    act(base, action_type="left_click", x=x, y=y)
    response = act(base, action_type="type", text="ab", x=1, y=2, colour="red", session="s1")
    assert response.status_code == 200, response.text
    assert response.headers["X-Ignored-Params"] == "colour, session, x, y"
    assert client.oracle()["inputs"]["first_name"]["value"] == "ab"
    # Scroll with one coordinate: upstream moves the pointer only with both.
    response = act(base, action_type="scroll", direction="down", x=300)
    assert response.status_code == 200 and response.headers["X-Ignored-Params"] == "x"


def test_scroll_direction_ignores_case_and_empty_text_types_nothing(
    client: SessionClient,
) -> None:
    client.reset(seed=0, options={"rows": [0]})
    base = client.base_url
    assert act(base, action_type="scroll", x=300, y=400, direction="DOWN").status_code == 200
    assert client.oracle()["scroll_top"] > 0
    assert act(base, action_type="scroll", x=300, y=400, direction="Up").status_code == 200
    assert client.oracle()["scroll_top"] == 0
    before = client.oracle()
    response = act(base, action_type="type", text="")
    assert response.status_code == 200, response.text
    after = client.oracle()
    assert after["inputs"] == before["inputs"] and after["focused"] == before["focused"]


def test_typed_tabs_and_newlines_press_tab_and_enter(client: SessionClient) -> None:
    """``type("first\\tlast\\temail\\n")`` fills the three fields and submits, as upstream."""
    client.reset(seed=5, options={"rows": [7]})
    oracle = client.oracle()
    client.act(Action(ActionType.LEFT_CLICK, *centre(oracle["inputs"]["first_name"]["box"])))
    client.act(Action(ActionType.TYPE, text="\t".join(oracle["target_values"][0]) + "\n"))
    progress = client.progress()
    assert progress["submitted_row_indices"] == [7], client.oracle()["inputs"]
    assert client.oracle()["view"] == "done"
    # A literal tab never lands in a field.
    client.reset(seed=5, options={"rows": [7]})
    inputs = client.oracle()["inputs"]
    client.act(Action(ActionType.LEFT_CLICK, *centre(inputs["first_name"]["box"])))
    client.act(Action(ActionType.TYPE, text="a\tb\r\nc"))
    values = {f: client.oracle()["inputs"][f]["value"] for f in FIELDS}
    assert values["first_name"] == "a" and "\t" not in "".join(values.values())


def test_every_pyautogui_key_name_is_accepted(client: SessionClient) -> None:
    client.reset(seed=0, options={"rows": [0]})
    base = client.base_url
    refused = {}
    # One name per key the browser gets (aliases such as del/delete press the same key;
    # test_actions checks every name's mapping) and a few single characters.
    by_key = {tuple(key_sequence(n)): n for n in reversed(PYAUTOGUI_KEYBOARD_KEYS) if len(n) > 1}
    names = [*by_key.values(), "\t", "\n", " ", "+", "a", "~"]
    for name in names:
        response = act(base, action_type="keys", keys=name, format="jpeg", quality=10)
        if response.status_code != 200:
            refused[name] = (response.status_code, response.text[:200])
    assert refused == {}
    # Combinations as upstream splits them ("ctrl+shift+c", any case).
    for keys in ("ctrl+shift+c", "CTRL+A", "shift+tab", "alt+f4", "win+d", "ctrl+num5"):
        assert act(base, action_type="keys", keys=keys).status_code == 200, keys
    assert client.health()["browser_alive"]


def test_long_text_upstream_would_type_is_typed(client: SessionClient) -> None:
    """The action space caps text at 512; an upstream client may send more."""
    client.reset(seed=0, options={"rows": [0]})
    x, y = centre(client.oracle()["inputs"]["email"]["box"])
    act(client.base_url, action_type="left_click", x=x, y=y)
    response = act(client.base_url, action_type="type", text="é" * 600)
    assert response.status_code == 200, response.text
    assert client.oracle()["inputs"]["email"]["value"] == "é" * 600


def test_a_parameter_name_no_header_can_hold_is_named_safely(client: SessionClient) -> None:
    """``zz%20=1`` made an illegal header: the click ran, then the answer was dropped."""
    client.reset(seed=0, options={"rows": [0]})
    base = client.base_url
    x, y = centre(client.oracle()["inputs"]["first_name"]["box"])
    # The probe's request, as sent: the header ended in a space.
    response = requests.get(
        f"{base}/act?action_type=left_click&x={x}&y={y}&zz%20=1", timeout=TIMEOUT_S
    )
    assert response.status_code == 200, response.text
    assert response.headers["X-Ignored-Params"] == "zz%20"
    odd = {"zz ": "1", " lead": "1", "tab\there": "1", "é": "1", "del\x7f": "1", "": "1"}
    response = act(base, action_type="left_click", x=x, y=y, **odd)
    assert response.status_code == 200, response.text
    named = response.headers["X-Ignored-Params"]
    assert "zz%20" in named and "%20lead" in named and "tab%09here" in named
    assert "%C3%A9" in named and "del%7F" in named
    # Many: the header names 20 and counts the rest (a client reads 64 KB at most).
    many = {f"p{i:03d}": "1" for i in range(500)}
    response = act(base, action_type="left_click", x=x, y=y, **many)
    assert response.status_code == 200, response.text
    assert response.headers["X-Ignored-Params"].endswith("p019, and 480 more")
    assert client.oracle()["focused"] == "first_name"


def test_every_header_built_from_input_can_be_sent() -> None:
    record = {"events": [{"title": "a\x7fb\u00e9\n\t "}]}
    for headers in (
        safe_headers({"X-A": "zz ", "X-B": " x", "X-C": "t\tab\x00\x7f\u00e9\u4f60", "X-D": ""}),
        {"X-Progress": encode_json_header(record)},
    ):
        # h11 is what refused the value (and dropped the answer): ask it directly.
        h11.Response(status_code=200, headers=list(headers.items()))
    assert json.loads(encode_json_header(record)) == record
    assert safe_headers({"X-A": "zz "}) == {"X-A": "zz%20"}

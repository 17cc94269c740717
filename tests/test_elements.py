"""The page as text and actions by element, through a real session server (issue 41):
``GET /page`` marks every element with a bid (frames and open shadow roots too) and says
what shows of it; an action on a bid becomes real input at the centre of the element's
visible part (scrolled into view first), and a bid that cannot be acted on is refused
with the reason, the session going on. On a plug-in task page of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from plugin_tasks import plugin_session

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import InvalidActionError, SessionClient
from uirl_gym.page_text import axtree_text, html_text

PLUGIN = '''
"""A page of every kind of element an action by element meets (tests/test_elements.py)."""

import dataclasses

from uirl_gym.tasks.base import Task
from uirl_gym.tasks.simple_data_entry import TASK_SPEC as _BASE

PAGE = """<!doctype html><html><body style="margin:0; font: 16px sans-serif">
<button id="plain" style="position:absolute;left:10px;top:10px;width:120px;height:30px">Plain</button>
<button id="gone" style="display:none">Gone</button>
<button id="ghost" style="position:absolute;left:150px;top:10px;width:120px;height:30px;visibility:hidden">Ghost</button>
<button id="under" style="position:absolute;left:10px;top:60px;width:120px;height:30px">Under</button>
<div id="cover" style="position:absolute;left:0;top:50px;width:300px;height:50px;background:#fee"></div>
<button id="off" disabled style="position:absolute;left:10px;top:110px;width:120px;height:30px">Off</button>
<button id="vanish" style="position:absolute;left:150px;top:110px;width:120px;height:30px">Vanish</button>
<input id="name" aria-label="Name" value="old" style="position:absolute;left:10px;top:160px;width:200px;height:30px">
<input id="day" type="date" style="position:absolute;left:250px;top:160px">
<input id="box" type="checkbox" style="position:absolute;left:450px;top:160px">
<select id="pick" style="position:absolute;left:10px;top:210px">
  <option value="r">Red</option><option value="g">Green</option></select>
<div id="note" contenteditable="true" style="position:absolute;left:250px;top:210px;width:200px;height:30px">x</div>
<div id="sheet" style="position:absolute;left:10px;top:260px;width:300px;height:100px;overflow:auto">
  <div style="height:400px"></div><button id="deep">Deep</button></div>
<iframe id="frame" style="position:absolute;left:400px;top:260px;width:200px;height:80px;border:5px solid;padding:3px"
  srcdoc="<body style='margin:0'><button id='inner' style='width:100px;height:30px'>Inner</button></body>"></iframe>
<div id="host" style="position:absolute;left:650px;top:260px"></div>
<button id="far" style="position:absolute;left:10px;top:1500px;width:120px;height:30px">Far</button>
<script src="/task/uirl.js"></script>
<script>
const $ = (id) => document.getElementById(id);
window.log = [];
const hit = (which) => window.log.push(which);
for (const id of ["plain", "under", "off", "vanish", "deep", "far"]) $(id).onclick = () => hit(id);
$("vanish").addEventListener("click", () => $("vanish").remove());
$("name").addEventListener("keydown", (e) => hit("key:" + e.key));
$("pick").addEventListener("change", () => hit("pick:" + $("pick").value));
const wireFrame = () => {
  const inner = $("frame").contentDocument.getElementById("inner");
  if (inner) inner.onclick = () => hit("inner");
};
wireFrame();
$("frame").addEventListener("load", wireFrame);
const shadow = $("host").attachShadow({mode: "open"});
shadow.innerHTML = "<button id='shadowed' style='width:100px;height:30px'>Shadowed</button>";
shadow.getElementById("shadowed").onclick = () => hit("shadowed");
uirl.onLoad(() => { window.log = []; });
uirl.onInspect(() => ({
  log: window.log, name: $("name").value, day: $("day").value, pick: $("pick").value,
  note: $("note").textContent,
}));
</script></body></html>"""


class ElementsTask(Task):
    name = "elements_demo"

    def reset(self, seed, options):
        self.episode_id += 1
        return {"instruction": "Act on every element.", "app_state": {"episode": self.episode_id}}

    def page_html(self):
        return PAGE

    def handle_event(self, event):
        return {"recorded": True}

    def progress(self):
        return {"episode": self.episode_id}

    def oracle(self, page_state):
        return dict(page_state)


TASK_SPEC = dataclasses.replace(
    _BASE, name="elements_demo", env_id="uirl/ElementsDemo-v0", task=ElementsTask, doc=None
)
'''


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionClient]:
    with plugin_session(
        tmp_path_factory.mktemp("plugin"), "uirl_elements_demo", PLUGIN, "elements_demo"
    ) as info:
        session = SessionClient(info, action_timeout_s=10.0)
        try:
            yield session
        finally:
            session.close()


def _fresh(client: SessionClient) -> dict[str, str]:
    """A new episode; the bid of each element with an id (frames and shadow roots too)."""
    client.reset(0, {}, task="elements_demo")
    page = client.page(["dom", "elements", "axtree"])
    return _bids_by_id(page)


def _bids_by_id(page: dict[str, Any]) -> dict[str, str]:
    strings = page["dom"]["strings"]
    bids: dict[str, str] = {}
    for document in page["dom"]["documents"]:
        for attrs in document["nodes"]["attributes"]:
            named = {strings[attrs[k]]: strings[attrs[k + 1]] for k in range(0, len(attrs), 2)}
            if "id" in named and "bid" in named:
                bids[named["id"]] = named["bid"]
    return bids


def _act(client: SessionClient, **fields: Any) -> None:
    client.act(Action(**fields))


def _refused(client: SessionClient, **fields: Any) -> str:
    with pytest.raises(InvalidActionError) as refused:
        client.act(Action(**fields))
    assert refused.value.status_code == 422
    return refused.value.detail


def test_every_element_has_a_bid_and_says_what_shows_of_it(client: SessionClient) -> None:
    bids = _fresh(client)
    page = client.page(["axtree", "elements", "dom"])
    # Frames and open shadow roots are marked too; a frame's elements carry its letters.
    assert {"plain", "inner", "shadowed", "deep", "far", "frame"} <= set(bids)
    assert bids["frame"].isalpha() and bids["inner"].startswith(bids["frame"])
    assert len(set(bids.values())) == len(bids)
    elements = page["elements"]
    assert elements[bids["plain"]]["visibility"] == 1.0
    assert elements[bids["plain"]]["set_of_marks"] and elements[bids["plain"]]["clickable"]
    assert elements[bids["plain"]]["bbox"] == [10, 10, 120, 30]
    assert elements[bids["gone"]] == {
        "bbox": None, "visibility": 0.0, "clickable": False, "set_of_marks": False
    }  # fmt: skip
    assert elements[bids["ghost"]]["visibility"] == 0.0
    # Covered: shown, but not a mark (a click at its centre would hit the cover).
    assert elements[bids["under"]]["visibility"] == 1.0
    assert not elements[bids["under"]]["set_of_marks"]
    # Clipped by its scrolled container, and below the screen.
    assert elements[bids["deep"]]["visibility"] == 0.0
    assert elements[bids["far"]]["visibility"] == 0.0
    # The frame's content box is where its elements are: border 5 + padding 3.
    assert elements[bids["inner"]]["bbox"] == [408, 268, 100, 30]
    # The tree reaches into the frame and the shadow root, with the same bids.
    tree = {n.get("browsergym_id"): n for n in page["axtree"]["nodes"]}
    assert tree[bids["inner"]]["name"]["value"] == "Inner"
    assert tree[bids["shadowed"]]["name"]["value"] == "Shadowed"
    text = axtree_text(page["axtree"]["nodes"])
    assert f"[{bids['plain']}] button 'Plain'" in text
    assert f"[{bids['name']}] textbox 'Name' value='old'" in text
    html = html_text(page["dom"])
    assert f'<button bid="{bids["plain"]}" id="plain">' in html
    assert "Gone" not in html  # not rendered, not shown


def test_bids_are_the_same_for_the_same_episode_and_kept_within_it(client: SessionClient) -> None:
    first = _fresh(client)
    again = _bids_by_id(client.page(["dom"]))
    assert again == first
    assert _fresh(client) == first  # counters start afresh each episode


def test_actions_by_bid_are_real_input_where_the_element_shows(client: SessionClient) -> None:
    bids = _fresh(client)
    for target in ("plain", "inner", "shadowed", "deep", "far"):
        _act(client, type=ActionType.LEFT_CLICK, bid=bids[target])
    assert client.oracle()["log"] == ["plain", "inner", "shadowed", "deep", "far"]
    # The scrolled-into-view element now shows.
    assert client.page(["elements"])["elements"][bids["far"]]["visibility"] == 1.0


def test_an_element_that_cannot_take_the_action_is_refused_with_the_reason(
    client: SessionClient,
) -> None:
    bids = _fresh(client)
    click = ActionType.LEFT_CLICK
    assert "is not rendered" in _refused(client, type=click, bid=bids["gone"])
    assert "is hidden" in _refused(client, type=click, bid=bids["ghost"])
    assert 'is covered by <div id="cover"' in _refused(client, type=click, bid=bids["under"])
    assert "is disabled" in _refused(client, type=click, bid=bids["off"])
    assert "is not on the page" in _refused(client, type=click, bid="999")
    _act(client, type=click, bid=bids["vanish"])
    assert "from an earlier observation" in _refused(client, type=click, bid=bids["vanish"])
    # Nothing was clicked by a refusal, and the session goes on.
    _act(client, type=click, bid=bids["plain"])
    assert client.oracle()["log"] == ["vanish", "plain"]


def test_fill_select_focus_and_keys_on_elements(client: SessionClient) -> None:
    bids = _fresh(client)
    _act(client, type=ActionType.FILL, bid=bids["name"], text="Ann")
    _act(client, type=ActionType.FILL, bid=bids["day"], text="2026-11-29")
    _act(client, type=ActionType.SELECT_OPTION, bid=bids["pick"], text="Green")
    _act(client, type=ActionType.FILL, bid=bids["note"], text="done")
    state = client.oracle()
    assert (state["name"], state["day"], state["pick"], state["note"]) == (
        "Ann", "2026-11-29", "g", "done"
    )  # fmt: skip
    # The value was typed as keys, as a person types it.
    assert [e for e in state["log"] if e.startswith("key:")] == ["key:A", "key:n", "key:n"]
    assert "pick:g" in state["log"]
    _act(client, type=ActionType.FILL, bid=bids["name"], text="")
    assert client.oracle()["name"] == ""
    assert "cannot be filled" in _refused(client, type=ActionType.FILL, bid=bids["box"], text="x")
    detail = _refused(client, type=ActionType.SELECT_OPTION, bid=bids["pick"], text="Blue")
    assert 'no option "Blue"' in detail and '"Green"' in detail
    _act(client, type=ActionType.FOCUS, bid=bids["name"])
    assert client.page()["focused_element_bid"] == bids["name"]
    _act(client, type=ActionType.KEYS, bid=bids["name"], keys="Enter")
    assert client.oracle()["log"][-1] == "key:Enter"

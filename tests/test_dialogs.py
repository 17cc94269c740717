"""JavaScript dialogs (``alert``, ``confirm``, ``prompt``, a ``beforeunload`` prompt) are
answered at once, as the task says (``Task.answer_dialog``): before, nothing answered
them, the page froze, and the action that opened one ran past its deadline (a 504; the
episode's page given up). Through a real session server, on a plug-in task of the
test's own (a package on the server's path, found by its entry point)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from plugin_tasks import plugin_session

from uirl_gym.runtimes.base import SessionInfo

# Each action answers well within this (a dialog is answered in milliseconds); the
# deadline each /act asks for, past which an unanswered dialog made it a 504.
PROMPT_S = 5.0
ACT_TIMEOUT_S = 8
HTTP_TIMEOUT_S = 30

PLUGIN = '''
"""A task whose page opens every kind of JavaScript dialog (tests/test_dialogs.py)."""

import dataclasses

from uirl_gym.tasks.base import Task
from uirl_gym.tasks.simple_data_entry import TASK_SPEC as _BASE

PAGE = """<!doctype html><html><body style="margin:0; font: 16px sans-serif">
<input id="draft" style="position:absolute;left:10px;top:10px;width:200px;height:30px">
<button id="alert" style="position:absolute;left:10px;top:60px;width:120px;height:30px">
  alert</button>
<button id="confirm" style="position:absolute;left:10px;top:110px;width:120px;height:30px">
  confirm</button>
<button id="prompt" style="position:absolute;left:10px;top:160px;width:120px;height:30px">
  prompt</button>
<a id="leave" href="/elsewhere" style="position:absolute;left:10px;top:210px">leave</a>
<button id="many" style="position:absolute;left:10px;top:260px;width:120px;height:30px">
  many</button>
<script src="/task/uirl.js"></script>
<script>
const $ = (id) => document.getElementById(id);
const answered = (which, value) => uirl.record({type: "answer", which, value});
$("alert").onclick = () => { alert("Saved!"); answered("alert", "closed"); };
$("confirm").onclick = () => answered("confirm", confirm("Delete the draft?"));
$("prompt").onclick = () => answered("prompt", prompt("Your name?", "Ada"));
$("many").onclick = () => { for (let i = 0; i < 15; i++) alert(`alert ${i}`); };
addEventListener("beforeunload", (event) => { event.preventDefault(); event.returnValue = ""; });
uirl.onLoad(() => { $("draft").value = ""; });
uirl.onInspect(() => ({draft: $("draft").value}));
</script></body></html>"""


class DialogTask(Task):
    """The reset option ``dialogs`` picks the answer: "default" (the contract's),
    "dismiss", "grace" (OK, a prompt answered "Grace") or "broken" (it raises)."""

    name = "dialog_demo"

    def __init__(self):
        self.policy = "default"
        self.answers = []
        self.dialogs = []

    def reset(self, seed, options):
        self.policy = options.get("dialogs", "default")
        self.answers, self.dialogs = [], []
        self.episode_id += 1
        return {"instruction": "Press every button.", "app_state": {"episode": self.episode_id}}

    def page_html(self):
        return PAGE

    def answer_dialog(self, dialog):
        # Imported here: the test's first run was on a server that answered no dialog.
        from uirl_gym.tasks.base import DISMISS, DialogAnswer

        self.dialogs.append([dialog.type, dialog.message])
        if self.policy == "dismiss":
            return DISMISS
        if self.policy == "grace":
            return DialogAnswer(accept=True, prompt_text="Grace")
        if self.policy == "broken":
            raise RuntimeError("a bug in the task")
        return super().answer_dialog(dialog)

    def handle_event(self, event):
        if event.get("episode") == self.episode_id:
            self.answers.append([event["which"], event["value"]])
        return {"recorded": True}

    def progress(self):
        return {"episode": self.episode_id, "answers": self.answers, "dialogs": self.dialogs}

    def oracle(self, page_state):
        return dict(page_state)


TASK_SPEC = dataclasses.replace(
    _BASE, name="dialog_demo", env_id="uirl/DialogDemo-v0", task=DialogTask, doc=None
)
'''


@pytest.fixture(scope="module")
def dialog_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionInfo]:
    """A session server of the plug-in task (the package is on its path only)."""
    with plugin_session(
        tmp_path_factory.mktemp("plugin"), "uirl_dialog_demo", PLUGIN, "dialog_demo"
    ) as info:
        yield info


def _reset(info: SessionInfo, policy: str) -> None:
    answer = requests.post(
        f"{info.base_url}/reset",
        json={"seed": 0, "options": {"dialogs": policy}},
        headers=info.headers,
        timeout=HTTP_TIMEOUT_S,
    )
    assert answer.status_code == 200, answer.text


def _get(info: SessionInfo, route: str) -> Any:
    answer = requests.get(f"{info.base_url}{route}", headers=info.headers, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _act(info: SessionInfo, what: str, **params: Any) -> list[dict[str, Any]]:
    """The action, answered within PROMPT_S; the dialogs its answer reports."""
    t0 = time.perf_counter()
    answer = requests.get(
        f"{info.base_url}/act",
        params={**params, "timeout": ACT_TIMEOUT_S, "format": "jpeg"},
        timeout=HTTP_TIMEOUT_S,
    )
    seconds = time.perf_counter() - t0
    assert answer.status_code == 200, f"{what}: {answer.status_code} {answer.text[:300]}"
    assert seconds < PROMPT_S, f"{what}: answered after {seconds:.1f}s"
    return json.loads(answer.headers.get("X-Dialogs", "[]"))


def _click(info: SessionInfo, what: str, x: int, y: int) -> list[dict[str, Any]]:
    return _act(info, what, action_type="left_click", x=x, y=y)


# (policy, what the page got: alert, confirm, prompt; whether the page was left)
POLICIES = [
    ("default", "closed", True, "Ada", True),
    ("dismiss", "closed", False, None, False),
    ("grace", "closed", True, "Grace", True),
]


@pytest.mark.parametrize(("policy", "alerted", "confirmed", "prompted", "left"), POLICIES)
def test_dialogs_are_answered_at_once_by_the_task(
    dialog_session: SessionInfo,
    policy: str,
    alerted: str,
    confirmed: bool,
    prompted: str | None,
    left: bool,
) -> None:
    info = dialog_session
    _reset(info, policy)
    _click(info, "click the draft", 100, 25)
    _act(info, "type a draft", action_type="type", text="kept")
    accepted = policy != "dismiss"
    assert _click(info, "alert", 70, 75) == [
        {"type": "alert", "message": "Saved!", "accepted": accepted}
    ]
    assert _click(info, "confirm", 70, 125) == [
        {"type": "confirm", "message": "Delete the draft?", "accepted": accepted}
    ]
    reported = {"type": "prompt", "message": "Your name?", "default_prompt": "Ada"}
    reported |= {"accepted": accepted} | ({"prompt_text": prompted} if accepted else {})
    assert _click(info, "prompt", 70, 175) == [reported]
    # The page saw the task's answers (recorded through the page's own uirl.record).
    record = _get(info, "/progress")
    assert record["answers"] == [["alert", alerted], ["confirm", confirmed], ["prompt", prompted]]
    # Leaving the page asks first (the page asked, and the user had clicked in it).
    (unload,) = _click(info, "leave", 25, 218)
    assert (unload["type"], unload["accepted"]) == ("beforeunload", accepted)
    # Left: the server put the app back (its inputs empty, as after a reload); stayed:
    # the draft is still there.
    assert _get(info, "/oracle")["draft"] == ("" if left else "kept")
    # The task saw each dialog as the page showed it.
    assert [kind for kind, _ in _get(info, "/progress")["dialogs"]] == [
        "alert",
        "confirm",
        "prompt",
        "beforeunload",
    ]
    # Nothing is stuck: the next action answers at once, and nothing more was opened.
    assert _act(info, "screenshot", action_type="screenshot") == []


def test_many_dialogs_are_counted_and_a_failing_answer_is_ok(dialog_session: SessionInfo) -> None:
    """A page that opens dialogs in a loop gets each answered (the first 10 are listed,
    the rest counted); a task whose answer raises gets OK (logged), not a frozen page;
    a page left with a dismissed beforeunload prompt does not keep its context."""
    info = dialog_session
    _reset(info, "dismiss")
    _click(info, "click the draft", 100, 25)
    (unload,) = _click(info, "leave", 25, 218)
    assert (unload["type"], unload["accepted"]) == ("beforeunload", False)
    _reset(info, "broken")
    assert _click(info, "confirm", 70, 125) == [
        {"type": "confirm", "message": "Delete the draft?", "accepted": True}
    ]
    assert _get(info, "/progress")["answers"] == [["confirm", True]]
    t0 = time.perf_counter()
    answer = requests.get(
        f"{info.base_url}/act",
        params={"action_type": "left_click", "x": 70, "y": 275, "timeout": ACT_TIMEOUT_S},
        timeout=HTTP_TIMEOUT_S,
    )
    assert answer.status_code == 200 and time.perf_counter() - t0 < PROMPT_S, answer.text
    listed = json.loads(answer.headers["X-Dialogs"])
    assert [d["message"] for d in listed] == [f"alert {i}" for i in range(10)]
    assert answer.headers["X-Dialogs-Not-Listed"] == "5"
    # The contexts of the episodes before are disposed of (the page that asked before it
    # was left too): the episode's page and the one prepared remain.
    deadline = time.monotonic() + 10
    while (pages := _get(info, "/health")["open_pages"]) > 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pages == 2


def test_the_client_says_what_dialogs_the_page_showed(dialog_session: SessionInfo) -> None:
    """A dialog shows in no screenshot: ``SessionClient.last_dialogs`` carries it (the
    env passes it on as ``info["dialogs"]``); empty when the page opened none."""
    from uirl_gym.actions import Action, ActionType
    from uirl_gym.client import SessionClient

    _reset(dialog_session, "dismiss")
    client = SessionClient(dialog_session)
    try:
        client.act(Action(ActionType.LEFT_CLICK, x=70, y=125))
        assert client.last_dialogs == [
            {"type": "confirm", "message": "Delete the draft?", "accepted": False}
        ]
        client.act(Action(ActionType.SCREENSHOT))
        assert client.last_dialogs == []
    finally:
        client.close()

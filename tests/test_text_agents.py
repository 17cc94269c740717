"""Agents that read the page (issue 41): the ``axtree`` and ``som`` formats, the scripted
experts acting by element, and both model agents in evaluate.py against a stand-in
chat-completions server (real HTTP, real sessions)."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_standin import QuietHandler, serving, url_of
from PIL import Image

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes
from uirl_agents.episodes.trajectories import load_episodes
from uirl_agents.evaluation.agents import AgentSpecError, parse_agent
from uirl_agents.formats import get_format
from uirl_agents.formats.page import action_string, axtree_entries
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.policies.element_expert import ELEMENT_OBSERVATIONS, NoElementError, element_at
from uirl_agents.policies.expert import ExpertPolicy
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.vector import SessionVectorEnv

ROOT = Path(__file__).resolve().parents[1]
AXTREE = get_format("axtree")
SOM = get_format("som")
PAGE = (
    "RootWebArea 'Login User Task', focused\n"
    "\t[19] paragraph\n"
    "\t\t[20] LabelText\n"
    "\t\t\tStaticText 'Username'\n"
    "\t\t[21] textbox\n"
    "\t[25] button 'Login'"
)


def _element(bid: str, box: list[float], marked: int = 1) -> dict[str, Any]:
    return {
        "bid": bid,
        "bbox": np.asarray(box, dtype=np.float32),
        "visibility": np.float32(1.0),
        "clickable": 1,
        "set_of_marks": marked,
    }


def _observation(error: str = "") -> dict[str, Any]:
    screenshot = np.full((210, 160, 3), 240, dtype=np.uint8)
    return {
        "screenshot": screenshot,
        "som": screenshot,
        "instruction": 'Enter the username "ann" and press login.',
        "axtree": PAGE,
        "elements": (
            _element("19", [0, 0, 160, 60], marked=0),
            _element("21", [7, 78, 128, 21]),
            _element("25", [2, 166, 87, 31]),
        ),
        "last_action_error": error,
    }


# -- the formats -------------------------------------------------------------------------


def test_axtree_prompt_is_plain_text_with_the_page_and_the_last_error() -> None:
    contexts = EpisodeContexts(AXTREE)
    prompt = contexts.observe(0, _observation())
    assert prompt.images == []
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert all(isinstance(m["content"], str) for m in prompt.messages)  # text-only templates
    task = prompt.messages[1]["content"]
    assert "click(bid: str" in task and "fill(bid: str, value: str" in task  # the action set
    assert 'Enter the username "ann"' in task and task.endswith(f"## Page\n{PAGE}")
    contexts.record(0, "Action: fill('21', 'ann')")
    refused = 'bid \'25\': <button bid="25"> is covered by <div bid="30"> at its centre'
    messages = contexts.observe(0, _observation(refused)).messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "Action: fill('21', 'ann')"
    assert messages[3]["content"] == f"## Page\n{PAGE}\n\n## The last action failed\n{refused}"


def test_a_reply_that_did_not_parse_is_the_next_steps_error() -> None:
    """The env only hears "no action"; the model is told what the parser found wrong."""
    contexts = EpisodeContexts(AXTREE)
    contexts.observe(0, _observation())
    contexts.record(0, "I would log in now.")
    env_error = "ValueError: no action: the policy's output could not be parsed into one"
    last = contexts.observe(0, _observation(env_error)).messages[-1]["content"]
    assert last.endswith(
        "## The last action failed\nParseError: expected a call such as click('12') at "
        "character 0, found 'I would log in now.'"
    )
    contexts.record(0, "Action: click('25')")
    assert "failed" not in contexts.observe(0, _observation()).messages[-1]["content"]


def test_som_prompt_shows_the_marked_screenshot_and_its_elements() -> None:
    prompt = EpisodeContexts(SOM).observe(0, _observation())
    (image,) = prompt.images
    assert image.shape == (224, 168, 3)  # the smart-resized 160x210 screen
    parts = prompt.messages[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image", "text"]
    # The marked elements, named from the AXTree; an unmarked one (19) is not listed.
    assert parts[2]["text"] == "## Elements\n[21] textbox\n[25] button 'Login'"
    assert "on its box" in parts[0]["text"]


@pytest.mark.parametrize("fmt", [AXTREE, SOM], ids=lambda f: f.name)
def test_replies_are_read_by_the_action_strings_parser(fmt) -> None:
    geometry = fmt.geometry(160, 210)
    fill = Action(ActionType.FILL, bid="21", text='ann "a"')
    for reply in (
        "Thought: the name first.\nAction: fill('21', 'ann \"a\"')",
        "The name first.\nfill('21', 'ann \"a\"')",  # no Action: line: the last line
        "```python\nfill('21', 'ann \"a\"')\n```",
        "Action: `fill('21', 'ann \"a\"')`",
    ):
        parsed = fmt.parse(reply, geometry)
        assert parsed.error is None and parsed.action == fill, reply
    assert fmt.parse("Thought: done.\nAction: fill('21', 'ann \"a\"')", geometry).thought == "done."
    for reply, message in (
        ("Action: click(25)", "click: bid must be a string, got 25"),
        ("Action: click('25') click('21')", "2 actions (click, click): give exactly one"),
        ("Action: mouse_click(10, 20)", "mouse_click: not in this action set"),
        ("Action: goto('http://x')", "goto: not in this action set"),
        ("Action: __import__('os').system('x')", "expected a call such as click('12')"),
        ("", "no action: expected a line 'Action: click('12')'"),
    ):
        parsed = fmt.parse(reply, geometry)
        assert parsed.action is None and parsed.error is not None, reply
        assert parsed.error.startswith("ParseError: ") and message in parsed.error, parsed.error


def test_actions_render_as_the_calls_that_parse_back() -> None:
    geometry = AXTREE.geometry(160, 210)
    actions = [
        Action(ActionType.LEFT_CLICK, bid="3"),
        Action(ActionType.LEFT_CLICK, bid="3", keys="Shift"),
        Action(ActionType.RIGHT_CLICK, bid="a7"),
        Action(ActionType.DOUBLE_CLICK, bid="3"),
        Action(ActionType.MOUSE_MOVE, bid="3"),
        Action(ActionType.DRAG, bid="3", end_bid="4"),
        Action(ActionType.KEYS, bid="3", keys="Control+a"),
        Action(ActionType.FILL, bid="3", text="two\nlines 'quoted'"),
        Action(ActionType.FILL, bid="3", text=""),
        Action(ActionType.SELECT_OPTION, bid="3", text="Iran"),
        Action(ActionType.FOCUS, bid="3"),
        Action(ActionType.SCROLL, direction="up", amount=2),
        Action(ActionType.SCROLL, direction="right", amount=1),
        Action(ActionType.SEND_MSG_TO_USER, text="It is 42."),
        Action(ActionType.SCREENSHOT),
    ]
    for action in actions:
        text = AXTREE.render(action, geometry, thought="next")
        assert text.startswith("Thought: next\nAction: ")
        assert AXTREE.parse(text, geometry).action == action, text
    assert action_string(actions[6]) == "press('3', 'Control+a')"
    for point in (
        Action(ActionType.LEFT_CLICK, 10, 20),
        Action(ActionType.SCROLL, 10, 20, direction="down"),
        Action(ActionType.TRIPLE_CLICK, bid="3"),
        Action(ActionType.FINISH),
    ):
        with pytest.raises(ValueError, match="bid|no such action"):
            action_string(point)


def test_axtree_entries_and_the_element_under_a_point() -> None:
    assert axtree_entries(PAGE) == {
        "19": "paragraph",
        "20": "LabelText",
        "21": "textbox",
        "25": "button 'Login'",
    }
    elements = [
        _element("5", [0, 0, 300, 300], marked=0),  # the page
        _element("8", [10, 10, 100, 30]),  # a field
        _element("9", [10, 10, 100, 30], marked=0),  # wrapped by 8, the same box
        _element("40", [0, 20, 200, 30], marked=0),  # a later row under a menu
        _element("12", [50, 15, 80, 20]),  # the menu's item, centred on (90, 25)
    ]
    assert element_at(elements, 90, 25) == "12"  # centred on the point: the item, not 40
    assert element_at(elements, 15, 15) == "9"  # innermost, of equal boxes the later
    assert element_at(elements, 150, 40) == "40"
    assert element_at(elements, 250, 250) == "5"
    with pytest.raises(NoElementError, match=r"no visible element at \(400, 5\)"):
        element_at(elements, 400, 5)


def test_agent_specs_read_the_page_by_their_format() -> None:
    url = "http://127.0.0.1:8000/v1"
    text = parse_agent(f"openai:Qwen/Qwen3-8B@{url},format=axtree")
    assert (text.label, text.mode) == ("openai:Qwen3-8B@axtree", "axtree")
    assert text.observations == ("axtree", "last_action_error")
    som = parse_agent(f"openai:gpt-4o@{url},format=som,max_tokens=64")
    assert (som.label, som.mode, som.max_tokens) == ("openai:gpt-4o@som", "som", 64)
    assert set(som.observations) == {"som", "elements", "axtree", "last_action_error"}
    pixels = parse_agent(f"openai:ui-tars@{url}")
    assert (pixels.label, pixels.mode, pixels.observations) == ("openai:ui-tars", "pixels", ())
    expert = parse_agent("expert-elements")
    assert (expert.mode, expert.observations) == ("elements", ELEMENT_OBSERVATIONS)
    with pytest.raises(AgentSpecError, match="unknown format 'axtre'; expected one of"):
        parse_agent(f"openai:x@{url},format=axtre")
    with pytest.raises(ValueError, match="format 'axtree' writes actions on elements: set by_el"):
        ExpertPolicy(lambda i: {}, task="miniwob.login-user", format=AXTREE)
    with pytest.raises(ValueError, match="format 'ui-tars' writes actions at points: leave out"):
        ExpertPolicy(lambda i: {}, format=get_format("ui-tars"), by_element=True)


# -- the scripted experts, by element, on real sessions ---------------------------------

# MiniWoB++ tasks of each kind (a button, typing, a form, checkboxes, a <select>, a
# scrolled text area), and SimpleDataEntry (a sheet scrolled to its rows, a form).
EXPERT_TASKS = (
    "miniwob.click-button",
    "miniwob.enter-text",
    "miniwob.login-user",
    "miniwob.click-checkboxes",
    "miniwob.choose-list",
    "miniwob.scroll-text-2",
    "simple_data_entry",
)
SEEDS = (0, 1)


@pytest.fixture(scope="module")
def element_envs() -> Iterator[SessionVectorEnv]:
    runtime = LocalRuntime()
    try:
        envs = SessionVectorEnv(2, runtime=runtime, observations=ELEMENT_OBSERVATIONS)
        try:
            yield envs
        finally:
            envs.close()
    finally:
        runtime.close()


def test_the_experts_solve_tasks_through_element_actions_only(
    element_envs: SessionVectorEnv,
) -> None:
    envs = element_envs
    policy = ExpertPolicy(
        lambda i: envs.envs[i].oracle(),
        task=lambda i: envs.envs[i].episode_task,
        format=AXTREE,  # its steps written as a text model's demonstrations, too
        by_element=True,
    )
    specs = [
        EpisodeSpec(
            seed, {"task": task, **({"num_rows": 2} if task == "simple_data_entry" else {})}
        )
        for task in EXPERT_TASKS
        for seed in SEEDS
    ]
    episodes = collect_episodes(policy, envs, specs, max_steps=40, progress=False)
    failed = [(e.task, e.seed, e.length) for e in episodes if not e.success]
    assert not failed
    actions = [s.action for e in episodes for s in e.steps]
    assert all(a is not None for a in actions)
    # No point anywhere: every action names its element, but a scroll at the pointer
    # (the expert moved onto the scrolled element first) and the env's own actions.
    for a in actions:
        assert a is not None and a.x is None and a.end_x is None, a
        assert a.bid is not None or a.type in (ActionType.SCROLL, ActionType.FINISH), a
    kinds = {a.type for a in actions if a is not None}
    assert {ActionType.FILL, ActionType.SELECT_OPTION, ActionType.SCROLL} <= kinds
    assert all(s.error is None for e in episodes for s in e.steps)
    # The demonstrations' text is the action string that parses to what was played.
    step = next(s for e in episodes for s in e.steps if s.action.type is ActionType.FILL)
    assert re.fullmatch(r"Thought: \nAction: fill\('\w+', '.+'\)", step.text)
    assert (
        isinstance(step.messages[-1]["content"], str)
        and "## Page\n" in step.messages[-1]["content"]
    )


# -- evaluate.py: a text agent and a set-of-marks agent on a stand-in server ------------


@dataclass
class ChatStandIn:
    """A chat-completions endpoint that clicks the button the task names, found in the
    page the request shows (AXTree text or element list); a text agent's first reply of
    an episode is malformed."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reply(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        content = messages[-1]["content"]
        page = (
            content
            if isinstance(content, str)
            else "\n".join(p["text"] for p in content if p["type"] == "text")
        )
        task = messages[1]["content"]
        task = task if isinstance(task, str) else task[0]["text"]
        instruction = task.split("## Task\n", 1)[1].splitlines()[0]
        (name,) = re.findall(r'"([^"]*)" button', instruction)
        bid = re.search(rf"^\t*\[(\w+)\] button '{re.escape(name)}'", page, re.MULTILINE)
        assert bid is not None, page
        first = not any(m["role"] == "assistant" for m in messages)
        if isinstance(content, str) and first:
            return f"I would press the {name} button now."
        return f"Thought: the {name} button.\nAction: click('{bid[1]}')"


def _chat_handler(stand_in: ChatStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stand_in.lock:
                stand_in.bodies.append(body)
            text = stand_in.reply(body)
            self.send_json(
                200,
                {
                    "id": "cmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 9},
                },
            )

    return Handler


def _png(url: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :]))))


@pytest.mark.slow
def test_text_and_som_agents_run_in_evaluate(tmp_path: Path) -> None:
    stand_in = ChatStandIn()
    out = tmp_path / "eval"
    with serving(_chat_handler(stand_in)) as httpd:
        url = f"{url_of(httpd)}/v1"
        cmd = [sys.executable, str(ROOT / "scripts" / "evaluate.py"),
               "--agent", f"openai:stand-in@{url},format=axtree",
               "--agent", "random",
               "--agent", f"openai:stand-in@{url},format=som",
               "--task", "miniwob.click-button", "--episodes", "2", "--num-envs", "1",
               "--max-steps", "4", "--out", str(out), "--leaderboard"]  # fmt: skip
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {a["agent"]: a for a in json.loads((out / "results.json").read_text())["agents"]}
    text, som = results["openai:stand-in@axtree"], results["openai:stand-in@som"]
    assert (text["observation"], som["observation"], results["random"]["observation"]) == (
        "axtree",
        "som",
        "pixels",
    )
    # The answered click('<bid>') earned the task's reward, both ways.
    assert text["success_rate"] == som["success_rate"] == 1.0
    assert (text["mean_steps"], som["mean_steps"]) == (2.0, 1.0)
    # The text agent's malformed first reply: an invalid action, with the parser's message.
    assert text["invalid_action_rate"] == 0.5 and som["invalid_action_rate"] == 0.0
    for episode in load_episodes(out / "openai_stand-in_axtree", load_images=False):
        first, second = episode.steps
        assert first.action is None and first.error is not None
        assert first.error.startswith("ParseError: expected a call such as click('12')")
        assert second.action is not None and second.action.bid is not None and second.reward > 0

    text_bodies = [b for b in stand_in.bodies if isinstance(b["messages"][1]["content"], str)]
    som_bodies = [b for b in stand_in.bodies if not isinstance(b["messages"][1]["content"], str)]
    assert len(text_bodies) == 4 and len(som_bodies) == 2
    for body in text_bodies:  # the AXTree as text, no image
        assert all(isinstance(m["content"], str) for m in body["messages"])
        page = body["messages"][-1]["content"]
        assert page.startswith("## Page\nRootWebArea") or "\n\n## Page\nRootWebArea" in page
        assert re.search(r"^\t+\[\d+\] button '", page, re.MULTILINE)
    retry = text_bodies[1]["messages"][-1]["content"]  # after the malformed reply
    assert "## The last action failed\nParseError: expected a call such as click('12')" in retry
    for body in som_bodies:  # the marked screenshot and the element list
        parts = body["messages"][1]["content"]
        assert [p["type"] for p in parts] == ["text", "image_url", "text"]
        image = _png(parts[1]["image_url"]["url"])
        marks = (image[..., 0] > 120) & (image[..., 1] < 60) & (image[..., 2] < 110)
        assert marks.sum() > 50  # the numbered boxes' red
        assert re.search(r"^## Elements\n(\[\d+\] .+\n?)+$", parts[2]["text"])
        assert re.search(r"^\[\d+\] button '", parts[2]["text"], re.MULTILINE)

    board = (out / "leaderboard.md").read_text()
    assert "| agent | observation | episodes |" in board
    for agent, mode in (("openai:stand-in@axtree", "axtree"), ("openai:stand-in@som", "som"),
                        ("random", "pixels")):  # fmt: skip
        assert re.search(rf"\| \d \| {re.escape(agent)} \| {mode} \| 2 \|", board), board
    assert '<td class="observation">som</td>' in (out / "leaderboard.html").read_text()

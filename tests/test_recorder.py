"""The demonstration recorder: a real browser on the recorder page solves an episode, whose
trajectory is what the person did, shows in the replay viewer and fine-tunes in train_rs.py."""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import os
import re
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, sync_playwright

from uirl_agents.episodes.trajectories import EPISODES_FILE, load_episodes, to_sft_examples
from uirl_agents.formats import get_format
from uirl_agents.recorder import RecorderAddressError, RecorderConfig, RecorderServer, record
from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action, ActionType
from uirl_gym.client import SessionClient
from uirl_gym.protocol import TOKEN_ENV_VAR, TOKEN_HEADER, SessionInfo
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.tasks.expert import box_centre

REPO = Path(__file__).resolve().parents[1]
SEED = 5
FIELDS = ("first_name", "last_name", "email")


def _read_url(proc: subprocess.Popen[str], timeout_s: float = 60) -> str:
    """The page's address: the recorder's first stdout line, ``recorder: URL``."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError(f"the recorder printed no address in {timeout_s}s")
    line = proc.stdout.readline()
    assert line.startswith("recorder: "), line + (proc.stderr.read() if proc.stderr else "")
    return line.removeprefix("recorder: ").strip()


def _screen_to_page(page: Page, x: int, y: int) -> tuple[int, tuple[int, int]]:
    """A page point (whole pixels) over screen point (x, y) of the scaled screenshot, and
    the screen point the page maps it back to (its rounding, as the page's script)."""
    box = page.locator("#shot").bounding_box()
    assert box is not None
    px = round(box["x"] + x * box["width"] / SCREEN_WIDTH)
    py = round(box["y"] + y * box["height"] / SCREEN_HEIGHT)
    back = (
        math.floor((px - box["x"]) * SCREEN_WIDTH / box["width"] + 0.5),
        math.floor((py - box["y"]) * SCREEN_HEIGHT / box["height"] + 0.5),
    )
    return (px, py), back


def _wait_idle(page: Page) -> None:
    page.wait_for_function("window.recorderIdle && window.recorderIdle()", timeout=30_000)


@contextlib.contextmanager
def _recorder_page(
    runtime: Any, out: Path, *args: str
) -> Iterator[tuple[Page, SessionInfo, subprocess.Popen[str]]]:
    """``python -m uirl_agents.recorder`` on a session of ``runtime``, its page open in a
    real browser (narrower than the screen: the screenshot is scaled down to fit)."""
    session: SessionInfo = runtime.acquire()
    cmd = [sys.executable, "-m", "uirl_agents.recorder", "--task", "simple_data_entry"]
    cmd += ["--out", str(out), "--options", json.dumps({"num_rows": 1})]
    cmd += ["--session-url", session.base_url, "--port", "0", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), TOKEN_ENV_VAR: session.headers[TOKEN_HEADER]}
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        url = _read_url(proc)
        assert url.startswith("http://127.0.0.1:")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_browser(headless=True))
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(url)
            _wait_screenshot(page)
            assert page.locator("#shot").bounding_box()["width"] < SCREEN_WIDTH
            yield page, session, proc
            browser.close()
        proc.wait(timeout=30)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        runtime.release(session)


def _wait_screenshot(page: Page) -> None:
    """Until the page shows the screenshot of the state it has last received."""
    page.wait_for_function(
        "(() => { const img = document.getElementById('shot'); return img.complete && "
        "img.naturalWidth === 1280 && img.src.endsWith('v=' + document.body.dataset.version) })()"
    )


@pytest.fixture(scope="module")
def recorded(
    runtime: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, list[Action], str]]:
    """One SimpleDataEntry episode (one row) done by clicks and typing on the page.

    Yields the run directory, the actions performed, and the page's text at the end.
    """
    out = tmp_path_factory.mktemp("record") / "demos"
    performed: list[Action] = []
    args = ("--seed", str(SEED), "--episodes", "1", "--format", "ui-tars")
    with _recorder_page(runtime, out, *args) as (page, session, _):
        oracle = SessionClient(session).oracle()
        for field, value in zip(FIELDS, oracle["target_values"][0], strict=True):
            point, back = _screen_to_page(page, *box_centre(oracle["inputs"][field]["box"]))
            page.mouse.click(*point)
            page.keyboard.type(value)
            performed += [Action(ActionType.LEFT_CLICK, *back), Action(ActionType.TYPE, text=value)]
        point, back = _screen_to_page(page, *box_centre(oracle["submit_button"]))
        page.mouse.click(*point)
        performed.append(Action(ActionType.LEFT_CLICK, *back))
        _wait_idle(page)
        page.wait_for_function("document.getElementById('finish').disabled")
        text = page.locator("body").inner_text()
    yield out, performed, text


def test_clicks_and_typing_on_the_page_solve_an_episode(
    recorded: tuple[Path, list[Action], str],
) -> None:
    out, performed, text = recorded
    [episode] = load_episodes(out)
    assert episode.success and episode.total_reward > 0
    assert episode.agent == "human" and episode.seed == SEED
    assert episode.options == {"num_rows": 1} and len(episode.target_rows) == 1
    assert [s.action for s in episode.steps] == performed
    assert episode.steps[-1].terminated and not any(s.error for s in episode.steps)
    # Each step is written as UI-TARS would have written it, for the model it trains.
    fmt = get_format("ui-tars")
    for step in episode.steps:
        assert fmt.parse(step.text, fmt.geometry()).action == step.action
        assert step.messages is not None and len(step.model_images) == 1
    assert len(to_sft_examples([episode])) == len(performed)
    assert "human-0: success" in text and "Recording finished" in text
    # The replay viewer shows it like any run.
    replay = (out / "index.html").read_text()
    assert "human-0" in replay and "success" in replay and "type(content=" in replay


@pytest.mark.slow
def test_train_rs_fine_tunes_on_recorded_demonstrations(
    recorded: tuple[Path, list[Action], str], tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    from uirl_agents.trainers.metrics import read_metrics

    out, performed, _ = recorded
    run_dir = tmp_path / "rs"
    cmd = [sys.executable, str(REPO / "scripts" / "train_rs.py")]
    cmd += ["--config", str(REPO / "scripts" / "configs" / "tiny_cpu.yaml")]
    cmd += ["--output-dir", str(run_dir), "--logging.progress", "false", "--iterations", "1"]
    # Recorded in UI-TARS's format, trained in Qwen2.5-VL's (tiny_cpu.yaml's): each step
    # is written afresh for the run's model.
    cmd += ["--env.num_envs", "1", "--eval.episodes", "0"]
    cmd += ["--rollout.episodes_per_iteration", "1", "--rollout.group_size", "1"]
    cmd += ["--env.max_steps", "1", "--rs.expert_episodes", "0"]
    # Only a success is kept: the demonstration, not the random model's episode.
    cmd += ["--rs.reward_threshold", "1.0", "--rs.demonstrations", json.dumps([str(out)])]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-5000:]
    [record] = [r for r in read_metrics(run_dir) if "recorded/episodes" in r]
    assert record["recorded/episodes"] == 1 and record["recorded/success_rate"] == 1
    assert record["train/samples"] == len(performed)
    assert record["train/optimizer_steps"] >= 1


def test_demonstration_directories_are_checked_with_the_config(tmp_path: Path) -> None:
    from uirl_agents.trainers.config import RSConfig, RSSection

    with pytest.raises(ValueError, match=f"is neither a run directory \\(with {EPISODES_FILE}"):
        RSConfig(rs=RSSection(demonstrations=[str(tmp_path / "missing")]))


def test_recorder_config_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="format: unknown 'ui_tars'"):
        RecorderConfig(out_dir=tmp_path, format="ui_tars")
    with pytest.raises(ValueError, match="episodes: expected >= 0"):
        RecorderConfig(out_dir=tmp_path, episodes=-1)


class _StubRecorder:
    """Answers the page's reads; a refused request must never reach :meth:`act`."""

    finished = threading.Event()

    def state(self) -> dict[str, Any]:
        return {"stub": True}

    def screenshot_png(self) -> bytes:
        return b"\x89PNG stub"

    def new_episode(self) -> None:
        pass

    def act(self, action: Action) -> None:
        raise AssertionError(f"a refused request got through: {action}")


@contextlib.contextmanager
def _stub_server(allowed_hosts: tuple[str, ...] = ()) -> Iterator[RecorderServer]:
    server = RecorderServer(("127.0.0.1", 0), allowed_hosts)
    server.start(_StubRecorder())  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def _ask(
    server: RecorderServer, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, str]:
    """One request with exactly these headers (``Host`` too); (status, body)."""
    port = server.server_address[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        headers.setdefault("Host", f"127.0.0.1:{port}")
        if body or method == "POST":
            headers.setdefault("Content-Length", str(len(body)))
        for name, value in headers.items():
            connection.putheader(name.replace("_", "-"), value)
        connection.endheaders(body or None)
        reply = connection.getresponse()
        return reply.status, reply.read().decode(errors="replace")
    finally:
        connection.close()


ROUTES = [("GET", "/"), ("GET", "/api/state"), ("GET", "/api/screenshot")]
ROUTES += [("POST", "/api/new_episode"), ("POST", "/api/action")]


def test_the_page_refuses_requests_from_other_sites() -> None:
    """Another site open in the browser can neither drive the session nor read it, even
    when it rebinds its own name to 127.0.0.1 (DNS rebinding: Host and Origin match)."""
    with _stub_server(allowed_hosts=("recorder.lan",)) as server:
        port = server.server_address[1]
        action = json.dumps({"type": "left_click", "x": 5, "y": 5}).encode()
        refused = [
            {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            {"Host": f"evil.example:{port}"},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},  # another port of localhost
            {"Host": "127.0.0.1:1"},
            {"Host": ""},
        ]
        for method, path in ROUTES:
            for headers in refused:
                status, text = _ask(server, method, path, action, **headers)
                assert status == 403, (method, path, headers, text)
        own = [
            {},
            {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
            {"Host": f"[::1]:{port}", "Sec-Fetch-Site": "same-origin"},
            {"Host": f"RECORDER.lan:{port}", "Origin": f"http://recorder.lan:{port}"},
            {"Sec-Fetch-Site": "none"},  # the person typed the address
        ]
        for method, path in ROUTES[:-1]:
            for headers in own:
                status, text = _ask(server, method, path, b"{}", **headers)
                assert status == 200, (method, path, headers, text)
        # A link elsewhere may open the page in a tab (it holds no data), not frame it.
        link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "document"}
        assert _ask(server, "GET", "/", **link)[0] == 200
        assert _ask(server, "GET", "/api/state", **link)[0] == 403
        framed = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "iframe"}
        assert _ask(server, "GET", "/", **framed)[0] == 403


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"[" * 65536, {}, 400, "nested too deeply"),
        (b'{"type":"type","text":["a"]}', {}, 400, "text: must be a string, got list"),
        (b'{"type":"keys","keys":{"a":1}}', {}, 400, "keys: must be a string"),
        (b'{"type":"scroll","direction":"down","amount":"3"}', {}, 400, "amount: must be"),
        (b"{}", {"Content-Length": "-1"}, 400, "Content-Length: must be a number of bytes"),
        (b"{}", {"Content-Length": "1_0"}, 400, "Content-Length"),
        (b"{", {}, 400, "not JSON"),
        (b"\xff", {}, 400, "not JSON"),
        (b"[1]", {}, 400, "must be a JSON object, got list"),
        (b"x" * 70_000, {}, 413, "at most 65536 bytes"),
    ],
    ids=[
        "deep",
        "text-list",
        "keys-object",
        "amount-str",
        "length-1",
        "length-1_0",
        "broken",
        "not-utf8",
        "array",
        "large",
    ],  # fmt: skip
)
def test_bad_input_is_a_400_with_a_message(
    body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    with _stub_server() as server:
        t0 = time.monotonic()
        got, text = _ask(server, "POST", "/api/action", body, **headers)
        assert (got, time.monotonic() - t0 < 3) == (status, True), text
        assert message in json.loads(text)["error"]
        # The page still answers.
        assert _ask(server, "GET", "/api/state")[0] == 200


def test_a_taken_port_is_an_error_before_any_session_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RecorderAddressError, match=re.escape(f"127.0.0.1:{port}")):
            record(RecorderConfig(out_dir=tmp_path / "demos"), port=port)
    assert not (tmp_path / "demos").exists()


def test_every_kind_of_input_becomes_its_action(runtime: Any, tmp_path: Path) -> None:
    """Double and right clicks, the wheel, a drag, typing corrected with Backspace and
    key combinations; New episode drops an episode, Finish saves one, Stop ends."""
    out = tmp_path / "demos"
    with _recorder_page(
        runtime, out, "--seed", "3", "--episodes", "0", "--format", "qwen2.5-vl"
    ) as (
        page,
        _,
        proc,
    ):
        sheet, cell = (320, 400), (120, 101)
        point, _ = _screen_to_page(page, *cell)
        page.mouse.click(*point)
        _wait_idle(page)
        assert page.locator("#steps").inner_text() == "1"
        page.click("#new")  # that click's episode is dropped: a new task instance
        _wait_idle(page)
        assert page.locator("#steps").inner_text() == "0"

        performed = []
        point, back = _screen_to_page(page, *cell)
        page.mouse.dblclick(*point)
        performed.append(Action(ActionType.DOUBLE_CLICK, *back))
        page.mouse.click(*point, button="right")
        performed.append(Action(ActionType.RIGHT_CLICK, *back))
        point, back = _screen_to_page(page, *sheet)
        page.mouse.move(*point)
        page.mouse.wheel(0, 300)
        performed.append(Action(ActionType.SCROLL, *back, direction="down", amount=3))
        start, start_back = _screen_to_page(page, *cell)
        end, end_back = _screen_to_page(page, cell[0] + 200, cell[1] + 60)
        page.mouse.move(*start)
        page.mouse.down()
        page.mouse.move(*end, steps=5)
        page.mouse.up()
        performed.append(Action(ActionType.DRAG, *start_back, end_x=end_back[0], end_y=end_back[1]))
        page.keyboard.type("ab")
        page.keyboard.press("Backspace")  # corrected before it was sent
        page.keyboard.type("c")
        performed.append(Action(ActionType.TYPE, text="ac"))
        for pressed, keys in (
            ("Control+a", "ctrl+a"),
            ("Escape", "esc"),
            ("Shift+Tab", "shift+tab"),
        ):
            page.keyboard.press(pressed)
            performed.append(Action(ActionType.KEYS, keys=keys))
        _wait_idle(page)
        page.click("#finish")
        _wait_idle(page)
        assert "human-0: failure" in page.locator("#saved").inner_text()
        page.click("#stop")  # the next episode, begun, is dropped
        _wait_idle(page)
        _wait_screenshot(page)
    assert proc.returncode == 0
    [episode] = load_episodes(out)
    assert episode.seed == 4 and not episode.success  # seed 3's episode was dropped
    assert [s.action for s in episode.steps[:-1]] == performed
    assert episode.steps[-1].action.type is ActionType.FINISH and episode.steps[-1].terminated

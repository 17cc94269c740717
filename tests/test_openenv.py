"""uirl on OpenEnv: the server (OpenEnv's create_app) in a thread and as
``python -m uirl_gym.openenv``, two concurrent WebSocket sessions on two tasks, bad
actions as errors, sessions closed on disconnect, what the app does not expose."""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import requests
import yaml
from fastapi import FastAPI

pytest.importorskip("openenv", reason="needs the openenv extra: pip install -e '.[openenv]'")

import uvicorn  # noqa: E402
from processes import running  # noqa: E402
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402
from websockets.sync.client import connect as ws_connect  # noqa: E402

from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, ActionType, to_action  # noqa: E402
from uirl_gym.client import ACTION_READ_MARGIN_S  # noqa: E402
from uirl_gym.env import UIEnv  # noqa: E402
from uirl_gym.openenv import (  # noqa: E402
    OpenEnvServerConfig,
    OpenEnvSession,
    UirlAction,
    UirlEnvClient,
    UirlOpenEnvEnvironment,
    make_app,
    resolve_task,
    to_wire_action,
)
from uirl_gym.openenv.__main__ import parse_args  # noqa: E402
from uirl_gym.openenv_wire import ACTION_TYPE_NAMES  # noqa: E402
from uirl_gym.remote_env import OpenEnvEnv  # noqa: E402
from uirl_gym.runtimes.local import (  # noqa: E402
    STOP_GRACE_S,
    LocalRuntimeConfig,
    descendant_pids,
)
from uirl_gym.tasks import TASKS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SDE = "uirl/SimpleDataEntry-v0"
SN = "uirl/SettingsNav-v0"


class RecordingEnvironment(UirlOpenEnvEnvironment):
    """Test-only: keeps every session's environment, so that the test can read the
    oracle (for the expert) and the session server's pid; no client can."""

    instances: ClassVar[list[UirlOpenEnvEnvironment]] = []

    def __init__(self, config: OpenEnvServerConfig | None = None) -> None:
        super().__init__(config)
        RecordingEnvironment.instances.append(self)


def environment_of(task: str) -> UirlOpenEnvEnvironment:
    (env,) = [e for e in RecordingEnvironment.instances if e.env and e.state.task == task]
    return env


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def serving(config: OpenEnvServerConfig) -> Iterator[str]:
    """The app in a uvicorn thread on a free port (sessions: real Chromium)."""
    app = make_app(config, environment=RecordingEnvironment)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, 30, "the OpenEnv server to start")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    config = OpenEnvServerConfig(
        max_sessions=3, max_steps=40, local=LocalRuntimeConfig(startup_timeout_s=120)
    )
    try:
        with serving(config) as url:
            yield url
    finally:
        for env in RecordingEnvironment.instances:
            env.close()


def test_two_concurrent_sessions_rewards_errors_and_disconnect(server_url: str) -> None:
    expert_client = UirlEnvClient(base_url=server_url)
    session = OpenEnvSession(server_url)
    try:
        # Both resets at once: each WebSocket session starts its own session server.
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(expert_client.reset, task=SDE, seed=0, options={"num_rows": 1})
            second = pool.submit(session.reset, SN, seed=1)
            reset = first.result()
            screenshot, instruction, info = second.result()
        assert reset.observation.task == SDE and reset.observation.instruction
        assert reset.observation.screenshot and not reset.done
        assert screenshot.shape == (800, 1280, 3) and str(screenshot.dtype) == "uint8"
        assert "Settings" in instruction and info["task"] == "settings_nav"
        sde, sn = environment_of(SDE), environment_of(SN)
        assert sde.env is not sn.env and sde.env.session != sn.env.session

        # Session 1: the task's expert, reading the oracle in this process (the server
        # never exposes it), wins the episode through the WebSocket.
        expert = TASKS["simple_data_entry"].expert()
        expert.reset()
        total, result, sn_steps = 0.0, reset, 0
        for _ in range(40):
            oracle = sde.env.oracle() if expert.needs_oracle else None
            result = expert_client.step(to_wire_action(expert.next_action(oracle)))
            assert result.observation.error is None, result.observation.error
            total += result.reward
            # Session 2 steps in between: the two sessions are independent.
            _shot, reward, terminated, _truncated, _info = session.step(
                {"type": "mouse_move", "x": 640, "y": 400}
            )
            assert reward == 0.0 and not terminated
            sn_steps += 1
            if result.done:
                break
        assert result.done and result.observation.terminated
        assert result.observation.is_success and result.observation.metadata["is_success"]
        assert "progress" not in result.observation.metadata  # the task's record stays private
        assert total == pytest.approx(1.0)
        state = expert_client.state()
        assert state.task == SDE and state.seed == 0 and state.done and state.is_success
        assert state.episode_return == pytest.approx(total) and state.step_count >= 3

        # Bad actions on session 2: the env refuses them as an observation (the step
        # counts, with the task's penalty), the session goes on.
        _shot, reward, terminated, truncated, info = session.step(
            {"type": "left_click", "x": 5000, "y": 10}
        )
        assert "off the 1280x800 screen" in info["invalid_action"] and reward < 0
        assert not (terminated or truncated)
        _shot, reward, _t, _tr, info = session.step({"type": "left_click"})
        assert "needs both coordinates" in info["invalid_action"] and reward < 0
        _shot, reward, _t, _tr, info = session.step({"type": "keys", "keys": "ctrl+nokey"})
        assert "unknown key" in info["invalid_action"]
        # A value UIEnv refuses is refused the same way here (one validation).
        _shot, reward, _t, _tr, info = session.step({"type": "left_click", "x": 1.5, "y": 2})
        assert "x: must be an integer, got 1.5" in info["invalid_action"] and reward < 0
        # ... one that is no action at all is not even sent.
        _shot, reward, _t, _tr, info = session.step({"type": "fly", "x": 1})
        assert "unknown 'fly'" in info["invalid_action"] and reward == 0.0
        # Wrong-shape messages from any client come back as OpenEnv error frames.
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            expert_client.step(UirlAction.model_construct())
        with pytest.raises(RuntimeError, match="Did you mean 'uirl/FormFill-v0'"):
            expert_client.reset(task="uirl/FormFil-v0")
        with pytest.raises(RuntimeError, match="episode has ended|no episode is running"):
            expert_client.step(UirlAction(action_type="screenshot"))
        with pytest.raises(RuntimeError, match="unknown arguments"):
            expert_client.reset(task=SDE, sed=3)
        # Both sessions still work.
        _shot, reward, terminated, truncated, info = session.step(
            {"type": "left_click", "x": 640, "y": 400}
        )
        assert "invalid_action" not in info and not truncated
        again = expert_client.reset(task=SDE, seed=0, options={"num_rows": 1})
        assert again.observation.instruction == reset.observation.instruction  # same seed
        # The refused actions counted as steps; the ones never sent did not.
        assert session.state().step_count == sn_steps + 5

        # Disconnect closes the session: its server and Chromium are gone.
        server_pid = sde._runtime.pid(sde.env.session)
        family = [server_pid, *descendant_pids(server_pid)]
        assert len(family) >= 2  # the server and its browser
        expert_client.close()
        wait_for(lambda: not any(running(p) for p in family), 20, "the session to stop")
        assert sde.env is None
        assert sn.env is not None  # the other session is untouched
        session.step({"type": "screenshot"})

        # A session the server closes (what the idle reaper does) ends the episode
        # truncated; the next reset opens a new session.
        sn.close()
        _shot, reward, terminated, truncated, info = session.step({"type": "screenshot"})
        assert truncated and not terminated and "session was closed" in info["error"]
        _shot, again, _info = session.reset(SN, seed=1)
        assert again == instruction
    finally:
        expert_client.close()
        session.close()
    wait_for(
        lambda: all(e.env is None for e in RecordingEnvironment.instances), 20, "sessions to close"
    )


def test_only_openenv_routes_are_exposed(server_url: str) -> None:
    health = requests.get(f"{server_url}/health", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "healthy"
    schema = requests.get(f"{server_url}/schema", timeout=10).json()
    assert set(schema["action"]["properties"]) >= {"action_type", "x", "y", "end_x", "text"}
    assert set(schema["observation"]["properties"]) >= {
        "screenshot",
        "instruction",
        "reward",
        "done",
        "is_success",
        "error",
    }
    assert set(schema["state"]["properties"]) >= {"episode_id", "step_count", "task", "seed"}
    # The session server's token routes are not proxied, and OpenEnv's stateless HTTP
    # routes are not registered (production mode).
    for method, path in [
        ("post", "/reset"),
        ("get", "/oracle"),
        ("post", "/step"),
        ("get", "/state"),
        ("get", "/act?action_type=screenshot"),
        ("get", "/progress"),
    ]:
        response = requests.request(method, server_url + path, json={}, timeout=10)
        assert response.status_code in (404, 405), (path, response.status_code)
    started = len(RecordingEnvironment.instances)
    assert requests.get(f"{server_url}/metadata", timeout=10).json()["name"] == "uirl"
    # /mcp answers JSON-RPC (OpenEnv's runtime check) but has no tools to reach a session.
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "oracle"}}
    answer = requests.post(f"{server_url}/mcp", json=call, timeout=10).json()
    assert "does not support MCP" in answer["error"]["message"]
    # /metadata and /mcp build an environment and close it: no session server starts.
    assert all(e.env is None for e in RecordingEnvironment.instances[started:])


def test_a_full_server_refuses_the_next_session(server_url: str) -> None:
    """max_sessions=3: the 4th WebSocket gets CAPACITY_REACHED (no browser starts
    before a reset, so open sessions cost nothing here)."""
    clients = [UirlEnvClient(base_url=server_url) for _ in range(4)]
    try:
        for client in clients[:3]:
            assert client.state().step_count == 0
        with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
            clients[3].state()
    finally:
        for client in clients:
            client.close()


def test_models_and_task_names() -> None:
    assert set(ACTION_TYPE_NAMES) == {t.value for t in ActionType}
    wire = to_wire_action({"action_type": "drag", "x": 1, "y": 2, "end_x": 3, "end_y": 4})
    assert wire.to_env_action() == {"type": "drag", "x": 1, "y": 2, "end_x": 3, "end_y": 4}
    assert to_wire_action({"type": "scroll", "direction": "Down"}).direction == "down"
    assert resolve_task("uirl/FormFill-v0").name == "form_fill"
    assert resolve_task("uirl_gym:uirl/FormFill-v0").name == "form_fill"
    assert resolve_task("mail_triage").env_id == "uirl/MailTriage-v0"
    with pytest.raises(ValueError, match="registered: uirl/CalendarBooking-v0"):
        resolve_task("uirl/Nope-v0")


def test_manifest_names_the_app_and_docker_runs_the_server() -> None:
    folder = ROOT / "uirl_gym" / "openenv"
    manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
    module, attribute = manifest["app"].split(":")
    assert isinstance(getattr(importlib.import_module(module), attribute), FastAPI)
    assert manifest["name"] == "uirl" and manifest["action"] == UirlAction.__name__
    dockerfile = (folder / "Dockerfile").read_text()
    assert 'pip install ".[openenv]"' in dockerfile and "chromium-headless-shell" in dockerfile
    assert '"-m", "uirl_gym.openenv"' in dockerfile


# An OpenEnv step against a frozen session (its server stopped): the deadline, the
# env's margin for the answer, the local runtime's grace to stop the failed server, and
# room for a loaded machine. It was 40 s at the 30 s deadline OpenEnv had.
FROZEN_STEP_TIMEOUT_S = 2.0
FROZEN_STEP_BOUND_S = FROZEN_STEP_TIMEOUT_S + ACTION_READ_MARGIN_S + STOP_GRACE_S + 5.0


def test_cli_keeps_its_step_deadline_and_stops_its_sessions(tmp_path: Path) -> None:
    """``python -m uirl_gym.openenv --port 0 --step-timeout-s 2``: a real process. A
    step on a frozen session (its server SIGSTOPped) ends the episode truncated within
    the deadline, and the next reset brings a new session; SIGTERM with a session open
    leaves no session server behind."""
    assert (
        parse_args([]).step_timeout_s
        == OpenEnvServerConfig().step_timeout_s
        == DEFAULT_ACTION_TIMEOUT_S
    )
    port_file = tmp_path / "port"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uirl_gym.openenv",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--step-timeout-s",
            str(FROZEN_STEP_TIMEOUT_S),
        ],  # fmt: skip
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    frozen: list[int] = []
    try:
        wait_for(port_file.exists, 60, "the server to bind")
        url = f"http://127.0.0.1:{port_file.read_text()}"
        wait_for(lambda: _healthy(url), 60, "/health to answer")
        with OpenEnvSession(url) as session:
            session.reset(SDE, seed=0, options={"num_rows": 1})
            frozen = _children(process.pid)  # the session server (its browser is below it)
            assert len(frozen) == 1
            os.kill(frozen[0], signal.SIGSTOP)
            t0 = time.monotonic()
            _shot, reward, terminated, truncated, info = session.step(
                {"type": "left_click", "x": 640, "y": 400}
            )
            took = time.monotonic() - t0
            assert truncated and not terminated and reward == 0.0 and info["error"]
            assert took < FROZEN_STEP_BOUND_S, f"{took:.1f}s"
            screenshot, instruction, _info = session.reset("uirl/FormFill-v0", seed=2)
            assert screenshot.shape == (800, 1280, 3) and instruction
            children = descendant_pids(process.pid)
            assert children and frozen[0] not in children  # a new session server
            process.terminate()
            # uvicorn shuts down, then re-raises the signal it caught.
            assert process.wait(timeout=30) in (0, -15)
        wait_for(lambda: not any(running(p) for p in children), 20, "the session to stop")
    finally:
        for pid in frozen:  # so that its parent watchdog can stop it if the test failed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if process.poll() is None:
            process.kill()
            process.wait()


def _children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    return [p for p in descendant_pids(pid) if _parent(p) == pid]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def _healthy(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_uirl_gym_imports_without_openenv_and_openenv_part_without_torch() -> None:
    code = (
        "import sys\n"
        "sys.modules['openenv'] = None  # as if not installed\n"
        "import uirl_gym, uirl_gym.env, uirl_gym.vector\n"
        "try:\n"
        "    import uirl_gym.openenv\n"
        "except ImportError as exc:\n"
        "    assert \"pip install -e '.[openenv]'\" in str(exc), exc\n"
        "else:\n"
        "    raise AssertionError('uirl_gym.openenv imported without openenv')\n"
        "del sys.modules['openenv']\n"
        "import uirl_gym.openenv\n"
        "assert 'torch' not in sys.modules, 'uirl_gym.openenv imported torch'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _ws_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://") + "/ws"


def _send(ws: Any, frame: str | bytes) -> dict[str, Any]:
    ws.send(frame)
    return json.loads(ws.recv(timeout=60))


def test_foreign_origins_and_hosts_and_session_ids_are_refused(server_url: str) -> None:
    """A page on another site could open /ws (browsers apply no CORS to WebSockets) and
    start browsers, or POST text/plain to /mcp and hold slots; a DNS name rebound to
    127.0.0.1 could too. And no client reaches another's session by its id."""
    evil = {"Origin": "http://evil.example"}
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(_ws_url(server_url), additional_headers=evil, open_timeout=10)
    assert refused.value.response.status_code == 403
    create = '{"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create", "params": {}}'
    posted = requests.post(
        f"{server_url}/mcp", data=create, headers={**evil, "Content-Type": "text/plain"}, timeout=10
    )
    assert posted.status_code == 403 and "evil.example" in posted.json()["detail"]
    rebound = requests.get(f"{server_url}/health", headers={"Host": "evil.example"}, timeout=10)
    assert rebound.status_code == 403 and "Host" in rebound.json()["detail"]
    # The server's own page, and clients that send no Origin, are served.
    own = requests.get(f"{server_url}/health", headers={"Origin": server_url}, timeout=10)
    assert own.status_code == 200
    # Sessions are WebSockets: none is made, attached to or closed by id.
    answer = requests.post(f"{server_url}/mcp", data=create, timeout=10).json()
    assert "WebSocket sessions" in answer["error"]["message"]
    with pytest.raises(InvalidStatus):
        ws_connect(_ws_url(server_url) + "?session_id=abc", open_timeout=10)
    with ws_connect(_ws_url(server_url), open_timeout=10) as ws:
        close = {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2,
                 "method": "openenv/session/close", "params": {"session_id": "x"}}}  # fmt: skip
        error = _send(ws, json.dumps(close))
        assert error["type"] == "error" and "is its WebSocket" in error["data"]["message"]


def test_bad_frames_are_errors_and_values_are_checked_as_by_uienv(server_url: str) -> None:
    """Each of these frames ended the session (SESSION_ERROR, socket closed, episode and
    browser gone); now each gets an error frame and the session goes on. And a value
    UIEnv refuses (x: "10", x: true, a lone surrogate) is the same invalid action."""
    deep = "[" * 3000 + "]" * 3000
    nested = '{"type": "step", "data": {"action_type": "type", "text": ' + deep + "}}"
    # Deep enough to stall a validator or a repr, within what json.loads takes.
    moderate = json.dumps({"type": "step", "data": {"x": json.loads("[" * 200 + "]" * 200)}})
    with ws_connect(_ws_url(server_url), open_timeout=10, max_size=None) as ws:
        for frame in ["[1, 2]", "42", "null", '"reset"', b"\x00\x01", deep, nested, moderate]:
            error = _send(ws, frame)
            assert error["type"] == "error", frame
            assert error["data"]["code"] == "INVALID_JSON", (frame, error)
        reset = _send(ws, json.dumps({"type": "reset", "data": {"task": SN, "seed": 1}}))
        assert reset["type"] == "observation", reset
        env = UIEnv(task="settings_nav")  # what gym.make's env says about the same values
        for action, expected in [
            ({"action_type": "left_click", "x": "10", "y": 5}, "x: must be an integer, got '10'"),
            ({"action_type": "left_click", "x": True, "y": 5}, "x: must be an integer, got True"),
            ({"action_type": "type", "text": "\ud800"}, "lone surrogate"),
        ]:
            # json.dumps writes the surrogate as the escape "\ud800", as a model's JSON would.
            step = _send(ws, json.dumps({"type": "step", "data": action}))
            observation = step["data"]["observation"]
            assert expected in observation["error"] and step["data"]["reward"] < 0, step
            fields = {("type" if k == "action_type" else k): v for k, v in action.items()}
            with pytest.raises(ValueError, match=re.escape(expected)):
                to_action(fields).validate(screen=env.screen)
        step = _send(ws, json.dumps({"type": "step", "data": {"action_type": "screenshot"}}))
        assert step["type"] == "observation" and step["data"]["observation"]["error"] is None


def test_a_silent_socket_frees_its_slot() -> None:
    """Two sockets that connected and never sent held --max-sessions 2 for the hour of
    the idle timeout; now a socket that sends no reset is closed after start_timeout_s."""
    # Long enough that the second socket is refused while the first holds the slot, on a
    # loaded machine too (at 1 s, under a load of 25, the first was already gone).
    config = OpenEnvServerConfig(max_sessions=1, start_timeout_s=8.0)
    with serving(config) as url, ws_connect(_ws_url(url), open_timeout=10) as silent:
        with ws_connect(_ws_url(url), open_timeout=10) as second:
            # Refused at connection (OpenEnv makes the session then): read, do not send,
            # since the server may have closed the socket already.
            full = json.loads(second.recv(timeout=60))
            assert full["data"]["code"] == "CAPACITY_REACHED"
        with pytest.raises(ConnectionClosed) as closed:
            silent.recv(timeout=60)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        client = UirlEnvClient(base_url=url)
        try:
            assert client.state().step_count == 0  # the slot is free
        finally:
            client.close()


def test_a_refused_reset_gives_the_slot_back(server_url: str) -> None:
    """A socket whose reset was refused (an unknown task or option) counted as started
    and kept its slot for the idle timeout (an hour): as many as --max-sessions locked
    the server. Now the slot goes back at once, and the socket stays usable."""
    refused = []
    with contextlib.ExitStack() as sockets:
        for data in [
            {"task": "uirl/Nope-v0"},
            {"task": SDE, "options": {"colour": "red"}},
            {"task": SN, "sed": 3},
            {"task": "uirl/FormFil-v0"},  # 4 sockets, 3 slots
        ]:
            ws = sockets.enter_context(
                ws_connect(_ws_url(server_url), open_timeout=10, max_size=None)
            )
            refused.append(ws)
            answer = _send(ws, json.dumps({"type": "reset", "data": data}))
            assert answer["data"]["code"] == "EXECUTION_ERROR", answer
        client = UirlEnvClient(base_url=server_url)
        try:
            assert client.state().step_count == 0  # a slot at once
        finally:
            client.close()
        # The refused socket is still open: a good reset takes a slot again and plays.
        reset = _send(refused[0], json.dumps({"type": "reset", "data": {"task": SN, "seed": 1}}))
        assert reset["type"] == "observation", reset
        step = _send(
            refused[0], json.dumps({"type": "step", "data": {"action_type": "screenshot"}})
        )
        assert step["type"] == "observation" and step["data"]["observation"]["error"] is None


def test_a_client_leaving_mid_answer_is_a_quiet_disconnect(
    server_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that closed its socket while its step ran made OpenEnv log an ASGI
    traceback (three exceptions long); now one INFO line, and the session closes."""
    uvicorn_logger = logging.getLogger("uvicorn")  # it does not propagate to the root
    uvicorn_logger.addHandler(caplog.handler)
    caplog.set_level(logging.INFO, logger="uirl_gym.openenv.guard")
    before = len(RecordingEnvironment.instances)
    try:
        with ws_connect(_ws_url(server_url), open_timeout=10, max_size=None) as ws:
            reset = _send(ws, json.dumps({"type": "reset", "data": {"task": SDE, "seed": 0}}))
            assert reset["type"] == "observation", reset
            (mine,) = [e for e in RecordingEnvironment.instances[before:] if e.env is not None]
            # A long text keeps the step running while the socket closes.
            step = {"action_type": "type", "text": "x" * 512}
            ws.send(json.dumps({"type": "step", "data": step}))
        wait_for(lambda: mine.env is None, 60, "the session to close")
        left = "left before its answer was sent"
        wait_for(
            lambda: any(
                left in r.getMessage() or r.levelno >= logging.ERROR for r in caplog.records
            ),
            30,
            "the server to log the client's leaving",
        )
    finally:
        uvicorn_logger.removeHandler(caplog.handler)
    loud = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]
    assert any(left in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


def test_the_page_as_text_and_actions_by_element_over_openenv(server_url: str) -> None:
    """A reset's ``observations`` add the page as text (UIEnv's names) to every answer,
    and an action by element earns the task's reward: a BrowserGym-style recipe
    (screenshot + accessibility tree per turn) runs over OpenEnv. OpenEnvEnv gives the
    same observations as gym.make's env, in the same space."""
    wanted = ["axtree", "elements", "som", "focused", "url", "last_action_error"]
    env = OpenEnvEnv(server_url, task="miniwob.click-button", observations=wanted)
    try:
        obs, _ = env.reset(seed=3)
        assert env.observation_space.contains(obs), {
            k: env.observation_space[k].contains(v) for k, v in obs.items()
        }
        target = re.search(r'"(.+?)"', obs["instruction"]).group(1)
        (bid,) = re.findall(rf"\[(\w+)\] button '{re.escape(target)}'", obs["axtree"])
        assert obs["som"].shape == obs["screenshot"].shape
        assert not np.array_equal(obs["som"], obs["screenshot"])  # the marks are drawn
        assert any(e["bid"] == bid and e["set_of_marks"] for e in obs["elements"])
        obs, reward, *_ = env.step({"action_type": "left_click", "bid": "999"})
        assert "is not on the page" in obs["last_action_error"] and reward <= 0
        obs, reward, terminated, _, info = env.step({"action_type": "left_click", "bid": bid})
        assert (reward, terminated, info["is_success"]) == (1.0, True, True)
        assert obs["last_action_error"] == ""
    finally:
        env.close()
    with pytest.raises(ValueError, match="valid: axtree, html"):
        OpenEnvEnv(server_url, observations=["axtre"])


def test_browsergym_action_strings_over_openenv(server_url: str) -> None:
    """OpenEnv's BrowserGym env takes ``action_str``; so does uirl's server: a recipe
    written for it (the accessibility tree in, ``click('12')`` out) runs unchanged but
    for the task. A string that does not parse is an invalid action saying why."""
    client = UirlEnvClient(base_url=server_url).sync()
    with client:
        result = client.reset(task="uirl/miniwob.click-button-v0", seed=4, observations=["axtree"])
        target = re.search(r'"(.+?)"', result.observation.instruction).group(1)
        (bid,) = re.findall(rf"\[(\w+)\] button '{re.escape(target)}'", result.observation.axtree)
        refused = client.step(UirlAction(action_str="click('1'); click('2')"))
        assert "ValueError" in refused.observation.error and refused.reward <= 0
        assert not refused.done
        result = client.step(UirlAction(action_str=f"click('{bid}')"))
        assert (result.reward, result.done, result.observation.is_success) == (1.0, True, True)

"""Who may do what to a session: the token, the submission binding, body limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import gymnasium as gym
import pytest
import requests
from credentials import session_headers

from uirl_gym.guards import MAX_BODY_BYTES
from uirl_gym.protocol import TOKEN_HEADER, SessionInfo
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.tasks import OWN_TASKS, TASKS
from uirl_gym.tasks.simple_data_entry.expert import SimpleDataEntryExpert

TIMEOUT_S = 30


def test_privileged_routes_need_the_token(session: SessionInfo) -> None:
    base = session.base_url
    token = session.headers[TOKEN_HEADER]
    # What an agent (or an unmodified ui-verifiers client) uses needs no token.
    assert requests.get(f"{base}/", timeout=TIMEOUT_S).status_code == 200
    assert requests.get(f"{base}/progress", timeout=TIMEOUT_S).status_code == 200
    shot = requests.get(f"{base}/act?action_type=screenshot", timeout=TIMEOUT_S)
    assert shot.status_code == 200 and shot.content[:4] == b"\x89PNG"
    # The answers and the reset do.
    for method, path in (("GET", "/oracle"), ("POST", "/reset")):
        bare = requests.request(method, base + path, json={}, timeout=TIMEOUT_S)
        assert bare.status_code == 401, bare.text
        assert TOKEN_HEADER in bare.json()["detail"]
        assert bare.headers["WWW-Authenticate"] == "Bearer"
        wrong = requests.request(
            method, base + path, json={}, headers={TOKEN_HEADER: "guess"}, timeout=TIMEOUT_S
        )
        assert wrong.status_code == 403, wrong.text
        for headers in ({TOKEN_HEADER: token}, {"Authorization": f"Bearer {token}"}):
            ok = requests.request(method, base + path, json={}, headers=headers, timeout=TIMEOUT_S)
            assert ok.status_code == 200, ok.text
    # The route list is not published.
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert requests.get(base + path, timeout=TIMEOUT_S).status_code == 404


def test_a_submission_cannot_be_faked_over_http(session: SessionInfo) -> None:
    """One POST used to record a correct submission; now only the page can record."""
    base = session.base_url
    started = requests.post(
        f"{base}/reset",
        json={"seed": 0, "options": {"rows": [3]}},
        headers=session_headers(base),
        timeout=TIMEOUT_S,
    ).json()
    oracle = requests.get(f"{base}/oracle", headers=session_headers(base), timeout=TIMEOUT_S)
    fake = {
        "type": "submit",
        "episode": started["episode"],
        "fields": oracle.json()["target_values"][0],
    }
    for headers in ({}, session_headers(base)):
        forged = requests.post(f"{base}/task/event", json=fake, headers=headers, timeout=TIMEOUT_S)
        assert forged.status_code in (404, 405), forged.text
    progress = requests.get(f"{base}/progress", timeout=TIMEOUT_S).json()
    assert progress["num_submissions"] == 0 and progress["submitted_row_indices"] == []


def test_the_expert_runs_end_to_end_through_gym_make() -> None:
    """The env holds the token (from its runtime): reset, oracle and expert still work."""
    env = gym.make("uirl_gym:uirl/SimpleDataEntry-v0")
    try:
        env.reset(seed=1, options={"rows": [2]})
        expert = SimpleDataEntryExpert()
        for _ in range(40):
            action = expert.next_action(env.unwrapped.oracle())
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and reward > 0, info
        # The agent's view of the same session: no token, no answers.
        base = env.unwrapped.session.base_url
        assert requests.get(f"{base}/oracle", timeout=TIMEOUT_S).status_code == 401
    finally:
        env.close()


@pytest.fixture
def base(session: SessionInfo) -> Iterator[str]:
    yield session.base_url
    # Whatever was sent, the session still answers.
    assert requests.get(f"{session.base_url}/health", timeout=TIMEOUT_S).status_code == 200


def test_a_deeply_nested_body_is_a_400(base: str) -> None:
    for body in ("[" * 100_000, '{"seed":' * 100_000):
        response = requests.post(
            f"{base}/reset", data=body, headers=session_headers(base), timeout=TIMEOUT_S
        )
        assert response.status_code == 400, response.text
        assert "nested too deeply" in response.json()["detail"] or "JSON" in response.text


def test_bodies_over_the_limit_are_a_413(base: str) -> None:
    headers = session_headers(base)
    too_big = b"x" * (MAX_BODY_BYTES + 1)
    declared = requests.post(f"{base}/reset", data=too_big, headers=headers, timeout=TIMEOUT_S)
    assert declared.status_code == 413 and "at most 1048576 bytes" in declared.json()["detail"]
    # Without a Content-Length (chunked), the body is counted as it arrives.
    chunks = (b"x" * 65536 for _ in range(40))
    streamed = requests.post(f"{base}/reset", data=chunks, headers=headers, timeout=TIMEOUT_S)
    assert streamed.status_code == 413, streamed.text
    # Without the token, a big body is refused by size before anything else reads it.
    bare = requests.post(f"{base}/reset", data=too_big, timeout=TIMEOUT_S)
    assert bare.status_code == 413


def test_the_token_stays_out_of_argv_and_the_browser(runtime: LocalRuntime) -> None:
    """The local runtime hands the token over in the server's environment (argv is
    readable by every local user); the server drops it before starting Chromium."""
    info = runtime.acquire()
    try:
        token = info.headers[TOKEN_HEADER].encode()
        server = runtime.pid(info)
        assert token not in Path(f"/proc/{server}/cmdline").read_bytes()
        children = descendant_pids(server)
        assert children, "no Chromium under the server"
        for pid in children:
            try:
                assert token not in Path(f"/proc/{pid}/environ").read_bytes(), pid
            except (FileNotFoundError, ProcessLookupError):
                continue  # a short-lived helper that is gone already
        assert "token" not in repr(info).lower()
    finally:
        runtime.release(info)


# What /progress and X-Progress show without the token, per task: upstream's two keys
# for SimpleDataEntry, and counts that say nothing about which answer is right.
UPSTREAM_KEYS = {"submitted_row_indices", "num_incorrect_submissions"}


def test_progress_detail_needs_the_token(session: SessionInfo) -> None:
    """Without the token, neither /progress nor X-Progress tells which guess was right."""

    base = session.base_url
    token = session_headers(base)
    try:
        # uirl's own tasks and one of each family (a family is one implementation).
        families = {spec.family: name for name, spec in TASKS.items() if spec.family}
        for task in [*OWN_TASKS, *families.values()]:
            started = reset_raw_task(base, task)
            assert started.status_code == 200, started.text
            full = requests.get(f"{base}/progress", headers=token, timeout=TIMEOUT_S).json()
            bare = requests.get(f"{base}/progress", timeout=TIMEOUT_S).json()
            wrong = requests.get(
                f"{base}/progress", headers={TOKEN_HEADER: "guess"}, timeout=TIMEOUT_S
            ).json()
            shot = f"{base}/act?action_type=screenshot"
            header = requests.get(shot, timeout=TIMEOUT_S).headers["X-Progress"]
            header_full = requests.get(shot, headers=token, timeout=TIMEOUT_S).headers["X-Progress"]
            assert bare == wrong == json.loads(header), task
            assert full == json.loads(header_full) and full != bare, task
            assert set(bare) < set(full) and bare["episode"] == full["episode"], task
            for key, value in bare.items():
                if task == "simple_data_entry" and key in UPSTREAM_KEYS:
                    continue
                assert type(value) is int, (task, key, value)  # counts only
            if task == "simple_data_entry":
                assert UPSTREAM_KEYS <= set(bare)
    finally:
        reset_raw_task(base, "simple_data_entry")


def reset_raw_task(base: str, task: str) -> requests.Response:
    return requests.post(
        f"{base}/reset",
        json={"seed": 0, "task": task},
        headers=session_headers(base),
        timeout=TIMEOUT_S,
    )

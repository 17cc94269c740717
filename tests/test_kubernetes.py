"""The Kubernetes runtime and the routing proxy, end to end, without a cluster.

The real ``kubernetes`` client talks to a stand-in API server (``k8s_standin.py``) whose
"kubelet" runs each pod's command as a real process: real session servers (Chromium
included), the real proxy, real HTTP. Deselect with ``-m "not k8s"``.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("kubernetes")

import requests  # noqa: E402
import yaml  # noqa: E402
from k8s_standin import PodStandIn, serve_app  # noqa: E402

from uirl_gym.actions import Action, ActionType  # noqa: E402
from uirl_gym.client import SessionClient  # noqa: E402
from uirl_gym.env import UIEnv  # noqa: E402
from uirl_gym.guards import MAX_TARGET_BYTES  # noqa: E402
from uirl_gym.protocol import MAX_TYPED_TEXT, TOKEN_ENV_VAR, TOKEN_HEADER
from uirl_gym.runtimes.base import RuntimeClosedError, SessionStartError
from uirl_gym.runtimes.kubernetes import KubernetesRuntime, KubernetesRuntimeConfig  # noqa: E402
from uirl_gym.runtimes.kubernetes.api import (  # noqa: E402
    APP_LABEL,
    APP_NAME,
    EXPIRES_ANNOTATION,
    RUN_LABEL,
    SESSION_LABEL,
    PodApi,
    load_api_client,
)
from uirl_gym.runtimes.kubernetes.pods import (  # noqa: E402
    POD_IP_ENV_VAR,
    build_pod_manifest,
    cleanup_orphans,
    load_template,
)
from uirl_gym.runtimes.kubernetes.proxy import ProxyConfig, create_proxy_app  # noqa: E402

pytestmark = pytest.mark.k8s

NS = "uirl-test"
DEPLOY = Path(__file__).resolve().parents[1] / "uirl_gym" / "deploy"


def wait_until(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return sock.getsockname()[1]


def pod_names(standin: PodStandIn) -> set[str]:
    return {p["metadata"]["name"] for p in standin.pods(NS)}


def assert_all_gone(standin: PodStandIn) -> None:
    wait_until(lambda: not standin.pods(NS), 10, "every pod to be deleted")
    wait_until(lambda: not standin.live_pids(), 20, "every pod process to exit")


@pytest.fixture(scope="module")
def standin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodStandIn]:
    with PodStandIn(tmp_path_factory.mktemp("standin")) as server:
        yield server
    assert not server.live_pids(), "the stand-in left pod processes behind"


@pytest.fixture(scope="module")
def api(standin: PodStandIn) -> PodApi:
    return PodApi(load_api_client(api_server=standin.url), NS)


@pytest.fixture(scope="module")
def proxy(api: PodApi) -> Iterator[tuple[str, Any]]:
    """The real proxy app in a uvicorn thread, its pod cache synced; yields (URL, app)."""
    app = create_proxy_app(ProxyConfig(), api)
    with serve_app(app) as url:
        wait_until(app.state.resolver.cache.synced.is_set, 10, "the proxy's pod cache")
        yield url, app


def runtime_config(standin: PodStandIn, **overrides: Any) -> KubernetesRuntimeConfig:
    values: dict[str, Any] = {
        "namespace": NS,
        "api_server": standin.url,
        "container_port": free_port(),
        "startup_timeout_s": 60,
    }
    values.update(overrides)
    return KubernetesRuntimeConfig(**values)


def static_pod(name: str, labels: dict[str, str], port: int, root: Path) -> dict[str, Any]:
    """A cheap pod: a static file server (for proxy tests that need no browser)."""
    command = [
        "python", "-m", "http.server", str(port), "--bind", "0.0.0.0", "--directory", str(root)
    ]  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "web",
                    "image": "python:3.11-slim",
                    "command": command,
                    "ports": [{"name": "http", "containerPort": port}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": "http"}},
                }
            ],
        },
    }


def sleeper_pod(name: str, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "600"]}]},
    }


# -- manifests ---------------------------------------------------------------------------


def test_manifests_validate_against_the_kubernetes_schemas() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    version = kv.latest_version()
    documents = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and not doc["apiVersion"].startswith("kustomize."):
                documents.append((path.name, doc))
    kinds = {doc["kind"] for _, doc in documents}
    assert {"Pod", "Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"} <= kinds
    pod = build_pod_manifest(
        load_template(),
        session_id="abc123",
        run_id="run1",
        image="registry.example/uirl-session:1",
        task="simple_data_entry",
        port=8123,
        ttl_s=600,
        resources_override={"limits": {"cpu": "2", "memory": None}},
        token="t0k3n",
    )
    documents.append(("built pod", pod))
    for name, doc in documents:
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as exc:
            pytest.fail(f"{name} ({doc['kind']}) does not validate: {exc}")
    broken = {**pod, "spec": {**pod["spec"], "restartPolicyy": "Never"}}
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, version, strict=True)  # the check has teeth


def test_built_pod_manifest() -> None:
    pod = build_pod_manifest(
        load_template(),
        session_id="abc123",
        run_id="run1",
        image="img:1",
        task="simple_data_entry",
        port=8123,
        ttl_s=600,
        resources_override={"limits": {"cpu": "2", "memory": None}},
        token="t0k3n",
    )
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == "uirl-session-abc123"
    assert meta["labels"] == {APP_LABEL: APP_NAME, SESSION_LABEL: "abc123", RUN_LABEL: "run1"}
    expires = datetime.fromisoformat(meta["annotations"][EXPIRES_ANNOTATION])
    assert timedelta(seconds=590) < expires - datetime.now(UTC) <= timedelta(seconds=600)
    assert spec["restartPolicy"] == "Never"
    assert spec["automountServiceAccountToken"] is False
    (container,) = spec["containers"]
    assert container["command"][:3] == ["python", "-m", "uirl_gym.session"]
    assert container["command"][3:] == [
        "--host", "0.0.0.0", "--port", "8123", "--session-id", "abc123",
        "--task", "simple_data_entry", "--log-level", "warning",
        # Requests name the pod's IP (the proxy's, direct ones, probes), not a loopback name.
        "--allowed-hosts", f"$({POD_IP_ENV_VAR})",
    ]  # fmt: skip
    assert container["ports"][0] == {"name": "http", "containerPort": 8123, "protocol": "TCP"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/", "port": "http"}
    assert container["resources"]["limits"] == {"cpu": "2"}
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "384Mi"}
    # The session token goes in the environment, never the command line.
    assert container["env"] == [
        {"name": POD_IP_ENV_VAR, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": TOKEN_ENV_VAR, "value": "t0k3n"},
    ]
    assert "t0k3n" not in container["command"]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="pool_size: expected >= 0, got -1"):
        KubernetesRuntimeConfig(pool_size=-1)
    with pytest.raises(ValueError, match="run_id: expected a label value"):
        KubernetesRuntimeConfig(run_id="not a label!")


# -- the proxy ---------------------------------------------------------------------------


def test_proxy_refuses_what_is_not_a_session(
    standin: PodStandIn, api: PodApi, proxy: tuple[str, Any], tmp_path: Path
) -> None:
    url, _ = proxy
    assert requests.get(f"{url}/healthz", timeout=5).json()["status"] == "ok"
    assert requests.get(f"{url}/proxy/Not_A_Session/", timeout=5).status_code == 400
    assert requests.get(f"{url}/proxy/{'a' * 60}/", timeout=5).status_code == 400
    assert requests.get(f"{url}/proxy/nosuchsession/", timeout=5).status_code == 404
    # A pod that claims a session id but is not a uirl session pod is never reached.
    port = free_port()
    api.create(static_pod("impostor", {SESSION_LABEL: "impostor1"}, port, tmp_path))
    api.create(
        static_pod("other-app", {APP_LABEL: "web", SESSION_LABEL: "impostor2"}, port, tmp_path)
    )
    wait_until(lambda: all(api.read(n).usable for n in ("impostor", "other-app")), 20, "ready")
    for session_id in ("impostor1", "impostor2"):
        reply = requests.get(f"{url}/proxy/{session_id}/", timeout=5)
        assert reply.status_code == 404, reply.text
    api.delete("impostor")
    api.delete("other-app")
    assert_all_gone(standin)


def test_proxy_passes_through_and_follows_a_replaced_pod(
    standin: PodStandIn, api: PodApi, proxy: tuple[str, Any], tmp_path: Path
) -> None:
    url, app = proxy
    (tmp_path / "hello.txt").write_text("hello")
    labels = {APP_LABEL: APP_NAME, SESSION_LABEL: "static1"}
    port = free_port()
    api.create(static_pod("static-a", labels, port, tmp_path))
    wait_until(lambda: api.read("static-a").usable, 20, "pod static-a to be ready")
    reply = requests.get(f"{url}/proxy/static1/hello.txt?x=1", timeout=5)
    assert (reply.status_code, reply.text) == (200, "hello")
    assert reply.headers["content-type"].startswith("text/plain")
    assert requests.get(f"{url}/proxy/static1/missing.txt", timeout=5).status_code == 404
    # The pod is replaced behind the proxy's back: same session id, new pod, new IP.
    old_ip = api.read("static-a").ip
    api.delete("static-a")
    api.create(static_pod("static-b", labels, port, tmp_path))
    new = wait_until(lambda: (p := api.read("static-b")) and p.usable and p, 20, "static-b")
    assert new.ip != old_ip
    wait_until(lambda: not standin.kubelet_process(NS, "static-a"), 10, "static-a to go")
    resolver = app.state.resolver
    lookups, calls = resolver.lookups, dict(standin.calls)
    reply = requests.get(f"{url}/proxy/static1/hello.txt", timeout=10)
    assert (reply.status_code, reply.text) == (200, "hello")
    # The watch told the proxy: no lookup, no API call.
    assert resolver.lookups == lookups and dict(standin.calls) == calls
    # The watch lagging behind (a stale address in the cache): the connection fails, the
    # proxy asks the API once and gets there.
    stale = dataclasses.replace(resolver.cache.get("static-b"), port=free_port())
    resolver._on_change(None, stale)
    reply = requests.get(f"{url}/proxy/static1/hello.txt", timeout=10)
    assert (reply.status_code, reply.text) == (200, "hello")
    assert resolver.lookups == lookups + 1
    api.delete("static-b")
    assert_all_gone(standin)


ECHO_SERVER = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
class Echo(BaseHTTPRequestHandler):
    def _echo(self):
        size = int(self.headers.get("content-length") or 0)
        body = json.dumps({"path": self.path, "headers": dict(self.headers.items()),
                           "body_bytes": len(self.rfile.read(size))}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = _echo
    def log_message(self, *args):
        pass
HTTPServer(("0.0.0.0", int(sys.argv[1])), Echo).serve_forever()
"""


@pytest.fixture
def echo_session(standin: PodStandIn, api: PodApi) -> Iterator[str]:
    """A session pod whose server answers with the request it got (no browser)."""
    port = free_port()
    pod = static_pod("echo", {APP_LABEL: APP_NAME, SESSION_LABEL: "echo1"}, port, Path("."))
    pod["spec"]["containers"][0]["command"] = ["python", "-c", ECHO_SERVER, str(port)]
    api.create(pod)
    wait_until(lambda: (p := api.read("echo")) and p.usable, 20, "the echo pod")
    yield "echo1"
    api.delete("echo")
    wait_until(lambda: not standin.kubelet_process(NS, "echo"), 10, "the echo pod to go")


def test_proxy_answers_400_to_encoded_ids_and_huge_paths(
    proxy: tuple[str, Any], echo_session: str
) -> None:
    url, _ = proxy
    for path in (
        "/proxy/%65cho1/",  # "echo1", percent-encoded
        "/proxy/echo1%2Fx/",  # an encoded slash in the id
        "/proxy/ech%C3%A9/",
        "/proxy/echo1/" + "a" * MAX_TARGET_BYTES,
        "/proxy/echo1/act?text=" + "b" * MAX_TARGET_BYTES,
    ):
        status, body = raw_get(url, path)
        assert status == 400, (path[:40], status, body[:200])
        assert json.loads(body)["detail"]
    # The encoding of the rest of the path reaches the pod exactly as sent.
    status, body = raw_get(url, "/proxy/echo1/a%2Fb?q=%C3%A9")
    assert status == 200 and json.loads(body)["path"] == "/a%2Fb?q=%C3%A9"


def raw_get(url: str, path: str) -> tuple[int, str]:
    """GET ``path`` byte for byte (requests would normalise its percent-encoding)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("GET", path)
        reply = connection.getresponse()
        return reply.status, reply.read().decode(errors="replace")
    finally:
        connection.close()


def test_proxy_sets_its_own_session_header(proxy: tuple[str, Any], echo_session: str) -> None:
    url, app = proxy
    requests.get(f"{url}/proxy/echo1/", timeout=10)
    lookups = app.state.resolver.lookups
    for forged in ("someone-else", "echo1"):
        reply = requests.get(
            f"{url}/proxy/echo1/", headers={"X-UIRL-Session-Id": forged}, timeout=10
        )
        assert reply.status_code == 200, reply.text
        sent = [v for k, v in reply.json()["headers"].items() if k.lower() == "x-uirl-session-id"]
        assert sent == ["echo1"]
    assert app.state.resolver.lookups == lookups  # the cache was not flushed


def test_unknown_sessions_cost_no_api_call(
    standin: PodStandIn, proxy: tuple[str, Any], echo_session: str
) -> None:
    """Made-up session ids, each new, answered from the watched cache (one list each
    before: 300 made-up ids cost 300 API calls)."""
    url, app = proxy
    calls, lookups = dict(standin.calls), app.state.resolver.lookups
    with requests.Session() as http:
        for i in range(50):
            reply = http.get(f"{url}/proxy/nosuchsession-{i}/", timeout=5)
            assert reply.status_code == 404, reply.text
        assert http.get(f"{url}/proxy/{echo_session}/", timeout=5).status_code == 200
    assert dict(standin.calls) == calls
    assert app.state.resolver.lookups == lookups


def test_proxy_limits_bodies(proxy: tuple[str, Any], echo_session: str) -> None:
    url, _ = proxy
    small = requests.post(f"{url}/proxy/echo1/reset", data=b"x" * 1000, timeout=10)
    assert small.status_code == 200 and small.json()["body_bytes"] == 1000
    declared = requests.post(f"{url}/proxy/echo1/reset", data=b"x" * 2_000_000, timeout=10)
    assert declared.status_code == 413, declared.text
    streamed = requests.post(
        f"{url}/proxy/echo1/reset", data=(b"x" * 65536 for _ in range(3200)), timeout=30
    )  # 200 MB offered, refused after the first MB
    assert streamed.status_code == 413, streamed.text


def test_proxy_with_a_token(api: PodApi, echo_session: str) -> None:
    app = create_proxy_app(ProxyConfig(token="proxy-secret"), api)
    with serve_app(app) as url:
        target = f"{url}/proxy/echo1/progress"
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200  # for probes
        bare = requests.get(target, timeout=5)
        assert bare.status_code == 401 and bare.headers["WWW-Authenticate"] == "Bearer"
        session_token_only = requests.get(target, headers={"X-UIRL-Token": "t"}, timeout=5)
        assert session_token_only.status_code == 401
        wrong = requests.get(target, headers={"Authorization": "Bearer nope"}, timeout=5)
        assert wrong.status_code == 403
        ok = requests.get(
            target,
            headers={"Authorization": "Bearer proxy-secret", "X-UIRL-Token": "t"},
            timeout=5,
        )
        assert ok.status_code == 200
        forwarded = {k.lower(): v for k, v in ok.json()["headers"].items()}
        assert "authorization" not in forwarded  # the proxy's credential stays here
        assert forwarded["x-uirl-token"] == "t"  # the session's goes on


# -- the runtime -------------------------------------------------------------------------


def test_unpullable_image_fails_fast(standin: PodStandIn) -> None:
    config = runtime_config(standin, image="unpullable/uirl-session:0", pool_size=0)
    with KubernetesRuntime(config) as runtime:
        with pytest.raises(SessionStartError, match="ErrImagePull"):
            runtime.acquire(timeout_s=60)
    assert_all_gone(standin)
    with pytest.raises(RuntimeClosedError):
        runtime.acquire()


def test_warm_pool_end_to_end_through_the_proxy(
    standin: PodStandIn, api: PodApi, proxy: tuple[str, Any]
) -> None:
    url, _ = proxy
    runtime = KubernetesRuntime(runtime_config(standin, pool_size=1, proxy_url=url))
    try:
        runtime.wait_pool_ready(timeout_s=60)
        assert runtime.stats() == {"ready": 1, "leased": 0, "starting": 0}

        t0 = time.perf_counter()
        first = runtime.acquire()
        print(f"acquire from the warm pool: {(time.perf_counter() - t0) * 1000:.2f} ms")
        assert first.base_url == f"{url}/proxy/{first.session_id}"
        # Given back while its replacement starts: it returns to the pool, which then
        # holds one too many once the replacement is ready; the extra is deleted.
        runtime.release(first, healthy=True)
        wait_until(
            lambda: (
                runtime.stats() == {"ready": 1, "leased": 0, "starting": 0}
                and len(pod_names(standin)) == 1
            ),
            60,
            "the pool to settle at one session",
        )
        session = runtime.acquire()
        assert session == first  # the pooled session, not a new one
        leased_pod = f"uirl-session-{session.session_id}"

        client = SessionClient(session, image_format="jpeg")
        try:
            reset = client.reset(seed=3)
            assert reset["session_id"] == session.session_id and reset["instruction"]
            assert client.act(Action(ActionType.SCREENSHOT)).shape == (800, 1280, 3)
            client.act(Action(ActionType.LEFT_CLICK, x=640, y=400))
            assert {"submitted_row_indices", "num_incorrect_submissions"} <= set(client.progress())
        finally:
            client.close()
        # The answers are not for whoever holds the URL (the agent): no token, 401.
        oracle = requests.get(f"{session.base_url}/oracle", timeout=10)
        assert oracle.status_code == 401 and "X-UIRL-Token" in oracle.json()["detail"]
        # A 4xx and its JSON body pass through the proxy unchanged.
        bad = requests.get(f"{session.base_url}/act", params={"action_type": "fly"}, timeout=10)
        assert bad.status_code == 400 and "action_type" in bad.json()["detail"]
        assert bad.headers["content-type"] == "application/json"
        check_long_texts_pass(session.base_url)
        # The pod answers requests addressed to its IP (its --allowed-hosts, expanded from
        # the downward API), and refuses, through the proxy too, what a web page sends.
        pod = api.read(leased_pod)
        assert pod is not None and pod.ip
        process = standin.kubelet_process(NS, leased_pod)
        assert process is not None
        argv = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert b"\0--allowed-hosts\0" + pod.ip.encode() + b"\0" in argv
        page = {"Sec-Fetch-Site": "cross-site"}
        shot = f"{session.base_url}/act?action_type=screenshot"
        refused = requests.get(shot, headers=page, timeout=10)
        assert refused.status_code == 403 and "Sec-Fetch-Site" in refused.json()["detail"]

        # The pool refills behind the lease.
        runtime.wait_pool_ready(timeout_s=60)
        pooled = wait_until(lambda: pod_names(standin) - {leased_pod}, 10, "the pooled pod")
        assert len(pooled) == 1

        # The watch survives an expired resourceVersion (410), then a pooled pod is
        # deleted behind the runtime's back: it is replaced.
        standin.compact()
        standin.drop_watches()
        api.delete(next(iter(pooled)))
        wait_until(
            lambda: (
                runtime.stats()["ready"] == 1
                and len(pod_names(standin) - {leased_pod} - pooled) == 1
            ),
            60,
            "a replacement of the deleted pod",
        )

        runtime.release(session, healthy=False)
        wait_until(lambda: leased_pod not in pod_names(standin), 10, "the unhealthy pod to go")
        assert runtime.stats()["leased"] == 0
    finally:
        runtime.close()
    assert_all_gone(standin)


def check_long_texts_pass(base_url: str) -> None:
    """The longest texts the protocol allows pass the proxy (its limit was 64 KiB, under
    8192 characters of up to 12 bytes each, percent-encoded): the session answers. A
    screenshot ignores its text, so nothing is typed for seconds."""
    for character in ("\u6f22", "\U0001f600"):  # 9 and 12 bytes percent-encoded
        text = character * MAX_TYPED_TEXT
        answer = requests.get(
            f"{base_url}/act", params={"action_type": "screenshot", "text": text}, timeout=60
        )
        assert answer.status_code == 200, answer.text[:300]
        assert answer.headers["X-Ignored-Params"] == "text"


def test_tokens_through_a_proxy_that_wants_one(standin: PodStandIn, api: PodApi) -> None:
    """The runtime makes a per-pod session token and sends the proxy's bearer token."""
    app = create_proxy_app(ProxyConfig(token="proxy-secret"), api)
    with serve_app(app) as url:
        config = runtime_config(standin, pool_size=0, proxy_url=url, proxy_token="proxy-secret")
        with KubernetesRuntime(config) as runtime:
            session = runtime.acquire(timeout_s=60)
            (manifest,) = [
                p for p in standin.pods(NS) if p["metadata"]["name"].endswith(session.session_id)
            ]
            env = {e["name"]: e.get("value") for e in manifest["spec"]["containers"][0]["env"]}
            assert env[TOKEN_ENV_VAR] == session.headers[TOKEN_HEADER]
            assert TOKEN_ENV_VAR not in " ".join(manifest["spec"]["containers"][0]["command"])
            client = SessionClient(session)
            try:
                assert client.reset(seed=0)["session_id"] == session.session_id
                assert client.oracle()["target_rows"]
            finally:
                client.close()
            proxy_only = {"Authorization": "Bearer proxy-secret"}
            oracle = f"{session.base_url}/oracle"
            assert requests.get(oracle, timeout=10).status_code == 401  # the proxy's check
            assert requests.get(oracle, headers=proxy_only, timeout=10).status_code == 401
            agent = requests.get(f"{session.base_url}/progress", headers=proxy_only, timeout=10)
            assert agent.status_code == 200
            runtime.release(session)
    assert_all_gone(standin)


def test_env_on_the_runtime_direct_route_and_pool_cap(standin: PodStandIn) -> None:
    with KubernetesRuntime(runtime_config(standin, pool_size=0)) as runtime:
        env = UIEnv(runtime=runtime, image_format="jpeg")  # acquires at its first reset
        try:
            obs, info = env.reset(seed=1)
            assert env.session is not None
            assert env.session.base_url.startswith("http://127.77.")  # the pod IP, no proxy
            assert obs["screenshot"].shape == (800, 1280, 3)
            env.step(Action(ActionType.LEFT_CLICK, x=100, y=100))
        finally:
            env.close()  # gives the session back healthy; a pool of size 0 is full: deleted
        wait_until(lambda: not standin.pods(NS), 10, "the released pod to be deleted")
    assert_all_gone(standin)


def test_trl_environment_on_the_kubernetes_runtime(standin: PodStandIn) -> None:
    """TRL's environment class (uirl_agents/integrations/trl.py) on a shared runtime."""
    from uirl_agents.integrations.trl import make_environment

    with KubernetesRuntime(runtime_config(standin, pool_size=1)) as runtime:
        env = make_environment("uirl/FormFill-v0", runtime=runtime, max_steps=2)()
        try:
            first = env.reset(seed=2)
            # The processor's frame (TRL class default): what the model sees.
            assert first[0]["image"].size == (644, 392) and first[1]["text"]
            assert env._holder["backend"].env.session.base_url.startswith("http://127.77.")
            out = env.click(x=100, y=100)
            assert out[0]["type"] == "image" and out[1]["text"] == "Clicked at (100, 100)."
        finally:
            env._close()  # the session goes back to the pool; the runtime deletes it
    assert_all_gone(standin)


def test_orphan_cleanup(standin: PodStandIn, api: PodApi) -> None:
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    uirl = {APP_LABEL: APP_NAME}
    api.create(sleeper_pod("expired", {**uirl, RUN_LABEL: "old"}, {EXPIRES_ANNOTATION: past}))
    api.create(sleeper_pod("live", {**uirl, RUN_LABEL: "other"}, {EXPIRES_ANNOTATION: future}))
    api.create(sleeper_pod("unannotated", {**uirl, RUN_LABEL: "other"}, {}))
    api.create(
        sleeper_pod("crashed", {**uirl, RUN_LABEL: "crashed1"}, {EXPIRES_ANNOTATION: future})
    )
    api.create(sleeper_pod("not-uirl", {APP_LABEL: "web"}, {EXPIRES_ANNOTATION: past}))

    assert cleanup_orphans(api, default_ttl_s=600) == ["expired"]
    # A runtime restarted with the run id of a crashed one deletes what it left.
    config = runtime_config(standin, pool_size=0, run_id="crashed1")
    KubernetesRuntime(config).close()
    assert pod_names(standin) == {"live", "unannotated", "not-uirl"}

    command = [sys.executable, "-m", "uirl_gym.runtimes.kubernetes", "cleanup"]
    args = ["--namespace", NS, "--api-server", standin.url, "--all-runs"]
    out = subprocess.run(command + args, capture_output=True, text=True, timeout=60, check=True)
    assert "deleted 2 session pod(s)" in out.stdout, out.stdout + out.stderr
    assert pod_names(standin) == {"not-uirl"}  # never touches pods without the uirl label
    api.delete("not-uirl")
    assert_all_gone(standin)


def test_proxy_token_comes_from_the_mounted_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uirl_gym.runtimes.kubernetes.proxy import read_proxy_token

    monkeypatch.delenv("UIRL_PROXY_TOKEN", raising=False)
    secret = tmp_path / "token"
    secret.write_text("s3cret\n")
    assert read_proxy_token(str(secret)) == "s3cret"
    assert read_proxy_token(str(tmp_path / "absent")) is None  # optional Secret not made
    monkeypatch.setenv("UIRL_PROXY_TOKEN", "from-env")
    assert read_proxy_token(str(tmp_path / "absent")) == "from-env"
    # The runtime reads the variable when it sends the token, never into its config
    # (which the trainers save and log).
    assert KubernetesRuntimeConfig().proxy_token is None
    assert KubernetesRuntimeConfig().bearer_token() == "from-env"
    assert KubernetesRuntimeConfig(proxy_token="given").bearer_token() == "given"

"""A stand-in for the Kubernetes API server (pods only), for tests and benchmarks.

A real HTTP server on 127.0.0.1 (``http.server``, one thread per connection) serving the
pod endpoints that the runtime and the proxy use, in namespaced form, as the official
client calls them:

- ``POST   /api/v1/namespaces/{ns}/pods``            create (201, 409 on a name clash)
- ``GET    /api/v1/namespaces/{ns}/pods/{name}``     read (404 when absent)
- ``GET    /api/v1/namespaces/{ns}/pods?labelSelector=..``  list, with resourceVersion
- ``GET    ...pods?watch=true&resourceVersion=N``    watch: JSON lines, chunked; an
  ``ERROR`` event with code 410 when N is older than the last :meth:`compact`
- ``PATCH  /api/v1/namespaces/{ns}/pods/{name}``     JSON merge patch (annotations)
- ``DELETE /api/v1/namespaces/{ns}/pods/{name}``     delete (404 when absent)

Label selectors: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, comma-joined.

RBAC, in small: ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`` (what
``kubectl auth can-i`` asks) answers allowed for every namespace but those given to
:meth:`PodStandIn.forbid`, whose pod calls get 403 Forbidden as an API server without a
RoleBinding answers them.

The "kubelet": creating a pod runs its container's ``command`` + ``args`` as a real
local process. Networking is the one design choice: every pod gets its own loopback
address (``127.77.x.y``; Linux routes all of 127/8 to lo) as ``status.podIP``, and a
container argument ``0.0.0.0`` is replaced by that address (inside a pod, 0.0.0.0
means the pod's own IP). So a pod serves on ``podIP:containerPort`` exactly as in a
cluster, several pods share a port number without clashing, and the runtime's direct
route and the proxy need no test-only knowledge. Other substitutions: ``python`` runs
as this interpreter, and a session server gets ``--parent-pid`` (this process) so that
it exits with the stand-in, as containers die with their node. The phase goes
Pending -> Running (process started) -> Ready once the readiness probe's ``GET``
answers 200 (polled every 0.1 s, faster than a kubelet), and Failed/Succeeded when the
process exits. An image whose name starts with ``unpullable/`` gets ``ErrImagePull``.
Deleting a pod emits ``DELETED`` at once and stops its process group (SIGTERM, then
SIGKILL) in the background; :meth:`close` waits for every process.
"""

from __future__ import annotations

import collections
import json
import re
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import uvicorn
from k8s_kubelet import STOP_GRACE_S, Kubelet, now, stop_process

from uirl_gym.guards import uvicorn_config
from uirl_gym.runtimes.local import descendant_pids

POD_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[a-z0-9-]+)/pods(?:/(?P<name>[^/]+))?$")
ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def parse_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """A predicate on labels for an equality/existence selector.

    Raises:
        ValueError: set-based selectors (``in``, ``notin``) are not supported.
    """
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        if " in " in term or " notin " in term or "(" in term:
            raise ValueError(f"unsupported selector term {term!r}")
        if "!=" in term:
            key, value = term.split("!=", 1)
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif term.startswith("!"):
            tests.append(lambda labels, k=term[1:]: k not in labels)
        else:
            tests.append(lambda labels, k=term: k in labels)
    return lambda labels: all(test(labels) for test in tests)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class PodStandIn:
    """The stand-in API server; ``url`` goes into ``kubernetes.client.Configuration.host``.

    Methods:
        start / close: serve; close also stops every pod process and waits for it.
        pods: the stored pods of a namespace (dicts, as served).
        kubelet_process: a pod's process (None before it starts or for unknown pods).
        live_pids: the pids of pod processes (and their children) still running.
        compact: forget history, so that watches from older versions get 410 Gone.
        drop_watches: end every open watch stream (clients must resume).
        forbid: refuse every pod call in a namespace (no RoleBinding there).

    Attributes:
        calls: API requests served, by kind (``create``, ``read``, ``list``, ``watch``,
            ``patch``, ``delete``): what a client's behaviour costs the API server.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._cond = threading.Condition()
        self._pods: dict[tuple[str, str], dict[str, Any]] = {}
        self._events: list[tuple[int, str, str, dict[str, Any]]] = []
        self._version = 0
        self._compacted = 0
        self._watch_epoch = 0
        self._closing = False
        self._next_ip = 0
        self._kubelets: dict[tuple[str, str], Kubelet] = {}
        self._processes: list[subprocess.Popen[bytes]] = []
        self._stoppers: list[threading.Thread] = []
        self.calls: collections.Counter[str] = collections.Counter()
        self.forbidden: set[str] = set()
        # Every pod ever created: (namespace, name, labels), in creation order.
        self.created: list[tuple[str, str, dict[str, str]]] = []
        handler = type("Handler", (_Handler,), {"standin": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> PodStandIn:
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._closing = True
            keys = list(self._pods)
            self._cond.notify_all()
        for ns, name in keys:
            self.delete(ns, name)
        self._server.shutdown()
        self._server.server_close()
        for stopper in list(self._stoppers):
            stopper.join()
        for process in self._processes:
            if process.poll() is None:
                stop_process(process)

    def __enter__(self) -> PodStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- test helpers ------------------------------------------------------------------

    def pods(self, ns: str) -> list[dict[str, Any]]:
        with self._cond:
            return [json.loads(json.dumps(p)) for (n, _), p in self._pods.items() if n == ns]

    def kubelet_process(self, ns: str, name: str) -> subprocess.Popen[bytes] | None:
        kubelet = self._kubelets.get((ns, name))
        return kubelet.process if kubelet else None

    def live_pids(self) -> list[int]:
        pids = []
        for process in self._processes:
            if process.poll() is None:
                pids += [process.pid, *descendant_pids(process.pid)]
        return pids

    def compact(self) -> None:
        """Expire every resourceVersion handed out so far (as etcd compaction does)."""
        with self._cond:
            self._version += 1
            self._compacted = self._version
            self._events.clear()

    def forbid(self, ns: str) -> None:
        self.forbidden.add(ns)

    def drop_watches(self) -> None:
        with self._cond:
            self._watch_epoch += 1
            self._cond.notify_all()

    # -- the store ---------------------------------------------------------------------

    def _record(self, event_type: str, ns: str, pod: dict[str, Any]) -> None:
        """Bump the version, stamp it on ``pod`` and log the event (lock held)."""
        self._version += 1
        pod["metadata"]["resourceVersion"] = str(self._version)
        self._events.append((self._version, event_type, ns, json.loads(json.dumps(pod))))
        self._cond.notify_all()

    def _register_process(self, process: subprocess.Popen[bytes]) -> None:
        with self._cond:
            self._processes.append(process)

    def create(self, ns: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):
            if not meta.get("generateName"):
                return 422, _status(422, "Invalid", "metadata.name or generateName: required")
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not (body.get("spec") or {}).get("containers"):
            return 422, _status(422, "Invalid", "spec.containers: Required value")
        name = meta["name"]
        with self._cond:
            if self._closing:
                return 503, _status(503, "ServiceUnavailable", "the stand-in is closing")
            if (ns, name) in self._pods:
                return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists')
            self._next_ip += 1
            meta.update(namespace=ns, uid=str(uuid.uuid4()), creationTimestamp=now())
            body["status"] = {
                "phase": "Pending",
                "podIP": f"127.77.{self._next_ip // 250}.{self._next_ip % 250 + 1}",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
            }
            self._pods[(ns, name)] = body
            self.created.append((ns, name, dict(meta.get("labels") or {})))
            self._record("ADDED", ns, body)
            kubelet = self._kubelets[(ns, name)] = Kubelet(
                body,
                self.log_dir / f"{ns}.{name}.log",
                report=lambda status: self._update(ns, name, {"status": status}),
                started=self._register_process,
            )
            snapshot = json.loads(json.dumps(body))
        kubelet.start()
        return 201, snapshot

    def _update(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        with self._cond:
            pod = self._pods.get((ns, name))
            if pod is None:
                return None
            merged = merge_patch(pod, patch)
            pod.clear()
            pod.update(merged)
            self._record("MODIFIED", ns, pod)
            return json.loads(json.dumps(pod))

    def delete(self, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        with self._cond:
            pod = self._pods.pop((ns, name), None)
            if pod is None:
                return 404, _status(404, "NotFound", f'pods "{name}" not found')
            pod["metadata"]["deletionTimestamp"] = now()
            self._record("DELETED", ns, pod)
            kubelet = self._kubelets.pop((ns, name), None)
        if kubelet is not None:
            kubelet.stop_event.set()
            stopper = threading.Thread(target=self._stop_kubelet, args=(kubelet,), daemon=True)
            self._stoppers.append(stopper)
            stopper.start()
        return 200, pod

    @staticmethod
    def _stop_kubelet(kubelet: Kubelet) -> None:
        kubelet.join(timeout=STOP_GRACE_S)
        if kubelet.process is not None:
            stop_process(kubelet.process)

    def list(self, ns: str, match: Callable[[Mapping[str, str]], bool]) -> dict[str, Any]:
        with self._cond:
            items = [
                json.loads(json.dumps(p))
                for (n, _), p in self._pods.items()
                if n == ns and match(p["metadata"].get("labels") or {})
            ]
            version = str(self._version)
        return {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": version},
            "items": items,
        }

    def watch_events(
        self, ns: str, match: Callable[[Mapping[str, str]], bool], since: str, timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Yield watch events (dicts) after ``since`` until timeout, close or drop."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            epoch = self._watch_epoch
            if since in ("", "0"):
                initial = self.list(ns, match)
                last = int(initial["metadata"]["resourceVersion"])
                pending = [{"type": "ADDED", "object": p} for p in initial["items"]]
            elif int(since) < self._compacted:
                yield {
                    "type": "ERROR",
                    "object": _status(
                        410, "Expired", f"too old resource version: {since} ({self._compacted})"
                    ),
                }
                return
            else:
                last, pending = int(since), []
        yield from pending
        while True:
            with self._cond:
                fresh = [e for e in self._events if e[0] > last and e[2] == ns]
                while (
                    not fresh
                    and not self._closing
                    and self._watch_epoch == epoch
                    and time.monotonic() < deadline
                ):
                    self._cond.wait(min(0.5, max(0.0, deadline - time.monotonic())))
                    fresh = [e for e in self._events if e[0] > last and e[2] == ns]
                if not fresh:
                    return
            for version, event_type, _, pod in fresh:
                last = version
                if match(pod["metadata"].get("labels") or {}):
                    yield {"type": event_type, "object": pod}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    standin: PodStandIn

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def _reply(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, str | None, dict[str, list[str]]] | None:
        url = urlsplit(self.path)
        found = POD_PATH.match(url.path)
        if found is None:
            self._reply(404, _status(404, "NotFound", f"the stand-in does not serve {url.path}"))
            return None
        if found["ns"] in self.standin.forbidden:
            message = (
                f'pods is forbidden: User "system:anonymous" cannot {self.command.lower()} '
                f'resource "pods" in API group "" in the namespace "{found["ns"]}"'
            )
            self._reply(403, _status(403, "Forbidden", message))
            return None
        return found["ns"], found["name"], parse_qs(url.query)

    def _review_access(self) -> None:
        review = self._body()
        attributes = (review.get("spec") or {}).get("resourceAttributes") or {}
        allowed = attributes.get("namespace") not in self.standin.forbidden
        self._reply(201, {**review, "status": {"allowed": allowed}})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def _count(self, kind: str) -> None:
        with self.standin._cond:
            self.standin.calls[kind] += 1

    def do_POST(self) -> None:  # noqa: N802 - http.server's names
        if urlsplit(self.path).path == ACCESS_REVIEW_PATH:
            self._count("access_review")
            self._review_access()
            return
        self._count("create")
        route = self._route()
        if route is not None:
            self._reply(*self.standin.create(route[0], self._body()))

    def do_DELETE(self) -> None:  # noqa: N802
        self._count("delete")
        route = self._route()
        if route is not None and route[1] is not None:
            self._body()  # DeleteOptions: ignored
            self._reply(*self.standin.delete(route[0], route[1]))

    def do_PATCH(self) -> None:  # noqa: N802
        self._count("patch")
        route = self._route()
        if route is not None and route[1] is not None:
            pod = self.standin._update(route[0], route[1], self._body())
            if pod is None:
                self._reply(404, _status(404, "NotFound", f'pods "{route[1]}" not found'))
            else:
                self._reply(200, pod)

    def do_GET(self) -> None:  # noqa: N802
        route = self._route()
        if route is None:
            return
        ns, name, query = route
        if name is not None:
            self._count("read")
            pods = [p for p in self.standin.pods(ns) if p["metadata"]["name"] == name]
            if pods:
                self._reply(200, pods[0])
            else:
                self._reply(404, _status(404, "NotFound", f'pods "{name}" not found'))
            return
        try:
            match = parse_selector(query.get("labelSelector", [""])[0])
        except ValueError as exc:
            self._reply(400, _status(400, "BadRequest", str(exc)))
            return
        if query.get("watch", ["false"])[0] not in ("true", "1"):
            self._count("list")
            self._reply(200, self.standin.list(ns, match))
            return
        self._count("watch")
        since = query.get("resourceVersion", [""])[0]
        timeout_s = float(query.get("timeoutSeconds", ["1800"])[0])
        self._stream(self.standin.watch_events(ns, match, since, timeout_s))

    def _stream(self, events: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


@contextmanager
def serve_app(app: Any, port: int = 0) -> Iterator[str]:
    """Serve an ASGI app (e.g. the routing proxy) on 127.0.0.1 in a thread; yields its URL.

    ``port`` 0 picks a free one; a given port can be served again at once (a restart).
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # asyncio sets TCP_NODELAY only on sockets made with proto=IPPROTO_TCP (uvicorn.run's
    # are; this one is not, nor the connections it accepts): without it each answer
    # waited ~40 ms for a delayed ACK (44 ms per proxied request, 1 ms with it).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    # The servers' own settings (their request limits and refusals), as in production.
    server = uvicorn.Server(uvicorn_config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("the app did not start in 10 s")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

"""The stand-in's "kubelet": a pod's container as a local process (see k8s_standin.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from uirl_gym.runtimes.local import descendant_pids

UNPULLABLE_PREFIX = "unpullable/"
PROBE_POLL_S = 0.1
STOP_GRACE_S = 5.0


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group (the server closes Chromium), then SIGKILL what is left."""
    family = [process.pid, *descendant_pids(process.pid)]
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=STOP_GRACE_S)
        except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
            pass
    for pid in family:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    process.wait(timeout=STOP_GRACE_S)


class Kubelet(threading.Thread):
    """Runs one pod's container as a local process and reports its status.

    Args:
        pod: the pod as stored (``spec`` and ``status.podIP`` are read).
        log_path: where the container's output goes.
        report: called with a ``status`` merge patch on every change.
        started: called with the process once it runs.
    """

    def __init__(
        self,
        pod: dict[str, Any],
        log_path: Path,
        report: Callable[[dict[str, Any]], None],
        started: Callable[[subprocess.Popen[bytes]], None],
    ) -> None:
        super().__init__(name=f"kubelet-{pod['metadata']['name']}", daemon=True)
        self.spec = pod["spec"]
        self.ip = pod["status"]["podIP"]
        self.log_path = log_path
        self._report = report
        self._on_started = started
        self.stop_event = threading.Event()
        self.process: subprocess.Popen[bytes] | None = None

    def _set(self, status: dict[str, Any]) -> None:
        self._report(status)

    def _container_status(self, state: dict[str, Any], ready: bool) -> dict[str, Any]:
        container = self.spec["containers"][0]
        return {
            "name": container["name"],
            "image": container["image"],
            "imageID": "",
            "ready": ready,
            "restartCount": 0,
            "started": "running" in state,
            "state": state,
        }

    def _conditions(self, ready: bool) -> list[dict[str, str]]:
        value = "True" if ready else "False"
        return [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
            {"type": "ContainersReady", "status": value, "lastTransitionTime": now()},
            {"type": "Ready", "status": value, "lastTransitionTime": now()},
        ]

    def _env(self) -> dict[str, str]:
        """The container's own variables: values, and the pod's IP from the downward API."""
        env = {}
        for item in self.spec["containers"][0].get("env") or []:
            field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            env[item["name"]] = self.ip if field == "status.podIP" else item.get("value", "")
        return env

    def _argv(self) -> list[str]:
        container = self.spec["containers"][0]
        argv = [*container.get("command", []), *container.get("args", [])]
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        argv = [self.ip if arg == "0.0.0.0" else arg for arg in argv]
        # $(NAME) in the command is the container's variable, as a kubelet expands it.
        env = self._env()
        argv = [
            re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), arg)
            for arg in argv
        ]
        if "uirl_gym.session" in argv:
            argv += ["--parent-pid", str(os.getpid())]
        return argv

    def _probe_url(self) -> str | None:
        container = self.spec["containers"][0]
        probe = (container.get("readinessProbe") or {}).get("httpGet")
        if not probe:
            return None
        port = probe["port"]
        if isinstance(port, str):
            port = next(p["containerPort"] for p in container["ports"] if p.get("name") == port)
        return f"http://{self.ip}:{port}{probe.get('path', '/')}"

    def run(self) -> None:
        container = self.spec["containers"][0]
        if container["image"].startswith(UNPULLABLE_PREFIX):
            waiting = {"reason": "ErrImagePull", "message": "pull access denied (stand-in)"}
            self._set({"containerStatuses": [self._container_status({"waiting": waiting}, False)]})
            return
        env = {**os.environ, **self._env()}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                self._argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        self._on_started(self.process)
        running = {"running": {"startedAt": now()}}
        self._set(
            {
                "phase": "Running",
                "conditions": self._conditions(False),
                "containerStatuses": [self._container_status(running, False)],
            }
        )
        self._wait_ready(running)
        while not self.stop_event.wait(PROBE_POLL_S * 2):
            if self.process.poll() is not None:
                self._exited(self.process.returncode)
                return

    def _wait_ready(self, running: dict[str, Any]) -> None:
        url = self._probe_url()
        with requests.Session() as http:
            http.trust_env = False
            while not self.stop_event.is_set() and self.process is not None:
                if self.process.poll() is not None:
                    return
                try:
                    ok = url is None or http.get(url, timeout=1).status_code == 200
                except requests.RequestException:
                    ok = False
                if ok:
                    self._set(
                        {
                            "conditions": self._conditions(True),
                            "containerStatuses": [self._container_status(running, True)],
                        }
                    )
                    return
                self.stop_event.wait(PROBE_POLL_S)

    def _exited(self, code: int) -> None:
        terminated = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "finishedAt": now(),
            }
        }
        self._set(
            {
                "phase": "Succeeded" if code == 0 else "Failed",
                "conditions": self._conditions(False),
                "containerStatuses": [self._container_status(terminated, False)],
            }
        )

"""A stand-in for the Hugging Face Hub's upload endpoints, on 127.0.0.1.

Serves what ``HfApi.create_repo`` and ``HfApi.upload_folder`` call (huggingface_hub
``hf_api.py`` / ``_commit_api.py``): ``POST /api/repos/create``,
``POST /api/validate-yaml`` (the README's metadata), ``POST
/api/models/{repo}/preupload/{revision}`` (every file answered "regular", so its
content comes inline in the commit: no LFS or Xet transfer to stand in for) and
``POST /api/models/{repo}/commit/{revision}`` (NDJSON). It records the repos, every
commit's files (decoded) and the ``Authorization`` header of each request.

Point a process at it with ``HF_ENDPOINT=<HubStandIn.url>``.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml
from http_standin import QuietHandler

_COMMIT = re.compile(
    r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<kind>preupload|commit)/(?P<rev>[^/?]+)"
)


@dataclass
class Repo:
    """A repo created on the stand-in, and what its commits uploaded."""

    repo_id: str
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)


class HubStandIn:
    """The stand-in server (a context manager: started on enter, stopped on exit).

    Attributes:
        url: its root, for ``HF_ENDPOINT``.
        repos: repo id -> :class:`Repo`.
        authorizations: the ``Authorization`` header of every request, in order.
    """

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def card_metadata(self, repo_id: str) -> dict[str, Any]:
        """The YAML block at the top of the repo's README.md."""
        text = self.repos[repo_id].files["README.md"].decode()
        _, block, _ = text.split("---\n", 2)
        return yaml.safe_load(block)

    # ---- requests ------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 (huggingface_hub's optional look-ups)
                self.send_json(404, {"error": f"not served by the stand-in: {self.path}"})

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hub._lock:
                    hub.authorizations.append(self.headers.get("Authorization"))
                    status, payload = hub._route(self.path, body)
                self.send_json(status, payload)

        return Handler

    def _route(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        if path == "/api/repos/create":
            request = json.loads(body)
            repo_id = "/".join(p for p in (request.get("organization"), request["name"]) if p)
            if repo_id in self.repos:
                return 409, {"error": "You already created this model repo", "url": ""}
            self.repos[repo_id] = Repo(repo_id, request.get("visibility") == "private")
            return 200, {"url": f"{self.url}/{repo_id}", "name": repo_id}
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}
        match = _COMMIT.match(path)
        if match is None or match["repo"] not in self.repos:
            return 404, {"error": f"no such endpoint or repo: {path}"}
        repo = self.repos[match["repo"]]
        if match["kind"] == "preupload":
            files = json.loads(body)["files"]
            modes = [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False} for f in files
            ]
            return 200, {"files": modes}
        summary = ""
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                summary = item["value"]["summary"]
            elif item["key"] == "file":
                value = item["value"]
                repo.files[value["path"]] = base64.b64decode(value["content"])
            else:  # lfsFile / deletedFile: the stand-in never asks for them
                return 400, {"error": f"unexpected commit operation {item['key']}"}
        repo.commits.append(summary)
        oid = f"{len(repo.commits):040x}"
        return 200, {"commitUrl": f"{self.url}/{repo.repo_id}/commit/{oid}", "commitOid": oid}

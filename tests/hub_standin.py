"""A stand-in for the Hugging Face Hub's endpoints, on 127.0.0.1: uploads, and the
downloads a dataset's are read back with.

Serves what ``HfApi.create_repo``, ``HfApi.upload_folder`` / ``upload_file`` and
``snapshot_download`` call (huggingface_hub ``hf_api.py``, ``_commit_api.py``,
``_upload_pipeline.py``, ``_snapshot_download.py``), for model and dataset repos:

- ``POST /api/repos/create``; ``POST /api/validate-yaml`` (the README's metadata);
- ``POST /api/{models,datasets}/{repo}/preupload/{revision}``: every file answered
  "regular" (its content comes inline in the commit: no LFS or Xet transfer to stand in
  for), with the ``oid`` (git blob sha1) of the file the repo already holds at that
  path, so that the client skips what is unchanged (a push that resumes);
- ``POST /api/{models,datasets}/{repo}/commit/{revision}`` (NDJSON: files added, files
  deleted); a commit that touches a path of :attr:`HubStandIn.refuse_commits_with` is
  refused once (403), as a push cut short;
- ``GET /api/{models,datasets}/{repo}/revision/{revision}`` (the repo's info and sha),
  ``GET /api/{...}/{repo}/tree/{revision}`` (its files, recursively), ``HEAD`` / ``GET``
  ``/[datasets/]{repo}/resolve/{revision}/{path}`` (a file and its metadata).

It records the repos, every commit's files (decoded) and the ``Authorization`` header
of each request. Point a process at it with ``HF_ENDPOINT=<HubStandIn.url>``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml
from http_standin import QuietHandler

_COMMIT = re.compile(
    r"^/api/(?P<type>model|dataset)s/(?P<repo>[^/]+/[^/]+)/(?P<kind>preupload|commit)/(?P<rev>[^/?]+)"
)
_INFO = re.compile(
    r"^/api/(?P<type>model|dataset)s/(?P<repo>[^/]+/[^/]+)/(?P<kind>revision|tree)/(?P<rev>[^/?]+)"
)
_RESOLVE = re.compile(
    r"^/(?P<type>datasets/)?(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>[^?]+)"
)


def git_blob_sha1(data: bytes) -> str:
    """The id git (and the Hub) gives a file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    """A repo created on the stand-in, and what its commits uploaded."""

    repo_id: str
    private: bool
    repo_type: str = "model"
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)
    # Per commit, the paths it added or replaced.
    committed: list[list[str]] = field(default_factory=list)

    @property
    def sha(self) -> str:
        return f"{len(self.commits):040x}"


class HubStandIn:
    """The stand-in server (a context manager: started on enter, stopped on exit).

    Attributes:
        url: its root, for ``HF_ENDPOINT``.
        repos: repo id -> :class:`Repo`.
        authorizations: the ``Authorization`` header of every request to a repo, in order.
        refuse_commits_with: paths whose next commit is refused (403), once each.
    """

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.authorizations: list[str | None] = []
        self.refuse_commits_with: set[str] = set()
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
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._answer_read(head=False)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer_read(head=True)

            def _answer_read(self, head: bool) -> None:
                with hub._lock:
                    status, payload, headers = hub._read(self.path)
                    if status != 404:  # a repo's (not huggingface_hub's own look-ups)
                        hub.authorizations.append(self.headers.get("Authorization"))
                if not isinstance(payload, bytes):
                    payload = json.dumps(payload).encode()
                    headers = {**headers, "Content-Type": "application/json"}
                self.send_response(status)
                for key, value in {**headers, "Content-Length": str(len(payload))}.items():
                    self.send_header(key, value)
                self.end_headers()
                if not head:  # a HEAD answer has the headers of the GET, no body
                    self.wfile.write(payload)

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
            repo_type = request.get("type") or "model"
            url = f"{self.url}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"
            if repo_id in self.repos:
                return 409, {"error": f"You already created this {repo_type} repo", "url": url}
            self.repos[repo_id] = Repo(repo_id, request.get("visibility") == "private", repo_type)
            return 200, {"url": url, "name": repo_id}
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}
        match = _COMMIT.match(path)
        repo = self._repo(match)
        if match is None or repo is None:
            return 404, {"error": f"no such endpoint or repo: {path}"}
        if match["kind"] == "preupload":
            modes = []
            for f in json.loads(body)["files"]:
                there = repo.files.get(f["path"])
                mode = {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                modes.append(mode | ({"oid": git_blob_sha1(there)} if there is not None else {}))
            return 200, {"files": modes}
        return self._commit(repo, body)

    def _repo(self, match: re.Match[str] | None) -> Repo | None:
        if match is None:
            return None
        repo = self.repos.get(match["repo"])
        kind = "dataset" if match["type"] in ("dataset", "datasets/") else "model"
        return repo if repo is not None and repo.repo_type == kind else None

    def _commit(self, repo: Repo, body: bytes) -> tuple[int, dict[str, Any]]:
        summary, added, deleted = "", {}, []
        for line in body.decode().splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                summary = item["value"]["summary"]
            elif item["key"] == "file":
                value = item["value"]
                added[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                deleted.append(item["value"]["path"])
            else:  # lfsFile: the stand-in never asks for it
                return 400, {"error": f"unexpected commit operation {item['key']}"}
        refused = self.refuse_commits_with & (set(added) | set(deleted))
        if refused:
            self.refuse_commits_with -= refused
            return 403, {"error": f"refused by the test: {sorted(refused)}"}
        for name in deleted:
            repo.files.pop(name, None)
        repo.files.update(added)
        repo.commits.append(summary)
        repo.committed.append(sorted(added))
        oid = repo.sha
        kind = "datasets/" if repo.repo_type == "dataset" else ""
        return 200, {"commitUrl": f"{self.url}/{kind}{repo.repo_id}/commit/{oid}", "commitOid": oid}

    def _read(self, path: str) -> tuple[int, dict[str, Any] | list[Any] | bytes, dict[str, str]]:
        info = _INFO.match(path)
        repo = self._repo(info)
        if info is not None and repo is not None:
            if info["kind"] == "revision":
                siblings = [{"rfilename": name} for name in sorted(repo.files)]
                payload = {"id": repo.repo_id, "sha": repo.sha, "private": repo.private}
                return 200, payload | {"siblings": siblings}, {}
            tree = [
                {"type": "file", "path": name, "size": len(data), "oid": git_blob_sha1(data)}
                for name, data in sorted(repo.files.items())
            ]
            return 200, tree, {}
        resolve = _RESOLVE.match(path)
        repo = self._repo(resolve)
        if resolve is not None and repo is not None and resolve["path"] in repo.files:
            data = repo.files[resolve["path"]]
            headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{git_blob_sha1(data)}"'}
            return 200, data, headers | {"Content-Type": "application/octet-stream"}
        return (
            404,
            {"error": f"not served by the stand-in: {path}"},
            {"X-Error-Code": "EntryNotFound"},
        )

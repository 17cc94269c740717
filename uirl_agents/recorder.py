"""Record a person's demonstrations through the env: ``python -m uirl_agents.recorder``.

    python -m uirl_agents.recorder --task simple_data_entry --out runs/demos --episodes 5

starts a session (the local runtime, as :class:`~uirl_gym.env.UIEnv` does, or the one at
``--session-url``) and serves a recorder page on 127.0.0.1: the live screenshot scaled
to fit, the instruction, the episode's reward and progress, and three controls (Finish:
declare the task done; New episode: drop this one and start another; Stop). The page
(``static/recorder.html``) turns what the person does on the screenshot into env actions:
a click, double or triple click, right click, wheel scroll, a drag, typed text (one
``type`` per run of characters) and key combinations (``keys``, e.g. ``ctrl+a``).

Each action goes through :meth:`UIEnv.step`, so rewards, ``is_success`` and the saved
trajectories are what a policy's would be; each step is written in a model's format
(``--format``, as the scripted experts' demonstrations are:
:meth:`~uirl_agents.policies.context.EpisodeContexts.demonstrate`), so that
``train_rs.py`` fine-tunes on the folder (``rs.demonstrations``) and the replay viewer
(:mod:`uirl_agents.view`) shows it like any run.
"""

from __future__ import annotations

import argparse
import io
import ipaddress
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from PIL import Image

from uirl_agents.formats import FORMATS, get_format
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.rollout import to_step
from uirl_agents.trajectories import EPISODES_FILE, Episode, TrajectoryWriter
from uirl_agents.view import write_viewer
from uirl_gym.actions import Action, to_action
from uirl_gym.env import UIEnv
from uirl_gym.guards import LOOPBACK_HOSTS, CallerPolicy, host_names
from uirl_gym.tasks import TASKS

logger = logging.getLogger(__name__)

AGENT_NAME = "human"
# The only sub-env the recorder's prompt contexts ever hold.
ENV_INDEX = 0
MAX_REQUEST_BYTES = 64 * 1024


@dataclass
class RecorderConfig:
    """What to record and where.

    Attributes:
        out_dir: the run directory (episodes are appended to one that has some).
        task: the task id (``uirl_gym.tasks.TASKS``).
        seed: episode k (counting every episode started) resets with ``seed + k``;
            None: the env draws the task instances.
        episodes: stop after saving this many episodes; 0: until Stop.
        format: the model format the steps are written in (``uirl_agents.formats``).
        max_images: screenshots in each step's prompt, as ``rollout.max_images``.
        max_steps: an episode still running after this many steps ends truncated.
        options: the task's reset options (SimpleDataEntry: ``num_rows``, ``rows``, ...).
        session_url: a running session server to use; None: start one locally.
    """

    out_dir: Path
    task: str = "simple_data_entry"
    seed: int | None = None
    episodes: int = 1
    format: str = "ui-tars"
    max_images: int = 1
    max_steps: int = 100
    options: dict[str, Any] = field(default_factory=dict)
    session_url: str | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task: unknown {self.task!r}; known: {sorted(TASKS)}")
        if self.format not in FORMATS:
            raise ValueError(f"format: unknown {self.format!r}; known: {sorted(FORMATS)}")
        for name in ("max_images", "max_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: expected >= 1, got {getattr(self, name)}")
        if self.episodes < 0:
            raise ValueError(f"episodes: expected >= 0 (0: until Stop), got {self.episodes}")


class Recorder:
    """One person's episodes on one env, written as they end. Thread-safe.

    Attributes:
        config: the :class:`RecorderConfig`.
        env: the env the actions go through.
        finished: set once the last episode is saved or the person stopped.

    Methods:
        start(): reset the env for the first episode.
        act(action): one step of the person's; the episode is saved when it ends.
        new_episode(): drop the running episode and start the next one.
        stop(): drop the running episode and finish.
        state(): what the page shows, as JSON-ready data.
        saved: the episodes saved so far (their images are on disk only).
        screenshot_png(): the current screenshot.
    """

    def __init__(self, config: RecorderConfig, env: UIEnv) -> None:
        self.config = config
        self.env = env
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._contexts = EpisodeContexts(get_format(config.format), max_images=config.max_images)
        self._episode_number = _episodes_in(config.out_dir)
        self._writer = TrajectoryWriter(config.out_dir, append=True)
        self._started = 0  # episodes started here (the seed offset)
        self._saved: list[Episode] = []
        self._episode: Episode | None = None
        self._obs: dict[str, Any] = {}
        self._shown_at = 0.0  # when the current observation was handed to the page
        self._version = 0
        self._png: tuple[int, bytes] | None = None
        self._last_error: str | None = None

    def start(self) -> None:
        with self._lock:
            self._reset()

    def _reset(self) -> None:
        cfg = self.config
        seed = None if cfg.seed is None else cfg.seed + self._started
        self._started += 1
        obs, info = self.env.reset(seed=seed, options=dict(cfg.options))
        self._episode = Episode(
            episode_id=f"{AGENT_NAME}-{self._episode_number}",
            agent=AGENT_NAME,
            seed=seed,
            options=dict(cfg.options),
            instruction=obs["instruction"],
            target_rows=list(info.get("target_rows", [])),
            task=info["task"],
        )
        self._contexts.begin_episode(ENV_INDEX)
        self._last_error = None
        self._show(obs)
        logger.info("episode %s: %s", self._episode.episode_id, obs["instruction"])

    def _show(self, obs: dict[str, Any]) -> None:
        self._obs = obs
        self._version += 1
        self._shown_at = time.perf_counter()

    def act(self, action: Action) -> None:
        """Step the env with the person's ``action``, written in the model's format.

        Raises:
            RecorderFinishedError: the recording is over.
        """
        with self._lock:
            episode = self._running()
            thinking_s = time.perf_counter() - self._shown_at
            policy_step = self._contexts.demonstrate(ENV_INDEX, self._obs, action)
            # The format writes every action it renders back as an action.
            assert policy_step.action is not None, policy_step.error
            obs, reward, terminated, truncated, info = self.env.step(policy_step.action)
            truncated = truncated or (
                not terminated and episode.length + 1 >= self.config.max_steps
            )
            step = to_step(
                self._obs,
                policy_step,
                (obs, reward, terminated, truncated, info),
                policy_time_s=thinking_s,
                env_time_s=self.env.timings.get("step_s", 0.0),
            )
            episode.steps.append(step)
            self._last_error = step.error
            self._show(obs)
            if terminated or truncated:
                episode.success = bool(info.get("is_success", False))
                episode.error = info.get("error")
                self._save(episode)

    def _save(self, episode: Episode) -> None:
        self._writer.write(episode)
        write_viewer(self.config.out_dir)
        for step in episode.steps:
            # On disk now; a long session must not hold every screenshot in memory.
            step.screenshot = step.model_images = None
        self._saved.append(episode)
        self._episode_number += 1
        self._episode = None
        logger.info(
            "saved %s: %s, reward %+.2f, %d steps",
            episode.episode_id,
            "success" if episode.success else "failure",
            episode.total_reward,
            episode.length,
        )
        if self.config.episodes and len(self._saved) >= self.config.episodes:
            self._finish()
        else:
            self._reset()

    def new_episode(self) -> None:
        """Drop the running episode (nothing of it is saved) and start the next one.

        Raises:
            RecorderFinishedError: the recording is over.
        """
        with self._lock:
            dropped = self._running()
            logger.info("episode %s dropped after %d steps", dropped.episode_id, dropped.length)
            self._reset()

    def stop(self) -> None:
        """Finish now; the running episode, if any, is dropped."""
        with self._lock:
            if self._episode is not None and self._episode.steps:
                logger.info("episode %s dropped (stopped)", self._episode.episode_id)
            self._finish()

    def _finish(self) -> None:
        self._episode = None
        self._writer.close()
        self.finished.set()

    def _running(self) -> Episode:
        if self._episode is None:
            raise RecorderFinishedError(
                f"the recording is over ({len(self._saved)} episodes saved in "
                f"{self.config.out_dir}); start the recorder again to record more"
            )
        return self._episode

    def state(self) -> dict[str, Any]:
        """What the page shows: the episode, its last step, the run so far."""
        with self._lock:
            episode = self._episode
            last = episode.steps[-1] if episode is not None and episode.steps else None
            return {
                "task": self.config.task,
                "format": self.config.format,
                "finished": self.finished.is_set(),
                "version": self._version,
                "episode_id": episode.episode_id if episode else None,
                "instruction": episode.instruction if episode else "",
                "steps": episode.length if episode else 0,
                "total_reward": episode.total_reward if episode else 0.0,
                "last_action": last.action.to_dict() if last and last.action else None,
                "last_text": last.text if last else "",
                "last_error": self._last_error,
                "progress": last.progress if last else None,
                "episodes_goal": self.config.episodes,
                "saved": [
                    {"episode_id": e.episode_id, "success": e.success, "reward": e.total_reward}
                    for e in self._saved
                ],
                "out_dir": str(self.config.out_dir),
            }

    @property
    def saved(self) -> list[Episode]:
        """The episodes saved so far, in order."""
        with self._lock:
            return list(self._saved)

    def screenshot_png(self) -> bytes:
        with self._lock:
            if self._png is None or self._png[0] != self._version:
                self._png = (self._version, _png_bytes(self._obs["screenshot"]))
            return self._png[1]

    def close(self) -> None:
        with self._lock:
            if not self.finished.is_set():
                self._finish()


class RecorderError(RuntimeError):
    """Base class of the recorder's errors."""


class RecorderFinishedError(RecorderError):
    """An action or a new episode after the recording finished."""


class RecorderAddressError(RecorderError):
    """The page's address cannot be served (e.g. the port is taken)."""


class BadRequestError(ValueError):
    """A request the page's API cannot read; ``status`` is the answer's (400 or 413)."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def _episodes_in(run_dir: Path) -> int:
    """Episodes already in ``run_dir`` (new episode ids continue after them)."""
    path = run_dir / EPISODES_FILE
    if not path.exists():
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def _png_bytes(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    # Fast compression: the page asks for each screenshot once, over loopback.
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def page_html() -> bytes:
    """The recorder page (one static file, its script inline)."""
    return resources.files("uirl_agents").joinpath("static/recorder.html").read_bytes()


class RecorderHandler(BaseHTTPRequestHandler):
    """The page and its JSON API; ``server.recorder`` is the :class:`Recorder`.

    ``GET /`` the page, ``GET /api/state``, ``GET /api/screenshot`` (PNG),
    ``POST /api/action`` (an action as :meth:`Action.to_dict` writes it),
    ``POST /api/new_episode``, ``POST /api/stop``.
    """

    server: RecorderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if not self._allowed():
            return
        recorder = self.server.recorder
        if path == "/":
            self._send(
                HTTPStatus.OK,
                page_html(),
                "text/html; charset=utf-8",
                # No other site may frame the page (and trick clicks into it).
                {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"},
            )
        elif path == "/api/state":
            self._send_json(HTTPStatus.OK, recorder.state())
        elif path == "/api/screenshot":
            self._send(HTTPStatus.OK, recorder.screenshot_png(), "image/png")
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path}"})

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if not self._allowed():
            return
        recorder = self.server.recorder
        try:
            body = self._read_json()
        except BadRequestError as exc:
            # The body was not read (or not whole): the connection cannot carry another.
            self.close_connection = True
            self._send_json(exc.status, {"error": str(exc)})
            return
        try:
            if path == "/api/action":
                recorder.act(to_action(body).validate())
            elif path == "/api/new_episode":
                recorder.new_episode()
            elif path == "/api/stop":
                recorder.stop()
            else:
                self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such action: {path}"})
                return
        except (ValueError, TypeError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": f"{type(exc).__name__}: {exc}"})
            return
        except RecorderFinishedError as exc:
            self._send_json(HTTPStatus.CONFLICT, {"error": str(exc)})
            return
        except Exception as exc:  # e.g. a session that failed on reset: the page says so
            logger.exception("%s failed", path)
            self._send_json(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
            )
            return
        self._send_json(HTTPStatus.OK, recorder.state())
        if recorder.finished.is_set():
            # Only now: the page has its last answer before the server goes away.
            self.server.done.set()

    def _allowed(self) -> bool:
        """Answer 403 (and say so) unless the request comes from the recorder's own page.

        Every route is checked, reads included: the screenshot and the state show the
        task. ``Origin`` alone is not enough: a page that rebinds its own name to
        127.0.0.1 (DNS rebinding) sends a matching ``Host`` and ``Origin``, so the
        ``Host`` must be one of this server's names (loopback ones unless told others).
        """
        refusal = self.server.policy.refusal(
            self.headers.get("Host"),
            self.headers.get("Origin"),
            self.headers.get("Sec-Fetch-Site"),
            # A tab opened on the page from a link elsewhere (not a frame, not a fetch).
            navigation=self.command == "GET"
            and urlsplit(self.path).path == "/"
            and self.headers.get("Sec-Fetch-Dest") == "document",
        )
        if refusal is None:
            return True
        logger.warning("refused %s %s: %s", self.command, self.path[:80], refusal)
        self.close_connection = True  # its body, if any, is not read
        self._send_json(HTTPStatus.FORBIDDEN, {"error": refusal})
        return False

    def _read_json(self) -> dict[str, Any]:
        """The request's JSON object ({} without a body).

        Raises:
            BadRequestError: a Content-Length that is not a size (``-1`` used to read
                until the client left), too large a body, not JSON, nested too deeply
                (a RecursionError was a 500), or not an object.
        """
        declared = self.headers.get("Content-Length")
        if declared is None:
            if self.headers.get("Transfer-Encoding"):
                raise BadRequestError("send the body with a Content-Length (not chunked)")
            return {}
        if not re.fullmatch(r"[0-9]{1,12}", declared.strip()):
            raise BadRequestError(
                f"Content-Length: must be a number of bytes (0 or more), got {declared[:40]!r}"
            )
        length = int(declared)
        if length > MAX_REQUEST_BYTES:
            raise BadRequestError(
                f"request body: at most {MAX_REQUEST_BYTES} bytes, got {length}",
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            raise BadRequestError(f"request body: {len(raw)} of {length} bytes arrived")
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except RecursionError:
            raise BadRequestError("request body: JSON nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"request body: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise BadRequestError(f"request body: must be a JSON object, got {type(body).__name__}")
        return body

    def _send_json(self, status: HTTPStatus, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class RecorderServer(ThreadingHTTPServer):
    """The recorder page's HTTP server (one thread per connection; the recorder locks).

    Binds its address when made; :meth:`start` serves a recorder from a thread,
    :meth:`stop` stops serving and frees the address.

    Attributes:
        recorder: the recorder served (set by :meth:`start`).
        done: set once the answer to the request that finished the recording is sent.
        url: the page's address.
        policy: who may call (``Host`` one of its names and this port, its own page).
    """

    daemon_threads = True
    recorder: Recorder

    def __init__(self, address: tuple[str, int], allowed_hosts: Sequence[str] = ()) -> None:
        super().__init__(address, RecorderHandler)
        self.done = threading.Event()
        self._thread: threading.Thread | None = None
        bound = str(self.server_address[0])
        names = [*LOOPBACK_HOSTS, *allowed_hosts]
        if bound not in ("0.0.0.0", "::", ""):
            # The address it listens on, as an IP literal: no name to rebind.
            names.append(bound)
        # Its own page only: no other origin may call it (the page is the only client).
        self.policy = CallerPolicy(
            hosts=host_names(names),
            port=self.server_address[1],
            allow_host="start the recorder with --allow-host NAME",
            allow_origin=None,
        )

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._thread = threading.Thread(
            target=self.serve_forever, name="uirl-recorder", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()  # waits for serve_forever, so only once it runs
            self._thread.join()
            self._thread = None
        self.server_close()


def record(
    config: RecorderConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    allowed_hosts: Sequence[str] = (),
) -> list[Episode]:
    """Serve the recorder page until the episodes are saved or the person stops.

    The page's address goes to stdout as ``recorder: URL`` (the first line).

    Args:
        config: what to record.
        host: the page's address; 127.0.0.1 keeps it (and the session) on this machine.
        port: the page's port; 0: any free one.
        allowed_hosts: names the page may be opened under besides the loopback ones
            (127.0.0.1, localhost, [::1]) and the address it listens on; any other
            ``Host`` is refused (DNS rebinding).

    Returns:
        The episodes saved.

    Raises:
        RecorderAddressError: ``host:port`` cannot be served.
    """
    # The address first: a taken port fails before any session or browser starts.
    try:
        server = RecorderServer((host, port), allowed_hosts)
    except OSError as exc:
        raise RecorderAddressError(
            f"cannot serve the recorder page on {host}:{port} ({exc.strerror}); "
            "choose another --port, or --port 0 for any free one"
        ) from exc
    if not ipaddress.ip_address(str(server.server_address[0])).is_loopback:
        logger.warning(
            "the recorder page listens on %s: anyone who reaches it can drive the session",
            host,
        )
    env = UIEnv(task=config.task, base_url=config.session_url)
    recorder = Recorder(config, env)
    try:
        recorder.start()
        server.start(recorder)
        sys.stdout.write(f"recorder: {server.url}\n")
        sys.stdout.flush()
        logger.info("recording %s into %s at %s", config.task, config.out_dir, server.url)
        server.done.wait()
        return recorder.saved
    finally:
        recorder.close()
        server.stop()
        env.close()


DEFAULT_PORT = 8765


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f'expected a JSON object such as {{"num_rows": 1}}, got {text!r}'
        )
    return value


def build_arg_parser() -> argparse.ArgumentParser:
    """The command line; its defaults are :class:`RecorderConfig`'s."""
    default = {f.name: f.default for f in fields(RecorderConfig)}
    p = argparse.ArgumentParser(
        prog="python -m uirl_agents.recorder", description=__doc__.splitlines()[0]
    )
    p.add_argument("--task", default=default["task"], choices=sorted(TASKS))
    p.add_argument("--out", type=Path, required=True, help="the run directory to write")
    p.add_argument("--seed", type=int, default=default["seed"], help="episode k: seed + k")
    p.add_argument(
        "--episodes", type=int, default=default["episodes"], help="episodes to save; 0: until Stop"
    )
    p.add_argument("--format", default=default["format"], choices=sorted(FORMATS))
    p.add_argument(
        "--max-images", type=int, default=default["max_images"], help="screenshots per prompt"
    )
    p.add_argument(
        "--max-steps", type=int, default=default["max_steps"], help="truncate episodes after this"
    )
    p.add_argument(
        "--options",
        type=_json_object,
        default={},
        help="reset options as JSON: '{\"num_rows\": 1}'",
    )
    p.add_argument(
        "--session-url", default=None, help="a running session server; default: start one"
    )
    p.add_argument("--host", default="127.0.0.1", help="the page's address (keep it local)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="the page's port; 0: any free one"
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the page may be opened under besides 127.0.0.1, localhost and --host "
        "(repeatable); requests naming any other Host are refused",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_arg_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    config = RecorderConfig(
        out_dir=args.out,
        task=args.task,
        seed=args.seed,
        episodes=args.episodes,
        format=args.format,
        max_images=args.max_images,
        max_steps=args.max_steps,
        options=args.options,
        session_url=args.session_url,
    )
    try:
        saved = record(config, host=args.host, port=args.port, allowed_hosts=args.allow_host)
    except RecorderAddressError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    won = sum(e.success for e in saved)
    sys.stdout.write(f"saved {len(saved)} episodes ({won} successes) in {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The session server: one Chromium, any task, the HTTP protocol of docs/protocol.md.

Requests that touch the browser (act, reset, oracle) are serialised by one lock: a
session serves one agent. The task app records submissions through an in-browser
binding (``window.uirlRecord``), never through HTTP, so nobody who can reach the server
can fake one; ``/reset`` and ``/oracle`` need the session's token (see ``guards``), and
``/progress`` (like ``/act``'s ``X-Progress``) gives its detail only with that token.
Every route answers only requests addressed to one of the server's names, and no
request a browser sends from another site's page (``guards.CallerPolicy``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Hashable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import orjson
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from uirl_gym.actions import (
    DEFAULT_ACTION_TIMEOUT_S,
    DEFAULT_SCREEN,
    MAX_ACTION_TIMEOUT_S,
    MIN_ACTION_TIMEOUT_S,
    check_screen,
)
from uirl_gym.guards import (
    LOOPBACK_HOSTS,
    MAX_BODY_BYTES,
    BodyLimitMiddleware,
    CallerMiddleware,
    CallerPolicy,
    RequestError,
    check_token,
    host_names,
    parse_json_object,
    presented_token,
)
from uirl_gym.protocol import (
    ACTION_ID_HEADER,
    ACTION_MS_HEADER,
    ACTION_TIMEOUT_HEADER,
    CAPTURE_MS_HEADER,
    CLAMPED_HEADER,
    DIALOGS_HEADER,
    DIALOGS_NOT_LISTED_HEADER,
    EPISODE_HEADER,
    HEIGHT_HEADER,
    IGNORED_PARAMS_HEADER,
    PROGRESS_HEADER,
    REPLAYED_HEADER,
    SESSION_HEADER,
    WIDTH_HEADER,
    ActRequest,
    ImageFormat,
    Route,
    encode_json_header,
    new_session_token,
    parse_act_query,
)
from uirl_gym.session.browser.cdp import CdpError
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.session.browser.elements import PAGE_PARTS, ElementActionError
from uirl_gym.session.browser.session import CdpBrowserSession
from uirl_gym.tasks import make_task, task_spec
from uirl_gym.tasks.base import (
    BRIDGE_PATH,
    Dialog,
    DialogAnswer,
    Task,
    TaskOptionsError,
    bridge_script,
)

logger = logging.getLogger(__name__)

# Answers remembered for retried actions (a client retries its last one only; a raw
# screenshot is 3 MB, so few); the ids themselves are remembered for the whole episode,
# up to this many.
ACTIONS_REMEMBERED = 4
ACTION_IDS_REMEMBERED = 10_000
ACTION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
# Ignored parameters named in X-Ignored-Params, at most (the rest are counted).
MAX_NAMED_PARAMS = 20
# A dialog's message in X-Dialogs, at most (the task gets it whole): with the browser's
# 10 dialogs per answer, the header stays far below the 64 KB a client reads of a line.
MAX_DIALOG_MESSAGE_CHARS = 500

MEDIA_TYPES = {
    ImageFormat.PNG: "image/png",
    ImageFormat.JPEG: "image/jpeg",
    ImageFormat.RAW: "application/octet-stream",
}


@dataclass
class SessionServerConfig:
    """How the session server runs.

    Attributes:
        host, port: where uvicorn listens (the app's own URL derives from them).
        task: the task id (see ``uirl_gym.tasks.TASKS``).
        browser: the Chromium executable; None means search (see ``find_browser``: a
            headless shell first when headless).
        session_id: reported by ``/`` and ``/health``; random when None.
        headless: False shows the browser (for debugging on a desktop).
        initial_options: reset options of the episode that is ready at start-up, so that
            ui-verifiers clients (which never reset) find a task on the screen.
        token: what ``/reset`` and ``/oracle`` require (from the runtime); None makes a
            random one that nobody else knows (the privileged routes are then closed).
        docs: serve ``/docs`` and ``/openapi.json`` (off: they list every route).
        max_body_bytes: larger request bodies get 413.
        action_timeout_s: how long an action and its capture may take when the request
            does not say (``GET /act``'s ``timeout``); past it the answer is a 504 and
            the episode's page is given up (the next reset starts a fresh one).
        allowed_hosts: names clients may address the server by (the ``Host`` header)
            besides the loopback ones and the address it listens on (``*``: any): a pod
            reached at its IP (the Kubernetes runtime sets it), a host name.
        allowed_origins: browser origins (``https://host:port``) whose pages may call
            the server besides its own (``*``: any). Default: none.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    task: str = "simple_data_entry"
    browser: str | None = None
    session_id: str | None = None
    headless: bool = True
    initial_seed: int = 0
    initial_options: dict[str, Any] = field(default_factory=dict)
    token: str | None = field(default=None, repr=False)
    docs: bool = False
    max_body_bytes: int = MAX_BODY_BYTES
    action_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not MIN_ACTION_TIMEOUT_S <= self.action_timeout_s <= MAX_ACTION_TIMEOUT_S:
            raise ValueError(
                f"action_timeout_s: expected {MIN_ACTION_TIMEOUT_S}..{MAX_ACTION_TIMEOUT_S} "
                f"seconds, got {self.action_timeout_s}"
            )

    def caller_policy(self) -> CallerPolicy:
        """Who may call: loopback names, the address the server listens on (its own
        browser loads the task app from there) and ``allowed_hosts``."""
        names = (*LOOPBACK_HOSTS, _url_host(self.host), *self.allowed_hosts)
        return CallerPolicy(hosts=host_names(names), origins=frozenset(self.allowed_origins))


class SessionState:
    """What one server process holds: config, task, browser, lock, counters."""

    def __init__(self, config: SessionServerConfig) -> None:
        self.config = config
        self.session_id = config.session_id or uuid.uuid4().hex[:12]
        # Every task a reset has asked for (a session serves any task; --task is the
        # one of the first episode): one object each, made on first use.
        self.tasks: dict[str, Task] = {}
        self.task: Task = self.task_named(config.task)
        self.token = config.token or new_session_token()
        self._server_root = f"http://{_url_host(config.host)}:{config.port}"
        self.browser = CdpBrowserSession(
            app_url=self.app_url(self.task.name),
            executable_path=find_browser(config.browser, headless=config.headless),
            headless=config.headless,
            # The task of the episode on the screen records the app's events and says
            # how its dialogs are answered.
            record_event=lambda event: self.task.handle_event(event),
            answer_dialog=lambda dialog: self.task.answer_dialog(dialog),
        )
        self.lock = asyncio.Lock()
        self.started_at = datetime.now(UTC)
        self.ready = False
        self.instruction = ""
        # The episode's screen (width, height): the viewport, what actions may point at.
        self.screen = DEFAULT_SCREEN
        # The episode's actions sent with an action id (see act()).
        self.actions = ActionMemory()
        # Why the episode's page was given up (an action past its deadline); None: fine.
        self.page_stuck: str | None = None

    def task_named(self, name: str) -> Task:
        """This session's object for task ``name`` (``ValueError``: unknown task)."""
        if name not in self.tasks:
            self.tasks[name] = make_task(name)
        return self.tasks[name]

    def app_url(self, task: str) -> str:
        return self._server_root + self.task_named(task).app_path()

    async def reset(
        self,
        seed: int | None,
        options: Mapping[str, Any],
        task: str | None = None,
        screen: tuple[int, int] = DEFAULT_SCREEN,
    ) -> dict[str, Any]:
        if not self.browser.alive:
            logger.warning("Chromium is down; starting a new one")
            await self.browser.restart()
        target = self.task if task is None else self.task_named(task)
        target.screen = screen
        episode = target.reset(seed, options)
        # The episode's app: the browser loads it into the prepared context if that
        # one holds another task's app.
        self.task = target
        self.browser.app_url = self.app_url(target.name)
        self.screen = screen
        # Action ids are the episode's: one sent again after the reset is a new action.
        self.actions = ActionMemory()
        self.browser.take_dialogs()  # the last episode's, never answered to an /act
        stuck, self.page_stuck = self.page_stuck, None
        loaded = await self.browser.new_episode(
            episode["app_state"],
            page_scale=float(episode.get("page_scale", 1.0)),
            screen=screen,
            # A page that hung is not restarted in place: a fresh context replaces it.
            in_page=bool(episode.get("in_page", False)) and stuck is None,
        )
        self.instruction = target.page_loaded(loaded, episode["instruction"])
        return {
            "instruction": self.instruction,
            "episode": self.task.episode_id,
            "session_id": self.session_id,
            "task": self.task.name,
            "screen": list(screen),
        }


def _url_host(host: str) -> str:
    # The browser runs beside the server: a wildcard bind address is reached on loopback.
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _bad_request(message: str) -> HTTPException:
    return HTTPException(status_code=400, detail=message)


def _page_stuck(why: str) -> HTTPException:
    """504: the episode's page hangs; the session is fine and the next reset starts a
    fresh page (the header tells a client it need not replace the session)."""
    return HTTPException(
        status_code=504,
        detail=f"{why}; this episode's page is given up: POST /reset starts a fresh one",
        headers={ACTION_TIMEOUT_HEADER: "true"},
    )


def _browser_down(exc: Exception) -> HTTPException:
    return HTTPException(
        status_code=503,
        detail=f"the browser failed ({type(exc).__name__}: {exc}); POST /reset starts a new one",
    )


async def _browser_error(state: SessionState, exc: Exception, what: str) -> HTTPException:
    """503 only when Chromium is really gone (checked); otherwise the session is fine."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "Unknown key" in message:
        return _bad_request(f"keys: {message}; docs/protocol.md lists the key names")
    if not await state.browser.responsive():
        return _browser_down(exc)
    return HTTPException(
        status_code=500,
        detail=f"{what} failed ({message}); the browser is fine and the session usable",
    )


def has_token(request: Request) -> bool:
    """Whether the request carries this session's token (none or a wrong one: False)."""
    state: SessionState = request.app.state.session
    presented = presented_token(request.headers)
    return presented is not None and secrets.compare_digest(
        presented.encode(), state.token.encode()
    )


def task_record(request: Request) -> dict[str, Any]:
    """The task's record as this request may see it: whole with the session token (the
    env's reward needs which goal is met), else only what reveals no answer (an agent
    that can make HTTP calls must not test its guesses through /progress)."""
    state: SessionState = request.app.state.session
    return state.task.progress() if has_token(request) else state.task.public_progress()


def require_token(request: Request, what: str) -> None:
    """Raise 401/403 unless the request carries this session's token."""
    state: SessionState = request.app.state.session
    try:
        check_token(state.token, presented_token(request.headers), what)
    except RequestError as exc:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        raise HTTPException(exc.status, exc.detail, headers=headers) from None


def create_app(config: SessionServerConfig) -> FastAPI:
    """The FastAPI app for one session (one task, one browser)."""
    state = SessionState(config)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await state.browser.start()
        # The browser loads /task/app from this server: load the first episode in the
        # background, once the server answers.
        first_episode = asyncio.create_task(_first_episode(state))
        yield
        first_episode.cancel()
        await state.browser.stop()

    docs: dict[str, Any] = (
        {} if config.docs else {"docs_url": None, "redoc_url": None, "openapi_url": None}
    )
    app = FastAPI(title="uirl session server", lifespan=lifespan, **docs)
    app.state.session = state
    app.include_router(router)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)

    @app.middleware("http")
    async def refuse_misdirected(request: Request, call_next: Any) -> Response:
        # A router (the Kubernetes proxy) names the session it means; a request that
        # reached another session (a reused pod IP) is refused before it acts.
        wanted = request.headers.get(SESSION_HEADER)
        if wanted is not None and wanted != state.session_id:
            return JSONResponse(
                {"detail": f"this is session {state.session_id}, not {wanted}"}, status_code=421
            )
        return await call_next(request)

    # Added last, so outermost: a page on another site learns nothing, not even a 421.
    app.add_middleware(CallerMiddleware, policy=config.caller_policy())
    return app


router = APIRouter()


@router.get(Route.STATUS, response_class=PlainTextResponse)
async def root(request: Request) -> PlainTextResponse:
    state: SessionState = request.app.state.session
    if not state.ready:
        return PlainTextResponse("starting", status_code=503)
    uptime = datetime.now(UTC) - state.started_at
    return PlainTextResponse(
        "uirl session server\n"
        f"Session: {state.session_id}\nTask: {state.task.name}\n"
        f"Start time: {state.started_at.isoformat()}\nDuration: {uptime}\n"
        f"Episode: {state.task.episode_id}\nInstruction: {state.instruction}\n"
    )


@router.get(Route.HEALTH)
async def health(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    body = {
        "status": "ok" if state.ready and state.browser.alive else "unhealthy",
        "ready": state.ready,
        "browser_alive": state.browser.alive,
        "browser_launches": state.browser.launches,
        # Always "cdp" since issue 34 (one backend); kept for clients that read it.
        "browser_backend": state.browser.backend,
        "browser_executable": state.browser.executable_path,
        # The headless shell draws frames only when the server captures one.
        "frames_on_demand": state.browser.frames_on_demand,
        # Episodes that restarted in the last one's page (MiniWoB++).
        "in_page_episodes": state.browser.in_page_episodes,
        # Pages open in Chromium, and new tabs a page opened that were closed.
        "open_pages": state.browser.open_pages,
        "popups_closed": state.browser.popups_closed,
        "session_id": state.session_id,
        "task": state.task.name,
        "episode": state.task.episode_id,
        "uptime_s": (datetime.now(UTC) - state.started_at).total_seconds(),
    }
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


@router.post(Route.RESET)
async def reset(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    require_token(request, "POST /reset")
    body = await _json_body(request)
    unknown = set(body) - {"seed", "options", "task", "screen"}
    if unknown:
        raise _bad_request(
            f"unknown field(s) {sorted(unknown)}; allowed: seed, options, task, screen"
        )
    task = body.get("task")
    if task is not None:
        if not isinstance(task, str):
            raise _bad_request(f"task: must be a task id (a string), got {task!r}")
        try:
            task_spec(task)
        except ValueError as exc:
            raise _bad_request(f"task: {exc}") from None
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad_request(f"seed: must be an integer or null, got {seed!r}")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise _bad_request(f"options: must be an object, got {options!r}")
    try:
        # Not given: the default screen (never the last episode's: a pooled session
        # must not hand one env's small screen to another).
        screen = check_screen(body["screen"]) if body.get("screen") is not None else DEFAULT_SCREEN
    except ValueError as exc:
        raise _bad_request(str(exc)) from None
    t0 = time.perf_counter()
    async with state.lock:
        try:
            result = await state.reset(seed, options, task, screen)
        except TaskOptionsError as exc:
            raise _bad_request(f"options.{exc}") from None
        except CdpError as exc:
            raise await _browser_error(state, exc, "the reset") from None
    result["reset_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    return JSONResponse(result)


@dataclass
class ActionOutcome:
    """What one ``GET /act`` answered, kept to answer a retry of it (same action id).

    The record is kept both ways (whole and public), so that the replay's ``X-Progress``
    follows the token rule of the request that asks again.
    """

    status: int
    body: bytes
    media_type: str
    headers: dict[str, str] = field(default_factory=dict)
    progress: dict[str, Any] | None = None
    public_progress: dict[str, Any] | None = None

    def response(self, request: Request, *, replayed: bool = False) -> Response:
        headers = dict(self.headers)
        record = self.progress if has_token(request) else self.public_progress
        if record is not None:
            # The task's record after the action, so that a client computing rewards
            # needs no second round trip (same JSON as GET /progress, token rule too).
            headers[PROGRESS_HEADER] = encode_json_header(record)
        if replayed:
            headers[REPLAYED_HEADER] = "true"
        return Response(
            self.body, self.status, media_type=self.media_type, headers=safe_headers(headers)
        )


class ActionMemory:
    """The episode's actions sent with an action id: what each id asked for (all of
    them, up to ``ACTION_IDS_REMEMBERED``) and the answers to the last
    ``ACTIONS_REMEMBERED``. A reset starts a new memory: ids are keyed by episode.

    Methods:
        recall: the remembered answer to a repeat; HTTPException 409 for an id that
            asked for something else, or whose answer is no longer kept.
        remember: keep an action's answer.
    """

    def __init__(self) -> None:
        self._asked: dict[str, Hashable] = {}
        self._answers: collections.OrderedDict[str, ActionOutcome] = collections.OrderedDict()

    def recall(self, action_id: str, request: Hashable) -> ActionOutcome | None:
        asked = self._asked.get(action_id)
        if asked is None:
            return None
        if asked != request:
            raise HTTPException(
                409,
                f"{ACTION_ID_HEADER} {action_id!r} was used in this episode for another "
                "action; an id names one action: send a new id for a new action",
            )
        answer = self._answers.get(action_id)
        if answer is None:
            raise HTTPException(
                409,
                f"{ACTION_ID_HEADER} {action_id!r}: this action was performed earlier in "
                f"the episode and its answer is no longer kept (only the last "
                f"{ACTIONS_REMEMBERED} are); it is not performed twice",
            )
        return answer

    def remember(self, action_id: str, request: Hashable, outcome: ActionOutcome) -> None:
        if len(self._asked) >= ACTION_IDS_REMEMBERED:
            del self._asked[next(iter(self._asked))]
        self._asked[action_id] = request
        self._answers[action_id] = outcome
        while len(self._answers) > ACTIONS_REMEMBERED:
            self._answers.popitem(last=False)


@router.get(Route.ACT)
async def act(request: Request) -> Response:
    """Perform an action and answer its settled screenshot.

    With an ``X-UIRL-Action-Id`` header, the answer is remembered for the episode: the
    same id with the same action again (a client whose connection broke before the
    answer came) gets that answer, and the action is not performed twice; the same id
    with another action is a 409.
    """
    state: SessionState = request.app.state.session
    action_id = request.headers.get(ACTION_ID_HEADER)
    if action_id is not None and not ACTION_ID_RE.fullmatch(action_id):
        raise _bad_request(
            f"{ACTION_ID_HEADER}: 1-64 letters, digits and . _ : -, got {action_id[:80]!r}"
        )
    try:
        parsed = parse_act_query(request.query_params, state.screen, state.config.action_timeout_s)
    except ValueError as exc:
        raise _bad_request(str(exc)) from None
    # What makes a repeat the same request (the deadline may differ).
    asked = (parsed.action, parsed.delay_s, parsed.image_format, parsed.jpeg_quality)
    async with state.lock:
        # Looked up under the lock: a retry that arrived while its first copy was still
        # acting waits for it here, then finds its answer.
        done = state.actions.recall(action_id, asked) if action_id is not None else None
        if done is not None:
            logger.info("action %s sent again: its answer is replayed, not the action", action_id)
            return done.response(request, replayed=True)
        try:
            outcome = await _perform(state, parsed)
        except HTTPException as exc:
            body = json.dumps({"detail": exc.detail}).encode()
            outcome = ActionOutcome(
                exc.status_code, body, "application/json", dict(exc.headers or {})
            )
        if action_id is not None:
            state.actions.remember(action_id, asked, outcome)
    return outcome.response(request)


_T = TypeVar("_T")


class _DeadlinePassed(Exception):
    """An action's deadline passed; says what it was waiting on."""


async def _within(
    deadline_s: float, work: Coroutine[Any, Any, _T], state: SessionState, phase: str
) -> _T:
    """``work`` within ``deadline_s``, or _DeadlinePassed naming the CDP commands still
    unanswered when it passed: read before the work is cancelled (cancelling forgets
    them), so that a deadline met once in 100,000 steps can be traced to its wait."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=deadline_s)
    except asyncio.CancelledError:
        # The request was cancelled: the work ends before the lock is let go, so that
        # the next action never runs beside it.
        await _cancelled(task)
        raise
    if done:
        return task.result()
    waiting = state.browser.waiting_on()
    await _cancelled(task)
    raise _DeadlinePassed(f"stuck in the {phase}, waiting on CDP: {waiting}")


async def _cancelled(task: asyncio.Future[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _perform(state: SessionState, parsed: ActRequest) -> ActionOutcome:
    """Act and capture (the lock is held) within the request's deadline; HTTPException
    when it failed."""
    if state.page_stuck is not None:
        raise _page_stuck(state.page_stuck)
    t0 = time.perf_counter()
    try:
        await _within(parsed.timeout_s, state.browser.act(parsed.action), state, "action")
        t1 = time.perf_counter()
        if parsed.delay_s:
            await asyncio.sleep(parsed.delay_s)
        image = await _within(
            max(parsed.timeout_s - (t1 - t0), MIN_ACTION_TIMEOUT_S),
            state.browser.capture(parsed.image_format, parsed.jpeg_quality),
            state,
            "screenshot",
        )
    except _DeadlinePassed as passed:
        state.page_stuck = (
            f"the {parsed.action.type.value} action and its screenshot did not finish "
            f"within {parsed.timeout_s:g}s (a page that hangs?; {passed})"
        )
        logger.warning(
            "episode %s: %s; the page is given up", state.task.episode_id, state.page_stuck
        )
        raise _page_stuck(state.page_stuck) from None
    except ElementActionError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    except CdpError as exc:
        raise await _browser_error(state, exc, f"the {parsed.action.type.value} action") from None
    except RuntimeError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    t2 = time.perf_counter()
    headers = {
        ACTION_MS_HEADER: f"{(t1 - t0) * 1000:.2f}",
        CAPTURE_MS_HEADER: f"{(t2 - t1) * 1000:.2f}",
        EPISODE_HEADER: str(state.task.episode_id),
        WIDTH_HEADER: str(state.screen[0]),
        HEIGHT_HEADER: str(state.screen[1]),
    }
    # What a lenient reading changed, so that a client can tell (never silently).
    if parsed.clamped:
        headers[CLAMPED_HEADER] = ", ".join(parsed.clamped)
    if parsed.ignored:
        # Bounded: a client reads a header line of 64 KB at most (http.client), and an
        # answer it cannot read is lost after the action ran.
        named = [_header_safe(n) for n in parsed.ignored[:MAX_NAMED_PARAMS]]
        if len(parsed.ignored) > MAX_NAMED_PARAMS:
            named.append(f"and {len(parsed.ignored) - MAX_NAMED_PARAMS} more")
        headers[IGNORED_PARAMS_HEADER] = ", ".join(named)
    dialogs, not_kept = state.browser.take_dialogs()
    if dialogs:
        headers[DIALOGS_HEADER] = dialogs_header(dialogs)
    if not_kept:
        headers[DIALOGS_NOT_LISTED_HEADER] = str(not_kept)
    return ActionOutcome(
        200,
        image,
        MEDIA_TYPES[parsed.image_format],
        headers,
        progress=state.task.progress(),
        public_progress=state.task.public_progress(),
    )


def _header_safe(name: str) -> str:
    # Parameter names come from the client: percent-encode them (UTF-8) so that the
    # header is printable ASCII without spaces at either end (h11 drops the whole answer,
    # after the action ran, for a value like "zz "), and two names cannot run together.
    safe = quote(name, safe="")
    return safe if len(safe) <= 40 else safe[:37] + "..."


def dialogs_header(dialogs: list[tuple[Dialog, DialogAnswer]]) -> str:
    """The dialogs the page opened, as answered: what the agent, which sees none in the
    screenshot, is told the page showed (``X-Dialogs``; docs/protocol.md)."""
    shown = []
    for dialog, answer in dialogs:
        entry: dict[str, Any] = {
            "type": dialog.type,
            "message": dialog.message[:MAX_DIALOG_MESSAGE_CHARS],
        }
        if dialog.type == "prompt":
            entry["default_prompt"] = dialog.default_prompt[:MAX_DIALOG_MESSAGE_CHARS]
        entry["accepted"] = answer.accept
        if answer.prompt_text is not None:
            entry["prompt_text"] = answer.prompt_text[:MAX_DIALOG_MESSAGE_CHARS]
        shown.append(entry)
    return encode_json_header(shown)


# RFC 9110 field-value, as h11 checks it, in ASCII: visible characters, spaces inside.
_HEADER_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")


def safe_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` with every value a server may send; an unsendable one is percent-encoded.

    The last line of defence: an answer whose header h11 refuses is dropped after the
    action ran, and the client cannot tell whether its click happened.
    """
    out = {}
    for name, value in headers.items():
        if value and not _HEADER_VALUE.fullmatch(value):
            logger.warning("header %s: unsendable value %r, percent-encoded", name, value[:80])
            value = quote(value, safe="".join(map(chr, range(0x21, 0x7F))).replace("%", ""))
        out[name] = value
    return out


@router.get(Route.PROGRESS)
async def progress(request: Request) -> JSONResponse:
    return JSONResponse(task_record(request))


@router.get(Route.PAGE)
async def page(request: Request) -> Response:
    """The page as text: ``include`` names the parts (``axtree``, ``dom``, ``elements``,
    ``dom_elements``: a MiniWoB++ page's own DOM, 409 on other pages; comma-separated;
    none: the URL, title and focused element only), ``full=1`` keeps every field CDP
    sends (BrowserGym's objects). Marks the page's elements with the bids that actions
    by element take (docs/protocol.md)."""
    state: SessionState = request.app.state.session
    wanted = [p for p in request.query_params.get("include", "").split(",") if p]
    unknown = sorted(set(wanted) - set(PAGE_PARTS))
    if unknown:
        raise _bad_request(
            f"include: unknown {', '.join(map(repr, unknown))}; allowed: {', '.join(PAGE_PARTS)}"
        )
    full = request.query_params.get("full", "0") not in ("", "0", "false")
    async with state.lock:
        if state.page_stuck is not None:
            raise _page_stuck(state.page_stuck)
        try:
            async with asyncio.timeout(state.config.action_timeout_s):
                answer = await state.browser.page(state.task.episode_id, frozenset(wanted), full)
        except TimeoutError:
            raise _page_stuck(
                f"the page did not answer within {state.config.action_timeout_s:g}s"
            ) from None
        except CdpError as exc:
            raise await _browser_error(state, exc, "reading the page") from None
        except RuntimeError as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from None
    answer["open_pages_urls"] = [answer["url"]]
    answer["open_pages_titles"] = [answer["title"]]
    return Response(orjson.dumps(answer), media_type="application/json")


@router.get(Route.ORACLE)
async def oracle(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    require_token(request, "GET /oracle")
    async with state.lock:
        if state.page_stuck is not None:
            raise _page_stuck(state.page_stuck)
        try:
            async with asyncio.timeout(state.config.action_timeout_s):
                page_state = await state.browser.inspect()
        except TimeoutError:
            raise _page_stuck(
                f"the page did not answer within {state.config.action_timeout_s:g}s"
            ) from None
        except CdpError as exc:
            raise await _browser_error(state, exc, "reading the page") from None
        except RuntimeError as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from None
    return JSONResponse(state.task.oracle(page_state))


@router.get(Route.TASK_APP, response_class=HTMLResponse)
async def task_app(request: Request) -> HTMLResponse:
    state: SessionState = request.app.state.session
    name = request.query_params.get("task", state.task.name)
    try:
        task_spec(name)
    except ValueError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    page = state.task_named(name).page_html()
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


@router.get(BRIDGE_PATH)
async def task_bridge() -> Response:
    """The page bridge every task app loads (``uirl_gym/tasks/static/uirl.js``)."""
    return Response(bridge_script(), media_type="text/javascript")


@router.get("/task/files/{task}/{path:path}")
async def task_file(request: Request, task: str, path: str) -> Response:
    """A file of task ``task``'s app (MiniWoB++ pages load scripts by relative URL)."""
    state: SessionState = request.app.state.session
    try:
        task_spec(task)
        body, media_type = state.task_named(task).file(path)
    except (ValueError, FileNotFoundError) as exc:
        raise HTTPException(404, f"no file {path!r} for task {task!r}: {exc}") from None
    return Response(body, media_type=media_type, headers={"Cache-Control": "no-store"})


async def _first_episode(state: SessionState, timeout_s: float = 30.0) -> None:
    # The browser loads /task/app from this very server: when the socket was not bound
    # before start-up (a plain `uvicorn` run), retry until the server answers.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with state.lock:
                await state.reset(state.config.initial_seed, state.config.initial_options)
            break
        except CdpError as exc:
            if time.monotonic() > deadline:
                logger.error("the first episode failed to load: %s", exc)
                return
            await asyncio.sleep(0.05)
    state.ready = True
    logger.info("session %s ready", state.session_id)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        return parse_json_object(await request.body())
    except RequestError as exc:
        raise HTTPException(exc.status, exc.detail) from None

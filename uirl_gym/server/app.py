"""The session server: one task, one Chromium, the HTTP protocol of docs/protocol.md.

Requests that touch the browser (act, reset, oracle) are serialised by one lock: a
session serves one agent. The task app's own requests (``/task/...``) bypass the lock,
since they arrive while an action holds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from playwright.async_api import Error as PlaywrightError

from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action
from uirl_gym.runtimes.base import SESSION_HEADER
from uirl_gym.server.browser import BrowserSession, ImageFormat, find_browser
from uirl_gym.tasks import make_task
from uirl_gym.tasks.base import Task, TaskOptionsError

logger = logging.getLogger(__name__)

ACT_PARAMS = frozenset(
    {"action_type", "x", "y", "text", "keys", "direction", "amount", "delay", "format", "quality"}
)
MAX_DELAY_S = 10.0
MEDIA_TYPES = {
    ImageFormat.PNG: "image/png",
    ImageFormat.JPEG: "image/jpeg",
    ImageFormat.RAW: "application/octet-stream",
}


@dataclass
class ServerConfig:
    """How the session server runs.

    Attributes:
        host, port: where uvicorn listens (the app's own URL derives from them).
        task: the task id (see ``uirl_gym.tasks.TASKS``).
        browser: the Chromium executable; None means search (see ``find_browser``).
        session_id: reported by ``/`` and ``/health``; random when None.
        headless: False shows the browser (for debugging on a desktop).
        initial_options: reset options of the episode that is ready at start-up, so that
            ui-verifiers clients (which never reset) find a task on the screen.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    task: str = "simple_data_entry"
    browser: str | None = None
    session_id: str | None = None
    headless: bool = True
    initial_seed: int = 0
    initial_options: dict[str, Any] = field(default_factory=dict)


class SessionState:
    """What one server process holds: config, task, browser, lock, counters."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.session_id = config.session_id or uuid.uuid4().hex[:12]
        self.task: Task = make_task(config.task)
        self.browser = BrowserSession(
            app_url=f"http://{_url_host(config.host)}:{config.port}/task/app",
            executable_path=find_browser(config.browser),
            headless=config.headless,
        )
        self.lock = asyncio.Lock()
        self.started_at = datetime.now(UTC)
        self.ready = False
        self.instruction = ""

    async def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        if not self.browser.alive:
            logger.warning("Chromium is down; starting a new one")
            await self.browser.restart()
        episode = self.task.reset(seed, options)
        await self.browser.new_episode(episode["app_state"])
        self.instruction = episode["instruction"]
        return {
            "instruction": self.instruction,
            "episode": self.task.episode_id,
            "session_id": self.session_id,
        }


def _url_host(host: str) -> str:
    # The browser runs beside the server: a wildcard bind address is reached on loopback.
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def _bad_request(message: str) -> HTTPException:
    return HTTPException(status_code=400, detail=message)


def _browser_down(exc: Exception) -> HTTPException:
    return HTTPException(
        status_code=503,
        detail=f"the browser failed ({type(exc).__name__}: {exc}); POST /reset starts a new one",
    )


def create_app(config: ServerConfig) -> FastAPI:
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

    app = FastAPI(title="uirl session server", lifespan=lifespan)
    app.state.session = state
    app.include_router(router)

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

    return app


router = APIRouter()


@router.get("/", response_class=PlainTextResponse)
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


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    body = {
        "status": "ok" if state.ready and state.browser.alive else "unhealthy",
        "ready": state.ready,
        "browser_alive": state.browser.alive,
        "browser_launches": state.browser.launches,
        "session_id": state.session_id,
        "task": state.task.name,
        "episode": state.task.episode_id,
        "uptime_s": (datetime.now(UTC) - state.started_at).total_seconds(),
    }
    return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)


@router.post("/reset")
async def reset(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    body = await _json_body(request)
    unknown = set(body) - {"seed", "options"}
    if unknown:
        raise _bad_request(f"unknown field(s) {sorted(unknown)}; allowed: seed, options")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad_request(f"seed: must be an integer or null, got {seed!r}")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise _bad_request(f"options: must be an object, got {options!r}")
    t0 = time.perf_counter()
    async with state.lock:
        try:
            result = await state.reset(seed, options)
        except TaskOptionsError as exc:
            raise _bad_request(f"options.{exc}") from None
        except PlaywrightError as exc:
            raise _browser_down(exc) from None
    result["reset_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    return JSONResponse(result)


@router.get("/act")
async def act(request: Request) -> Response:
    state: SessionState = request.app.state.session
    query = dict(request.query_params)
    unknown = set(query) - ACT_PARAMS
    if unknown:
        raise _bad_request(f"unknown parameter(s) {sorted(unknown)}; allowed: {sorted(ACT_PARAMS)}")
    try:
        action = Action.from_query(query)
        delay_s = _float_param(query, "delay", 0.0, 0.0, MAX_DELAY_S)
        fmt = ImageFormat(query.get("format", "png"))
        quality = int(_float_param(query, "quality", 90, 1, 100))
    except ValueError as exc:
        message = str(exc)
        if "ImageFormat" in message:
            message = f"format: must be one of {', '.join(f.value for f in ImageFormat)}"
        raise _bad_request(message) from None
    async with state.lock:
        t0 = time.perf_counter()
        try:
            await state.browser.act(action)
            t1 = time.perf_counter()
            if delay_s:
                await asyncio.sleep(delay_s)
            image = await state.browser.capture(fmt, quality)
        except PlaywrightError as exc:
            raise _browser_down(exc) from None
        except RuntimeError as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from None
        t2 = time.perf_counter()
    headers = {
        "X-Action-Ms": f"{(t1 - t0) * 1000:.2f}",
        "X-Capture-Ms": f"{(t2 - t1) * 1000:.2f}",
        "X-Episode": str(state.task.episode_id),
        "X-Width": str(SCREEN_WIDTH),
        "X-Height": str(SCREEN_HEIGHT),
        # The task's record after the action, so that a client computing rewards needs
        # no second round trip (same JSON as GET /progress).
        "X-Progress": json.dumps(state.task.progress(), separators=(",", ":")),
    }
    return Response(image, media_type=MEDIA_TYPES[fmt], headers=headers)


@router.get("/progress")
async def progress(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    return JSONResponse(state.task.progress())


@router.get("/oracle")
async def oracle(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    async with state.lock:
        try:
            page_state = await state.browser.inspect()
        except PlaywrightError as exc:
            raise _browser_down(exc) from None
        except RuntimeError as exc:
            raise HTTPException(status_code=409, detail=str(exc)) from None
    return JSONResponse(state.task.oracle(page_state))


@router.get("/task/app", response_class=HTMLResponse)
async def task_app(request: Request) -> HTMLResponse:
    state: SessionState = request.app.state.session
    return HTMLResponse(state.task.page_html(), headers={"Cache-Control": "no-store"})


@router.post("/task/event")
async def task_event(request: Request) -> JSONResponse:
    state: SessionState = request.app.state.session
    try:
        return JSONResponse(state.task.handle_event(await _json_body(request)))
    except ValueError as exc:
        raise _bad_request(str(exc)) from None


async def _first_episode(state: SessionState, timeout_s: float = 30.0) -> None:
    # The browser loads /task/app from this very server: when the socket was not bound
    # before start-up (a plain `uvicorn` run), retry until the server answers.
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            async with state.lock:
                await state.reset(state.config.initial_seed, state.config.initial_options)
            break
        except PlaywrightError as exc:
            if time.monotonic() > deadline:
                logger.error("the first episode failed to load: %s", exc)
                return
            await asyncio.sleep(0.05)
    state.ready = True
    logger.info("session %s ready", state.session_id)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = await request.json()
    except ValueError:
        raise _bad_request("the body must be JSON") from None
    if not isinstance(body, dict):
        raise _bad_request("the body must be a JSON object")
    return body


def _float_param(
    query: Mapping[str, str], name: str, default: float, low: float, high: float
) -> float:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}: must be a number, got {raw!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name}: must be {low:g}..{high:g}, got {value:g}")
    return value

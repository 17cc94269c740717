"""``python -m uirl_gym.session``: run one session server.

Binds the listening socket before start-up so that ``--port 0`` works (the chosen
port is written to ``--port-file``) and the browser can load the task app from the
server as soon as it starts.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
import time

import uvicorn

from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S
from uirl_gym.guards import uvicorn_config
from uirl_gym.protocol import DEFAULT_KEEP_ALIVE_S, TOKEN_ENV_VAR, TOKEN_HEADER
from uirl_gym.session.app import SessionServerConfig, create_app
from uirl_gym.session.browser.chromium import BrowserNotFoundError

logger = logging.getLogger(__name__)

# How long a stopping server lets requests in flight finish before cancelling them. A
# session is stopped because its client is done with it (or gave up on it): an answer
# nobody reads is not worth waiting for. uvicorn's 5 s here, plus closing Chromium, was
# longer than the runtime's grace (runtimes.local.STOP_GRACE_S), so a session stopped
# with an action in flight (an env dropping a session whose action timed out, under
# load) was killed ("ignored SIGTERM") instead of closing its browser.
SHUTDOWN_GRACE_S = 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m uirl_gym.session", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument("--task", default="simple_data_entry")
    p.add_argument("--browser", help="Chromium executable (default: $UIRL_CHROMIUM, then search)")
    p.add_argument("--session-id", default=os.environ.get("UIRL_SESSION_ID"))
    p.add_argument("--headed", action="store_true", help="show the browser window")
    p.add_argument("--initial-seed", type=int, default=0)
    p.add_argument(
        "--initial-options", default="{}", help="JSON reset options of the start-up episode"
    )
    p.add_argument(
        "--token-file",
        help=f"file holding the token of /reset and /oracle (default: ${TOKEN_ENV_VAR}; "
        "neither: a random one, logged once). Never pass a token in argv: anyone can read it",
    )
    p.add_argument("--docs", action="store_true", help="serve /docs and /openapi.json")
    p.add_argument(
        "--allowed-hosts",
        default="",
        help="comma-separated names clients address the server by (the Host header) "
        "besides 127.0.0.1, localhost, ::1 and --host ('*': any); other names are refused "
        "(403: DNS rebinding). The Kubernetes runtime sets its pods' IP",
    )
    p.add_argument(
        "--allowed-origins",
        default="",
        help="comma-separated browser origins (https://host:port) whose pages may call the "
        "server ('*': any); default: none, only programs and the server's own pages",
    )
    p.add_argument(
        "--keep-alive-s",
        type=float,
        default=DEFAULT_KEEP_ALIVE_S,
        help="how long an idle keep-alive connection stays open; longer than the clients' "
        "idle limit (SessionClient.max_idle_s), so that the client closes it first",
    )
    p.add_argument(
        "--action-timeout-s",
        type=float,
        default=DEFAULT_ACTION_TIMEOUT_S,
        help="how long an action and its screenshot may take when the request does not "
        "say (GET /act's timeout); past it: 504, and the episode's page is given up",
    )
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--parent-pid",
        type=int,
        help="exit when this process is gone (set by the local runtime: no orphans)",
    )
    return p.parse_args(argv)


def _items(value: str) -> tuple[str, ...]:
    """A comma-separated flag's items."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def _exit_with_parent(parent_pid: int, poll_s: float = 1.0) -> None:
    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                # SIGTERM makes uvicorn shut down cleanly, closing Chromium.
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def read_token(token_file: str | None) -> tuple[str | None, str]:
    """The session token and where it came from; taken out of the environment so that
    the browser, started later, does not inherit it."""
    from_env = os.environ.pop(TOKEN_ENV_VAR, None)
    if token_file:
        with open(token_file) as f:
            return f.read().strip(), token_file
    return (from_env, f"${TOKEN_ENV_VAR}") if from_env else (None, "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this: without it, a keep-alive client waits ~40 ms
    # per response (Nagle + delayed ACK on split header/body writes).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    token, token_source = read_token(args.token_file)
    try:
        config = SessionServerConfig(
            host=args.host,
            port=port,
            task=args.task,
            browser=args.browser,
            session_id=args.session_id,
            headless=not args.headed,
            initial_seed=args.initial_seed,
            initial_options=json.loads(args.initial_options),
            token=token,
            docs=args.docs,
            action_timeout_s=args.action_timeout_s,
            allowed_hosts=_items(args.allowed_hosts),
            allowed_origins=_items(args.allowed_origins),
        )
        app = create_app(config)
    except (BrowserNotFoundError, ValueError) as exc:
        logger.error("%s", exc)
        return 2
    if token is None:
        # Started by hand: whoever started it reads the token from its own terminal.
        logger.warning(
            "no token given (%s or --token-file): /reset and /oracle need the header %s: %s",
            TOKEN_ENV_VAR,
            TOKEN_HEADER,
            app.state.session.token,
        )
    else:
        logger.info("session token from %s", token_source)
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    if args.parent_pid:
        _exit_with_parent(args.parent_pid)
    server = uvicorn.Server(
        uvicorn_config(
            app,
            log_level=args.log_level,
            access_log=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            # uvicorn's default (5 s) closed connections under agents that think longer,
            # racing with their next request (a click sent as the server closed).
            timeout_keep_alive=args.keep_alive_s,
        )
    )
    # What start-up made (the app, FastAPI, NumPy, Gymnasium: ~100,000 objects) lives as
    # long as the server: out of the cycle collector's way. A large CDP answer (a page's
    # accessibility tree, tens of thousands of dicts) triggers full collections, and
    # each walked all of it again: a third of a GET /page's server time on a 100-row
    # sheet (issue 41).
    gc.freeze()
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m uirl_gym.openenv``: serve every uirl task through OpenEnv.

Binds the listening socket before start-up so that ``--port 0`` works (the chosen port
is written to ``--port-file``), as ``python -m uirl_gym.session`` does.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

import uvicorn

from uirl_gym.make import RuntimeSettings, build_runtime
from uirl_gym.openenv.server import OpenEnvServerConfig, make_app
from uirl_gym.runtimes.base import Runtime
from uirl_gym.runtimes.kubernetes.config import KubernetesRuntimeConfig
from uirl_gym.runtimes.local import LocalRuntimeConfig

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = OpenEnvServerConfig()
    p = argparse.ArgumentParser(prog="python -m uirl_gym.openenv", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument(
        "--max-sessions",
        type=int,
        default=defaults.max_sessions,
        help="WebSocket sessions at once (each is a Chromium)",
    )
    p.add_argument("--max-steps", type=int, default=defaults.max_steps, help="steps per episode")
    p.add_argument("--reward-mode", choices=["sparse", "dense"], default=defaults.reward_mode)
    p.add_argument(
        "--step-timeout-s",
        type=float,
        default=defaults.step_timeout_s,
        help="how long one action and its screenshot may take; past it the episode ends "
        "truncated with an error (a page that hangs, a frozen session)",
    )
    p.add_argument(
        "--idle-timeout-s",
        type=float,
        default=defaults.idle_timeout_s,
        help="close a session after this long without a message (0: never)",
    )
    p.add_argument(
        "--allowed-hosts",
        default=",".join(defaults.allowed_hosts),
        help="comma-separated host names clients address the server by (the Host header; "
        "'*': any); default: loopback, or $UIRL_OPENENV_ALLOWED_HOSTS. Listening on "
        "0.0.0.0 for other machines: name the host names they use",
    )
    p.add_argument(
        "--allowed-origins",
        default=",".join(defaults.allowed_origins),
        help="comma-separated browser origins (https://host:port) whose pages may call the "
        "server besides its own ('*': any); default: none, or $UIRL_OPENENV_ALLOWED_ORIGINS",
    )
    p.add_argument(
        "--start-timeout-s",
        type=float,
        default=defaults.start_timeout_s,
        help="close a WebSocket with no successful reset within this long (frees its slot)",
    )
    p.add_argument("--browser", help="Chromium executable (default: $UIRL_CHROMIUM, then search)")
    p.add_argument(
        "--runtime",
        choices=["local", "kubernetes"],
        default="local",
        help="local: a session server per WebSocket session on this machine; kubernetes: "
        "session pods (needs the k8s extra; see docs/kubernetes.md)",
    )
    k8s = p.add_argument_group("kubernetes runtime")
    k8s.add_argument("--namespace", default="default")
    k8s.add_argument("--image", default="uirl-session:latest", help="the session image")
    k8s.add_argument("--proxy-url", help="the routing proxy (None: pod IPs, in-cluster only)")
    k8s.add_argument("--pool-size", type=int, default=2, help="ready sessions kept waiting")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def _list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


def server_runtime(args: argparse.Namespace) -> Runtime | None:
    """The server-wide runtime, built by :mod:`uirl_gym.make` (None: a local runtime per
    WebSocket session, which the server makes with its session)."""
    if args.runtime == "local":
        return None
    kubernetes = KubernetesRuntimeConfig(
        namespace=args.namespace,
        image=args.image,
        proxy_url=args.proxy_url,
        pool_size=args.pool_size,
    )
    return build_runtime(RuntimeSettings("kubernetes", kubernetes=kubernetes))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)
    port = sock.getsockname()[1]
    runtime = server_runtime(args)
    try:
        config = OpenEnvServerConfig(
            max_sessions=args.max_sessions,
            max_steps=args.max_steps,
            reward_mode=args.reward_mode,
            step_timeout_s=args.step_timeout_s,
            idle_timeout_s=args.idle_timeout_s or None,
            runtime=runtime,
            local=LocalRuntimeConfig(browser=args.browser),
            allowed_hosts=_list(args.allowed_hosts),
            allowed_origins=_list(args.allowed_origins),
            start_timeout_s=args.start_timeout_s,
        )
        app = make_app(config)
    except ValueError as exc:
        logger.error("%s", exc)
        if runtime is not None:
            runtime.close()
        return 2
    if args.port_file:
        tmp = f"{args.port_file}.tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    logger.info("uirl OpenEnv server on http://%s:%d (WebSocket /ws)", args.host, port)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level=args.log_level, access_log=False, timeout_graceful_shutdown=5)
    )
    try:
        server.run(sockets=[sock])
    finally:
        if runtime is not None:
            runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

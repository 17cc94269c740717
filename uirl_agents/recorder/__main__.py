"""Record a person's demonstrations through the env.

The command line of :mod:`uirl_agents.recorder` (``python -m uirl_agents.recorder``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from uirl_agents.formats import FORMATS
from uirl_agents.recorder.recording import RecorderAddressError, RecorderConfig
from uirl_agents.recorder.server import record
from uirl_gym.tasks import TASKS

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
    p.add_argument(
        "--format",
        default=default["format"],
        choices=sorted(n for n, f in FORMATS.items() if f.mode == "pixels"),
    )
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

"""The command line: ``python -m uirl_agents.dataset export|push``.

    python -m uirl_agents.dataset export RUN_DIR OUT_DIR [--format NAME] [--strict]
        [--overwrite] [--push-to-hub USER/NAME [--public]]
    python -m uirl_agents.dataset push OUT_DIR USER/NAME [--public]

Exit status: 0 done; 1 a strict export met something incomplete, or the Hub refused
(run the same command again to resume the push); 2 bad input (RUN_DIR of no known
layout, no complete episode, OUT_DIR taken, an unknown format, no token).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path

from tqdm.contrib.logging import logging_redirect_tqdm

from uirl_agents.dataset.export import (
    ExportConfig,
    ExportIncompleteError,
    ExportResult,
    export_dataset,
)
from uirl_agents.dataset.hub import (
    HubTokenMissingError,
    NotAnExportError,
    push_dataset,
    require_token,
)
from uirl_agents.dataset.runs import EmptyRunError, RunLayoutError
from uirl_agents.evaluation.cost import DEFAULT_PRICES, load_prices
from uirl_agents.formats import FORMATS

PROG = "python -m uirl_agents.dataset"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Export uirl runs (evaluate.py, trainers, the recorder) as a Hugging "
        "Face dataset, and push it to the Hub (docs/datasets.md).",
    )
    commands = p.add_subparsers(dest="command", required=True)
    export = commands.add_parser(
        "export", help="write RUN_DIR's episodes as Parquet shards + a dataset card"
    )
    export.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    export.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    export.add_argument(
        "--format",
        default=None,
        metavar="NAME",
        help="write the steps of policies that recorded no prompt (scripted agents) in "
        f"this model format for the steps configuration ({', '.join(sorted(FORMATS))})",
    )
    export.add_argument("--max-images", type=int, default=1, help="screenshots per such prompt")
    export.add_argument(
        "--max-pixels",
        type=int,
        default=None,
        help="the largest image of such a prompt (the trained model's processor's max_pixels)",
    )
    export.add_argument(
        "--strict", action="store_true", help="fail (exit 1) if anything is incomplete"
    )
    export.add_argument("--overwrite", action="store_true", help="replace an earlier export")
    export.add_argument("--max-shard-mb", type=float, default=500.0, help="MB per Parquet file")
    export.add_argument("--license", default="unknown", help="the card's license (a Hub id)")
    export.add_argument("--prices", type=Path, default=None, help="a price table (cost_usd)")
    export.add_argument("--no-progress", action="store_true", help="no progress bar")
    export.add_argument("--push-to-hub", metavar="USER/NAME", default=None)
    push = commands.add_parser("push", help="push an exported dataset (again: resumes)")
    push.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    push.add_argument("repo_id", metavar="USER/NAME")
    for command in (export, push):
        command.add_argument(
            "--public", action="store_true", help="create the repo public (default: private)"
        )
        command.add_argument("--token", default=None, help="default: HF_TOKEN or the saved login")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for chatty in ("httpx", "httpx2"):  # a line per request to the Hub
        logging.getLogger(chatty).setLevel(logging.WARNING)
    with logging_redirect_tqdm():
        try:
            if args.command == "export":
                return export(args, argv)
            return push(args.out_dir, args.repo_id, args)
        except (
            RunLayoutError,
            EmptyRunError,
            FileExistsError,
            NotAnExportError,
            HubTokenMissingError,
            ValueError,
        ) as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)  # noqa: T201
            return 2


def export(args: argparse.Namespace, argv: list[str] | None) -> int:
    if args.push_to_hub is not None:
        require_token(args.push_to_hub, args.token)  # before the export, not after
    config = ExportConfig(
        format=args.format,
        max_images=args.max_images,
        max_pixels=args.max_pixels,
        strict=args.strict,
        overwrite=args.overwrite,
        max_shard_mb=args.max_shard_mb,
        license=args.license,
        prices=load_prices(args.prices) if args.prices else dict(DEFAULT_PRICES),
        progress=not args.no_progress,
        command=f"{PROG} {shlex.join(sys.argv[1:] if argv is None else argv)}",
    )
    try:
        result = export_dataset(args.run_dir, args.out_dir, config)
    except ExportIncompleteError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)  # noqa: T201
        return 1
    report(result)
    if args.push_to_hub is None:
        return 0
    return push(result.out_dir, args.push_to_hub, args)


def report(result: ExportResult) -> None:
    s = result.summary
    episodes = s.configs["episodes"].num_rows
    print(f"exported {episodes} episode(s) of {len(s.runs)} run folder(s) to {result.out_dir}")  # noqa: T201
    for name, written in s.configs.items():
        size = written.download_size / 1e6
        print(f"  {name}: {written.num_rows} rows, {size:,.1f} MB in {len(written.files)} file(s)")  # noqa: T201
    if "steps" not in s.configs:
        print("  no steps configuration: no step carried its prompt; pass --format NAME")  # noqa: T201
    if s.left_out:
        print(f"  left out {len(s.left_out)} (incomplete in the run):")  # noqa: T201
        for item in s.left_out:
            print(f"    {item}")  # noqa: T201


def push(out_dir: Path, repo_id: str, args: argparse.Namespace) -> int:
    from huggingface_hub.errors import HfHubHTTPError

    try:
        url = push_dataset(out_dir, repo_id, private=not args.public, token=args.token)
    except HfHubHTTPError as exc:
        print(  # noqa: T201
            f"{PROG}: error: the Hub refused the push ({exc}); the export is in {out_dir}: "
            f"run `{PROG} push {out_dir} {repo_id}` to resume (what is there is not sent again)",
            file=sys.stderr,
        )
        return 1
    print(url)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a terminal shows for a captured stream of progress bars and log lines."""

from __future__ import annotations

import re


def terminal_lines(stream: str) -> list[str]:
    """What a terminal shows for ``stream``: a carriage return overwrites the line."""
    shown = []
    for raw in stream.split("\n"):
        line: list[str] = []
        for segment in raw.split("\r"):
            line[: len(segment)] = segment
        shown.append("".join(line).rstrip())
    return shown


def check_one_bar_per_job(
    stderr: str, jobs: list[str], log_line: str = r"(INFO|WARNING) \S+: "
) -> None:
    """Every log line (matches ``log_line``) on a line of its own, and one bar line per
    job: a log record written while a bar is drawn must not leave a bar fragment behind."""
    lines = terminal_lines(stderr)
    for job in jobs:
        bars = [li for li in lines if li.startswith(f"{job}: ") and "%|" in li]
        assert len(bars) == 1, bars
    for li in lines:
        assert "%|" not in li or not re.search(log_line, li), li

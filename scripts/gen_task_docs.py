"""Write each task's docs page from its package docstring.

    python scripts/gen_task_docs.py                     # every task with a doc, into docs/tasks/
    python scripts/gen_task_docs.py --task todo --out my_docs/

The page is the docstring (``TaskSpec.doc``) plus the spaces every task shares
(``uirl_gym.tasks.docs``); ``tests/test_task_contract.py`` fails when a checked-in page
is not what this script writes.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from uirl_gym.tasks import TASKS
from uirl_gym.tasks.docs import task_page

REPO = Path(__file__).resolve().parents[1]
logger = logging.getLogger("gen_task_docs")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", action="append", help="default: every task that has a doc")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "tasks", help="folder")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = args.task or sorted(n for n, s in TASKS.items() if s.doc)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = args.out / f"{name}.md"
        path.write_text(task_page(TASKS[name]), "utf-8")
        logger.info("wrote %s", path)


if __name__ == "__main__":
    main()

"""Write each task's docs page from its package docstring.

    python scripts/gen_task_docs.py                     # every task with a doc, into docs/tasks/
    python scripts/gen_task_docs.py --task todo --out my_docs/

The page is the docstring (``TaskSpec.doc``) plus the spaces every task shares
(``uirl_gym.task_docs``); ``tests/test_task_registry.py`` fails when a checked-in page
is not what this script writes.
"""

from __future__ import annotations

from pathlib import Path

from uirl_gym.task_docs import main

if __name__ == "__main__":
    main(default_out=Path(__file__).resolve().parents[1] / "docs" / "tasks")

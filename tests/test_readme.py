"""The README's first snippet runs, and its comments show what it really prints."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def first_python_block() -> str:
    readme = (ROOT / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", readme, re.S)
    assert match, "README.md has no python block"
    return match[1]


def shown(value: Any, comment: str) -> bool:
    """``comment`` shows ``value``: a quoted string may end in "...", anything else starts
    with the value's text (a note may follow it)."""
    comment = comment.strip()
    if comment.startswith('"'):
        prefix = comment.strip('"').removesuffix("...").rstrip()
        return isinstance(value, str) and value.startswith(prefix)
    return comment.startswith(str(value))


def test_readme_snippet_output_is_real() -> None:
    namespace: dict[str, Any] = {}
    checked = 0
    try:
        for line in first_python_block().splitlines():
            code, _, comment = line.partition("  #")
            tree = ast.parse(code)
            if comment and len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
                value = eval(code, namespace)  # noqa: S307 - the README's own code
                assert shown(value, comment), f"README shows {comment.strip()!r}, got {value!r}"
                checked += 1
            else:
                exec(line, namespace)  # noqa: S102 - the README's own code
    finally:
        if "env" in namespace:
            namespace["env"].close()
    assert checked >= 2  # the screenshot's shape and the instruction

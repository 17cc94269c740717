"""Model formats: prompt building and output parsing per model family (no torch here).

>>> from uirl_agents.formats import get_format
>>> fmt = get_format("ui-tars")
>>> fmt.parse("Thought: open it\\nAction: click(start_box='(644,406)')").action.to_dict()
{'type': 'left_click', 'x': 640, 'y': 400}
"""

from __future__ import annotations

import difflib

from .base import (
    FormatConfig,
    FormatParseError,
    ModelFormat,
    ParsedOutput,
    ScreenGeometry,
    smart_resize,
)
from .qwen25vl import Qwen25VLFormat
from .ui_tars import UITarsFormat

FORMATS: dict[str, type[ModelFormat]] = {
    UITarsFormat.name: UITarsFormat,
    Qwen25VLFormat.name: Qwen25VLFormat,
}


def get_format(name: str, config: FormatConfig | None = None) -> ModelFormat:
    """Build the format registered as ``name`` ("ui-tars", "qwen2.5-vl").

    Args:
        name: the format's registry name.
        config: image sizing; the default keeps a 1280x800 screen at about native scale.

    Raises:
        ValueError: unknown name (with the closest registered name).
    """
    if name not in FORMATS:
        close = difflib.get_close_matches(name, FORMATS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown format {name!r}; registered: {sorted(FORMATS)}.{hint}")
    return FORMATS[name](config)


__all__ = [
    "FORMATS",
    "FormatConfig",
    "FormatParseError",
    "ModelFormat",
    "ParsedOutput",
    "Qwen25VLFormat",
    "ScreenGeometry",
    "UITarsFormat",
    "get_format",
    "smart_resize",
]

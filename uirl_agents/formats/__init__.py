"""Model formats: prompt building and output parsing per model family (no torch here).

>>> from uirl_agents.formats import get_format
>>> fmt = get_format("ui-tars")
>>> fmt.parse("Thought: open it\\nAction: click(start_box='(644,406)')").action.to_dict()
{'type': 'left_click', 'x': 640, 'y': 400}
"""

from __future__ import annotations

import difflib
import re

from .base import (
    FormatConfig,
    FormatParseError,
    ModelFormat,
    ParsedOutput,
    ScreenGeometry,
    smart_resize,
)
from .generic import CoordinatesFormat, JsonFormat, TextFormat
from .page import AXTreeFormat, SetOfMarksFormat
from .qwen25vl import Qwen25VLFormat
from .ui_tars import UITarsFormat

FORMATS: dict[str, type[ModelFormat]] = {
    f.name: f
    for f in (
        UITarsFormat,
        Qwen25VLFormat,
        TextFormat,
        JsonFormat,
        CoordinatesFormat,
        AXTreeFormat,
        SetOfMarksFormat,
    )
}


def get_format(name: str, config: FormatConfig | None = None) -> ModelFormat:
    """Build the format registered as ``name`` ("ui-tars", "qwen2.5-vl", "text", "json",
    "coordinates"; "axtree", "som": the page as text, actions by element).

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


# Names a UI-TARS checkpoint goes by: "UI-TARS-1.5-7B", "ui_tars", "uitars15".
_UI_TARS_NAME = re.compile(r"ui[-_ ]?tars", re.IGNORECASE)
_QWEN_VL_NAME = re.compile(r"qwen2(?:\.5|_5)?[-_ ]?vl", re.IGNORECASE)
QWEN_VL_MODEL_TYPES = ("qwen2_5_vl", "qwen2_vl")


def infer_format(name: str, model_type: str | None = None, config_text: str = "") -> str:
    """The format a model speaks, from its name and config, when none is given.

    UI-TARS is fine-tuned from Qwen2.5-VL and shares its ``model_type``, so the UI-TARS
    check (the name or the config mentions UI-TARS) comes first; any other
    Qwen2-VL / Qwen2.5-VL model speaks the Qwen2.5-VL format; any other model has no
    GUI syntax of its own and gets the generic ``text`` format.

    Args:
        name: the checkpoint path, Hub id or served model name.
        model_type: the config's ``model_type`` (None: unknown, e.g. a served model).
        config_text: the raw ``config.json`` (searched for a UI-TARS mention).

    >>> infer_format("ByteDance-Seed/UI-TARS-1.5-7B", "qwen2_5_vl")
    'ui-tars'
    >>> infer_format("/models/tiny", "qwen2_5_vl")
    'qwen2.5-vl'
    >>> infer_format("HuggingFaceTB/SmolVLM-256M-Instruct", "idefics3")
    'text'
    """
    if _UI_TARS_NAME.search(name) or _UI_TARS_NAME.search(config_text):
        return UITarsFormat.name
    if model_type in QWEN_VL_MODEL_TYPES or (model_type is None and _QWEN_VL_NAME.search(name)):
        return Qwen25VLFormat.name
    return TextFormat.name


__all__ = [
    "AXTreeFormat",
    "FORMATS",
    "FormatConfig",
    "FormatParseError",
    "CoordinatesFormat",
    "JsonFormat",
    "ModelFormat",
    "ParsedOutput",
    "Qwen25VLFormat",
    "ScreenGeometry",
    "SetOfMarksFormat",
    "TextFormat",
    "UITarsFormat",
    "get_format",
    "infer_format",
    "smart_resize",
]

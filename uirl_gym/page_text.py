"""The page as text an LLM reads, from what ``GET /page`` answers (issue 41).

- :func:`axtree_text`: the accessibility tree, one line per node, indented by depth:
  ``[12] button 'Submit', focused``; ``[bid]`` names the element an action by element
  takes; nodes a person cannot tell apart from their parent (ignored nodes, nameless
  ``generic`` boxes, text repeated from the parent's name) are left out, their children
  kept.
- :func:`html_text`: the DOM as pruned HTML, with each element's ``bid`` first and the
  attributes that say what an element is and holds (no scripts, styles, or wrappers
  without meaning).
- :func:`element_list`: each rendered element's box (screen pixels), visible fraction,
  whether it takes clicks, and set-of-marks membership, as a sequence.
- :func:`mark_screenshot`: the set-of-marks screenshot: each marked element boxed and
  numbered with its bid.

Texts are cut at a line boundary to at most ``limit`` characters, and the cut is said
in its last line (:data:`CUT_MARKER`), so that an agent knows there is more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CUT_MARKER",
    "DEFAULT_TEXT_LIMIT",
    "axtree_text",
    "element_list",
    "html_text",
    "mark_screenshot",
]

# Characters of a text observation: about 4,000 tokens, what a 1280x800 task page takes
# (SimpleDataEntry's sheet of ~100 rows is ~12,000 characters as a tree).
DEFAULT_TEXT_LIMIT = 16_000
CUT_MARKER = "[... {lines} more lines cut: this text stops at {limit} characters]"

# Accessibility properties worth a word: a state, or a value the element holds.
_SHOWN_STATES = ("focused", "disabled", "required", "selected", "busy", "modal")
_SHOWN_VALUES = ("checked", "pressed", "expanded", "valuemin", "valuemax", "autocomplete")
_SKIPPED_ROLES = frozenset({"InlineTextBox", "LineBreak", "none", "Ignored"})


def axtree_text(nodes: Sequence[Mapping[str, Any]], limit: int = DEFAULT_TEXT_LIMIT) -> str:
    """The accessibility tree ``nodes`` (``GET /page``'s ``axtree["nodes"]``) as text."""
    by_id = {node["nodeId"]: node for node in nodes}
    lines: list[str] = []
    if not nodes:
        return ""
    # Depth-first from the root, iteratively (a deep page must not hit the recursion limit).
    # A nameless box left out passes its bid to its only child: a menu item that is a
    # <div> around its text shows as "[57] StaticText 'Archive'", clickable by its bid.
    stack: list[tuple[Mapping[str, Any], int, str, str | None]] = [(nodes[0], 0, "", None)]
    while stack:
        node, depth, parent_name, carried = stack.pop()
        line = _ax_line(node, parent_name, carried)
        name = str(node.get("name", {}).get("value", ""))
        child_depth = depth
        if line is not None:
            lines.append("\t" * depth + line)
            child_depth = depth + 1
        children = [by_id[c] for c in node.get("childIds", []) if c in by_id]
        passed = None
        if line is None and len(children) == 1:
            passed = node.get("browsergym_id") or carried
        for child in reversed(children):
            stack.append((child, child_depth, name if line is not None else parent_name, passed))
    return _cut(lines, limit)


def _ax_line(node: Mapping[str, Any], parent_name: str, carried: str | None) -> str | None:
    if node.get("ignored"):
        return None
    role = str(node.get("role", {}).get("value", ""))
    if role in _SKIPPED_ROLES:
        return None
    name = str(node.get("name", {}).get("value", ""))
    # (text first: most of a page's nodes, and its rule needs no properties)
    if role == "StaticText" and (not name.strip() or name in parent_name):
        return None
    properties = {
        p["name"]: p.get("value", {}).get("value")
        for p in node.get("properties", [])
        if "name" in p
    }
    bid = node.get("browsergym_id")
    if bid is None and role == "StaticText":
        bid = carried
    shown = [p for p in _SHOWN_STATES if properties.get(p) is True]
    shown += [f"{p}={properties[p]}" for p in _SHOWN_VALUES if properties.get(p) not in (None, "")]
    value = node.get("value", {}).get("value")
    if role == "generic" and not name and not shown and value in (None, ""):
        return None
    line = f"[{bid}] {role}" if bid is not None else role
    if name:
        line += f" {_quoted(name)}"
    if value not in (None, ""):
        line += f" value={_quoted(str(value))}"
    return line + "".join(f", {s}" for s in shown)


def _quoted(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 200 else text[:199] + "…")


# Tags whose content no agent reads, and wrappers printed only for what they hold.
_DROPPED_TAGS = frozenset(
    {"SCRIPT", "STYLE", "LINK", "META", "HEAD", "NOSCRIPT", "TEMPLATE", "BR", "#comment"}
)
_WRAPPERS = frozenset({"DIV", "SPAN", "I", "B", "P", "HTML", "BODY", "#document", "SECTION"})
_KEPT_ATTRIBUTES = (
    "bid", "id", "type", "name", "value", "placeholder", "aria-label", "role", "title",
    "alt", "href", "for", "checked", "selected", "disabled", "readonly", "contenteditable",
)  # fmt: skip


def html_text(snapshot: Mapping[str, Any], limit: int = DEFAULT_TEXT_LIMIT) -> str:
    """CDP's DOM snapshot (``GET /page``'s ``dom``) as pruned HTML: one element or text
    per line, indented by depth; the values fields hold now (not their first ones)."""
    strings: list[str] = snapshot["strings"]
    documents = snapshot["documents"]
    if not documents:
        return ""
    lines: list[str] = []
    _document_lines(documents, 0, strings, 0, lines)
    return _cut(lines, limit)


def _document_lines(
    documents: Sequence[Mapping[str, Any]],
    index: int,
    strings: list[str],
    depth: int,
    lines: list[str],
) -> None:
    nodes = documents[index]["nodes"]
    parents: list[int] = nodes["parentIndex"]
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        children.setdefault(parent, []).append(i)
    current = _rare_strings(nodes.get("inputValue"), strings)
    checked = set(nodes.get("inputChecked", {}).get("index", []))
    selected = set(nodes.get("optionSelected", {}).get("index", []))
    frames = dict(
        zip(
            nodes.get("contentDocumentIndex", {}).get("index", []),
            nodes.get("contentDocumentIndex", {}).get("value", []),
            strict=True,
        )
    )

    def name_of(i: int) -> str:
        return strings[nodes["nodeName"][i]] if nodes["nodeName"][i] >= 0 else ""

    # Elements with a layout box are rendered; one without (display: none) shows nothing,
    # nor does anything inside it.
    rendered = set(documents[index].get("layout", {}).get("nodeIndex", []))
    stack: list[tuple[int, int]] = [(root, depth) for root in reversed(children.get(-1, []))]
    while stack:
        i, level = stack.pop()
        tag = name_of(i).upper()
        node_type = nodes["nodeType"][i]
        if tag in _DROPPED_TAGS or node_type == 8:
            continue
        if node_type in (1, 3) and i not in rendered:
            continue
        if node_type == 3:  # text
            value = nodes["nodeValue"][i]
            text = " ".join(strings[value].split()) if value >= 0 else ""
            if text:
                lines.append("\t" * level + text)
            continue
        attributes = _attributes(nodes["attributes"][i], strings)
        if i in current:
            attributes["value"] = current[i]
        for flag, holders in (("checked", checked), ("selected", selected)):
            attributes.pop(flag, None)
            if i in holders:
                attributes[flag] = ""
        kept = {k: v for k, v in attributes.items() if k in _KEPT_ATTRIBUTES}
        inner = level
        if node_type == 1 and not (tag in _WRAPPERS and set(kept) <= {"bid"}):
            shown = " ".join(
                k if v == "" and k != "value" else f'{k}="{_attribute(v)}"'
                for k, v in sorted(kept.items(), key=lambda kv: kv[0] != "bid")
            )
            lines.append("\t" * level + f"<{tag.lower()}{' ' + shown if shown else ''}>")
            inner = level + 1
        if i in frames:
            _document_lines(documents, frames[i], strings, inner, lines)
        stack.extend((c, inner) for c in reversed(children.get(i, [])))


def _rare_strings(data: Mapping[str, Any] | None, strings: list[str]) -> dict[int, str]:
    if not data:
        return {}
    return {
        i: strings[v] if v >= 0 else ""
        for i, v in zip(data.get("index", []), data.get("value", []), strict=True)
    }


def _attributes(flat: Sequence[int], strings: list[str]) -> dict[str, str]:
    return {
        strings[flat[k]]: strings[flat[k + 1]] if flat[k + 1] >= 0 else ""
        for k in range(0, len(flat) - 1, 2)
    }


def _attribute(value: str) -> str:
    value = " ".join(value.split()).replace('"', "&quot;")
    return value if len(value) <= 200 else value[:199] + "…"


def _cut(lines: list[str], limit: int) -> str:
    """``lines`` joined, cut at a line boundary to at most ``limit`` characters (the
    marker counted), with the marker saying how many lines were cut."""
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    kept: list[str] = []
    size = 0
    for line in lines:
        if size + len(line) + 1 > limit:
            break
        kept.append(line)
        size += len(line) + 1
    while True:
        marker = CUT_MARKER.format(lines=len(lines) - len(kept), limit=limit)
        if not kept or size + len(marker) <= limit:
            return "\n".join([*kept, marker])[:limit] if kept else marker[:limit]
        size -= len(kept.pop()) + 1


def element_list(elements: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Each rendered element (one with a box) of ``GET /page``'s ``elements``, in bid
    order, as ``{"bid", "bbox": float32 [x, y, width, height] (screen pixels),
    "visibility": float32 0..1, "clickable": 0|1, "set_of_marks": 0|1}``."""
    rows = []
    for bid, props in elements.items():
        box = props.get("bbox")
        if box is None:
            continue
        rows.append(
            {
                "bid": bid,
                "bbox": np.asarray(box, dtype=np.float32),
                "visibility": np.asarray(props.get("visibility") or 0.0, dtype=np.float32),
                "clickable": int(bool(props.get("clickable"))),
                "set_of_marks": int(bool(props.get("set_of_marks"))),
            }
        )
    return tuple(rows)


def mark_screenshot(
    screenshot: np.ndarray, elements: Mapping[str, Mapping[str, Any]]
) -> np.ndarray:
    """A copy of ``screenshot`` with each set-of-marks element boxed and its bid written
    at the box's top-left corner (white on a dark tag, readable on any page)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.fromarray(screenshot)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    height, width = screenshot.shape[:2]
    for bid, props in elements.items():
        box = props.get("bbox")
        if not props.get("set_of_marks") or box is None:
            continue
        x, y, w, h = box
        x0, y0 = max(0.0, x), max(0.0, y)
        x1, y1 = min(width - 1.0, x + w), min(height - 1.0, y + h)
        if x1 <= x0 or y1 <= y0:
            continue
        draw.rectangle((x0, y0, x1, y1), outline=(255, 0, 64), width=2)
        left, top, right, bottom = draw.textbbox((0, 0), bid, font=font)
        tag_w, tag_h = right - left + 4, bottom - top + 4
        tx, ty = x0, max(0.0, y0 - tag_h) if y0 >= tag_h else y0
        draw.rectangle((tx, ty, tx + tag_w, ty + tag_h), fill=(160, 0, 40))
        draw.text((tx + 2 - left, ty + 2 - top), bid, fill=(255, 255, 255), font=font)
    return np.asarray(image, dtype=np.uint8)

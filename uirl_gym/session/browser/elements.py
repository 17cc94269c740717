"""The page as text, and actions by element: the session's side of issue 41.

Observing (:func:`observe`): one script marks every element of every same-origin frame
with a ``bid`` attribute, as BrowserGym does (so an agent written for it finds what it
expects in the DOM), and computes each element's box in screen pixels, visible fraction
and set-of-marks membership at once (frames are drawn on demand here: BrowserGym's
IntersectionObserver would never report). Then the accessibility tree of each frame
(``Accessibility.getFullAXTree``) and the DOM (``DOMSnapshot.captureSnapshot``) are
taken together; the tree's nodes get their element's bid by joining
``backendDOMNodeId`` with the snapshot's ``backendNodeId`` (no ARIA attribute is written
into the page, unlike BrowserGym, and none has to be cleaned up), and each frame's tree
hangs under its iframe's node.

Acting (:func:`perform`): an action on an element becomes the same input events as a
person's: the element is scrolled into view when it is not wholly visible, and the
pointer acts at the centre of its visible part; ``fill`` focuses the field, selects its
value and types the new one as keys. A bid that is unknown, from an earlier page,
hidden, covered or disabled is refused with :class:`ElementActionError`, which says
which; the page is left as it was.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from importlib import resources
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.session.browser.tabs import Tab, js_call

__all__ = ["ElementActionError", "PAGE_PARTS", "observe", "perform"]

# What a text observation can ask the page for (``GET /page``'s ``include``);
# ``dom_elements`` only of a MiniWoB++ page (its own ``core.getDOMInfo()``).
PAGE_PARTS = ("axtree", "dom", "elements", "dom_elements")
# The parts made from CDP's DOM snapshot (the tree's bids and ``clickable`` come from it).
_SNAPSHOT_PARTS = frozenset({"axtree", "dom", "elements"})
# MiniWoB++'s DOM as its own pages give it (the ``miniwob`` package reads the same call).
_MINIWOB_DOM = (
    "typeof core === 'object' && core !== null && typeof core.getDOMInfo === 'function' "
    "? core.getDOMInfo() : null"
)
# Fields of the accessibility tree's nodes an agent never reads: left out unless the
# whole of CDP's answer is asked for (``full``; BrowserGym's ``axtree_object``).
_HEAVY_AX_FIELDS = ("chromeRole",)

_SCRIPT = resources.files("uirl_gym.session.browser").joinpath("elements.js").read_text()


class ElementActionError(ValueError):
    """An action on an element that cannot be done: the message says why."""


_OBJECT = 'window[Symbol.for("uirl.elements")]'


async def _call(tab: Tab, function: str, *args: Any) -> Any:
    """The answer of the script's ``function`` in the page. The script (14 kB to parse)
    goes with the call only to a document that lacks it: a new page (a navigation
    brings a new window), answered ``undefined`` by the short call. Every function
    answers an object."""
    call = js_call(f"{_OBJECT}.{function}", *args)
    answer = await tab.eval(f"{_OBJECT} && {call}")
    if answer is None:
        answer = await tab.eval(f"{_SCRIPT};\n{call}")
    return answer


async def observe(tab: Tab, episode: int, include: frozenset[str], full: bool) -> dict[str, Any]:
    """The page as text: ``url``, ``title``, ``focused_element_bid``, and what
    ``include`` names of :data:`PAGE_PARTS` (``axtree``: ``{"nodes": [...]}`` with each
    element's bid in ``browsergym_id``; ``dom``: CDP's snapshot; ``elements``: bid ->
    ``{"bbox", "visibility", "clickable", "set_of_marks"}``). ``full`` keeps every field
    CDP sends (BrowserGym's objects); otherwise the accessibility tree leaves out
    ``name.sources`` and text boxes, which no agent reads. ``dom_elements``: a MiniWoB++
    page's ``core.getDOMInfo()`` (the tree the ``miniwob`` package's observation is made
    of; it writes its ``data-wob_ref`` attributes into the page, as there), taken first so
    that every part sees the same page.

    Raises:
        RuntimeError: ``dom_elements`` asked of a page that is not a MiniWoB++ page.
    """
    miniwob_dom = None
    if "dom_elements" in include:
        miniwob_dom = await tab.eval(_MINIWOB_DOM)
        if miniwob_dom is None:
            raise RuntimeError(
                "dom_elements: the page has no core.getDOMInfo(); only MiniWoB++ pages give "
                "MiniWoB++'s DOM (ask for axtree, dom or elements)"
            )
    marked = await _call(tab, "mark", episode, "elements" in include)
    snapshot_wanted = bool(include & _SNAPSHOT_PARTS)
    snapshot_task = (
        asyncio.ensure_future(_snapshot(tab, rects="dom" in include)) if snapshot_wanted else None
    )
    axtrees: list[dict[str, Any]] = []
    if "axtree" in include:
        axtrees = await _frame_axtrees(tab)
    snapshot = await snapshot_task if snapshot_task is not None else None
    page: dict[str, Any] = {
        "url": marked["url"],
        "title": marked["title"],
        "focused_element_bid": marked["focused"],
    }
    if miniwob_dom is not None:
        page["dom_elements"] = miniwob_dom
    if snapshot is None:
        return page
    bids, frames_of_iframes, clickable = _snapshot_index(snapshot)
    if "axtree" in include:
        page["axtree"] = {"nodes": _merged_axtree(axtrees, bids, frames_of_iframes, full)}
    if "dom" in include:
        page["dom"] = snapshot
    if "elements" in include:
        page["elements"] = {
            bid: {
                "bbox": box,
                "visibility": float(visibility),
                "clickable": bid in clickable,
                "set_of_marks": bool(som),
            }
            for bid, (box, visibility, som) in marked["props"].items()
        }
    return page


async def _snapshot(tab: Tab, rects: bool) -> dict[str, Any]:
    return await tab.cdp.send(
        "DOMSnapshot.captureSnapshot",
        {"computedStyles": [], "includeDOMRects": rects, "includePaintOrder": rects},
        session_id=tab.session_id,
    )


async def _frame_axtrees(tab: Tab) -> list[dict[str, Any]]:
    """Each frame's accessibility tree, the top frame's first."""
    tree = (await tab.cdp.send("Page.getFrameTree", {}, session_id=tab.session_id))["frameTree"]
    frame_ids: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        frame_ids.append(node["frame"]["id"])
        stack.extend(reversed(node.get("childFrames", [])))
    answers = await asyncio.gather(
        *(
            tab.cdp.send("Accessibility.getFullAXTree", {"frameId": f}, session_id=tab.session_id)
            for f in frame_ids
        )
    )
    return [
        {"frameId": f, "nodes": a.get("nodes", [])} for f, a in zip(frame_ids, answers, strict=True)
    ]


def _snapshot_index(snapshot: dict[str, Any]) -> tuple[dict[int, str], dict[int, str], set[str]]:
    """From CDP's DOM snapshot: backend node id -> bid; an iframe's backend node id -> the
    frame id of the document it holds; the bids Chromium says respond to clicks."""
    strings: list[str] = snapshot["strings"]
    try:
        bid_name = strings.index("bid")
    except ValueError:
        bid_name = -1
    bids: dict[int, str] = {}
    frames: dict[int, str] = {}
    clickable: set[str] = set()
    documents = snapshot["documents"]
    for document in documents:
        nodes = document["nodes"]
        backend = nodes.get("backendNodeId", [])
        attributes = nodes.get("attributes", [])
        node_bid: dict[int, str] = {}
        for i, attrs in enumerate(attributes):
            for k in range(0, len(attrs) - 1, 2):
                if attrs[k] == bid_name:
                    node_bid[i] = strings[attrs[k + 1]]
                    bids[backend[i]] = node_bid[i]
                    break
        for i in nodes.get("isClickable", {}).get("index", []):
            if i in node_bid:
                clickable.add(node_bid[i])
        content = nodes.get("contentDocumentIndex", {})
        for i, child in zip(content.get("index", []), content.get("value", []), strict=True):
            frame = documents[child].get("frameId", -1)
            if frame >= 0:
                frames[backend[i]] = strings[frame]
    return bids, frames, clickable


def _merged_axtree(
    axtrees: list[dict[str, Any]],
    bids: dict[int, str],
    frames_of_iframes: dict[int, str],
    full: bool,
) -> list[dict[str, Any]]:
    """The frames' trees as one list (the top frame's root first), each frame's root a
    child of its iframe's node, each element's node carrying its ``browsergym_id``."""
    roots = {tree["frameId"]: tree["nodes"][0]["nodeId"] for tree in axtrees if tree["nodes"]}
    merged: list[dict[str, Any]] = []
    for tree in axtrees:
        # The nodes are changed in place: CDP's answer, parsed for this call alone.
        for node in tree["nodes"]:
            role = node.get("role")
            if not full:
                if role is not None and role.get("value") == "InlineTextBox":
                    continue
                for field in _HEAVY_AX_FIELDS:
                    node.pop(field, None)
                name = node.get("name")
                if name is not None:
                    name.pop("sources", None)
                children = node.get("childIds")
                if children:  # (text boxes have negative ids)
                    node["childIds"] = [c for c in children if c[0] != "-"]
            if "childIds" not in node:
                node["childIds"] = []
            if role is None:
                role = node["role"] = {"type": "role", "value": "none"}
            backend = node.get("backendDOMNodeId")
            bid = bids.get(backend)
            if bid is not None:
                node["browsergym_id"] = bid
            if backend in frames_of_iframes and role.get("value") == "Iframe":
                child_root = roots.get(frames_of_iframes[backend])
                if child_root is not None:
                    node["childIds"] = [*node["childIds"], child_root]
            merged.append(node)
    return merged


async def perform(tab: Tab, action: Action, screen: tuple[int, int]) -> Action | None:
    """Do what an action on an element needs inside the page, and return the pixel
    action that does the rest with real input events (None: nothing left to send).

    Raises:
        ElementActionError: the element cannot take the action (the message says why).
    """
    t = action.type
    if t is ActionType.SELECT_OPTION:
        _check(await _call(tab, "select", action.bid, action.text))
        return None
    if t is ActionType.FOCUS:
        _check(await _call(tab, "focus", action.bid))
        return None
    if t is ActionType.FILL:
        filled = _check(await _call(tab, "fill", action.bid, action.text or ""))
        if not filled.get("typed"):
            return None
        # The value is selected: the keys replace it (Delete clears it, as Playwright's).
        if action.text:
            return Action(ActionType.TYPE, text=action.text)
        return Action(ActionType.KEYS, keys="Delete")
    if t is ActionType.KEYS:
        _check(await _call(tab, "focus", action.bid))
        return dataclasses.replace(action, bid=None)
    fields: dict[str, Any] = {"bid": None, "end_bid": None}
    if action.bid is not None:
        fields["x"], fields["y"] = await _point(
            tab, action.bid, screen, clicks=t is not ActionType.MOUSE_MOVE
        )
    if action.end_bid is not None:
        fields["end_x"], fields["end_y"] = await _point(tab, action.end_bid, screen, clicks=False)
    return dataclasses.replace(action, **fields)


async def _point(tab: Tab, bid: str, screen: tuple[int, int], clicks: bool) -> tuple[int, int]:
    """The screen pixel to act on an element at."""
    found = _check(await _call(tab, "target", bid, True))
    if clicks and found.get("disabled"):
        raise ElementActionError(f"bid {bid!r}: the element is disabled")
    x, y = math.floor(found["x"]), math.floor(found["y"])
    if not (0 <= x < screen[0] and 0 <= y < screen[1]):
        raise ElementActionError(
            f"bid {bid!r}: its visible part's centre ({found['x']:.0f}, {found['y']:.0f}) is "
            f"off the {screen[0]}x{screen[1]} screen"
        )
    return x, y


def _check(answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise ElementActionError(f"the page answered {json.dumps(answer)[:200]}")
    if "error" in answer:
        raise ElementActionError(str(answer["error"]))
    return answer

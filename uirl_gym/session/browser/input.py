"""The pointer and keyboard of a tab: everything an action sends to the page.

What it does the way Playwright does, so that the page sees the same events:
- keys: Playwright's US layout (``keys.py``): ``Input.dispatchKeyEvent`` with the
  same key, code, key codes and text; characters outside the layout are inserted
  (``Input.insertText``); a typed text's key events are sent without waiting for each
  answer (Chromium queues them; the page gets the same events in the same order);
- mouse: ``mouseMoved`` then ``mousePressed``/``mouseReleased`` per click count;
  wheel at the pointer's place.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import orjson

from uirl_gym.actions import (
    CDP_KEYS,
    DRAG_MOVE_STEPS,
    HOLDING_ACTIONS,
    SCROLL_NOTCH_PX,
    TYPED_KEYS,
    Action,
    ActionType,
    held_modifiers,
    key_sequence,
    typed_chunks,
)
from uirl_gym.session.browser.capture import begin_frame, settle_frame
from uirl_gym.session.browser.cdp import CdpError
from uirl_gym.session.browser.keys import LAYOUT, MODIFIERS, describe, modifier_mask
from uirl_gym.session.browser.tabs import Background, Tab, js_call

# Input Chromium delivers to the page with the next frame (rAF-aligned): under frame
# control the server must draw frames until the event is taken.
_FRAME_ALIGNED_MOUSE_EVENTS = frozenset({"mouseMoved"})
# A wheel notch under frames on demand: Chromium's own wheel path never finishes a frame
# when the scroller under the pointer holds a sticky table header (measured: Chromium
# 156's headless shell, ``beginFrame`` unanswered), so the page gets what a wheel gives
# it: a cancelable ``wheel`` event at the pointer, then the whole delta scrolls the
# innermost element that can scroll that way and lets the user scroll it (Chromium's
# wheel latching), else the page.
_WHEEL_JS = """(({x, y, dx, dy, ctrlKey, shiftKey, altKey, metaKey}) => {
  const target = document.elementFromPoint(x, y) || document.documentElement;
  const wheel = new WheelEvent("wheel", {bubbles: true, cancelable: true, composed: true,
    clientX: x, clientY: y, screenX: x, screenY: y, deltaX: dx, deltaY: dy, deltaMode: 0,
    view: window, ctrlKey, shiftKey, altKey, metaKey});
  if (!target.dispatchEvent(wheel)) return "prevented";
  const root = document.scrollingElement || document.documentElement;
  const userScrolls = (el, axis) => {
    if (el === root) {
      const html = getComputedStyle(document.documentElement)[axis];
      const body = document.body ? getComputedStyle(document.body)[axis] : "visible";
      return (html === "visible" ? body : html) !== "hidden" && html !== "clip";
    }
    return ["auto", "scroll", "overlay"].includes(getComputedStyle(el)[axis]);
  };
  const room = (el) => ({
    x: dx < 0 ? el.scrollLeft : el.scrollWidth - el.clientWidth - el.scrollLeft,
    y: dy < 0 ? el.scrollTop : el.scrollHeight - el.clientHeight - el.scrollTop,
  });
  for (let el = target; el; el = el.parentElement || (el !== root ? root : null)) {
    const r = room(el);
    const xs = dx !== 0 && r.x >= 1 && userScrolls(el, "overflowX");
    const ys = dy !== 0 && r.y >= 1 && userScrolls(el, "overflowY");
    if (xs || ys) {
      el.scrollBy({left: xs ? dx : 0, top: ys ? dy : 0, behavior: "instant"});
      return "scrolled";
    }
    if (el === root) break;
  }
  return "nothing to scroll";
})"""
# Whether a page point is on a scrollbar: the viewport's (no element there), or the
# part of an element's border box outside its client area and borders.
_ON_SCROLLBAR_JS = """((x, y) => {
  const el = document.elementFromPoint(x, y);
  if (!el) return x >= 0 && y >= 0 && x < innerWidth && y < innerHeight;
  const box = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  const left = box.left + el.clientLeft, top = box.top + el.clientTop;
  const right = box.right - parseFloat(style.borderRightWidth);
  const bottom = box.bottom - parseFloat(style.borderBottomWidth);
  const inX = x >= left && x < right, inY = y >= top && y < bottom;
  const vertical = el.offsetWidth - el.clientWidth - el.clientLeft
    - parseFloat(style.borderRightWidth) > 0;
  const horizontal = el.offsetHeight - el.clientHeight - el.clientTop
    - parseFloat(style.borderBottomWidth) > 0;
  return (vertical && inY && x >= left + el.clientWidth && x < right) ||
    (horizontal && inX && y >= top + el.clientHeight && y < bottom);
})"""
_BUTTON_BITS = {"left": 1, "right": 2, "middle": 4}


class Input:
    """The pointer and keyboard of one tab.

    Attributes:
        tab: the tab they act on.
        mouse: where the pointer is (screen pixels).

    Methods:
        act: perform a pointer or keyboard action (its held modifiers around it).
        leave: move the pointer off the page.
    """

    def __init__(self, tab: Tab, background: Background) -> None:
        self.tab = tab
        self.mouse = (0, 0)
        self._held: set[str] = set()  # modifiers a pointer action holds down
        self._background = background

    async def act(self, action: Action) -> None:
        """Send an action's events (a validated action; ``screenshot`` and ``finish``
        send none), without waiting for the page to settle."""
        t = action.type
        held = held_modifiers(action.keys) if action.keys and t in HOLDING_ACTIONS else []
        try:
            # A person's shift+click: the modifier's keydown, the mouse events with its
            # flag (``_dispatch`` adds it), then its keyup.
            for key in held:
                await self._key_event("down", key, self._held, repeat=False)
            await self._perform(action)
        finally:
            for key in reversed(held):
                await self._key_event("up", key, self._held, repeat=False)

    async def _perform(self, action: Action) -> None:
        t = action.type
        if t is ActionType.MOUSE_MOVE:
            await self._mouse_move(*action.point)
        elif t is ActionType.LEFT_CLICK:
            await self._click(*action.point, "left", 1)
        elif t is ActionType.RIGHT_CLICK:
            await self._click(*action.point, "right", 1)
        elif t is ActionType.DOUBLE_CLICK:
            await self._click(*action.point, "left", 2)
        elif t is ActionType.TRIPLE_CLICK:
            await self._click(*action.point, "left", 3)
        elif t is ActionType.TYPE:
            await self._type(action.text or "")
        elif t is ActionType.KEYS:
            await self._press(key_sequence(action.keys or ""))
        elif t is ActionType.SCROLL:
            await self._scroll(action)
        elif t is ActionType.DRAG:
            await self._drag(action)

    async def leave(self) -> None:
        """The pointer leaves the page, as in a fresh one (no hover left behind)."""
        await self._dispatch(
            "Input.dispatchMouseEvent",
            {"type": "mouseMoved", "x": -1, "y": -1, "button": "none", "buttons": 0},
        )

    async def _dispatch(self, method: str, params: dict[str, Any], *, frames: bool = True) -> None:
        """Dispatch an input event; a frame-aligned one is delivered by frames begun
        until Chromium acknowledges it (``frames=False``: by the next frame anyone begins)."""
        tab = self.tab
        if "x" in params:
            x, y = self._page_point(params["x"], params["y"])
            params = {**params, "x": x, "y": y}
        if self._held and method == "Input.dispatchMouseEvent":
            params = {**params, "modifiers": modifier_mask(self._held)}
        aligned = params.get("type") in _FRAME_ALIGNED_MOUSE_EVENTS
        if not (tab.frames_on_demand and aligned and frames):
            await tab.cdp.send(method, params, session_id=tab.session_id)
            return
        sent = asyncio.ensure_future(tab.cdp.send(method, params, session_id=tab.session_id))
        begun = 0
        while not sent.done():
            await begin_frame(tab)
            begun += 1
            # A frame begun before the event reached the renderer does not deliver it
            # (about half the time): the next one does, so the first frames follow each
            # other closely (one without damage costs ~1 ms); should more be needed
            # (a loaded machine), draw at 60 Hz, as a display would, until Chromium
            # acknowledges the event (or the command times out).
            await asyncio.wait({sent}, timeout=0.003 if begun < 4 else 0.016)
        await sent

    def _page_point(self, x: float, y: float) -> tuple[int, int]:
        """The page pixel under a screen point (Chromium takes pointer input in page
        pixels, whatever the pinch zoom): the pixel's corner, as at zoom 1, never a
        fraction. At a fractional point on the edge of a scrollbar's thumb (screen pixel
        320 at zoom 3 is page x 106.67) the compositor and the page disagreed about what
        was pressed, and the drag that followed left ``beginFrame`` unanswered for good
        (MiniWoB's copy-paste at zoom 2 and 3, found by the stall hunt); a drag's steps
        between its ends are whole pixels too."""
        s = self.tab.page_scale
        return math.floor(x / s), math.floor(y / s)

    # -- the mouse -----------------------------------------------------------------------

    async def _mouse_move(self, x: int, y: int) -> None:
        self.mouse = (x, y)
        await self._dispatch(
            "Input.dispatchMouseEvent",
            {"type": "mouseMoved", "x": x, "y": y, "button": "none", "buttons": 0},
        )

    async def _click(self, x: int, y: int, button: str, count: int) -> None:
        await self._mouse_move(x, y)
        for n in range(1, count + 1):
            for kind, buttons in (("mousePressed", _BUTTON_BITS[button]), ("mouseReleased", 0)):
                await self._dispatch(
                    "Input.dispatchMouseEvent",
                    {
                        "type": kind,
                        "x": x,
                        "y": y,
                        "button": button,
                        "buttons": buttons,
                        "clickCount": n,
                    },
                )

    async def _drag(self, action: Action) -> None:
        """Press at (x, y), move to (end_x, end_y) in steps with the button held, release:
        the events a person's drag sends (pointer-event drags, selections, sliders)."""
        (x0, y0), (x1, y1) = action.point, action.end_point
        await self._mouse_move(x0, y0)
        # Frames begun between the moves of a drag that holds a scrollbar's thumb stop
        # Chromium for good (measured: Chromium 156's headless shell, ``beginFrame``
        # unanswered after the second move, on the viewport's scrollbars). So a drag that
        # starts on a scrollbar moves once, to its end, and one frame delivers that move
        # before the release (Chromium scrolls for one thumb move per frame): the thumb
        # ends where it is dropped, as at 60 Hz. Nothing else is lost: a page gets no
        # mousemove while a scrollbar holds the pointer.
        on_scrollbar = self.tab.frames_on_demand and await self.tab.eval(
            js_call(_ON_SCROLLBAR_JS, *self._page_point(x0, y0))
        )
        left = _BUTTON_BITS["left"]
        press = {"button": "left", "buttons": left, "clickCount": 1}
        await self._dispatch(
            "Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, **press}
        )
        steps = 1 if on_scrollbar else DRAG_MOVE_STEPS
        for i in range(1, steps + 1):
            x = x0 + (x1 - x0) * i / steps
            y = y0 + (y1 - y0) * i / steps
            move = {"type": "mouseMoved", "x": x, "y": y, "button": "left", "buttons": left}
            if on_scrollbar:
                self._background.run(self._dispatch("Input.dispatchMouseEvent", move, frames=False))
                await asyncio.sleep(0)  # its task writes it to the pipe before the frame
                await begin_frame(self.tab)
            else:
                await self._dispatch("Input.dispatchMouseEvent", move)
        self.mouse = (x1, y1)
        await self._dispatch(
            "Input.dispatchMouseEvent",
            {
                "type": "mouseReleased",
                "x": x1,
                "y": y1,
                "button": "left",
                "buttons": 0,
                "clickCount": 1,
            },
        )

    async def _scroll(self, action: Action) -> None:
        if action.x is not None and action.y is not None:
            await self._mouse_move(action.x, action.y)
        px = action.scroll_amount * SCROLL_NOTCH_PX
        dx, dy = {"up": (0, -px), "down": (0, px), "left": (-px, 0), "right": (px, 0)}[
            action.scroll_direction.value
        ]
        x, y = self.mouse
        if self.tab.frames_on_demand:
            page_x, page_y = self._page_point(x, y)  # elementFromPoint takes page pixels
            wheel = {"x": page_x, "y": page_y, "dx": dx, "dy": dy}
            wheel |= {f"{k.lower().replace('control', 'ctrl')}Key": True for k in self._held}
            await self.tab.eval(f"{_WHEEL_JS}({orjson.dumps(wheel).decode()})")
        else:
            await self._dispatch(
                "Input.dispatchMouseEvent",
                {"type": "mouseWheel", "x": x, "y": y, "deltaX": dx, "deltaY": dy},
            )
        # The wheel scroll is applied on the compositor after the event is dispatched.
        await settle_frame(self.tab)

    # -- the keyboard --------------------------------------------------------------------

    async def _type(self, text: str) -> None:
        """Type ``text``; tabs and line breaks press Tab and Enter, as pyautogui does.

        A character of the US layout is a key press (keydown, keypress, input, keyup);
        any other is inserted as text, as Playwright's ``keyboard.type`` does.
        """
        for chunk in typed_chunks(text):
            if chunk in TYPED_KEYS:
                await self._press([TYPED_KEYS[chunk]])
                continue
            presses: list[dict[str, Any]] = []
            pending = ""
            for char in chunk:
                if char in LAYOUT:
                    if pending:
                        await self._send_keys(presses)
                        presses = []
                        await self._dispatch("Input.insertText", {"text": pending})
                        pending = ""
                    presses += [
                        _key_params(kind, char, set(), repeat=False) for kind in ("down", "up")
                    ]
                else:
                    pending += char
            await self._send_keys(presses)
            if pending:
                await self._dispatch("Input.insertText", {"text": pending})

    async def _send_keys(self, events: list[dict[str, Any]]) -> None:
        """Send key events in order, each before the last is answered: Chromium queues
        them and the page handles them one by one as before, without a round trip
        between two (a 512-character text took ~1.8 s one event at a time)."""
        sent = [
            asyncio.ensure_future(self._dispatch("Input.dispatchKeyEvent", params))
            for params in events
        ]
        if not sent:
            return
        results = await asyncio.gather(*sent, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _press(self, keys: list[str]) -> None:
        """Press keys in order and release them in reverse (``pyautogui.hotkey``)."""
        held: list[str] = []
        modifiers: set[str] = set()
        try:
            for key in keys:
                await self._key_event("down", key, modifiers, repeat=key in held)
                held.append(key)
        finally:
            for key in reversed(held):
                await self._key_event("up", key, modifiers, repeat=False)

    async def _key_event(self, kind: str, key: str, modifiers: set[str], *, repeat: bool) -> None:
        await self._dispatch(
            "Input.dispatchKeyEvent", _key_params(kind, key, modifiers, repeat=repeat)
        )


def _key_params(kind: str, key: str, modifiers: set[str], *, repeat: bool) -> dict[str, Any]:
    """``Input.dispatchKeyEvent``'s parameters for a key going ``kind`` ("down" or
    "up"); a modifier going down or up is added to or taken from ``modifiers``."""
    if key in CDP_KEYS:  # keys outside the US layout: DOM key values + virtual key codes
        vk = CDP_KEYS[key]
        return {
            "type": "rawKeyDown" if kind == "down" else "keyUp",
            "key": key,
            "code": key,
            "modifiers": modifier_mask(modifiers),
            "windowsVirtualKeyCode": vk,
            "nativeVirtualKeyCode": vk,
        }
    try:
        description = describe(key, modifiers)
    except ValueError as exc:
        raise CdpError(str(exc), method="Input.dispatchKeyEvent") from None
    if description.key in MODIFIERS:
        if kind == "down":
            modifiers.add(description.key)
        else:
            modifiers.discard(description.key)
    params: dict[str, Any] = {
        "modifiers": modifier_mask(modifiers),
        "windowsVirtualKeyCode": description.key_code_without_location,
        "code": description.code,
        "key": description.key,
        "location": description.location,
        "isKeypad": description.location == 3,
    }
    if kind == "down":
        text = description.text
        params |= {
            "type": "keyDown" if text else "rawKeyDown",
            "text": text,
            "unmodifiedText": text,
            "autoRepeat": repeat,
        }
    else:
        params["type"] = "keyUp"
    return params

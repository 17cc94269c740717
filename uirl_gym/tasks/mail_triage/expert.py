"""MailTriage's scripted expert: reads privileged state, acts only through agent actions.

It scores the page's mailbox against the goals with the task's own
:func:`~uirl_gym.tasks.mail_triage.data.evaluate` and plans the next short macro from
what is wrong, in this order: discard a reply box it does not need; undo stray
changes first (the episode ends when the last goal is met): put back messages that
are where they should not be (through the right-click menu, *Move to*, the folder) and
set other messages' flags back (the row's flag button); then move the target messages
(the first, third, ... move goal by dragging the row onto the folder in the sidebar,
the others through the right-click menu); flag (the row's flag button); mark as
unread (right-click menu); then reply (open the message, Reply, type the text, Send). A message in another folder is reached
by opening that folder first, and a row out of view is scrolled to. It re-plans after
each macro, so it recovers from whatever the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks.expert import MacroExpert, box_centre, click, scroll_towards
from uirl_gym.tasks.mail_triage.data import Goal, Mailbox, evaluate, normalise_text

ESCAPE = Action(ActionType.KEYS, keys="Escape")
# Where a drag grabs a row: left of centre, clear of the flag button at the right.
GRAB_FROM_LEFT_PX = 150


class MailTriageExpert(MacroExpert):
    """Solves MailTriage episodes from the oracle state (see :class:`MacroExpert`)."""

    def _plan(self, o: Mapping[str, Any]) -> list[Action]:
        box = Mailbox.from_json(o["goal"])
        ev = evaluate(box, o["mailbox"], o["sent"])
        reply = next((g for g in box.goals if g.kind == "reply"), None)
        # The reply goal while it is not met yet (it is the last goal).
        open_reply = reply if reply is not None and not ev.met[-1] else None
        compose = o["compose"]
        if compose is not None and not (
            open_reply is not None and compose["message_id"] == open_reply.message_id
        ):
            return _close_menu(o) or [click(compose["discard"])]
        # Sent replies cannot be taken back: with every goal met, nothing else is left.
        if all(ev.met) and len(ev.stray) == ev.stray_replies:
            return [Action(ActionType.FINISH)]
        # Strays first: the episode ends when the last goal is met.
        return (
            self._moves(o, box, goals=False)
            or self._flags(o, box, goals=False)
            or self._moves(o, box, goals=True)
            or self._flags(o, box, goals=True)
            or self._unread(o, box, ev.met)
            or (self._reply(o, open_reply) if open_reply is not None else [])
            or _no_plan()
        )

    # -- one kind of fix each; [] when there is nothing of that kind to do -------------

    @staticmethod
    def _moves(o: Mapping[str, Any], box: Mailbox, *, goals: bool) -> list[Action]:
        """Messages out of place that no move goal names (put back through the menu),
        or the move goals' messages (the first, third, ... one dragged from where it
        began; the others, and any already moved elsewhere, through the menu)."""
        moves = [g.message_id for g in box.goals if g.kind == "move"]
        state = {s["id"]: s for s in o["mailbox"]}
        for m in box.messages:
            folder, dest = state[m.id]["folder"], box.wanted_folder(m.id)
            if folder == dest or (m.id in moves) != goals:
                continue
            if goals and folder == m.folder and moves.index(m.id) % 2 == 0:
                return _close_menu(o) or _drag(o, m.id, folder, dest)
            return _from_menu(o, m.id, folder, "move", dest)
        return []

    @staticmethod
    def _flags(o: Mapping[str, Any], box: Mailbox, *, goals: bool) -> list[Action]:
        """Flags changed on other messages (set back), or the flag goals: the row's
        flag button."""
        flag_goals = {g.message_id for g in box.goals if g.kind == "flag"}
        for m, s in zip(box.messages, o["mailbox"], strict=True):
            if (m.id in flag_goals) != goals:
                continue
            if s["flagged"] != (goals or m.flagged):
                row = _row(o, m.id, s["folder"])
                if isinstance(row, list):
                    return row
                return _close_menu(o) or [click(row["flag_box"])]
        return []

    @staticmethod
    def _unread(o: Mapping[str, Any], box: Mailbox, met: list[bool]) -> list[Action]:
        for g, done in zip(box.goals, met, strict=True):
            if g.kind == "unread" and not done:
                folder = o["mailbox"][g.message_id]["folder"]
                return _from_menu(o, g.message_id, folder, "read", None)
        return []

    @staticmethod
    def _reply(o: Mapping[str, Any], g: Goal) -> list[Action]:
        compose = o["compose"]
        if compose is not None:  # (it is this message's: others were discarded)
            if normalise_text(compose["text"]) == g.text:
                return _close_menu(o) or [click(compose["send"])]
            typed = [click(compose["box"]), Action(ActionType.TYPE, text=g.text)]
            if compose["text"]:  # select what is there: the typed text replaces it
                typed.insert(1, Action(ActionType.KEYS, keys="ctrl+a"))
            return _close_menu(o) or typed
        if o["open_id"] == g.message_id and o["toolbar"] is not None:
            return _close_menu(o) or [click(o["toolbar"]["reply"])]
        row = _row(o, g.message_id, o["mailbox"][g.message_id]["folder"])
        if isinstance(row, list):
            return row
        return _close_menu(o) or [click(row["box"])]


def _no_plan() -> list[Action]:  # every fix came up empty: a rule is missing above
    raise RuntimeError("MailTriageExpert: no plan for this mailbox")


def _close_menu(o: Mapping[str, Any]) -> list[Action]:
    return [ESCAPE] if o["context_menu"] is not None else []


def _row(o: Mapping[str, Any], message_id: int, folder: str) -> Mapping[str, Any] | list[Action]:
    """The message's visible row, or the action that gets there (open its folder, scroll)."""
    if o["folder"] != folder:
        return _close_menu(o) or [click(o["folders"][folder])]
    row = next((r for r in o["visible_rows"] if r["id"] == message_id), None)
    return row if row is not None else (_close_menu(o) or [_scroll_to(o, message_id)])


def _drag(o: Mapping[str, Any], message_id: int, folder: str, dest: str) -> list[Action]:
    row = _row(o, message_id, folder)
    if isinstance(row, list):
        return row
    x, y, _w, h = row["box"]
    end_x, end_y = box_centre(o["folders"][dest])
    return [Action(ActionType.DRAG, x + GRAB_FROM_LEFT_PX, y + h // 2, end_x=end_x, end_y=end_y)]


def _from_menu(
    o: Mapping[str, Any], message_id: int, folder: str, item: str, dest: str | None
) -> list[Action]:
    """Right-click the message's row and pick ``item`` (``move``: then the folder ``dest``)."""
    menu = o["context_menu"]
    if menu is not None and menu["message_id"] == message_id:
        if item == "move" and menu["submenu"] is not None:
            return [click(menu["submenu"][dest])]
        return [click(menu["items"][item])]
    row = _row(o, message_id, folder)
    if isinstance(row, list):
        return row
    x, y, _w, h = row["box"]
    # (a right click on another row replaces an open menu)
    return [Action(ActionType.RIGHT_CLICK, x + GRAB_FROM_LEFT_PX, y + h // 2)]


def _scroll_to(o: Mapping[str, Any], message_id: int) -> Action:
    """One wheel scroll over the list that brings the row near the list's middle."""
    ly = o["list_box"][1]
    index = o["list_ids"].index(message_id)
    row_y = ly + index * o["row_height"] - o["scroll_top"]
    return scroll_towards(o["list_box"], row_y)

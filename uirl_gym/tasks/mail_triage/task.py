"""MailTriage: triage a webmail inbox: move, flag, mark as unread, reply.

The app: a folder list on the left (Inbox, Archive, Trash, Sent, then the user's
folders), the open folder's message list (sender, subject, date, a flag button; no
preview: a message's text shows only when it is opened) and a reading pane (Reply,
Flag, Mark as unread; a reply box with Send and Discard). A message moves by dragging
its row onto a folder, or through its right-click menu (*Move to* and a folder).
Opening a message marks it read.

The record: after every change the app records every message's state (folder,
flagged, read), and each reply sent. ``/progress`` scores them against the goals
(:func:`~uirl_gym.tasks.mail_triage.data.evaluate`): which goals are met and the other
changes made.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from uirl_gym.tasks.base import Task, is_int
from uirl_gym.tasks.mail_triage.data import (
    ME,
    Mailbox,
    evaluate,
    generate_mailbox,
    instruction,
    parse_options,
    start_state,
)

# Replies the record keeps and their longest text (an episode cannot send more; a
# larger event is malformed).
MAX_SENT = 100
MAX_REPLY_CHARS = 5000
# /progress travels in a response header: it lists at most this many stray changes.
MAX_STRAY_LISTED = 10


class MailTriageTask(Task):
    """The episode's mailbox and goals, the recorded state and replies (module docstring)."""

    name = "mail_triage"
    public_progress_keys = frozenset({"episode", "num_goals", "num_sent", "num_changes"})

    def __init__(self) -> None:
        self.box: Mailbox | None = None
        self.state: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.num_changes = 0

    def reset(self, seed: int | None, options: Mapping[str, Any]) -> dict[str, Any]:
        opts = parse_options(options)
        rng = random.Random(seed)
        self.box = generate_mailbox(rng.randrange(2**63), opts)
        self.state = start_state(self.box)
        self.sent = []
        self.num_changes = 0
        self.episode_id += 1
        return {
            "instruction": instruction(self.box),
            "app_state": {
                "episode": self.episode_id,
                "me": {"name": ME[0], "email": ME[1]},
                "folders": list(self.box.folders),
                # (the reference is said in the body; the page needs no separate copy)
                "messages": [
                    {k: v for k, v in m.to_json().items() if k != "ref"} for m in self.box.messages
                ],
            },
        }

    def handle_event(self, event: Mapping[str, Any]) -> dict[str, Any]:
        if self.box is None or event.get("episode") != self.episode_id:
            return {"recorded": False, "reason": "stale episode"}
        kind = event.get("type")
        if kind == "mailbox":
            self.state = self._checked_state(event.get("messages"))
        elif kind == "reply":
            self.sent.append(self._checked_reply(event))
        else:
            raise ValueError(f"unknown event type {kind!r}; expected 'mailbox' or 'reply'")
        self.num_changes += 1
        return {"recorded": True}

    def _checked_state(self, messages: Any) -> list[dict[str, Any]]:
        assert self.box is not None
        n, folders = len(self.box.messages), set(self.box.all_folders)
        if not isinstance(messages, list) or len(messages) != n:
            raise ValueError(f"messages: expected a list of all {n} messages")
        out = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping) or m.get("id") != i:
                raise ValueError(f"messages: expected message {i} at index {i}")
            if m.get("folder") not in folders:
                raise ValueError(f"messages[{i}].folder: {m.get('folder')!r} is not a folder")
            if not isinstance(m.get("flagged"), bool) or not isinstance(m.get("read"), bool):
                raise ValueError(f"messages[{i}]: flagged and read must be true or false")
            out.append({"id": i, "folder": m["folder"], "flagged": m["flagged"], "read": m["read"]})
        return out

    def _checked_reply(self, event: Mapping[str, Any]) -> dict[str, Any]:
        assert self.box is not None
        to, body = event.get("in_reply_to"), event.get("body")
        if not is_int(to) or not 0 <= to < len(self.box.messages):
            raise ValueError(f"in_reply_to: {to!r} is not a message id")
        if not isinstance(body, str) or len(body) > MAX_REPLY_CHARS:
            raise ValueError(f"body: expected a text of at most {MAX_REPLY_CHARS} characters")
        if len(self.sent) >= MAX_SENT:
            raise ValueError(f"at most {MAX_SENT} replies per episode")
        return {"in_reply_to": to, "body": body}

    def progress(self) -> dict[str, Any]:
        if self.box is None:
            return {
                "goals": [],
                "num_goals": 0,
                "met": [],
                "num_stray": 0,
                "stray": [],
                "num_sent": 0,
            }
        ev = evaluate(self.box, self.state, self.sent)
        return {
            "episode": self.episode_id,
            "goals": self.box.goal_kinds(),
            "num_goals": len(ev.met),
            "met": ev.met,
            "num_stray": len(ev.stray),
            "stray": ev.stray[:MAX_STRAY_LISTED],
            "num_sent": len(self.sent),
            "num_changes": self.num_changes,
        }

    def oracle(self, page_state: Mapping[str, Any]) -> dict[str, Any]:
        assert self.box is not None
        ev = evaluate(self.box, self.state, self.sent)
        return {
            "episode": self.episode_id,
            "goal": self.box.to_json(),
            "record": {"messages": [dict(s) for s in self.state], "sent": list(self.sent)},
            "met": ev.met,
            "stray": ev.stray,
            **page_state,
        }

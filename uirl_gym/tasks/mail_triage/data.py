"""Seeded mailboxes, the triage an episode asks for, and how a mailbox is scored.

A mailbox has system folders (Inbox, Archive, Trash; Sent holds the replies) and a
few user folders ("Travel", "Receipts", ...). Each message has a stable ``id``, a
sender, a subject, a body (paragraphs) and a date, and its state: ``folder``,
``flagged``, ``read``. An episode asks for *goals*, each about one inbox message,
which the instruction names by a *clue*:

- ``sender``: "the email from Priya Natarajan" (no other message has that sender);
- ``subject``: 'the email whose subject mentions "Invoice 4821"';
- ``content``: "the email that mentions reference 48213" (only its body says so: the
  agent has to open messages to find it).

Goal kinds: ``move`` (to a named folder), ``flag``, ``unread`` (mark as unread) and
``reply`` (send a given text as a reply). *Distractors* are other messages made to
look like a target: the same first name, the same subject with the digits swapped,
or a body that mentions the reference with its digits swapped.

The goal is a mailbox state; :func:`evaluate` scores any state (and the replies sent)
against it. Everything here is pure and deterministic for a seed; the task, the
scorer and the expert all score with :func:`evaluate`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import TaskOptionsError, check_option_names, int_option

INBOX, ARCHIVE, TRASH = "Inbox", "Archive", "Trash"
SYSTEM_FOLDERS = (INBOX, ARCHIVE, TRASH)
USER_FOLDERS = ("Travel", "Receipts", "Projects", "Clients", "Family", "Newsletters", "Hiring")
NUM_USER_FOLDERS = 4
GOAL_KINDS = ("move", "flag", "unread", "reply")
CLUES = ("sender", "subject", "content")
OPTION_NAMES = frozenset({"messages", "num_triage", "distractors", "reply"})
MIN_MESSAGES, MAX_MESSAGES, DEFAULT_MESSAGES = 4, 40, 10
MAX_TRIAGE, DEFAULT_TRIAGE = 8, 3
MAX_DISTRACTORS, DEFAULT_DISTRACTORS = 5, 2
ME = ("Alex Morgan", "alex.morgan@brightline.io")

FIRST_NAMES = (
    "Priya", "Tom", "Elena", "Marcus", "Aisha", "Daniel", "Sofia", "Kenji", "Laura", "Omar",
    "Hannah", "Lucas", "Mei", "Samuel", "Chloe", "Ravi", "Grace", "Jonas", "Fatima", "Peter",
    "Nina", "Diego", "Emma", "Viktor", "Zoe", "Ibrahim", "Clara", "Ethan", "Yuki", "Martin",
)  # fmt: skip
LAST_NAMES = (
    "Natarajan", "Hughes", "Petrova", "Bennett", "Khan", "Okafor", "Rossi", "Tanaka",
    "Fischer", "Haddad", "Lindqvist", "Moreau", "Chen", "Adeyemi", "Dubois", "Iyer",
    "Walsh", "Becker", "Nair", "Kowalski", "Santos", "Novak", "Clarke", "Brandt", "Silva",
    "Larsen", "Murphy", "Sato", "Weber", "Ortiz",
)  # fmt: skip
DOMAINS = (
    "northwind.com", "fabrikam.io", "contoso.org", "tailspin.travel", "lumen.co",
    "gmail.com", "outlook.com", "acme-corp.com", "harbor.dev", "brightline.io",
)  # fmt: skip

# (subject, home folder): {n} is a 4-digit number; the clue quotes the subject up to
# the number ("Invoice 4821"), so a look-alike gets the same words and other digits.
SUBJECTS = (
    ("Invoice {n} for October services", "Receipts"),
    ("Order #{n} has shipped", "Receipts"),
    ("Your receipt {n} from Lumen Coffee", "Receipts"),
    ("Flight LX{n}: your boarding pass", "Travel"),
    ("Hotel booking {n} confirmed", "Travel"),
    ("Train tickets {n} for Friday", "Travel"),
    ("Ticket #{n} updated: login issue", "Projects"),
    ("Pull request #{n} needs your review", "Projects"),
    ("Sprint {n} retrospective notes", "Projects"),
    ("Proposal {n} for the Harbor account", "Clients"),
    ("Contract {n} ready for signature", "Clients"),
    ("Quote {n} for the spring campaign", "Clients"),
    ("Photos from the weekend ({n})", "Family"),
    ("School trip form {n}", "Family"),
    ("Weekly digest no. {n}", "Newsletters"),
    ("Product news issue {n}", "Newsletters"),
    ("Application {n}: backend engineer", "Hiring"),
    ("Interview slot {n} confirmed", "Hiring"),
)
# Paragraphs of a body; {ref} is a 5-digit reference, said once per body.
OPENERS = (
    "Hope your week is going well.",
    "Thanks for getting back to me so quickly.",
    "Just a quick note before the weekend.",
    "Following up on our conversation yesterday.",
    "Sorry for the delay on this one.",
)
MIDDLES = (
    "Everything is filed under reference {ref}, so please quote it if you call.",
    "The details are attached; our system lists it as reference {ref}.",
    "I have logged it with reference {ref} and copied the team.",
    "For your records, the reference is {ref}. Nothing else is needed from you yet.",
    "Accounts asked me to mention reference {ref} in any reply about it.",
)
CLOSERS = (
    "Let me know if anything looks off.",
    "Happy to jump on a call if that is easier.",
    "Have a good one.",
    "Talk soon.",
    "Thanks again for your help.",
)
REPLIES = (
    "Thanks, I will take a look today",
    "Got it, thank you. I will confirm by Friday",
    "Thanks for the update. Tuesday at 10 works for me",
    "Received, thanks. I have forwarded it to finance",
    "Great, please go ahead",
    "Thank you. Could you send the signed copy as well?",
)
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# The app's "today" (Tuesday 24 November 2026) and an episode's minutes before it.
TODAY_DAY = 23  # 0-based day of November 2026: the 24th
TODAY_WEEKDAY = 1  # Tuesday
NOW_MINUTES = 9 * 60 + 40


@dataclass(frozen=True)
class Options:
    """An episode's difficulty (reset options). See docs/tasks/mail_triage.md.

    Attributes:
        messages: messages in the inbox (4..40; more than about 11 need scrolling).
        num_triage: messages to move, flag or mark as unread (1..8).
        distractors: targets that get a look-alike message (0..5, at most the targets).
        reply: whether the instruction also asks to reply to a message.
    """

    messages: int = DEFAULT_MESSAGES
    num_triage: int = DEFAULT_TRIAGE
    distractors: int = DEFAULT_DISTRACTORS
    reply: bool = True

    @property
    def num_targets(self) -> int:
        return self.num_triage + self.reply


def parse_options(options: Mapping[str, Any]) -> Options:
    """Checked reset options, defaults filled in.

    Raises:
        TaskOptionsError: an unknown option, a value of the wrong type or range, or too
            few messages for the targets and their look-alikes.
    """
    check_option_names(options, OPTION_NAMES)
    messages = int_option(options, "messages", DEFAULT_MESSAGES, MIN_MESSAGES, MAX_MESSAGES)
    num_triage = int_option(options, "num_triage", DEFAULT_TRIAGE, 1, MAX_TRIAGE)
    distractors = int_option(options, "distractors", DEFAULT_DISTRACTORS, 0, MAX_DISTRACTORS)
    reply = options.get("reply", True)
    if not isinstance(reply, bool):
        raise TaskOptionsError(f"reply: must be true or false, got {reply!r}")
    opts = Options(messages=messages, num_triage=num_triage, distractors=distractors, reply=reply)
    if distractors > opts.num_targets:
        raise TaskOptionsError(
            f"distractors: at most one per target ({opts.num_targets} with num_triage="
            f"{num_triage} and reply={reply}), got {distractors}"
        )
    if messages < opts.num_targets + distractors:
        raise TaskOptionsError(
            f"messages: at least {opts.num_targets + distractors} for num_triage={num_triage}, "
            f"reply={reply} and distractors={distractors} (each target and look-alike is a "
            f"message), got {messages}"
        )
    return opts


@dataclass(frozen=True)
class Message:
    """A message and its starting state.

    Attributes:
        id: stable through moves (the index in :attr:`Mailbox.messages`).
        sender, email, subject, body: what the app shows (the body is paragraphs).
        minutes, date: how long before the app's "now" it came (the list's order) and
            the list's label for it (``07:44``, ``Mon``, ``18 Nov``).
        folder, flagged, read: its state at the start.
        ref: the 5-digit reference its body mentions (``content`` clues name it).
    """

    id: int
    sender: str
    email: str
    subject: str
    body: tuple[str, ...]
    minutes: int
    date: str
    folder: str
    flagged: bool
    read: bool
    ref: str

    def to_json(self) -> dict[str, Any]:
        return {**vars(self), "body": list(self.body)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Message:
        return cls(**{**data, "body": tuple(data["body"])})


@dataclass(frozen=True)
class Goal:
    """One thing to do with message ``message_id``, named by its ``clue``.

    ``folder``: where a ``move`` puts it; ``text``: what a ``reply`` says.
    """

    kind: str
    message_id: int
    clue: str
    folder: str = ""
    text: str = ""


@dataclass(frozen=True)
class Mailbox:
    """One episode's mailbox and goals (JSON: :meth:`to_json`/:meth:`from_json`).

    Attributes:
        folders: the user folders, in the sidebar's order.
        messages: every message at the start (inbox first, newest first), ids ``0..n-1``.
        goals: the goals, triage first, the reply last.
    """

    folders: tuple[str, ...]
    messages: tuple[Message, ...]
    goals: tuple[Goal, ...]

    @property
    def all_folders(self) -> tuple[str, ...]:
        """Every folder a message can be in (moves and drops), in the sidebar's order."""
        return (INBOX, ARCHIVE, TRASH, *self.folders)

    def goal_kinds(self) -> list[str]:
        return [g.kind for g in self.goals]

    def wanted_folder(self, message_id: int) -> str:
        for g in self.goals:
            if g.kind == "move" and g.message_id == message_id:
                return g.folder
        return self.messages[message_id].folder

    def to_json(self) -> dict[str, Any]:
        return {
            "folders": list(self.folders),
            "messages": [m.to_json() for m in self.messages],
            "goals": [vars(g) for g in self.goals],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Mailbox:
        return cls(
            folders=tuple(data["folders"]),
            messages=tuple(Message.from_json(m) for m in data["messages"]),
            goals=tuple(Goal(**g) for g in data["goals"]),
        )


def normalise_text(text: str) -> str:
    """A reply's text as it is compared: runs of whitespace as one space, trimmed."""
    return " ".join(text.split())


@dataclass
class Evaluation:
    """A mailbox state scored against the goals.

    Attributes:
        met: per goal, whether the state meets it.
        stray: the other changes, one line each (a message in a folder it should not be
            in, a flag changed, a reply nobody asked for).
        stray_replies: how many of ``stray`` are sent replies (no action takes them back).
    """

    met: list[bool]
    stray: list[str]
    stray_replies: int = 0


def evaluate(
    box: Mailbox, state: Sequence[Mapping[str, Any]], sent: Sequence[Mapping[str, Any]]
) -> Evaluation:
    """Score a state (``[{"id", "folder", "flagged", "read"}]``, every message) and the
    replies sent (``[{"in_reply_to", "body"}]``) against the goals.

    A move target still in its starting folder is an unmet goal, not a stray change; in
    any other wrong folder it is both.
    """
    now = {s["id"]: s for s in state}
    by_kind = {k: {g.message_id for g in box.goals if g.kind == k} for k in GOAL_KINDS}
    stray: list[str] = []
    for m in box.messages:
        s = now[m.id]
        wanted = box.wanted_folder(m.id)
        if s["folder"] != wanted and not (m.id in by_kind["move"] and s["folder"] == m.folder):
            stray.append(f"{m.subject!r} moved to {s['folder']}")
        if m.id not in by_kind["flag"] and s["flagged"] != m.flagged:
            stray.append(f"{m.subject!r} {'flagged' if s['flagged'] else 'unflagged'}")
    met: list[bool] = []
    replied = False
    for g in box.goals:
        s = now[g.message_id]
        if g.kind == "move":
            met.append(s["folder"] == g.folder)
        elif g.kind == "flag":
            met.append(bool(s["flagged"]))
        elif g.kind == "unread":
            met.append(not s["read"])
        else:
            replied = any(_is_reply(r, g) for r in sent)
            met.append(replied)
    reply_goal = next((g for g in box.goals if g.kind == "reply"), None)
    stray_replies = 0
    taken = False
    for r in sent:
        if reply_goal is not None and not taken and _is_reply(r, reply_goal):
            taken = True
            continue
        subject = box.messages[r["in_reply_to"]].subject
        stray.append(f"reply to {subject!r}: {normalise_text(r['body'])[:40]!r}")
        stray_replies += 1
    return Evaluation(met=met, stray=stray, stray_replies=stray_replies)


def _is_reply(reply: Mapping[str, Any], goal: Goal) -> bool:
    return reply["in_reply_to"] == goal.message_id and normalise_text(reply["body"]) == goal.text


def start_state(box: Mailbox) -> list[dict[str, Any]]:
    """Every message's starting state, as the app records it."""
    return [
        {"id": m.id, "folder": m.folder, "flagged": m.flagged, "read": m.read} for m in box.messages
    ]


# -- instruction words --------------------------------------------------------------


def subject_phrase(subject: str) -> str:
    """The words a ``subject`` clue quotes: the subject up to and including its number."""
    words = subject.split()
    end = next(i for i, w in enumerate(words) if any(c.isdigit() for c in w))
    return " ".join(words[: end + 1]).rstrip(":")


def describe_message(m: Message, clue: str) -> str:
    if clue == "sender":
        return f"the email from {m.sender}"
    if clue == "subject":
        return f'the email whose subject mentions "{subject_phrase(m.subject)}"'
    return f"the email that mentions reference {m.ref}"


def describe_goal(box: Mailbox, g: Goal) -> str:
    what = describe_message(box.messages[g.message_id], g.clue)
    if g.kind == "move":
        return f"move {what} to {g.folder}"
    if g.kind == "flag":
        return f"flag {what}"
    if g.kind == "unread":
        return f"mark {what} as unread"
    return f'reply to {what} with "{g.text}"'


def instruction(box: Mailbox) -> str:
    steps = "; ".join(describe_goal(box, g) for g in box.goals)
    return f"Triage the inbox: {steps}. Leave everything else as it is."


# -- generation ---------------------------------------------------------------------


def generate_mailbox(seed: int, opts: Options) -> Mailbox:
    """The mailbox and goals for a seed; the same seed and options give the same ones."""
    rng = random.Random(seed)
    folders = tuple(sorted(rng.sample(USER_FOLDERS, NUM_USER_FOLDERS)))
    n_inbox = opts.messages
    n_filed = rng.randint(NUM_USER_FOLDERS, 2 * NUM_USER_FOLDERS)
    n = n_inbox + n_filed
    names = rng.sample([(f, last) for f in FIRST_NAMES for last in LAST_NAMES], n)
    numbers = rng.sample(range(1000, 10000), n)
    refs = rng.sample(range(10000, 100000), n)
    subjects = [rng.choice(SUBJECTS) for _ in range(n)]
    fields: list[dict[str, Any]] = []
    for i in range(n):
        first, last = names[i]
        fields.append(
            {
                "first": first,
                "last": last,
                "domain": rng.choice(DOMAINS),
                "template": subjects[i][0],
                "number": str(numbers[i]),
                "ref": str(refs[i]),
                "body": (rng.choice(OPENERS), rng.choice(MIDDLES), rng.choice(CLOSERS)),
            }
        )
    targets = rng.sample(range(n_inbox), opts.num_targets)
    kinds = _goal_kinds(rng, opts)
    clues = [rng.choice(CLUES) for _ in targets]
    others = [i for i in range(n_inbox) if i not in targets]
    rng.shuffle(others)
    for k in rng.sample(range(len(targets)), opts.distractors):
        _make_lookalike(rng, fields, targets[k], others.pop(), clues[k])
    messages = _messages(rng, fields, n_inbox, folders)
    # A target's state must be changeable: a flag goal's message starts unflagged, a
    # mark-as-unread goal's starts read.
    for i, kind in zip(targets, kinds, strict=True):
        if kind in ("flag", "unread"):
            messages[i] = _replace(messages[i], flagged=False, read=True)
    goals = []
    for i, kind, clue in zip(targets, kinds, clues, strict=True):
        home = dict(SUBJECTS)[fields[i]["template"]]
        folder = ""
        if kind == "move":
            folder = home if home in folders else rng.choice((ARCHIVE, *folders))
        text = rng.choice(REPLIES) if kind == "reply" else ""
        goals.append(Goal(kind=kind, message_id=i, clue=clue, folder=folder, text=text))
    box = Mailbox(folders=folders, messages=tuple(messages), goals=tuple(goals))
    _check_clues_unique(box)
    return box


def _goal_kinds(rng: random.Random, opts: Options) -> list[str]:
    """Moves first (at least two when there is room: one dragged, one through the
    menu), then a mix; the reply last."""
    kinds = ["move"] * min(2, opts.num_triage)
    kinds += rng.choices(("move", "flag", "unread"), (2, 1, 1), k=opts.num_triage - len(kinds))
    rng.shuffle(kinds)
    return kinds + ["reply"] * opts.reply


def _make_lookalike(
    rng: random.Random, fields: list[dict[str, Any]], target: int, other: int, clue: str
) -> None:
    """Make message ``other`` look like ``target`` under the target's clue."""
    t, o = fields[target], fields[other]
    if clue == "sender":
        taken = {(f["first"], f["last"]) for f in fields}
        o["first"] = t["first"]
        o["last"] = rng.choice([last for last in LAST_NAMES if (t["first"], last) not in taken])
    elif clue == "subject":
        o["template"] = t["template"]
        o["number"] = _swap_digits(rng, t["number"], {f["number"] for f in fields})
    else:
        o["ref"] = _swap_digits(rng, t["ref"], {f["ref"] for f in fields})


def _swap_digits(rng: random.Random, number: str, taken: set[str]) -> str:
    """``number`` with two digits swapped (or one changed), not one of ``taken``."""
    while True:
        digits = list(number)
        i, j = rng.sample(range(1, len(digits)), 2)
        digits[i], digits[j] = digits[j], digits[i]
        if "".join(digits) == number:
            digits[i] = str((int(digits[i]) + rng.randint(1, 8)) % 10)
        candidate = "".join(digits)
        if candidate not in taken:
            return candidate


def _messages(
    rng: random.Random, fields: list[dict[str, Any]], n_inbox: int, folders: tuple[str, ...]
) -> list[Message]:
    """Inbox messages newest first (this week), then filed ones (older)."""
    minutes = sorted(rng.sample(range(5, 6 * 24 * 60), n_inbox))
    minutes += sorted(rng.sample(range(7 * 24 * 60, 30 * 24 * 60), len(fields) - n_inbox))
    out = []
    for i, f in enumerate(fields):
        inbox = i < n_inbox
        out.append(
            Message(
                id=i,
                sender=f"{f['first']} {f['last']}",
                email=f"{f['first'].lower()}.{f['last'].lower()}@{f['domain']}",
                subject=f["template"].format(n=f["number"]),
                body=(
                    "Hi Alex,",
                    f["body"][0],
                    f["body"][1].format(ref=f["ref"]),
                    f["body"][2],
                    f"Best,\n{f['first']}",
                ),
                minutes=minutes[i],
                date=date_label(minutes[i]),
                folder=INBOX if inbox else rng.choice((ARCHIVE, *folders)),
                flagged=rng.random() < (0.15 if inbox else 0.05),
                read=not inbox or rng.random() < 0.5,
                ref=f["ref"],
            )
        )
    return out


def _replace(m: Message, **changes: Any) -> Message:
    return Message(**{**vars(m), **changes})


def date_label(minutes_ago: int) -> str:
    """How the list dates a message: a time today, a weekday this week, else the date."""
    t = NOW_MINUTES - minutes_ago
    days_back = 0 if t >= 0 else (-t - 1) // (24 * 60) + 1
    if days_back == 0:
        return f"{t // 60:02d}:{t % 60:02d}"
    if days_back < 6:
        return DAYS[(TODAY_WEEKDAY - days_back) % 7]
    day = TODAY_DAY + 1 - days_back
    return f"{day} Nov" if day >= 1 else f"{day + 31} Oct"


def _check_clues_unique(box: Mailbox) -> None:
    """Every target's clue names exactly one message (the generator's invariant)."""
    for g in box.goals:
        m = box.messages[g.message_id]
        phrase = subject_phrase(m.subject)
        if g.clue == "sender":
            same = [x for x in box.messages if x.sender == m.sender]
        elif g.clue == "subject":
            same = [x for x in box.messages if phrase in x.subject]
        else:
            same = [x for x in box.messages if any(m.ref in p for p in x.body)]
        if len(same) != 1:  # pragma: no cover
            raise AssertionError(f"clue {g.clue} of message {m.id} names {len(same)} messages")

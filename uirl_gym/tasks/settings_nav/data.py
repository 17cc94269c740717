"""The settings catalogue and the seeded settings tree of one episode.

Every section of the sidebar has a pool of plausible settings. An episode places a
seeded subset of each pool: some in the section's tabs, a few in its "Advanced
settings" dialog (reached through the section's "more" menu). Current values, the
defaults that "Restore defaults" brings back, and the targets are seeded too.

Look-alikes: many names share a word with a setting elsewhere ("Session timeout",
"Idle timeout"; "Default language", "Keyboard language", "Email language"), so that an
agent matching names loosely sets the wrong one.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["toggle", "radio", "dropdown", "number", "text"]
Value = bool | int | str

# Depth of a setting's place: 1 the section's first tab (shown on opening the section),
# 2 another tab, 3 the section's "Advanced settings" dialog (behind the "more" menu).
DEPTH_FIRST_TAB, DEPTH_OTHER_TAB, DEPTH_DIALOG = 1, 2, 3
ADVANCED_PER_SECTION = 2

LANGUAGES = ["English", "German", "French", "Spanish", "Italian", "Portuguese", "Dutch"]

# (kind, name, description, choices): choices are the options (radio, dropdown),
# (low, high, step, unit) (number), or candidate values (text).
CATALOGUE: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {
    "Account": (
        ["Profile", "Email", "Billing"],
        [
            (
                "text",
                "Display name",
                "How your name appears to others",
                ["Alex Morgan", "Sam Rivera", "Jordan Lee", "Taylor Brooks", "Robin Hale"],
            ),
            (
                "text",
                "Job title",
                "Shown on your profile card",
                ["Product manager", "Data analyst", "Support lead", "Designer", "Engineer"],
            ),
            (
                "text",
                "Recovery email",
                "Where account recovery links are sent",
                ["alex.m@example.com", "backup@mail.test", "it-desk@example.org", "me@post.test"],
            ),
            (
                "dropdown",
                "Profile visibility",
                "Who can see your profile",
                ["Everyone", "Team members", "Only me"],
            ),
            ("toggle", "Show profile photo", "Display your photo next to your name", None),
            ("toggle", "Marketing emails", "News about products and offers", None),
            ("radio", "Email format", "Format of the emails we send you", ["HTML", "Plain text"]),
            ("dropdown", "Email language", "Language of account emails", LANGUAGES),
            (
                "dropdown",
                "Billing currency",
                "Currency of invoices",
                ["US dollar", "Euro", "British pound", "Japanese yen", "Swiss franc"],
            ),
            ("radio", "Billing cycle", "How often you are charged", ["Monthly", "Yearly"]),
            ("toggle", "Auto-renew subscription", "Renew at the end of each cycle", None),
            ("number", "Invoice reminder", "Days before a payment is due", (1, 30, 1, "days")),
        ],
    ),
    "Security": (
        ["Sign-in", "Sessions", "Devices"],
        [
            ("toggle", "Two-factor authentication", "Ask for a code on new devices", None),
            ("toggle", "Login alerts", "Email me when someone signs in", None),
            (
                "dropdown",
                "Two-factor method",
                "How you receive sign-in codes",
                ["Authenticator app", "Text message", "Security key"],
            ),
            ("number", "Session timeout", "Sign out after this long", (5, 240, 5, "minutes")),
            ("number", "Idle timeout", "Lock the app when inactive", (1, 60, 1, "minutes")),
            ("number", "Maximum sessions", "Sessions allowed at once", (1, 10, 1, "sessions")),
            ("toggle", "Remember this device", "Skip codes on this device", None),
            ("toggle", "Trusted devices only", "Block sign-ins from new devices", None),
            (
                "radio",
                "Password strength",
                "Rule for new passwords",
                ["Standard", "Strong", "Very strong"],
            ),
            ("number", "Password expiry", "Days until a password expires", (0, 365, 15, "days")),
            (
                "dropdown",
                "Lock screen after",
                "Lock when the screen is off",
                ["1 minute", "5 minutes", "15 minutes", "Never"],
            ),
            ("toggle", "Session alerts", "Notify me about new sessions", None),
        ],
    ),
    "Notifications": (
        ["General", "Email", "Mobile"],
        [
            ("toggle", "Email notifications", "Send notifications by email", None),
            ("toggle", "Push notifications", "Send notifications to your phone", None),
            ("toggle", "Desktop notifications", "Show notifications on this computer", None),
            (
                "dropdown",
                "Email digest",
                "A summary of activity",
                ["Off", "Daily", "Weekly", "Monthly"],
            ),
            (
                "dropdown",
                "Notification sound",
                "Sound for new notifications",
                ["Chime", "Bell", "Pop", "None"],
            ),
            (
                "radio",
                "Mention alerts",
                "When to alert you",
                ["All messages", "Direct mentions", "Nothing"],
            ),
            ("number", "Quiet hours start", "Hour when quiet hours begin", (0, 23, 1, "h")),
            ("number", "Quiet hours end", "Hour when quiet hours end", (0, 23, 1, "h")),
            ("toggle", "Notification badges", "Show unread counts on icons", None),
            ("toggle", "Email previews", "Include message text in emails", None),
            ("number", "Reminder lead time", "Minutes before an event", (5, 120, 5, "minutes")),
            ("toggle", "Weekly summary email", "A report every Monday", None),
        ],
    ),
    "Display": (
        ["Appearance", "Text", "Layout"],
        [
            ("radio", "Theme", "Colour scheme of the app", ["Light", "Dark", "System"]),
            (
                "dropdown",
                "Accent color",
                "Colour of buttons and links",
                ["Blue", "Green", "Purple", "Orange", "Red"],
            ),
            ("number", "Font size", "Size of body text", (10, 24, 1, "px")),
            ("number", "Interface zoom", "Scale of the whole interface", (50, 200, 10, "%")),
            (
                "dropdown",
                "Font family",
                "Typeface of body text",
                ["Sans serif", "Serif", "Monospace"],
            ),
            ("radio", "Density", "Spacing between items", ["Comfortable", "Compact"]),
            ("toggle", "Show sidebar icons", "Icons next to sidebar items", None),
            ("toggle", "Reduce motion", "Fewer animations", None),
            ("toggle", "High contrast mode", "Stronger colours and borders", None),
            ("number", "Items per page", "Rows shown in lists", (10, 100, 10, "items")),
            (
                "dropdown",
                "Start page",
                "Page shown after sign-in",
                ["Home", "Inbox", "Calendar", "Projects"],
            ),
            ("toggle", "Show status bar", "A status bar at the bottom", None),
        ],
    ),
    "Language & region": (
        ["Language", "Region", "Formats"],
        [
            ("dropdown", "Default language", "Language of the interface", LANGUAGES),
            ("dropdown", "Keyboard language", "Layout used for typing", LANGUAGES),
            ("dropdown", "Spoken language", "Language for voice input", LANGUAGES),
            (
                "dropdown",
                "Time zone",
                "Used for dates and reminders",
                ["UTC", "Europe/Berlin", "Europe/London", "America/New_York", "Asia/Tokyo"],
            ),
            ("radio", "Time format", "How times are shown", ["12-hour", "24-hour"]),
            (
                "dropdown",
                "Date format",
                "How dates are shown",
                ["DD/MM/YYYY", "MM/DD/YYYY", "YYYY-MM-DD"],
            ),
            (
                "dropdown",
                "First day of week",
                "Start of the calendar week",
                ["Monday", "Saturday", "Sunday"],
            ),
            ("radio", "Measurement units", "Units for distances", ["Metric", "Imperial"]),
            ("toggle", "Automatic time zone", "Set the time zone from your location", None),
            ("toggle", "Spell check", "Underline misspelled words", None),
            ("number", "Decimal places", "Digits after the decimal point", (0, 6, 1, "digits")),
            ("toggle", "Automatic language", "Detect the language of messages", None),
        ],
    ),
    "Privacy": (
        ["General", "Data sharing", "History"],
        [
            ("toggle", "Share usage data", "Help improve the product", None),
            ("toggle", "Share crash reports", "Send reports when the app crashes", None),
            ("toggle", "Personalised ads", "Ads based on your activity", None),
            (
                "radio",
                "Profile search",
                "Who can find your profile",
                ["Anyone", "Contacts", "No one"],
            ),
            (
                "dropdown",
                "Who can message me",
                "People allowed to start a chat",
                ["Everyone", "Contacts", "No one"],
            ),
            ("toggle", "Read receipts", "Show when you have read a message", None),
            ("toggle", "Activity status", "Show when you are online", None),
            ("number", "History retention", "Days activity history is kept", (1, 365, 1, "days")),
            ("number", "Search history retention", "Days searches are kept", (0, 90, 1, "days")),
            (
                "dropdown",
                "Cookie preference",
                "Cookies stored by the site",
                ["Allow all", "Essential only", "Block all"],
            ),
            ("toggle", "Location access", "Let the app use your location", None),
            ("toggle", "Camera access", "Let the app use your camera", None),
        ],
    ),
}
SECTION_NAMES = list(CATALOGUE)
MAX_TABS = 3
# Spreads targets over sections, and keeps depth 1 (the first tab) able to hold them.
MAX_TARGETS_PER_SECTION = 2
# Words too common to make two names look alike.
_COMMON_WORDS = frozenset({"of", "the", "me", "my", "can", "who", "this", "show", "per"})


def slug(name: str) -> str:
    """A setting's id from its name: ``Two-factor authentication`` -> ``two_factor_authentication``."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def name_words(name: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", name.lower())) - _COMMON_WORDS


@dataclass(frozen=True)
class SettingDef:
    """One setting of the catalogue.

    Attributes:
        id: the slug of its name, unique across the catalogue.
        kind: toggle, radio, dropdown, number or text.
        options: radio/dropdown options, or text candidates.
        low, high, step, unit: a number's range, the step seeded values use, its unit.
    """

    id: str
    section: str
    kind: Kind
    name: str
    description: str
    options: tuple[str, ...] = ()
    low: int = 0
    high: int = 0
    step: int = 1
    unit: str = ""

    def valid(self, value: Any) -> bool:
        """Whether ``value`` (JSON) is a value this setting can be saved with."""
        if self.kind == "toggle":
            return isinstance(value, bool)
        if self.kind == "number":
            return (
                isinstance(value, int)
                and not isinstance(value, bool)
                and self.low <= value <= self.high
            )
        if self.kind == "text":
            return isinstance(value, str) and 0 < len(value.strip()) <= 60
        return value in self.options

    def random_value(self, rng: random.Random) -> Value:
        if self.kind == "toggle":
            return rng.random() < 0.5
        if self.kind == "number":
            return rng.randrange(self.low, self.high + 1, self.step)
        return rng.choice(self.options)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
        }
        if self.kind in ("radio", "dropdown"):
            out["options"] = list(self.options)
        if self.kind == "number":
            out.update(low=self.low, high=self.high, unit=self.unit)
        return out


def _build_defs() -> dict[str, SettingDef]:
    defs: dict[str, SettingDef] = {}
    for section, (_tabs, rows) in CATALOGUE.items():
        for kind, name, description, choices in rows:
            extra: dict[str, Any] = {}
            if kind == "number":
                low, high, step, unit = choices
                extra = {"low": low, "high": high, "step": step, "unit": unit}
            elif choices is not None:
                extra = {"options": tuple(choices)}
            d = SettingDef(slug(name), section, kind, name, description, **extra)
            if d.id in defs:
                raise AssertionError(f"duplicate setting id {d.id!r}")
            defs[d.id] = d
    return defs


SETTINGS: dict[str, SettingDef] = _build_defs()


@dataclass
class Placement:
    """Where a setting lives in this episode's tree."""

    section: int
    tab: int | None  # None: in the section's Advanced settings dialog
    depth: int


@dataclass
class SettingsTree:
    """One episode's sections, tabs, dialogs and the settings placed in them.

    Attributes:
        sections: ``[{"name", "tabs": [{"name", "settings": [id]}], "advanced": [id]}]``.
        placements: setting id -> where it lives.
        initial: every placed setting's value at the start of the episode.
        defaults: what "Restore defaults" sets.
        targets: setting id -> the value the instruction asks for.
    """

    sections: list[dict[str, Any]]
    placements: dict[str, Placement]
    initial: dict[str, Value]
    defaults: dict[str, Value]
    targets: dict[str, Value] = field(default_factory=dict)


def generate_tree(
    rng: random.Random, num_targets: int, depth: int, distractors: bool, per_tab: int
) -> SettingsTree:
    """Seeded settings tree with ``num_targets`` targets placed at most ``depth`` deep.

    Targets are drawn first (from distinct-looking names); with ``distractors`` their
    look-alikes (names sharing a word) are placed too, without them they are left out.
    """
    pool = list(SETTINGS.values())
    rng.shuffle(pool)
    targets: list[SettingDef] = []
    for d in pool:
        if len(targets) == num_targets:
            break
        crowded = sum(t.section == d.section for t in targets) >= MAX_TARGETS_PER_SECTION
        if not crowded and all(not (name_words(d.name) & name_words(t.name)) for t in targets):
            targets.append(d)
    target_ids = {t.id for t in targets}
    target_words = frozenset().union(*(name_words(t.name) for t in targets))
    sections: list[dict[str, Any]] = []
    placements: dict[str, Placement] = {}
    for s_index, section in enumerate(SECTION_NAMES):
        tab_names, _rows = CATALOGUE[section]
        num_tabs = rng.randint(2, MAX_TABS)
        members = [d for d in pool if d.section == section]
        look_alike = [
            d for d in members if d.id not in target_ids and name_words(d.name) & target_words
        ]
        others = [d for d in members if d.id not in target_ids and d not in look_alike]
        section_targets = [d for d in members if d.id in target_ids]
        chosen = section_targets + (look_alike if distractors else []) + others
        capacity = num_tabs * per_tab + ADVANCED_PER_SECTION
        chosen = chosen[:capacity]
        tabs: list[list[str]] = [[] for _ in range(num_tabs)]
        advanced: list[str] = []
        # Targets first, each into a slot its depth allows; then everything else.
        for d in chosen:
            slots = _free_slots(tabs, advanced, per_tab)
            if d.kind == "text":  # edited in its own dialog, which does not nest
                slots = [s for s in slots if s is not None]
            if not slots:  # only the dialog is left, and a text setting cannot go there
                continue
            if d.id in target_ids:
                slots = [s for s in slots if _slot_depth(s) <= depth] or slots
            slot = rng.choice(slots)
            if slot is None:
                advanced.append(d.id)
            else:
                tabs[slot].append(d.id)
            placements[d.id] = Placement(s_index, slot, _slot_depth(slot))
        for t in tabs:
            rng.shuffle(t)
        rng.shuffle(advanced)
        sections.append(
            {
                "name": section,
                "tabs": [{"name": n, "settings": t} for n, t in zip(tab_names, tabs, strict=False)],
                "advanced": advanced,
            }
        )
    initial = {i: SETTINGS[i].random_value(rng) for i in placements}
    defaults = {i: SETTINGS[i].random_value(rng) for i in placements}
    tree = SettingsTree(sections, placements, initial, defaults)
    for target in targets:
        tree.targets[target.id] = _different_value(rng, target, initial[target.id])
    return tree


def _free_slots(tabs: list[list[str]], advanced: list[str], per_tab: int) -> list[int | None]:
    slots: list[int | None] = [i for i, t in enumerate(tabs) if len(t) < per_tab]
    if len(advanced) < ADVANCED_PER_SECTION:
        slots.append(None)
    return slots


def _slot_depth(slot: int | None) -> int:
    if slot is None:
        return DEPTH_DIALOG
    return DEPTH_FIRST_TAB if slot == 0 else DEPTH_OTHER_TAB


def _different_value(rng: random.Random, d: SettingDef, current: Value) -> Value:
    if d.kind == "toggle":
        return not current
    for _ in range(100):
        value = d.random_value(rng)
        if value != current:
            return value
    raise AssertionError(f"{d.id}: no value other than {current!r}")

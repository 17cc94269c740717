"""No answer leaks into the page as text (issue 41): what a task keeps for scoring, beyond
what its page shows a person and what its instruction says, appears nowhere in the text
observations (the AXTree text, the pruned HTML, uncut), the raw objects behind them
(``env.page(..., full=True)``: CDP's accessibility tree and DOM snapshot, the elements'
properties), the URL or the focused bid.

One test per task family, one env per family, on several seeds. What each family keeps
for scoring is read from its oracle (docs/env.md, "No answer in the page"):

- every family: the episode's task seed (``info["task_seed"]``), from which the task
  makes its data and its answer (MiniWoB++'s pages seed ``Math.random`` with it);
- the seven uirl apps: no attribute name, id, class, name or data attribute of the page,
  and no accessibility property, speaks of a goal, target, answer, solution, expected or
  correct value (the usual way an answer hides in a page);
- SimpleDataEntry: the target rows: the page is the same, bid for bid, whichever rows
  are asked for;
- FormFill: the phone in the form's ``NNN-NNN-NNNN`` format and the incident date as the
  form takes it (the letter words both its own way);
- MailTriage: every message's reference number (its body shows only once it is opened);
- SpreadsheetEdit: the goal sheet's cells that the sheet does not hold yet (the totals to
  compute, the quantities after an edit);
- MiniWoB++: the oracle's utterance fields that the instruction does not say, unless the
  page shows them whatever the episode asks (``email-inbox-nl-turk``'s ``task``: the
  page's own Reply and Forward buttons).

A number of four digits or fewer is not searched for: bids, boxes and row numbers hold
such numbers on every page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import orjson
import pytest

from uirl_gym.env import UIEnv
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.form_fill.data import phone_canonical

SEEDS = (11, 22, 33)
# Texts are checked whole: a secret past the cut would still be in the observation's
# source.
UNCUT = 10_000_000
VIEWS = ["axtree", "html", "focused", "url"]
# Words that name an answer; checked against the page's names (attributes, ids, classes).
ANSWER_WORDS = re.compile(
    r"(?<![a-z])(goal|target|answer|solution|expected|correct|oracle|secret)s?(?![a-z])", re.I
)
FRAME_ID = re.compile(r"\b[0-9A-F]{32}\b")
# HTML's own attribute named ``target`` (a link's window), not an answer.
HTML_ATTRIBUTES = frozenset({"target"})


def _views(env: UIEnv, obs: Mapping[str, Any]) -> dict[str, str]:
    """Every way the env shows the page as text: the observations and the raw objects."""
    page = env.page(("axtree", "dom", "elements"), full=True)
    # (the ``elements`` observation is ``element_properties`` in arrays: not searched twice)
    views = {name: str(obs[name]) for name in ("axtree", "html", "focused", "url")}
    views["axtree_object"] = orjson.dumps(page["axtree"]).decode()
    views["dom_object"] = orjson.dumps(page["dom"]).decode()
    views["element_properties"] = orjson.dumps(page["elements"]).decode()
    views["page"] = orjson.dumps(
        {k: v for k, v in page.items() if k not in ("axtree", "dom", "elements")}
    ).decode()
    return views


def _leaks(views: Mapping[str, str], secrets: Mapping[str, str]) -> list[str]:
    return [
        f"{what} = {secret!r} is in {view}"
        for what, secret in secrets.items()
        for view, text in views.items()
        if _word(secret).search(text)
    ]


def _word(secret: str) -> re.Pattern[str]:
    # Whole: a reference 68371 is not in a box's 0.68371 nor in a longer number.
    return re.compile(rf"(?<![0-9A-Za-z.]){re.escape(secret)}(?![0-9A-Za-z]|\.[0-9])")


def _searchable(value: str) -> bool:
    return len(value) >= 3 and not (value.isdigit() and len(value) <= 4)


def _answer_names(env: UIEnv) -> list[str]:
    """The page's names that speak of an answer (attribute names; ids, classes, names and
    data attributes' values; accessibility property names)."""
    page = env.page(("axtree", "dom"), full=True)
    strings: list[str] = page["dom"]["strings"]
    found = []
    for document in page["dom"]["documents"]:
        for attrs in document["nodes"].get("attributes", []):
            for k in range(0, len(attrs) - 1, 2):
                name = strings[attrs[k]]
                value = strings[attrs[k + 1]] if attrs[k + 1] >= 0 else ""
                if name not in HTML_ATTRIBUTES and ANSWER_WORDS.search(name):
                    found.append(f"attribute {name}={value!r}")
                named = name in ("id", "class", "name") or name.startswith("data-")
                if named and ANSWER_WORDS.search(value):
                    found.append(f"{name}={value!r}")
    for node in page["axtree"]["nodes"]:
        for prop in node.get("properties", []):
            if ANSWER_WORDS.search(prop.get("name", "")):
                found.append(f"accessibility property {prop['name']}")
    return found


@pytest.fixture
def family_env(runtime: LocalRuntime) -> Iterator[Callable[..., UIEnv]]:
    envs: list[UIEnv] = []

    def make(task: str, **kwargs: Any) -> UIEnv:
        env = UIEnv(
            runtime=runtime,
            task=task,
            image_format="jpeg",
            observations=VIEWS,
            text_limit=UNCUT,
            **kwargs,
        )
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def _check_family(
    env: UIEnv,
    secrets_of: Callable[[Mapping[str, Any], str], dict[str, str]],
    *,
    names: bool = True,
) -> None:
    """For each seed: no secret (the task seed and ``secrets_of(oracle, instruction)``,
    those the instruction does not say) in any view, and no answer-named attribute."""
    problems = []
    for seed in SEEDS:
        obs, info = env.reset(seed=seed)
        oracle = env.oracle()
        instruction = obs["instruction"]
        secrets = {"task_seed": str(info["task_seed"]), **secrets_of(oracle, instruction)}
        secrets = {
            what: s for what, s in secrets.items() if _searchable(s) and s not in instruction
        }
        assert secrets, f"seed {seed}: nothing to look for"
        problems += [f"seed {seed}: {p}" for p in _leaks(_views(env, obs), secrets)]
        if names:
            problems += [f"seed {seed}: the page names {n}" for n in _answer_names(env)]
    assert problems == []


def _without_frame_ids(views: Mapping[str, str]) -> dict[str, str]:
    # Chromium names each new page's frame afresh (a 32-digit hex id): not the task's.
    return {k: FRAME_ID.sub("<frame>", v) for k, v in views.items()}


def _none(oracle: Mapping[str, Any], instruction: str) -> dict[str, str]:
    return {}


@pytest.mark.slow
def test_simple_data_entry_shows_the_same_page_whichever_rows_are_asked_for(
    family_env: Callable[..., UIEnv],
) -> None:
    env = family_env("simple_data_entry")
    _check_family(env, lambda o, i: {"data_seed": str(o["data_seed"])})
    # The target rows: the same sheet (data_seed), other rows asked for, the same page.
    for data_seed in SEEDS:
        pages = []
        for rows in ([3], [57], [12, 80]):
            obs, _info = env.reset(seed=0, options={"data_seed": data_seed, "rows": rows})
            assert obs["instruction"] != (pages[-1][0] if pages else None)
            pages.append((obs["instruction"], _without_frame_ids(_views(env, obs))))
        assert pages[0][1] == pages[1][1] == pages[2][1]


@pytest.mark.slow
def test_form_fill_pages_hold_no_value_in_the_forms_format(
    family_env: Callable[..., UIEnv],
) -> None:
    def secrets(oracle: Mapping[str, Any], instruction: str) -> dict[str, str]:
        targets = oracle["targets"]
        out = {}
        if "phone" in targets:
            digits = targets["phone"].replace("-", "")
            out["phone"] = phone_canonical(digits)
        if "incident_date" in targets:
            year, month, day = targets["incident_date"].split("-")
            out["incident_date"] = targets["incident_date"]
            out["incident_date_us"] = f"{month}/{day}/{year}"
            out["incident_date_us_short"] = f"{int(month)}/{int(day)}/{year}"
        return out

    _check_family(family_env("form_fill"), secrets)


@pytest.mark.slow
def test_mail_triage_pages_hold_no_unopened_body(family_env: Callable[..., UIEnv]) -> None:
    def secrets(oracle: Mapping[str, Any], instruction: str) -> dict[str, str]:
        return {f"message {m['id']} ref": m["ref"] for m in oracle["goal"]["messages"]}

    _check_family(family_env("mail_triage"), secrets)


@pytest.mark.slow
def test_settings_nav_pages_name_no_target(family_env: Callable[..., UIEnv]) -> None:
    _check_family(family_env("settings_nav"), _none)


@pytest.mark.slow
def test_shop_checkout_pages_name_no_goal(family_env: Callable[..., UIEnv]) -> None:
    _check_family(family_env("shop_checkout"), _none)


@pytest.mark.slow
def test_spreadsheet_edit_pages_hold_no_goal_cell(family_env: Callable[..., UIEnv]) -> None:
    def secrets(oracle: Mapping[str, Any], instruction: str) -> dict[str, str]:
        now = {cell for row in oracle["record"]["rows"] for cell in row["cells"]}
        now |= set(oracle["record"]["header"])
        return {
            f"goal row {r} cell {c}": cell
            for r, row in enumerate(oracle["goal_rows"])
            for c, cell in enumerate(row)
            if cell and cell not in now
        }

    _check_family(family_env("spreadsheet_edit"), secrets)


@pytest.mark.slow
def test_calendar_booking_pages_name_no_goal(family_env: Callable[..., UIEnv]) -> None:
    _check_family(family_env("calendar_booking"), _none)


# The MiniWoB++ pages whose oracle holds utterance fields (the others' oracle holds none:
# their answer stays in the page's script), and pages whose answer is not in the
# instruction (a number to guess, a sum to work out, the boxes to tick by their word):
# for these the task seed is the key to the answer.
MINIWOB_SAMPLE = (
    "email-inbox-nl-turk",
    "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk",
    "guess-number",
    "simple-arithmetic",
    "click-checkboxes-soft",
)


@pytest.mark.slow
def test_miniwob_pages_hold_no_field_the_instruction_does_not_say(
    family_env: Callable[..., UIEnv],
) -> None:
    env = family_env(f"miniwob.{MINIWOB_SAMPLE[0]}", screen_size=(160, 210))
    problems = []
    for name in MINIWOB_SAMPLE:
        episodes = []
        for seed in SEEDS:
            obs, info = env.reset(seed=seed, options={"task": f"miniwob.{name}"})
            fields = env.oracle()["fields"] or {}
            unsaid = {
                k: str(v)
                for k, v in fields.items()
                if str(v).lower() not in obs["instruction"].lower()
            }
            episodes.append((info["task_seed"], unsaid, _views(env, obs)))
        for task_seed, unsaid, views in episodes:
            problems += [f"{name}: {p}" for p in _leaks(views, {"task_seed": str(task_seed)})]
            for field, value in unsaid.items():
                # A field's value the page shows in an episode that asks for another one
                # is the page's vocabulary (a button), not this episode's answer.
                vocabulary = any(
                    u.get(field) != value and _leaks(v, {field: value}) for _s, u, v in episodes
                )
                if not vocabulary:
                    problems += [f"{name}: {p}" for p in _leaks(views, {field: value})]
    assert problems == []

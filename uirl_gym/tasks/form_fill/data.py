"""Seeded claim letters, the form's fields, and how a field value is matched.

A policyholder's letter (left half of the screen) holds every value the claim form
(right half) asks for, but in the letter's own wording and formats: the phone number in
one of several styles, the incident date written out ("4 March 2025"), the claim type
and contact method in prose, the attachments as a sentence. Distractors are decoy
values of the same kinds (a partner's phone, an old policy number, another date).

Everything here is pure and deterministic for a seed; the task and the scorer both
match values with :func:`field_matches`.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The form's fields, in form order. A shorter form keeps a subset in this order.
FIELD_IDS = (
    "full_name",
    "policy_number",
    "email",
    "phone",
    "claim_type",
    "incident_date",
    "contact_method",
    "attachments",
)
FIELD_LABELS = {
    "full_name": "Full name",
    "policy_number": "Policy number",
    "email": "Email",
    "phone": "Phone",
    "claim_type": "Claim type",
    "incident_date": "Date of incident",
    "contact_method": "Preferred contact",
    "attachments": "Documents enclosed",
}
CLAIM_TYPES = ("Auto", "Home", "Renters", "Travel", "Health", "Pet", "Boat", "Liability")
CONTACT_METHODS = ("Email", "Phone", "Post")
ATTACHMENTS = ("Photos", "Police report", "Receipts", "Medical report", "Repair estimate")

FIRST_NAMES = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara "
    "Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy "
    "Olivia Noah Emma Liam Sofia Mateo Aisha Omar Yuki Kenji Priya Arjun Ingrid Lars Chloe"
).split()
LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez "
    "Lopez Wilson Anderson Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Clark Lewis Walker Young Allen King Wright Nguyen Hill Flores Green Adams Baker Hall "
    "Lindqvist Okafor Tanaka Novak Kowalski Fischer Rossi Dubois Silva Petrov"
).split()
STREETS = ("Elm Street", "Oak Avenue", "Maple Drive", "Harbor Road", "Cedar Lane", "Mill Road")
TOWNS = ("Springfield", "Riverton", "Fairview", "Lakewood", "Ashford", "Brookside")
DOMAINS = ("example.com", "mail.test", "inbox.example.org", "post.test")
INSURERS = ("Harbor Mutual Insurance", "Northgate Assurance", "Bluepeak Insurance Co.")
POLICY_PREFIXES = ("HM", "NG", "BP", "PL", "QX")
# What the claim was for, in the letter's words, per claim type.
STORIES = {
    "Auto": "my car was struck from behind while parked outside my home",
    "Home": "a burst pipe flooded the kitchen and damaged the flooring",
    "Renters": "my rented apartment was broken into and a laptop was taken",
    "Travel": "my checked luggage was lost on a return flight",
    "Health": "I needed emergency treatment at a walk-in clinic",
    "Pet": "my dog needed surgery after swallowing a toy",
    "Boat": "my sailing boat was damaged against the dock in a storm",
    "Liability": "a visitor slipped on my front steps and was injured",
}
CONTACT_PHRASES = {
    "Email": "by email",
    "Phone": "by phone",
    "Post": "by post at the address above",
}
PHONE_STYLES = ("({a}) {b}-{c}", "{a}.{b}.{c}", "{a} {b} {c}", "+1 {a} {b} {c}", "{a}{b}{c}")


def phone_canonical(digits: str) -> str:
    """The form's phone format: ``NNN-NNN-NNNN``."""
    return f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"


def date_long(day: dt.date, style: int) -> str:
    """A date as a letter writes it (``March 4, 2025`` or ``4 March 2025``)."""
    month = day.strftime("%B")
    return f"{month} {day.day}, {day.year}" if style == 0 else f"{day.day} {month} {day.year}"


def with_article(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def join_words(items: Sequence[str]) -> str:
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True)
class Claim:
    """One episode's letter and the values the form must hold when submitted.

    Attributes:
        targets: field id -> the value the form must submit (dates as ISO
            ``YYYY-MM-DD``, attachments as a sorted list, everything else a string).
        letter_date: the letter's date; the calendar opens on its month ("today").
        letter: the document's lines (``""`` separates paragraphs).
    """

    targets: dict[str, Any]
    letter_date: dt.date
    letter: list[str]


def _person(rng: random.Random) -> tuple[str, str]:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    style = rng.choice(("{f}.{l}", "{f}{l}", "{fi}{l}", "{f}_{l}"))
    local = style.format(f=first.lower(), l=last.lower(), fi=first[0].lower())
    if rng.random() < 0.5:
        local += str(rng.randint(1, 99))
    return f"{first} {last}", f"{local}@{rng.choice(DOMAINS)}"


def _phone_digits(rng: random.Random) -> str:
    return f"{rng.randint(201, 989)}{rng.randint(200, 999)}{rng.randint(0, 9999):04d}"


def _phone_letter(rng: random.Random, digits: str) -> str:
    return rng.choice(PHONE_STYLES).format(a=digits[:3], b=digits[3:6], c=digits[6:])


def _policy(rng: random.Random) -> str:
    return f"{rng.choice(POLICY_PREFIXES)}-{rng.randint(100000, 999999)}"


def generate_claim(seed: int, num_distractors: int) -> Claim:
    """The letter and targets for a seed; the same seed always gives the same claim.

    Raises:
        ValueError: ``num_distractors`` outside 0..4.
    """
    if not 0 <= num_distractors <= 4:
        raise ValueError(f"num_distractors: must be 0..4, got {num_distractors}")
    rng = random.Random(seed)
    name, email = _person(rng)
    digits = _phone_digits(rng)
    letter_date = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randrange(3 * 365))
    incident = letter_date - dt.timedelta(days=rng.randint(3, 110))
    claim_type = rng.choice(CLAIM_TYPES)
    contact = rng.choice(CONTACT_METHODS)
    attachments = sorted(rng.sample(ATTACHMENTS, rng.randint(1, 3)), key=ATTACHMENTS.index)
    policy = _policy(rng)
    date_style = rng.randrange(2)
    targets = {
        "full_name": name,
        "policy_number": policy,
        "email": email,
        "phone": phone_canonical(digits),
        "claim_type": claim_type,
        "incident_date": incident.isoformat(),
        "contact_method": contact,
        "attachments": list(attachments),
    }
    enclosed = [a.lower() if i else a for i, a in enumerate(attachments)]
    story = (
        f"I am writing to make {with_article(claim_type.lower())} insurance claim. On "
        f"{date_long(incident, date_style)}, {STORIES[claim_type]}."
    )
    decoys = _distractors(rng, num_distractors, name, incident, date_style, policy, claim_type)
    body = [story, *decoys]
    body.append(
        f"{join_words(enclosed)} {'is' if len(enclosed) == 1 else 'are'} enclosed with this "
        f"letter. I would prefer to be contacted {CONTACT_PHRASES[contact]}."
    )
    letter = [
        name,
        f"{rng.randint(2, 480)} {rng.choice(STREETS)}, {rng.choice(TOWNS)}",
        f"Email: {email}",
        f"Tel: {_phone_letter(rng, digits)}",
        "",
        date_long(letter_date, date_style),
        "",
        "Claims Department",
        rng.choice(INSURERS),
        "",
        f"Re: policy {policy}",
        "",
        "Dear Claims Team,",
        "",
        *[line for paragraph in body for line in (paragraph, "")],
        "Yours sincerely,",
        name,
    ]
    return Claim(targets=targets, letter_date=letter_date, letter=letter)


def _distractors(
    rng: random.Random,
    count: int,
    name: str,
    incident: dt.date,
    style: int,
    policy: str,
    claim_type: str,
) -> list[str]:
    """Sentences with decoy values of the form's kinds (never equal to a target)."""
    partner, partner_email = _person(rng)
    while partner.split()[0] == name.split()[0]:
        partner, partner_email = _person(rng)
    old_policy = _policy(rng)
    while old_policy == policy:
        old_policy = _policy(rng)
    earlier = incident - dt.timedelta(days=rng.randint(200, 700))
    other_type = rng.choice([t for t in CLAIM_TYPES if t != claim_type])
    pool = [
        f"If I cannot be reached, my partner {partner} is on "
        f"{_phone_letter(rng, _phone_digits(rng))}.",
        f"My previous policy, {old_policy}, was closed last year and is not affected.",
        f"This is unrelated to my earlier claim of {date_long(earlier, style)}, which was settled.",
        f"Please do not use my old address {partner_email}, which I no longer read.",
        f"A friend suggested I also file a {other_type.lower()} claim, but I have not done so.",
    ]
    return rng.sample(pool, count)


def parse_date(text: str) -> dt.date | None:
    """``MM/DD/YYYY`` or ISO ``YYYY-MM-DD`` (what the form's date field accepts)."""
    text = text.strip()
    m = re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", text)
    try:
        if m:
            return dt.date(int(m[3]), int(m[1]), int(m[2]))
        return dt.date.fromisoformat(text) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text) else None
    except ValueError:
        return None


def field_matches(field_id: str, value: Any, target: Any) -> bool:
    """Whether a submitted (or currently entered) value counts as the target.

    Text is compared after trimming surrounding whitespace; the email and the policy
    number ignore case, the name does not. The phone must be in the form's
    ``NNN-NNN-NNNN`` format (the instruction says so). The date may be any form the date
    field accepts. The attachments must be exactly the enclosed ones.
    """
    if field_id == "attachments":
        return isinstance(value, list) and sorted(map(str, value)) == sorted(target)
    if not isinstance(value, str):
        return False
    value = value.strip()
    if field_id in ("email", "policy_number"):
        return value.lower() == target.lower()
    if field_id == "incident_date":
        day = parse_date(value)
        return day is not None and day.isoformat() == target
    return value == target

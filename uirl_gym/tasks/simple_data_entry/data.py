"""Seeded spreadsheet data: plausible people with deliberate near-duplicates.

Near-duplicates make sloppy copying fail: rows that share a first name with another
row, rows that share a last name, and email addresses that differ from another row's
by a single digit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

FIRST_NAMES = (
    "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara "
    "Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy "
    "Anthony Betty Mark Sandra Donald Ashley Steven Emily Paul Donna Andrew Michelle Joshua "
    "Carol Kevin Amanda Brian Melissa George Deborah Timothy Stephanie Ronald Rebecca Jason "
    "Sharon Edward Laura Jeffrey Cynthia Ryan Kathleen Jacob Amy Gary Angela Nicholas Anna "
    "Eric Ruth Jonathan Brenda Stephen Pamela Larry Nicole Justin Katherine Scott Samantha "
    "Olivia Noah Emma Liam Sofia Mateo Aisha Omar Yuki Kenji Priya Arjun Ingrid Lars Chloe"
).split()
LAST_NAMES = (
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez "
    "Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson "
    "White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott "
    "Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter "
    "Roberts Lindqvist Okafor Tanaka Novak Kowalski Fischer Rossi Dubois Silva Petrov"
).split()
DOMAINS = ("example.com", "mail.test", "inbox.example.org", "corp.example.net", "post.test")
EMAIL_STYLES = ("{f}.{l}", "{f}{l}", "{fi}{l}", "{f}_{l}", "{f}.{li}", "{fi}.{l}")


@dataclass(frozen=True)
class Person:
    """One data row: the three columns of the sheet."""

    first_name: str
    last_name: str
    email: str

    def as_tuple(self) -> tuple[str, str, str]:
        return (self.first_name, self.last_name, self.email)


def _email(rng: random.Random, first: str, last: str) -> str:
    local = rng.choice(EMAIL_STYLES).format(
        f=first.lower(), l=last.lower(), fi=first[0].lower(), li=last[0].lower()
    )
    if rng.random() < 0.6:
        local += str(rng.randint(1, 99))
    return f"{local}@{rng.choice(DOMAINS)}"


def _digit_variant(rng: random.Random, email: str) -> str | None:
    """The same address with one digit changed, or None if it has no digit."""
    local, domain = email.split("@")
    digits = [i for i, c in enumerate(local) if c.isdigit()]
    if not digits:
        return None
    i = rng.choice(digits)
    new = rng.choice([d for d in "0123456789" if d != local[i]])
    return f"{local[:i]}{new}{local[i + 1 :]}@{domain}"


def generate_people(seed: int, num_rows: int = 100) -> list[Person]:
    """The sheet's data rows for a data seed; the same seed always gives the same rows.

    About a fifth of the rows are near-duplicates of an earlier row (same first name
    with another last name, same last name with another first name, or an email that
    differs by one digit). Every row is unique as a whole.

    Raises:
        ValueError: ``num_rows`` outside 1..1000.
    """
    if not 1 <= num_rows <= 1000:
        raise ValueError(f"num_rows: must be 1..1000, got {num_rows}")
    rng = random.Random(seed)
    people: list[Person] = []
    seen: set[tuple[str, str, str]] = set()
    seen_emails: set[str] = set()
    while len(people) < num_rows:
        person = _near_duplicate(rng, people) if people and rng.random() < 0.2 else None
        if person is None:
            first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
            person = Person(first, last, _email(rng, first, last))
        if person.as_tuple() in seen or person.email in seen_emails:
            continue
        seen.add(person.as_tuple())
        seen_emails.add(person.email)
        people.append(person)
    return people


def _near_duplicate(rng: random.Random, people: list[Person]) -> Person | None:
    base = rng.choice(people)
    kind = rng.randrange(3)
    if kind == 0:
        last = rng.choice([n for n in LAST_NAMES if n != base.last_name])
        return Person(base.first_name, last, _email(rng, base.first_name, last))
    if kind == 1:
        first = rng.choice([n for n in FIRST_NAMES if n != base.first_name])
        return Person(first, base.last_name, _email(rng, first, base.last_name))
    email = _digit_variant(rng, base.email)
    return None if email is None else Person(base.first_name, base.last_name, email)

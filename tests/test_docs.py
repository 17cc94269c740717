"""The docs name what exists: every module of both packages is on the map in
docs/architecture.md, and every training-config key the docs mention is a field.

Read as text (nothing imported but the config dataclasses): a module added without a
line on the map, or a setting renamed while a page still names the old one, fails here
(issue 34: ~3,450 lines of modules were missing from the map, and docs/integrations.md
named a `grpo.async_rollouts` that never existed).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

from uirl_agents.trainers.cli import MOVED_FIELDS
from uirl_agents.trainers.config import GRPOConfig, RSConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
# Code spans that start like a config key but name Python objects (a Gymnasium env's
# methods, a model's module paths): never config keys.
PYTHON_PREFIXES = (
    "env.reset",
    "env.step",
    "env.unwrapped",
    "model.language_model.",
    "model.text_model.",
)


def config_keys() -> dict[str, type]:
    """``section.field`` (and deeper) -> the field's type, over every trainer config."""
    keys: dict[str, type] = {}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            key = prefix + field.name
            keys[key] = hints[field.name]
            if dataclasses.is_dataclass(hints[field.name]):
                walk(hints[field.name], key + ".")

    for cls in (RSConfig, GRPOConfig):
        walk(cls, "")
    return keys


def is_known(key: str, keys: dict[str, type]) -> bool:
    """``key`` is a field, or lies under a field that is not a section (a dict such as
    ``env.task_options`` takes any key below it), or is a moved field the docs name as
    such."""
    if key in MOVED_FIELDS:
        return True
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        if head in keys:
            return n == len(parts) or not dataclasses.is_dataclass(keys[head])
    return False


def test_every_config_key_the_docs_mention_exists() -> None:
    keys = config_keys()
    sections = sorted(k for k in keys if "." not in k and dataclasses.is_dataclass(keys[k]))
    assert {"env", "grpo", "rollout", "model"} <= set(sections)
    # A code span that is a key, a flag (`--grpo.kl_beta 0.1`) or a setting
    # (`rollout.mode: async`, `grpo.tis_cap=2`).
    span = re.compile(rf"`(?:--)?((?:{'|'.join(sections)})\.[A-Za-z_][\w.]*)(?:[ =:][^`]*)?`")
    unknown = []
    for page in DOCS:
        for match in span.finditer(page.read_text("utf-8")):
            key = match[1].rstrip(".")
            if key.endswith(".py") or key.startswith(PYTHON_PREFIXES):
                continue
            if not is_known(key, keys):
                unknown.append(f"{page.relative_to(ROOT)}: `{key}`")
    assert not unknown, "config keys the docs name that do not exist:\n" + "\n".join(unknown)

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


# ---- the "as built" map in docs/architecture.md ------------------------------------------

PACKAGES = ("uirl_gym", "uirl_agents")
# A path entry: a file or folder name, optionally under folders (`runtimes/base.py`).
ENTRY = re.compile(r"[\w.]+(?:/[\w.]*)*")
# The line for one task folder names the layout every task folder shares.
EACH_TASK = "(and so each task)"


def map_block() -> list[str]:
    """The lines of the fenced blocks that follow "As built:" in docs/architecture.md
    (one per package)."""
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    lines: list[str] = []
    for after in text.split("\nAs built:\n")[1:]:
        lines += after.split("```", 2)[1].split("\n")[1:]
    return lines


def mapped_paths() -> tuple[set[str], set[str]]:
    """The files and the task-folder layout the map names, as repository paths.

    A line is ``<indent><entries>  <description>``: entries are comma-separated paths
    relative to the folder of the nearest less-indented folder entry; after the first,
    entries are relative to the first one's folder (``runtimes/kubernetes.py,
    k8s_pods.py``). A folder entry's description may name its files by their bare names
    (``policies/  base.py (...), random.py``). A line whose first column is not a list of paths continues the
    description above it.
    """
    records: list[tuple[int, list[str], str]] = []  # (indent, entries, description)
    for line in map_block():
        if not line.strip():
            continue
        first, _, description = line.strip().partition("  ")
        entries = [e.strip() for e in first.split(",")]
        if all(ENTRY.fullmatch(e) for e in entries):
            records.append((len(line) - len(line.lstrip()), entries, description))
        elif records:  # a description's continuation
            indent, entries, above = records[-1]
            records[-1] = (indent, entries, f"{above} {line.strip()}")
    files: set[str] = set()
    task_layout: set[str] = set()
    folders: list[tuple[int, str]] = []  # (indent, folder path) of the open folder entries
    for indent, entries, description in records:
        while folders and folders[-1][0] >= indent:
            folders.pop()
        base = folders[-1][1] if folders else ""
        head_folder = base + entries[0][: entries[0].rfind("/") + 1]
        for i, entry in enumerate(entries):
            path = (base if i == 0 else head_folder) + entry
            if not path.endswith("/"):
                files.add(path)
                continue
            folders.append((indent, path))
            named = set(re.findall(r"(?<![\w/])\w+\.py\b", description))
            files |= {path + name for name in named}
            if EACH_TASK in description:
                task_layout |= named
    return files, task_layout


def package_modules() -> set[str]:
    return {
        str(p.relative_to(ROOT))
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_every_module_of_both_packages_is_on_the_map() -> None:
    """Every module but the packages' ``__init__.py`` files; a task folder's modules may
    be named by the one task-folder line's layout (``data.py, task.py, ...``)."""
    files, task_layout = mapped_paths()
    assert task_layout >= {"__init__.py", "task.py"}, "the task-folder line lost its layout"

    def covered(module: str) -> bool:
        parts = module.split("/")
        in_task_folder = len(parts) == 4 and parts[:2] == ["uirl_gym", "tasks"]
        return (
            module in files
            or parts[-1] == "__init__.py"
            or (in_task_folder and parts[3] in task_layout)
        )

    missing = sorted(m for m in package_modules() if not covered(m))
    assert not missing, "modules missing from the map in docs/architecture.md:\n" + "\n".join(
        missing
    )


def test_every_file_the_map_names_exists() -> None:
    files, _ = mapped_paths()
    gone = sorted(f for f in files if f.endswith(".py") and not (ROOT / f).is_file())
    assert not gone, "the map in docs/architecture.md names files that do not exist:\n" + (
        "\n".join(gone)
    )


# ---- the floors: which way the imports go ----------------------------------------------------


def floors() -> tuple[dict[str, tuple[int | None, str]], dict[str, str]]:
    """The ``floors`` block of docs/architecture.md: module prefix -> (floor, room), and
    prefix -> room for the rooms with no floor (old paths kept for a release)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"```floors\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no ```floors block"
    rooms: dict[str, tuple[int | None, str]] = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        head, _, prefixes = line.partition(":")
        floor, _, room = head.strip().rpartition(" ")
        for prefix in prefixes.split(","):
            rooms[prefix.strip()] = (int(floor) if floor else None, room)
    return rooms, {p: r for p, (f, r) in rooms.items() if f is None}


def room_of(module: str, rooms: dict[str, tuple[int | None, str]]) -> tuple[int | None, str]:
    """The room of the longest prefix that ``module`` is or is inside."""
    matches = [p for p in rooms if module == p or module.startswith(p + ".")]
    assert matches, f"{module} is on no floor of docs/architecture.md's floors block"
    return rooms[max(matches, key=len)]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that run up the floors (or into an old path)."""
    rooms, _ = floors()
    offences = []
    for module, targets in graph.items():
        if not module.startswith("uirl_gym"):
            continue
        floor, room = room_of(module, rooms)
        if floor is None:  # an old path: it imports its new home, wherever that is
            continue
        for target in sorted(targets):
            target_floor, target_room = room_of(target, rooms)
            if target_floor is None:
                offences.append(f"{module} imports {target}, an old path ({target_room})")
            elif target_room != room and target_floor >= floor:
                offences.append(
                    f"{module} ({room}, floor {floor}) imports {target} "
                    f"({target_room}, floor {target_floor})"
                )
    return offences


def test_imports_never_run_up_the_floors() -> None:
    """issue 40: uirl_gym is built in floors (actions, protocol, guards and tasks, the
    session server beside the client, runtimes, the env side, make, the OpenEnv server): a
    module imports its own room and the floors below, never a floor above or a sibling
    room on its own floor (the session server never imports the client, the runtimes or
    the env side); nothing imports an old path kept for a release."""
    from test_imports import import_graph

    offences = upward_imports(import_graph())
    assert not offences, "imports that run up the floors:\n" + "\n".join(offences)


def test_the_floors_check_finds_an_import_that_runs_up() -> None:
    """The check itself, on the real graph with one arrow added per kind of offence."""
    from test_imports import import_graph

    graph = import_graph()
    added = {
        "uirl_gym.session.app": "uirl_gym.client",  # a sibling room on the same floor
        "uirl_gym.protocol": "uirl_gym.env",  # a floor above
        "uirl_gym.make": "uirl_gym.runtimes.settings",  # an old path
    }
    for module, target in added.items():
        graph[module] = graph[module] | {target}
    found = "\n".join(upward_imports(graph))
    assert "uirl_gym.session.app (session, floor 3) imports uirl_gym.client" in found
    assert "uirl_gym.protocol (protocol, floor 1) imports uirl_gym.env" in found
    assert "uirl_gym.make imports uirl_gym.runtimes.settings, an old path" in found

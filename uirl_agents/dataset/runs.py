"""What an export reads: the run directories in RUN_DIR and their episodes, checked.

A *run directory* is what :class:`~uirl_agents.episodes.trajectories.TrajectoryWriter`
writes: ``episodes.jsonl`` + ``images/``. RUN_DIR is one of (:func:`find_runs`):

- a run directory itself (one agent of ``evaluate.py``, a recorder's ``--out``);
- an ``evaluate.py --out`` folder: ``run.json`` and a run directory per agent (the
  agent's model comes from its label, its format from its ``summary.json``);
- a trainer's ``--output-dir``: ``config_{rs,grpo,ppo}.yaml`` and a run directory per
  iteration and process, ``trajectories/TAG/rank_R`` (rollouts, evaluations,
  demonstrations; the model and format from the config);
- a folder of run directories (recordings): its subfolders that hold ``episodes.jsonl``.

Nothing here writes: a run is read as it is, even while its writer appends to it.
:func:`scan_run` reads a run directory once, without images, and names what an export
must leave out (a line cut short by a kill, an episode whose PNG is missing, a repeated
episode id); :func:`complete_records` then yields the others.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from uirl_agents.episodes.trajectories import EPISODES_FILE, IMAGES_DIR
from uirl_agents.evaluation.benchmark import RUN_FILE, SUMMARY_FILE, agent_run_dir
from uirl_agents.evaluation.cost import ModelPrice, find_price

logger = logging.getLogger(__name__)

TRAJECTORIES_DIR = "trajectories"  # a trainer's (uirl_agents.trainers.run)
TRAINER_CONFIGS = ("config_rs.yaml", "config_grpo.yaml", "config_ppo.yaml")
# A step record's text observations (issue 41): ``{"observation": {"axtree": ..., ...}}``.
OBSERVATION_KEY = "observation"


class Layout(StrEnum):
    """What RUN_DIR is."""

    RUN = "run directory"
    EVALUATE = "evaluate.py run"
    TRAINING = "training run"
    RUNS = "folder of run directories"


class RunLayoutError(ValueError):
    """RUN_DIR is none of the layouts an export reads."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(
            f"{path}: {why}; expected a run directory ({EPISODES_FILE} + {IMAGES_DIR}/, "
            "written by evaluate.py, a trainer or the recorder), an evaluate.py --out folder "
            f"({RUN_FILE}), a trainer's --output-dir ({TRAJECTORIES_DIR}/TAG/rank_R) or a "
            "folder of run directories"
        )
        self.path = path


class EmptyRunError(ValueError):
    """RUN_DIR holds no complete episode."""


@dataclass(frozen=True)
class RunSource:
    """One run directory of RUN_DIR.

    Attributes:
        path: the folder.
        name: its path relative to RUN_DIR (``.``: RUN_DIR itself): the ``run`` column.
        model: the model its policy ran (None: scripted, a person, unknown).
        format: the model format its prompts are in (None: no prompts, or unknown).
        price: its model's price (None: not an API model, or not in the price table).
    """

    path: Path
    name: str
    model: str | None = None
    format: str | None = None
    price: ModelPrice | None = None


@dataclass(frozen=True)
class RunFolder:
    """RUN_DIR, read: its layout, run directories and settings (for the card)."""

    root: Path
    layout: Layout
    sources: list[RunSource]
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeftOut:
    """Something an export left out, and why."""

    run: str
    where: str
    why: str

    def __str__(self) -> str:
        return f"{self.run}: {self.where}: {self.why}"


@dataclass
class RunScan:
    """One read of a run directory's ``episodes.jsonl`` (no images decoded).

    Attributes:
        skip: line numbers (1-based) whose episode is left out.
        left_out: why, one entry per line.
        episodes: complete episodes; steps: their steps.
        observations: the text observations their steps carry (issue 41).
        prompted_steps: their steps that carry the prompt the policy saw.
    """

    skip: set[int] = field(default_factory=set)
    left_out: list[LeftOut] = field(default_factory=list)
    episodes: int = 0
    steps: int = 0
    observations: set[str] = field(default_factory=set)
    prompted_steps: int = 0


def find_runs(root: str | os.PathLike[str], prices: Mapping[str, ModelPrice]) -> RunFolder:
    """RUN_DIR's layout and run directories.

    Raises:
        RunLayoutError: not a folder, or none of the layouts (the message lists them).
    """
    root = Path(root)
    if not root.is_dir():
        raise RunLayoutError(root, "no such folder" if not root.exists() else "not a folder")
    if (root / EPISODES_FILE).is_file():
        return RunFolder(root, Layout.RUN, [_source(root, ".", _label(root), prices)])
    if (root / RUN_FILE).is_file():
        return _evaluate_run(root, prices)
    configs = [root / name for name in TRAINER_CONFIGS if (root / name).is_file()]
    if configs:
        return _training_run(root, configs[0], prices)
    runs = sorted(p for p in root.iterdir() if (p / EPISODES_FILE).is_file())
    if not runs:
        raise RunLayoutError(root, f"no {EPISODES_FILE} in it or in its subfolders")
    sources = [_source(p, p.name, _label(p), prices) for p in runs]
    return RunFolder(root, Layout.RUNS, sources)


def _label(run_dir: Path) -> str | None:
    """The agent label in an evaluate.py agent folder's summary (None: not one)."""
    summary = _read_json(run_dir / SUMMARY_FILE)
    return summary.get("result", {}).get("agent") if summary else None


def _source(
    path: Path, name: str, label: str | None, prices: Mapping[str, ModelPrice]
) -> RunSource:
    """A run directory; ``label``: its evaluate.py agent label (its model, format, price)."""
    summary = _read_json(path / SUMMARY_FILE) or {}
    format_name = summary.get("result", {}).get("format")
    model = model_of_label(label) if label else None
    price = find_price(model, prices) if model else None
    return RunSource(path, name, model, format_name, price)


def model_of_label(label: str) -> str | None:
    """The model of an ``evaluate.py`` agent label (``hf:NAME+LORA@8bit`` -> ``NAME``;
    ``expert``, ``random``: None).

    >>> model_of_label("anthropic:claude-sonnet-4-5"), model_of_label("expert")
    ('claude-sonnet-4-5', None)
    """
    kind, colon, rest = label.partition(":")
    if not colon:
        return None
    return rest.split("+", 1)[0].split("@", 1)[0] or None


def _evaluate_run(root: Path, prices: Mapping[str, ModelPrice]) -> RunFolder:
    run = _read_json(root / RUN_FILE)
    if run is None or not isinstance(run.get("agents"), list):
        raise RunLayoutError(root, f"{RUN_FILE} is not an evaluate.py run file")
    sources = []
    for label in run["agents"]:
        path = agent_run_dir(root, label)
        if (path / EPISODES_FILE).is_file():  # an agent not started yet has none
            sources.append(_source(path, path.name, label, prices))
    if not sources:
        raise EmptyRunError(f"{root}: no agent of {RUN_FILE} has played an episode yet")
    return RunFolder(root, Layout.EVALUATE, sources, dict(run.get("settings", {})))


def _training_run(root: Path, config_file: Path, prices: Mapping[str, ModelPrice]) -> RunFolder:
    import yaml  # datasets' dependency too

    config = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
    model = config.get("model", {})
    runs = sorted(p.parent for p in (root / TRAJECTORIES_DIR).glob(f"*/rank_*/{EPISODES_FILE}"))
    if not runs:
        raise RunLayoutError(
            root,
            f"a training run without trajectories (nothing under {TRAJECTORIES_DIR}/: "
            "train with logging.save_trajectories true)",
        )
    name = model.get("name")
    sources = [
        RunSource(
            p,
            str(p.relative_to(root)),
            name,
            model.get("format"),
            find_price(name, prices) if name else None,
        )
        for p in runs
    ]
    settings = {"trainer": config_file.stem.removeprefix("config_"), "model": name}
    settings |= {k: config[k] for k in ("iterations", "seed") if k in config}
    return RunFolder(root, Layout.TRAINING, sources, settings)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def step_images(step: dict[str, Any]) -> list[str]:
    """The PNG names a step record refers to (screenshot, model images, ``som``)."""
    names = [step.get("screenshot"), *(step.get("model_images") or [])]
    names.append((step.get(OBSERVATION_KEY) or {}).get("som"))
    return [n for n in names if isinstance(n, str)]


def scan_run(source: RunSource) -> RunScan:
    """Read ``source``'s episodes once (no image decoded) and name what is incomplete."""
    scan = RunScan()
    present = (
        set(os.listdir(source.path / IMAGES_DIR)) if (source.path / IMAGES_DIR).is_dir() else set()
    )
    seen: set[str] = set()
    for number, record, problem, _ in _lines(source.path / EPISODES_FILE):
        if record is not None and problem is None:
            problem = _episode_problem(record, present, seen)
        if problem is not None:
            scan.skip.add(number)
            scan.left_out.append(LeftOut(source.name, f"{EPISODES_FILE} line {number}", problem))
            continue
        assert record is not None
        seen.add(record["episode_id"])
        scan.episodes += 1
        for step in record["steps"]:
            scan.steps += 1
            scan.observations |= set(step.get(OBSERVATION_KEY) or {})
            scan.prompted_steps += step.get("messages") is not None
    return scan


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None, int]]:
    """``(line number, record, problem, length)`` of each non-empty line."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                yield number, None, "incomplete line (a run killed while writing it)", len(line)
                continue
            if not isinstance(record, dict) or not isinstance(record.get("steps"), list):
                yield number, None, "not an episode record", len(line)
                continue
            yield number, record, None, len(line)


def _episode_problem(record: dict[str, Any], present: set[str], seen: set[str]) -> str | None:
    episode_id = record.get("episode_id")
    if episode_id in seen:
        return f"episode {episode_id} again (the first one is kept)"
    for n, step in enumerate(record["steps"]):
        missing = [name for name in step_images(step) if name not in present]
        if missing:
            return f"episode {episode_id} step {n}: {IMAGES_DIR}/{missing[0]} is missing"
    return None


def complete_records(source: RunSource, scan: RunScan) -> Iterator[tuple[dict[str, Any], int]]:
    """The episode records of ``source`` that :func:`scan_run` found complete, in order,
    each with the length of its line (the size of its text).

    Lines appended since the scan are not read: the export is of the run as scanned.
    """
    limit = scan.episodes
    for number, record, _, length in _lines(source.path / EPISODES_FILE):
        if limit == 0:
            return
        if number in scan.skip or record is None:
            continue
        limit -= 1
        yield record, length

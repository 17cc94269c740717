"""An exported dataset's folder: its names, and telling a dataset from a run directory.

A dataset folder (``python -m uirl_agents.dataset export``) holds ``README.md`` (the
card), ``uirl_export.json`` (what the export saw) and a folder of Parquet files per
configuration (``episodes/train-00000-of-00001.parquet``, ``steps/...``). On the Hub
the same files are a dataset repo, named here ``hf://datasets/USER/NAME`` (the address
``datasets`` and ``huggingface_hub``'s file system use; ``@REVISION`` may follow).

This module imports neither ``datasets`` nor ``huggingface_hub``: a trainer's config
checks its ``rs.demonstrations`` with it before anything heavy is loaded.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from uirl_agents.episodes.trajectories import EPISODES_FILE

EPISODES, STEPS = "episodes", "steps"
SPLIT = "train"
CARD_FILE = "README.md"
SUMMARY_FILE = "uirl_export.json"
HUB_PREFIX = "hf://datasets/"
_REPO_ID = re.compile(r"[\w.-]+/[\w.-]+")


class HubDataset(NamedTuple):
    """A dataset repo on the Hub: its id and revision (None: the default branch)."""

    repo_id: str
    revision: str | None = None


def hub_dataset(source: str) -> HubDataset | None:
    """The Hub dataset ``source`` names (``hf://datasets/USER/NAME[@REVISION]``); None
    when it names no Hub dataset.

    Raises:
        ValueError: it starts like one but the id is not ``USER/NAME``.

    >>> hub_dataset("hf://datasets/me/demos@v1"), hub_dataset("runs/demos")
    (HubDataset(repo_id='me/demos', revision='v1'), None)
    """
    if not source.startswith(HUB_PREFIX):
        return None
    repo_id, _, revision = source.removeprefix(HUB_PREFIX).partition("@")
    if not _REPO_ID.fullmatch(repo_id):
        raise ValueError(f"{source!r}: expected {HUB_PREFIX}USER/NAME[@REVISION]")
    return HubDataset(repo_id, revision or None)


def is_dataset_folder(path: Path) -> bool:
    """``path`` holds an exported dataset (its ``episodes`` configuration's files)."""
    return any((path / EPISODES).glob(f"{SPLIT}-*.parquet"))


def check_episode_source(source: str) -> None:
    """``source`` is somewhere episodes can be read from: a run directory, a dataset
    folder or a Hub dataset (``hf://datasets/USER/NAME``). Nothing is downloaded.

    Raises:
        ValueError: none of these, saying what each would hold.
    """
    if hub_dataset(source) is not None:
        return
    path = Path(source)
    if (path / EPISODES_FILE).is_file() or is_dataset_folder(path):
        return
    raise ValueError(
        f"{source!r} is neither a run directory (with {EPISODES_FILE}: written by "
        "`python -m uirl_agents.recorder --out DIR`, evaluate.py or a trainer) nor an "
        f"exported dataset (with {EPISODES}/{SPLIT}-*.parquet: `python -m "
        f"uirl_agents.dataset export`), nor a Hub dataset ({HUB_PREFIX}USER/NAME)"
    )

"""Export runs as a Hugging Face dataset: Parquet shards of two configurations and a card.

:func:`export_dataset` reads RUN_DIR (:mod:`~uirl_agents.dataset.runs`) twice: once
without images, to find what is incomplete and which columns there are, then episode
by episode, each row written as it is made (:mod:`~uirl_agents.dataset.rows`). Memory
holds one episode and one row group (``ROW_GROUP_BYTES`` of rows) per configuration,
whatever the run's size. The rows go through ``datasets``' own Parquet writer (its
features' encoding and metadata, content-defined chunking, as ``push_to_hub`` writes);
a configuration's files are ``CONFIG/train-0000k-of-0000n.parquet``, a new one every
``max_shard_mb`` of images.

Everything is written into a temporary folder beside OUT_DIR, renamed into place at the
end: a failed or killed export leaves OUT_DIR as it was. Nothing in RUN_DIR is written.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from datasets import Features
from datasets.arrow_writer import ParquetWriter
from tqdm.auto import tqdm

from uirl_agents.dataset.card import ConfigSummary, ExportSummary, Tally, render_card
from uirl_agents.dataset.folder import CARD_FILE, EPISODES, SPLIT, STEPS, SUMMARY_FILE
from uirl_agents.dataset.rows import (
    OBSERVATION_FEATURES,
    EpisodeRows,
    RowBuilder,
    episode_features,
    step_features,
)
from uirl_agents.dataset.runs import (
    EmptyRunError,
    LeftOut,
    RunFolder,
    RunScan,
    complete_records,
    find_runs,
    scan_run,
)
from uirl_agents.evaluation.cost import DEFAULT_PRICES, ModelPrice
from uirl_agents.formats import FormatConfig, get_format
from uirl_agents.formats.base import DEFAULT_MIN_PIXELS
from uirl_agents.policies.context import EpisodeContexts

logger = logging.getLogger(__name__)

# A row group: what a reader decodes at once (and what the export holds in memory).
ROW_GROUP_BYTES = 32 * 1024 * 1024
PREVIEW_EPISODES = 5


class ExportIncompleteError(RuntimeError):
    """A strict export met something incomplete in RUN_DIR (nothing was written)."""

    def __init__(self, left_out: Sequence[LeftOut]) -> None:
        listed = "\n".join(f"  {item}" for item in left_out[:20])
        more = f"\n  ... and {len(left_out) - 20} more" if len(left_out) > 20 else ""
        super().__init__(
            f"strict export: {len(left_out)} thing(s) incomplete in the run, nothing "
            f"written:\n{listed}{more}\n(without --strict they are left out and named)"
        )
        self.left_out = list(left_out)


@dataclass
class ExportConfig:
    """How to export.

    Attributes:
        format: write the steps of policies that recorded no prompt (scripted agents)
            in this model format (``uirl_agents.formats``); None: such steps have no
            ``steps`` row. Steps with a recorded prompt keep it.
        max_images: screenshots in each such prompt (as ``rollout.max_images``).
        max_pixels: the largest image of such a prompt, in pixels (the processor's
            ``max_pixels`` of the model to train: its coordinates are pixels of that
            image); None: the format's default (a 1280x800 screen at about native scale).
        strict: fail, writing nothing, when anything in the run is incomplete.
        overwrite: replace an OUT_DIR that holds an earlier export.
        max_shard_mb: start a new Parquet file after this many MB of images.
        license: the card's ``license`` (a Hub license id).
        prices: the model price table, for the ``cost_usd`` column.
        progress: show a progress bar.
        command: the command line, for the card (None: the Python call).
    """

    format: str | None = None
    max_images: int = 1
    max_pixels: int | None = None
    strict: bool = False
    overwrite: bool = False
    max_shard_mb: float = 500.0
    license: str = "unknown"
    prices: Mapping[str, ModelPrice] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    progress: bool = True
    command: str | None = None

    def format_config(self) -> FormatConfig:
        if self.max_pixels is None:
            return FormatConfig()
        return FormatConfig(
            min_pixels=min(DEFAULT_MIN_PIXELS, self.max_pixels), max_pixels=self.max_pixels
        )

    def __post_init__(self) -> None:
        self.format_config()  # ValueError: bad max_pixels
        if self.format is not None:
            get_format(self.format)  # ValueError: unknown, with the registered names
        if self.max_images < 1:
            raise ValueError(f"max_images: expected >= 1, got {self.max_images}")
        if not self.max_shard_mb > 0:
            raise ValueError(f"max_shard_mb: expected > 0, got {self.max_shard_mb}")


@dataclass
class ExportResult:
    """What :func:`export_dataset` wrote (``summary``: as ``uirl_export.json`` has it)."""

    out_dir: Path
    summary: ExportSummary

    @property
    def left_out(self) -> list[str]:
        return self.summary.left_out


class _Shards:
    """One configuration's Parquet files, written a row group at a time.

    Rows come encoded (images as ``{"bytes", "path"}``, the rest plain values) and go to
    Arrow in one call per row group (``pyarrow.Table.from_pylist`` with the features'
    schema), then through ``datasets``' Parquet writer (its schema metadata, content-
    defined chunking).
    """

    def __init__(self, folder: Path, features: Features, max_shard_bytes: float) -> None:
        self.folder = folder
        self.features = features
        self.schema = features.arrow_schema
        self.max_shard_bytes = max_shard_bytes
        self.num_rows = self.num_bytes = 0
        self._files: list[Path] = []
        self._writer: ParquetWriter | None = None
        self._rows: list[dict[str, Any]] = []
        self._shard_bytes = self._group_bytes = 0

    def write(self, row: dict[str, Any], size: int) -> None:
        if set(row) != set(self.features):  # a column would be silently null or dropped
            raise ValueError(f"row columns {sorted(row)} != features {sorted(self.features)}")
        self._rows.append(row)
        self._shard_bytes += size
        self._group_bytes += size
        if self._group_bytes >= ROW_GROUP_BYTES or self._shard_bytes >= self.max_shard_bytes:
            self._flush()
        if self._shard_bytes >= self.max_shard_bytes:
            self._close_file()

    def _flush(self) -> None:
        if not self._rows:
            return
        if self._writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"part-{len(self._files):05d}.parquet"
            self._files.append(path)
            # One row group per flush: the writer's own count of rows never cuts one.
            self._writer = ParquetWriter(
                features=self.features, path=str(path), writer_batch_size=1 << 30
            )
        self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self.schema))
        self._rows = []
        self._group_bytes = 0

    def _close_file(self) -> None:
        self._flush()
        if self._writer is None:
            return
        rows, size = self._writer.finalize()
        self.num_rows += rows
        self.num_bytes += size
        self._writer = None
        self._shard_bytes = 0

    def close(self) -> ConfigSummary | None:
        """Finish the last file and name them all ``train-0000k-of-0000n``; None: no rows."""
        self._close_file()
        if not self._files:
            return None
        names = []
        for k, path in enumerate(self._files):
            name = f"{SPLIT}-{k:05d}-of-{len(self._files):05d}.parquet"
            path.rename(self.folder / name)
            names.append(f"{self.folder.name}/{name}")
        size = sum((self.folder.parent / n).stat().st_size for n in names)
        return ConfigSummary(self.num_rows, self.num_bytes, size, names)


def export_dataset(
    run_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    config: ExportConfig | None = None,
) -> ExportResult:
    """Export the episodes of ``run_dir`` as a dataset in ``out_dir``.

    Args:
        run_dir: a run directory, an ``evaluate.py --out`` folder, a trainer's
            ``--output-dir`` or a folder of run directories.
        out_dir: the dataset folder to write (Parquet files, ``README.md``,
            ``uirl_export.json``); it must not be inside ``run_dir``.
        config: the options (default: :class:`ExportConfig`'s).

    Returns:
        What was written; ``left_out`` names the incomplete episodes not exported.

    Raises:
        RunLayoutError: ``run_dir`` is none of the layouts.
        EmptyRunError: it holds no complete episode.
        ExportIncompleteError: ``config.strict`` and something was incomplete.
        FileExistsError: ``out_dir`` exists (without ``config.overwrite``), or holds
            something other than an export.
        ValueError: ``out_dir`` inside ``run_dir``.
    """
    config = config or ExportConfig()
    where = str(out_dir)  # as given: the card's load_dataset(...) line
    run_dir, out_dir = Path(run_dir).resolve(), Path(out_dir).resolve()
    folder = find_runs(run_dir, config.prices)
    _check_out_dir(run_dir, out_dir, config.overwrite)
    scans = [scan_run(source) for source in folder.sources]
    left_out = [item for scan in scans for item in scan.left_out]
    if not any(scan.episodes for scan in scans):
        raise EmptyRunError(
            f"{run_dir}: no complete episode to export"
            + (f" ({len(left_out)} incomplete: {left_out[0]}, ...)" if left_out else "")
        )
    if config.strict and left_out:
        raise ExportIncompleteError(left_out)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    staging.chmod(0o777 & ~_umask())  # mkdtemp's folder is private; the export is not
    try:
        summary = _write(folder, scans, staging, config, left_out)
        (staging / CARD_FILE).write_text(render_card(summary, where), encoding="utf-8")
        _move_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for item in summary.left_out:
        logger.warning("left out: %s", item)
    return ExportResult(out_dir, summary)


def _check_out_dir(run_dir: Path, out_dir: Path, overwrite: bool) -> None:
    if out_dir == run_dir or out_dir.is_relative_to(run_dir):
        raise ValueError(
            f"{out_dir} is inside the run folder {run_dir}: an export never writes there; "
            "choose an OUT_DIR outside it"
        )
    if not out_dir.exists():
        return
    if not overwrite:
        raise FileExistsError(
            f"{out_dir} exists: pass --overwrite to replace it, or choose another OUT_DIR"
        )
    if not (out_dir / SUMMARY_FILE).is_file() and any(out_dir.iterdir()):
        raise FileExistsError(
            f"{out_dir} holds something other than an exported dataset (no {SUMMARY_FILE}): "
            "not replacing it; choose another OUT_DIR"
        )


def _move_into_place(staging: Path, out_dir: Path) -> None:
    if out_dir.exists():
        old = out_dir.with_name(f".{out_dir.name}.replaced-{os.getpid()}")
        os.replace(out_dir, old)
        os.replace(staging, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, out_dir)


def _write(
    folder: RunFolder,
    scans: Sequence[RunScan],
    staging: Path,
    config: ExportConfig,
    left_out: list[LeftOut],
) -> ExportSummary:
    observed = set().union(*(scan.observations for scan in scans))
    observations = [name for name in OBSERVATION_FEATURES if name in observed]
    if observed - set(observations):
        logger.warning(
            "observations without a column type, not exported: %s (known: %s)",
            ", ".join(sorted(observed - set(observations))),
            ", ".join(OBSERVATION_FEATURES),
        )
    max_bytes = config.max_shard_mb * 1e6
    episodes = _Shards(staging / EPISODES, episode_features(observations), max_bytes)
    steps = _Shards(staging / STEPS, step_features(observations), max_bytes)
    summary = _empty_summary(folder, config, observations)
    total = sum(scan.episodes for scan in scans)
    with tqdm(total=total, desc="export", unit="ep", disable=not config.progress) as bar:
        for source, scan in zip(folder.sources, scans, strict=True):
            render = None
            if config.format is not None:
                fmt = get_format(config.format, config.format_config())
                render = EpisodeContexts(fmt, max_images=config.max_images)
            builder = RowBuilder(source, observations, render)
            summary.runs.append(source.name)
            for record, text_size in complete_records(source, scan):
                rows = builder.rows(record)
                episodes.write(rows.episode, text_size + rows.episode_bytes)
                step_size = (text_size + rows.step_bytes) // max(1, len(rows.steps))
                for row in rows.steps:
                    steps.write(row, step_size)
                left_out += rows.left_out
                _tally(summary, rows, source.format)
                bar.update(1)
    if config.strict and left_out:
        raise ExportIncompleteError(left_out)
    summary.left_out = [str(item) for item in left_out]
    for name, shards in ((EPISODES, episodes), (STEPS, steps)):
        written = shards.close()
        if written is not None:
            summary.configs[name] = written
    summary.save(staging / SUMMARY_FILE)
    return summary


def _empty_summary(
    folder: RunFolder, config: ExportConfig, observations: list[str]
) -> ExportSummary:
    return ExportSummary(
        uirl_version=_uirl_version(),
        command=config.command or f"export_dataset({str(folder.root)!r}, ...)",
        source=str(folder.root),
        layout=str(folder.layout),
        settings=folder.settings,
        runs=[],
        observations=observations,
        configs={},
        agents={},
        tasks={},
        license=config.license,
        written_in=config.format,
    )


def _tally(summary: ExportSummary, rows: EpisodeRows, recorded_format: str | None) -> None:
    row = rows.episode
    for table, key in ((summary.agents, row["agent"]), (summary.tasks, row["task"])):
        table.setdefault(key, Tally()).add(
            row["success"], row["total_reward"], row["num_steps"], row["cost_usd"]
        )
    summary.models.setdefault(row["agent"], row["model"])
    summary.formats.setdefault(row["agent"], recorded_format)
    if len(summary.preview) < PREVIEW_EPISODES and all(
        p["run"] != row["run"] for p in summary.preview
    ):
        first = row["steps"][0] if row["steps"] else None
        first_action = "-" if first is None or first["action"] is None else first["action"]["type"]
        summary.preview.append(
            {k: row[k] for k in ("episode_id", "run", "agent", "task", "seed", "num_steps")}
            | {"total_reward": row["total_reward"], "success": row["success"]}
            | {"first_action": first_action}
        )
    if summary.example is None and rows.steps:
        messages = rows.steps[0]["messages"]
        prompt = [p["text"] for m in messages[:-1] for p in m["content"] if p["text"]]
        summary.example = {
            "prompt": prompt[-1] if prompt else "",
            "completion": messages[-1]["content"][0]["text"] or "",
        }


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _uirl_version() -> str:
    try:
        return importlib.metadata.version("uirl")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"

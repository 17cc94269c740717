"""The dataset card: ``README.md`` with the Hub's YAML metadata, from what an export saw.

The metadata block is what ``datasets`` and the Hub read: ``configs`` (each
configuration's Parquet files), ``dataset_info`` (features, sizes, rows; written by
``datasets``' own ``DatasetInfosDict``), ``license``, ``task_categories``, ``tags``
(the uirl task ids among them), ``size_categories``, ``pretty_name``. The text says how
the data was made (uirl version, command, source run and its settings, agents and
their success rates, what was left out) and shows a preview.

An export keeps what the card is made from in ``uirl_export.json``
(:class:`ExportSummary`), so that a push renders it again with the repo's id.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from datasets import DatasetInfo, SplitDict, SplitInfo
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCardData

from uirl_agents.dataset.folder import EPISODES, SPLIT, STEPS
from uirl_agents.dataset.rows import episode_features, step_features

DOCS_URL = "docs/datasets.md in the uirl repository"
_PREVIEW_TEXT = 300  # characters of a prompt or completion in the card


@dataclass
class Tally:
    """Episodes of one agent or task: how many, how they ended."""

    episodes: int = 0
    successes: int = 0
    reward: float = 0.0
    steps: int = 0
    cost_usd: float | None = None

    def add(self, success: bool, reward: float, steps: int, cost_usd: float | None) -> None:
        self.episodes += 1
        self.successes += success
        self.reward += reward
        self.steps += steps
        if cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost_usd


@dataclass
class ConfigSummary:
    """One configuration as written: rows, Arrow bytes, Parquet files and their size."""

    num_rows: int
    num_bytes: int
    download_size: int
    files: list[str]


@dataclass
class ExportSummary:
    """What an export wrote and from what (``uirl_export.json``; the card's source)."""

    uirl_version: str
    command: str
    source: str
    layout: str
    settings: dict[str, Any]
    runs: list[str]
    observations: list[str]
    configs: dict[str, ConfigSummary]
    agents: dict[str, Tally]
    tasks: dict[str, Tally]
    models: dict[str, str | None] = field(default_factory=dict)  # agent -> model
    formats: dict[str, str | None] = field(default_factory=dict)  # agent -> format
    left_out: list[str] = field(default_factory=list)
    preview: list[dict[str, Any]] = field(default_factory=list)
    example: dict[str, str] | None = None
    license: str = "unknown"
    written_in: str | None = None  # the format of the steps that recorded no prompt

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", "utf-8")

    @classmethod
    def load(cls, path: Path) -> ExportSummary:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["configs"] = {k: ConfigSummary(**v) for k, v in data["configs"].items()}
        data["agents"] = {k: Tally(**v) for k, v in data["agents"].items()}
        data["tasks"] = {k: Tally(**v) for k, v in data["tasks"].items()}
        return cls(**data)


def size_category(rows: int) -> str:
    """The Hub's size category of a dataset of ``rows`` rows.

    >>> size_category(999), size_category(15_000)
    ('n<1K', '10K<n<100K')
    """
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")]
    bounds += [(1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")]
    return next((name for bound, name in bounds if rows < bound), "n>10M")


def card_metadata(summary: ExportSummary) -> DatasetCardData:
    """The YAML block: configs, dataset_info, license, task categories, tags, sizes."""
    card = DatasetCardData(
        license=summary.license,
        pretty_name=f"uirl trajectories: {', '.join(sorted(summary.tasks))}",
        task_categories=["image-text-to-text", "reinforcement-learning"],
        tags=["uirl", "computer-use", "gui-agent", "trajectories", *sorted(summary.tasks)],
        size_categories=[size_category(max(c.num_rows for c in summary.configs.values()))],
    )
    features = {
        EPISODES: episode_features(summary.observations),
        STEPS: step_features(summary.observations),
    }
    infos, configs = {}, {}
    for name, written in summary.configs.items():
        splits = SplitDict()
        splits.add(
            SplitInfo(name=SPLIT, num_bytes=written.num_bytes, num_examples=written.num_rows)
        )
        infos[name] = DatasetInfo(
            features=features[name],
            splits=splits,
            download_size=written.download_size,
            dataset_size=written.num_bytes,
        )
        configs[name] = {
            "data_files": [{"split": SPLIT, "path": f"{name}/{SPLIT}-*.parquet"}],
            **({"default": True} if name == EPISODES else {}),
        }
    DatasetInfosDict(infos).to_dataset_card_data(card)
    MetadataConfigs(configs).to_dataset_card_data(card)
    return card


def render_card(summary: ExportSummary, where: str) -> str:
    """``README.md``: the metadata block and the text; ``where`` is what
    ``load_dataset`` is given to load it (the folder, or the Hub id once pushed)."""
    lines = [f"---\n{card_metadata(summary).to_yaml()}\n---", ""]
    lines += [f"# {card_metadata(summary).pretty_name}", ""]
    lines += [
        "Episodes of computer-use agents on uirl tasks, each step with "
        "its screenshot, the action in uirl's form and in the model's own text, and the "
        "reward; exported with `python -m uirl_agents.dataset` "
        f"({DOCS_URL}).",
        "",
        "## Configurations",
        "",
    ]
    for name, written in summary.configs.items():
        lines.append(
            f"- `{name}`: {written.num_rows:,} rows, {_mb(written.download_size)} "
            f"in {len(written.files)} Parquet file(s). " + _CONFIG_TEXT[name]
        )
    if STEPS not in summary.configs:
        lines.append(
            f"- no `{STEPS}` configuration: no step carried the prompt its policy "
            "saw (scripted agents); export with `--format NAME` to write them in a "
            "model format."
        )
    if summary.observations:
        lines.append(f"- text observations as columns: {', '.join(summary.observations)}.")
    lines += ["", "## How it was made", "", *_provenance(summary), "", "## Agents", ""]
    lines += _agents_table(summary) + ["", "## Tasks", ""] + _tasks_table(summary)
    lines += ["", "## Preview", ""] + _preview(summary)
    lines += ["", "## Use", "", "```python", "from datasets import load_dataset", ""]
    lines += [f'episodes = load_dataset("{where}", "{EPISODES}", split="{SPLIT}")']
    if STEPS in summary.configs:
        lines += [f'steps = load_dataset("{where}", "{STEPS}", split="{SPLIT}")  # SFT']
    lines += [
        "```",
        "",
        "Train on it with TRL's `SFTTrainer`, or as expert iteration's "
        f"demonstrations (`rs.demonstrations`): {DOCS_URL}.",
        "",
    ]
    return "\n".join(lines)


_CONFIG_TEXT = {
    EPISODES: "One row per episode: who played what (run, agent, model, format, task, seed, "
    "options), how it ended (success, total reward, terminated/truncated, error, tokens, "
    "cost), and its `steps`: screenshot, action (uirl's fields), `action_text` (the model's "
    "output), reward, the task's progress.",
    STEPS: "One row per step in chat form: `messages` (the prompt the policy saw, then its "
    "output as the assistant turn) and `images` (the prompt's images, in order), with the "
    "step's action and reward and its episode's outcome (`episode_success`, "
    "`episode_reward`).",
}


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _provenance(summary: ExportSummary) -> list[str]:
    lines = [
        f"- uirl {summary.uirl_version}: `{summary.command}`",
        f"- source: {summary.layout} `{Path(summary.source).name}`, "
        f"{len(summary.runs)} run folder(s): {', '.join(f'`{r}`' for r in summary.runs[:10])}"
        + (", ..." if len(summary.runs) > 10 else ""),
    ]
    if summary.settings:
        lines.append(f"- its settings: {_settings(summary.settings)}")
    if summary.written_in is not None:
        lines.append(
            f"- the steps of agents that recorded no prompt (scripted ones) are written in "
            f"`{summary.written_in}`'s format in `{STEPS}` (`--format`)"
        )
    if summary.left_out:
        lines.append(f"- left out ({len(summary.left_out)}), incomplete in the source:")
        lines += [f"  - {item}" for item in summary.left_out[:20]]
        if len(summary.left_out) > 20:
            lines.append(f"  - ... and {len(summary.left_out) - 20} more")
    return lines


def _settings(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k} `{v}`" for k, v in settings.items())


def _tally_cells(t: Tally) -> str:
    cost = "-" if t.cost_usd is None else f"${t.cost_usd / t.episodes:.4f}"
    return (
        f"{t.episodes} | {t.successes / t.episodes:.0%} | {t.reward / t.episodes:.2f} "
        f"| {t.steps / t.episodes:.1f} | {cost}"
    )


def _agents_table(summary: ExportSummary) -> list[str]:
    lines = [
        "| agent | model | format | episodes | success | mean reward | steps/episode "
        "| cost/episode |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for agent, tally in sorted(summary.agents.items()):
        model = summary.models.get(agent) or "-"
        fmt = summary.formats.get(agent) or "-"
        lines.append(f"| {agent} | {model} | {fmt} | {_tally_cells(tally)} |")
    return lines


def _tasks_table(summary: ExportSummary) -> list[str]:
    lines = [
        "| task | episodes | success | mean reward | steps/episode | cost/episode |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {task} | {_tally_cells(t)} |" for task, t in sorted(summary.tasks.items())]
    return lines


def _preview(summary: ExportSummary) -> list[str]:
    lines = [
        f"The first episode of each run folder in `{EPISODES}`:",
        "",
        "| episode | run | agent | task | seed | steps | reward | success | first action |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary.preview:
        cells = [str(row[k]) for k in ("episode_id", "run", "agent", "task", "seed", "num_steps")]
        cells += [f"{row['total_reward']:.2f}", str(row["success"]), f"`{row['first_action']}`"]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if summary.example is not None:
        lines += [
            "",
            f"The first row of `{STEPS}`: the prompt's last text, then the completion:",
            "",
        ]
        lines += ["```text", _cut(summary.example["prompt"]), "```", "", "```text"]
        lines += [_cut(summary.example["completion"]), "```"]
    return lines


def _cut(text: str) -> str:
    return text if len(text) <= _PREVIEW_TEXT else text[:_PREVIEW_TEXT] + " [...]"

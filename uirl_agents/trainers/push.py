"""Share a training run on the Hugging Face Hub.

    python -m uirl_agents.trainers.push RUN_DIR user/name [--merged] [--results DIR] [--private]

uploads, from the run's latest checkpoint, in one commit:

- the LoRA adapter (``adapter_model.safetensors`` + ``adapter_config.json``), or with
  ``--merged`` the base model with the adapter merged in (full weights, merged into an
  unquantized base even when the run trained on an 8/4-bit one); a full fine-tuning
  run uploads its weights;
- the processor (tokenizer, image processor, chat template);
- the resolved config (``config_rs.yaml``, ``config_grpo.yaml`` or ``config_ppo.yaml``);
- ``README.md``, a model card with Hub metadata (``base_model``, ``library_name``,
  ``tags``) and the evaluation table of ``scripts/evaluate.py`` (``results.md`` in the
  run folder or ``--results DIR``), plus the last evaluation the trainer logged.

The upload goes through ``huggingface_hub`` (``HfApi.create_repo`` +
``upload_folder``); the token comes from ``HF_TOKEN`` or ``hf auth login``, and
``HF_ENDPOINT`` points it at another Hub. Both trainers push the same way at the end of
a run with ``--push-to-hub REPO`` (config ``hub.*``), from the main process only.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from uirl_agents.trainers.config import HubConfig, TrainConfig

logger = logging.getLogger(__name__)

CARD_FILE = "README.md"
# What scripts/evaluate.py writes in its --out folder (uirl_agents.evaluation.benchmark.write_reports).
RESULTS_TABLE = "results.md"
RESULTS_JSON = "results.json"
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_TRAINERS = {"rs": "expert iteration (rejection sampling + SFT)", "grpo": "GRPO"}


class HubTokenMissingError(RuntimeError):
    """A push was asked for but no Hub token can be found."""

    def __init__(self, repo_id: str) -> None:
        super().__init__(
            f"hub.repo_id is {repo_id!r} but no Hugging Face token is set: export HF_TOKEN "
            "(a write token) or run `hf auth login` before the run, or unset hub.repo_id"
        )
        self.repo_id = repo_id


class RunNotPushableError(ValueError):
    """A run folder with nothing to push: no resolved config or no checkpoint yet."""

    def __init__(self, run_dir: Path, missing: str) -> None:
        super().__init__(
            f"{run_dir}: expected a training run folder with {missing}; run "
            "scripts/train_rs.py, train_grpo.py or train_ppo.py with --output-dir there first"
        )
        self.run_dir = run_dir


@dataclass(frozen=True)
class TrainedRun:
    """What a run folder holds.

    Attributes:
        run_dir: the folder.
        trainer: ``rs`` or ``grpo``.
        config_file: the resolved config the trainer wrote.
        config: it, loaded (``RSConfig`` / ``GRPOConfig``).
        checkpoint: the latest checkpoint folder.
        iterations: iterations done at that checkpoint.
        base_model: the checkpoint the run started from (a Hub id or a local folder).
    """

    run_dir: Path
    trainer: str
    config_file: Path
    config: TrainConfig
    checkpoint: Path
    iterations: int
    base_model: str

    @property
    def is_lora(self) -> bool:
        return self.config.model.lora_rank > 0

    @property
    def quantization(self) -> str | None:
        from uirl_agents.loading.quantization import quantization_mode

        m = self.config.model
        return quantization_mode(load_in_8bit=m.load_in_8bit, load_in_4bit=m.load_in_4bit)


def read_run(run_dir: str | Path) -> TrainedRun:
    """The run in ``run_dir`` (its resolved config and latest checkpoint).

    Raises:
        RunNotPushableError: no ``config_*.yaml`` or no checkpoint.
    """
    from uirl_agents.trainers import checkpoint as ckpt
    from uirl_agents.trainers.cli import load_config
    from uirl_agents.trainers.config import (
        TINY_MODEL,
        TINY_MODEL_DIR,
        GRPOConfig,
        PPOConfig,
        RSConfig,
    )

    run_dir = Path(run_dir)
    configs = sorted(run_dir.glob("config_*.yaml"))
    if not configs:
        raise RunNotPushableError(run_dir, "a config_rs.yaml, config_grpo.yaml or config_ppo.yaml")
    checkpoint = ckpt.latest_checkpoint(run_dir)
    if checkpoint is None:
        raise RunNotPushableError(run_dir, f"a checkpoint under {ckpt.CHECKPOINTS_DIR}/")
    config_file = configs[-1]
    trainer = config_file.stem.removeprefix("config_")
    # A PPO run's value head stays behind. Its config may be a GRPO config with the
    # deprecated algorithm: ppo (runs from before PPOConfig): PPOConfig ignores its grpo
    # section, which holds nothing the push reads.
    config_classes: dict[str, type[TrainConfig]] = {
        "rs": RSConfig,
        "grpo": GRPOConfig,
        "ppo": PPOConfig,
    }
    if trainer not in config_classes:
        raise RunNotPushableError(run_dir, f"the config of a {' or '.join(config_classes)} run")
    config = load_config(config_classes[trainer], config_file)
    name = config.model.name
    return TrainedRun(
        run_dir=run_dir,
        trainer=trainer,
        config_file=config_file,
        config=config,
        checkpoint=checkpoint,
        iterations=int(ckpt.load_state(checkpoint)["iteration"]),
        base_model=str(run_dir / TINY_MODEL_DIR) if name == TINY_MODEL else name,
    )


def hub_base_model(run: TrainedRun) -> str | None:
    """The base model's Hub id, for the card's metadata (None: a local folder)."""
    name = run.base_model
    return name if _HUB_ID.match(name) and not Path(name).exists() else None


def stage_run(
    run: TrainedRun,
    out_dir: Path,
    repo_id: str,
    *,
    merged: bool = False,
    results_dir: Path | None = None,
) -> list[str]:
    """Write what :func:`push_run` uploads to ``repo_id`` into ``out_dir``; returns the
    file names.

    Raises:
        RunNotPushableError: the checkpoint holds neither an adapter nor weights.
    """
    from uirl_agents.loading.pretrained import load_processor
    from uirl_agents.trainers import checkpoint as ckpt

    out_dir.mkdir(parents=True, exist_ok=True)
    adapter = run.checkpoint / ckpt.ADAPTER_DIR
    weights = run.checkpoint / ckpt.MODEL_DIR
    if run.is_lora and merged:
        _save_merged(run, adapter, out_dir)
    elif (adapter if run.is_lora else weights).is_dir():
        shutil.copytree(adapter if run.is_lora else weights, out_dir, dirs_exist_ok=True)
    else:
        raise RunNotPushableError(run.run_dir, f"{adapter} or {weights}")
    load_processor(run.base_model).save_pretrained(out_dir)
    shutil.copy2(run.config_file, out_dir / run.config_file.name)
    results = _read_results(results_dir or run.run_dir)
    card = model_card(
        run, repo_id, merged=merged, results=results, training_eval=_last_eval(run.run_dir)
    )
    (out_dir / CARD_FILE).write_text(card, encoding="utf-8")
    return sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())


def _save_merged(run: TrainedRun, adapter: Path, out_dir: Path) -> None:
    """The base (unquantized, in the run's dtype, on CPU) with the adapter merged in;
    ``model.dtype: auto`` is bf16 where a GPU is visible, else float32."""
    from uirl_agents.loading.pretrained import default_device, load_model, resolve_dtype

    dtype = resolve_dtype(run.config.model.dtype, default_device())
    from peft import PeftModel

    model = load_model(run.base_model, adapter_path=adapter, device="cpu", dtype=dtype)
    assert isinstance(model, PeftModel)  # load_model puts the adapter on
    model.merge_and_unload().save_pretrained(out_dir)


def _read_results(results_dir: Path) -> tuple[str, dict[str, Any]] | None:
    """evaluate.py's table and settings in ``results_dir`` (None: it has none)."""
    table = results_dir / RESULTS_TABLE
    if not table.is_file():
        return None
    settings_file = results_dir / RESULTS_JSON
    settings = json.loads(settings_file.read_text())["settings"] if settings_file.is_file() else {}
    return table.read_text(encoding="utf-8").strip(), settings


def _last_eval(run_dir: Path) -> tuple[int, dict[str, float]] | None:
    """The last ``eval/*`` metrics the trainer logged, with their step."""
    from uirl_agents.trainers.metrics import read_metrics

    evals = [r for r in read_metrics(run_dir) if any(k.startswith("eval/") for k in r)]
    if not evals:
        return None
    last = evals[-1]
    return int(last["step"]), {k: v for k, v in last.items() if k.startswith("eval/")}


def model_card(
    run: TrainedRun,
    repo_id: str,
    *,
    merged: bool = False,
    results: tuple[str, dict[str, Any]] | None = None,
    training_eval: tuple[int, dict[str, float]] | None = None,
) -> str:
    """The repo's ``README.md``: YAML metadata, what was trained and how, evaluation."""
    m = run.config.model
    adapter_only = run.is_lora and not merged
    what = (
        "A LoRA adapter"
        if adapter_only
        else "The weights (LoRA merged in)"
        if run.is_lora
        else "The fine-tuned weights"
    )
    rows = [
        ("trainer", _TRAINERS[run.trainer]),
        ("base model", f"`{run.base_model}`"),
        ("tasks", ", ".join(sorted(run.config.env.tasks or {"simple_data_entry": 1}))),
        ("iterations", str(run.iterations)),
        ("action format", f"`{m.format}`"),
        ("fine-tuning", f"LoRA rank {m.lora_rank}, {m.lora_preset}" if run.is_lora else "full"),
        ("base weights", run.quantization or m.dtype),
        ("learning rate", str(run.config.optim.learning_rate)),
    ]
    lines = [
        "---",
        yaml.safe_dump(card_metadata(run, adapter_only=adapter_only), sort_keys=False).strip(),
        "---",
        "",
        f"# {repo_id.rsplit('/', 1)[-1]}",
        "",
        f"{what} of `{run.base_model}`, trained with uirl's "
        f"{_TRAINERS[run.trainer]} to use a computer from screenshots "
        "(pixel-level mouse and keyboard actions).",
        "",
        "## Training",
        "",
        "| setting | value |",
        "| --- | --- |",
        *(f"| {k} | {v} |" for k, v in rows),
        "",
        f"The resolved config is `{run.config_file.name}`.",
    ]
    if results is not None:
        table, settings = results
        lines += ["", "## Evaluation", ""]
        if settings:
            described = ", ".join(f"{k} {v}" for k, v in settings.items())
            lines += [f"`scripts/evaluate.py` ({described}):", ""]
        lines.append(table)
    if training_eval is not None:
        step, metrics = training_eval
        lines += ["", f"## Evaluation during training (step {step})", ""]
        lines += ["| metric | value |", "| --- | --- |"]
        lines += [f"| {k} | {v:.4g} |" for k, v in sorted(metrics.items())]
    agent = f"hf:{run.base_model},lora={repo_id}" if adapter_only else f"hf:{repo_id}"
    usage = f"python scripts/evaluate.py --agent {agent},format={m.format}"
    lines += ["", "## Use", "", "```bash", usage, "```", ""]
    return "\n".join(lines)


def card_metadata(run: TrainedRun, *, adapter_only: bool) -> dict[str, Any]:
    """The card's YAML block: ``base_model`` (a Hub id only), ``library_name``, tags."""
    metadata: dict[str, Any] = {}
    base = hub_base_model(run)
    if base is not None:
        metadata["base_model"] = base
    tags = ["uirl", "computer-use", "gui-agent", run.trainer]
    tags += (["lora"] if run.is_lora else []) + (["qlora"] if run.quantization else [])
    return metadata | {
        "library_name": "peft" if adapter_only else "transformers",
        "pipeline_tag": "image-text-to-text",
        "tags": tags,
    }


def require_token(repo_id: str) -> None:
    """Fail before a long run, not after it, when its push could not authenticate.

    Raises:
        HubTokenMissingError: neither ``HF_TOKEN`` nor a saved login.
    """
    from huggingface_hub import get_token

    if get_token() is None:
        raise HubTokenMissingError(repo_id)


def push_result(hub: HubConfig, output_dir: str | Path) -> str | None:
    """The end of a training run: with ``hub.repo_id`` set, the main process pushes the
    run's result (every other process returns at once); returns the commit URL."""
    from accelerate import PartialState

    if hub.repo_id is None or not PartialState().is_main_process:
        return None
    return push_run(
        output_dir,
        hub.repo_id,
        merged=hub.merged,
        private=hub.private,
        results_dir=hub.results_dir,
    )


def push_run(
    run_dir: str | Path,
    repo_id: str,
    *,
    merged: bool = False,
    private: bool = False,
    results_dir: str | Path | None = None,
    token: str | None = None,
    commit_message: str | None = None,
) -> str:
    """Upload a run's result to the Hub repo ``repo_id`` (created if missing).

    Args:
        run_dir: the training run folder.
        repo_id: ``user/name`` (or ``org/name``).
        merged: upload the base with the adapter merged in, not the adapter.
        private: create the repo private (an existing one keeps its visibility).
        results_dir: an evaluate.py ``--out`` folder for the card; None: ``run_dir``.
        token: a Hub token; None: ``HF_TOKEN`` or the saved login.
        commit_message: None: says which checkpoint.

    Returns:
        The commit's URL.

    Raises:
        RunNotPushableError: nothing to push in ``run_dir``.
        huggingface_hub.errors.HfHubHTTPError: the Hub refused (e.g. no write token).
    """
    from huggingface_hub import HfApi

    run = read_run(run_dir)
    api = HfApi(token=token)
    with tempfile.TemporaryDirectory(prefix="uirl-push-") as tmp:
        files = stage_run(
            run,
            Path(tmp),
            repo_id,
            merged=merged,
            results_dir=Path(results_dir) if results_dir is not None else None,
        )
        logger.info("pushing %s (%d files: %s) to %s", run.checkpoint, len(files), files, repo_id)
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=tmp,
            repo_type="model",
            commit_message=commit_message
            or f"uirl {run.trainer}: {run.checkpoint.name} of {run.run_dir.name}",
        )
    logger.info("pushed to %s", commit.commit_url)
    return commit.commit_url


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m uirl_agents.trainers.push",
        description="Push a training run's adapter (or merged weights), processor, config "
        "and model card to the Hugging Face Hub.",
    )
    p.add_argument("run_dir", type=Path, help="the trainer's --output-dir")
    p.add_argument("repo_id", metavar="REPO", help="the Hub repo, user/name")
    p.add_argument("--merged", action="store_true", help="merge the adapter into the base")
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument(
        "--results", type=Path, default=None, help="an evaluate.py --out folder for the card"
    )
    p.add_argument("--token", default=None, help="default: HF_TOKEN or the saved login")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        url = push_run(
            args.run_dir,
            args.repo_id,
            merged=args.merged,
            private=args.private,
            results_dir=args.results,
            token=args.token,
        )
    except RunNotPushableError as exc:
        print(f"push: error: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    print(url)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())

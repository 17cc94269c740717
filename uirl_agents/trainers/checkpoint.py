"""Checkpoints: enough to resume a run exactly where its last checkpoint left it.

A checkpoint is a folder ``OUTPUT_DIR/checkpoints/iter_NNNNNN`` (N = iterations done):

- ``adapter/`` (peft ``save_pretrained``) with LoRA, or ``model/`` for full fine-tuning;
- ``optimizer.pt``: the optimizer's and the learning-rate scheduler's state dicts;
- ``rng.pt``: every process's Python, NumPy and torch RNG states;
- ``trainer_state.json``: the iteration count and the run's counters.

It is written to ``iter_NNNNNN.tmp`` and renamed when complete, so a run killed while
saving leaves the previous checkpoint as the latest. Only the main process writes.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
STATE_FILE = "trainer_state.json"
ADAPTER_DIR = "adapter"
MODEL_DIR = "model"
_NAME = re.compile(r"^iter_(\d{6})$")


def checkpoint_name(iteration: int) -> str:
    return f"iter_{iteration:06d}"


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(output_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda p: p.name)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    checkpoints = list_checkpoints(output_dir)
    return checkpoints[-1] if checkpoints else None


def rng_state() -> dict[str, Any]:
    """This process's RNG states (Python, NumPy global, torch CPU and CUDA)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    output_dir: str | Path,
    iteration: int,
    *,
    model: PreTrainedModel | PeftModel,
    optimizer_state: dict[str, Any],
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    model_state: dict[str, torch.Tensor] | None = None,
    rng_states: list[dict[str, Any]],
    state: dict[str, Any],
    keep_last: int,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write checkpoint ``iteration`` (iterations done) and delete all but the last ``keep_last``.

    Args:
        output_dir: the run folder.
        iteration: iterations completed; the resumed run starts at this index.
        model: the trained model (a peft model saves only its adapter).
        optimizer_state: the optimizer's state dict (see ``sharding.optimizer_state``).
        scheduler: the learning-rate schedule (its state dict is saved next to it).
        model_state: the model's whole state dict when ``model`` is sharded (FSDP);
            None: ``model``'s own.
        rng_states: one :func:`rng_state` per process, in rank order.
        state: JSON-serialisable counters (saved with ``iteration``).
        keep_last: checkpoints kept.
        extra: name -> picklable object, saved as ``NAME.pt`` (e.g. GRPO's replay).

    Returns:
        The checkpoint folder.
    """
    root = Path(output_dir) / CHECKPOINTS_DIR
    final = root / checkpoint_name(iteration)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from peft import PeftModel

    if isinstance(model, PeftModel):  # the trained adapter only (not a frozen reference one)
        model.save_pretrained(
            str(tmp / ADAPTER_DIR), selected_adapters=["default"], state_dict=model_state
        )
    else:
        model.save_pretrained(tmp / MODEL_DIR, state_dict=model_state)
    torch.save(
        {
            "optimizer": optimizer_state,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
        },
        tmp / "optimizer.pt",
    )
    torch.save(rng_states, tmp / "rng.pt")
    for name, value in (extra or {}).items():
        torch.save(value, tmp / f"{name}.pt")
    (tmp / STATE_FILE).write_text(json.dumps({**state, "iteration": iteration}, indent=2))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in list_checkpoints(output_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    logger.info("saved checkpoint %s", final)
    return final


def load_state(checkpoint: Path) -> dict[str, Any]:
    return json.loads((checkpoint / STATE_FILE).read_text())


def resumed_state(checkpoint: Path | None, trainer: str, output_dir: Path) -> dict[str, Any]:
    """The counters saved with the checkpoint a run resumes from (fresh ones without one).

    Raises:
        ValueError: the run folder holds another trainer's run.
    """
    state: dict[str, Any] = {"episodes": 0, "trainer": trainer}
    if checkpoint is not None:
        state.update(load_state(checkpoint))
    if state["trainer"] != trainer:
        raise ValueError(
            f"{output_dir} holds a {state['trainer']} run, not {trainer}: "
            "give this run another --output-dir"
        )
    return state


def load_extra(checkpoint: Path, name: str) -> Any | None:
    """What ``save_checkpoint(extra={name: ...})`` saved (None: nothing saved)."""
    path = checkpoint / f"{name}.pt"
    # Our own pickled objects (episodes with their images): weights_only cannot hold them.
    return torch.load(path, weights_only=False) if path.exists() else None


def load_optimizer(
    checkpoint: Path, scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
) -> dict[str, Any]:
    """Restore the scheduler's state; returns the optimizer's saved state dict (for
    ``sharding.load_optimizer_state``)."""
    saved = torch.load(checkpoint / "optimizer.pt", weights_only=False)
    if scheduler is not None and saved["scheduler"] is not None:
        scheduler.load_state_dict(saved["scheduler"])
    return saved["optimizer"]


def load_rng(checkpoint: Path, rank: int, world_size: int) -> None:
    """Restore this process's RNG states (skipped with a warning if the world size changed)."""
    states = torch.load(checkpoint / "rng.pt", weights_only=False)
    if len(states) != world_size:
        logger.warning(
            "checkpoint %s was written by %d processes, this run has %d: RNG states not restored",
            checkpoint,
            len(states),
            world_size,
        )
        return
    set_rng_state(states[rank])

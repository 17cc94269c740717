"""Metric sinks (TensorBoard by default, W&B when asked, always ``metrics.jsonl``) and
episode statistics.

Metric names are namespaced with slashes: ``rollout/*`` (the iteration's training
episodes), ``eval/*`` (held-out seeds, greedy), ``train/*`` (the update), ``perf/*``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.trainers.config import LoggingConfig

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"

# Per metric sink: the module it needs and the extra that installs it.
BACKENDS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "train"),
    "wandb": ("wandb", "wandb"),
}


class MetricsBackendMissingError(ImportError):
    """A metric sink (``logging.report_to``) whose package is not installed.

    Attributes:
        backend: the sink asked for ("tensorboard", "wandb").
        extra: the uirl extra that installs it.
    """

    def __init__(self, backend: str, extra: str) -> None:
        self.backend, self.extra = backend, extra
        super().__init__(
            f"logging.report_to asks for {backend!r}, but {BACKENDS[backend][0]} is not "
            f"installed: pip install -e '.[{extra}]' (or drop {backend!r} from "
            f"logging.report_to)"
        )


def check_backends(report_to: Sequence[str]) -> None:
    """Check that every sink in ``report_to`` can be imported, without importing it.

    Called when the config is read, so that a missing package fails the run before
    any session starts or any model loads.

    Raises:
        MetricsBackendMissingError: a sink's package is not installed.
    """
    for backend in report_to:
        module, extra = BACKENDS[backend]
        try:
            found = importlib.util.find_spec(module) is not None
        except ValueError:  # in sys.modules without a spec: treat as importable
            found = True
        if not found:
            raise MetricsBackendMissingError(backend, extra)


def _import_backend(backend: str) -> Any:
    module, extra = BACKENDS[backend]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MetricsBackendMissingError(backend, extra) from exc


class MetricsLogger:
    """Writes scalars to TensorBoard / W&B and appends them to ``metrics.jsonl``.

    Args:
        output_dir: the run folder (``metrics.jsonl`` goes there).
        report_to: ``"tensorboard"`` and/or ``"wandb"``.
        log_dir: the TensorBoard folder.
        run_name: the W&B run name.
        wandb_project: the W&B project.
        config: logged to W&B with the run.
        start_step: a resumed run's first step: later records of the earlier attempt
            are dropped from ``metrics.jsonl`` and purged from TensorBoard.

    Raises:
        MetricsBackendMissingError: a sink in ``report_to`` is not installed (checked
            for all sinks before any is opened).
    """

    def __init__(
        self,
        output_dir: Path,
        report_to: Sequence[str],
        log_dir: Path,
        run_name: str,
        wandb_project: str,
        config: dict[str, Any],
        start_step: int = 0,
    ) -> None:
        check_backends(report_to)
        self.path = output_dir / METRICS_FILE
        self._truncate(start_step)
        self._tb = None
        self._wandb = None
        if "tensorboard" in report_to:
            _import_backend("tensorboard")
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(log_dir), purge_step=start_step or None)
        if "wandb" in report_to:
            wandb = _import_backend("wandb")  # only runs that ask for W&B need it
            self._wandb = wandb.init(
                project=wandb_project, name=run_name, config=config, resume="allow"
            )

    def _truncate(self, start_step: int) -> None:
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text().splitlines():
            try:
                if json.loads(line)["step"] < start_step:
                    kept.append(line)
            except (json.JSONDecodeError, KeyError):
                continue  # a line cut short by a kill
        self.path.write_text("".join(k + "\n" for k in kept))

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Write finite scalars at ``step``."""
        clean = {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(v)}
        if not clean:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, **clean}) + "\n")
        if self._tb is not None:
            for key, value in clean.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(clean, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def run_metrics_logger(
    logging: LoggingConfig, output_dir: Path, config: dict[str, Any], *, start_step: int
) -> MetricsLogger:
    """A run's metric sinks as its ``logging`` section says (``config``: the run's whole
    config, logged to W&B)."""
    return MetricsLogger(
        output_dir,
        logging.report_to,
        Path(logging.log_dir) if logging.log_dir else output_dir / "tb",
        logging.run_name or output_dir.name,
        logging.wandb_project,
        config,
        start_step=start_step,
    )


def read_metrics(output_dir: str | Path) -> list[dict[str, float]]:
    """The records of ``metrics.jsonl``, in order."""
    path = Path(output_dir) / METRICS_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


EpisodeRecord = tuple[float, float, int, int, float, str]


def episode_record(episode: Episode) -> EpisodeRecord:
    """``(return, success, length, invalid steps, policy seconds, task)`` of one episode."""
    return (
        episode.total_reward,
        float(episode.success),
        episode.length,
        episode.num_invalid,
        sum(s.policy_time_s for s in episode.steps),
        episode.task,
    )


def episode_metrics(records: Sequence[EpisodeRecord], prefix: str) -> dict[str, float]:
    """Means over episodes (records from every process) as ``{prefix}/...`` metrics; with
    several tasks, also per task as ``{prefix}/task/{task}/...``."""
    if not records:
        return {}
    n = len(records)
    steps = sum(r[2] for r in records)
    metrics = {
        f"{prefix}/reward_mean": sum(r[0] for r in records) / n,
        f"{prefix}/reward_max": max(r[0] for r in records),
        f"{prefix}/success_rate": sum(r[1] for r in records) / n,
        f"{prefix}/episode_length": steps / n,
        f"{prefix}/invalid_action_rate": sum(r[3] for r in records) / max(1, steps),
        f"{prefix}/episodes": float(n),
    }
    tasks = sorted({r[5] for r in records})
    if len(tasks) > 1:
        for task in tasks:
            mine = [r for r in records if r[5] == task]
            metrics |= {
                f"{prefix}/task/{task}/reward_mean": sum(r[0] for r in mine) / len(mine),
                f"{prefix}/task/{task}/success_rate": sum(r[1] for r in mine) / len(mine),
                f"{prefix}/task/{task}/episode_length": sum(r[2] for r in mine) / len(mine),
                f"{prefix}/task/{task}/episodes": float(len(mine)),
            }
    return metrics


class Stopwatch:
    """Wall time per named phase (accumulated)."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self._start


def perf_metrics(totals: dict[str, float], wall_s: float, tokens: float) -> dict[str, float]:
    """``perf/*``: time shares of the iteration's wall time and training throughput.

    ``totals`` holds ``policy`` (generation), ``rollout`` (collection, generation
    included) and ``train`` seconds; env time is collection time not spent generating.
    """
    wall_s = max(wall_s, 1e-9)
    policy = totals.get("policy", 0.0)
    env = max(0.0, totals.get("rollout", 0.0) - policy)
    train = totals.get("train", 0.0)
    return {
        "perf/time_share_env": env / wall_s,
        "perf/time_share_policy": policy / wall_s,
        "perf/time_share_train": train / wall_s,
        "perf/tokens_per_s": tokens / train if train > 0 else 0.0,
        "perf/iteration_s": wall_s,
    }


def policy_seconds(episodes: Sequence[Episode]) -> float:
    """Generation wall time of these episodes (each step holds its share of its batch)."""
    return sum(s.policy_time_s for e in episodes for s in e.steps)


def rank_divergence(parameters: Sequence[Any]) -> float:
    """``train/rank_divergence``: ``max |w_i - w_j|`` over ``parameters`` (torch tensors)
    and every pair of processes; call it on every process.

    0 when every process holds the same weights, as it must: each applies the same
    summed gradients to the same initial weights.
    """
    # Here, not at the top: the configs and evaluate.py import this module without torch.
    import torch.distributed as dist

    worst = 0.0
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return worst
    for p in parameters:
        high, low = p.detach().clone(), p.detach().clone()
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        worst = max(worst, float((high.double() - low.double()).abs().max()))
    return worst

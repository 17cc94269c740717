"""One process's share of a training run: its processes, model, sessions, episodes,
metrics and checkpoints (:class:`TrainingRun`).

Each process (``accelerate launch`` / ``torchrun``, or a plain ``python``) owns its own
sessions (a runtime from ``env.runtime``, :mod:`uirl_gym.make`: local
subprocesses, its own Kubernetes pods, its share of ``env.servers`` or its own OpenEnv
sessions; and a :class:`~uirl_gym.vector.SessionVectorEnv`), collects its own episodes with
:func:`~uirl_agents.episodes.rollout.collect_episodes`, and keeps GRPO groups whole (a group's
episodes never span processes). Only the main process logs and writes checkpoints.

Seeds: the model is built under ``config.seed`` on every process (so a fresh LoRA
adapter starts equal everywhere, and stays equal: every process applies the same
summed gradients), then each process samples with its own stream ``seed + rank``
(:func:`~uirl_agents.trainers.policy_model.load_policy_model`). Which task instances it
plays: :mod:`~uirl_agents.trainers.specs`. The loop that drives a run:
:mod:`~uirl_agents.trainers.loop`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from tqdm.auto import tqdm

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes
from uirl_agents.episodes.trajectories import Episode, TrajectoryWriter
from uirl_agents.policies.base import Policy
from uirl_agents.policies.hf import HFPolicy, vision_token_ids
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers import sharding
from uirl_agents.trainers.cli import config_to_dict, save_config
from uirl_agents.trainers.config import TrainConfig, check_world_size
from uirl_agents.trainers.metrics import (
    check_backends,
    episode_metrics,
    episode_record,
    rank_divergence,
    run_metrics_logger,
)
from uirl_agents.trainers.policy_model import (
    PolicyModel,
    keep_reference_adapter,
    load_policy_model,
    needs_autocast,
    optimizer_and_schedule,
    resolve_model_path,
    rollout_policies,
)
from uirl_agents.trainers.push import require_token
from uirl_agents.trainers.specs import EVAL_STREAM, TRAIN_STREAM, derive_specs
from uirl_agents.trainers.value import VALUE_HEAD_CHECKPOINT
from uirl_agents.trainers.vllm import load_lora_adapter, vllm_policy
from uirl_gym.actions import DEFAULT_SCREEN
from uirl_gym.make import build_runtime, check_runtime, describe, vector_env

logger = logging.getLogger(__name__)

TRAJECTORIES_DIR = "trajectories"


class TrainingRun:
    """One process's share of a training run (use as a context manager).

    Attributes:
        config: the resolved config.
        output_dir: the run folder.
        accelerator: process group, device, ``is_main_process``.
        rank, world_size: this process's index and the number of processes.
        model, processor, format: the policy model (``PeftModel`` with LoRA), its
            processor and prompt format.
        trainable: the trainable parameters (the LoRA adapter, or all but frozen ones;
            and the value head's).
        value_head: PPO's :class:`~uirl_agents.trainers.value.ValueHead` (None otherwise).
        sharded: FSDP holds the model (:mod:`~uirl_agents.trainers.sharding`).
        compute_dtype: the dtype of forward passes (see :meth:`autocast`).
        optimizer: AdamW over ``trainable``; scheduler: its learning-rate schedule.
        policy: samples actions with the current weights (HF in-process, or vLLM).
        eval_policy: the current weights, greedy (or at ``eval.temperature``).
        envs: this process's sessions; envs_lock: held by each :meth:`collect` (an
            asynchronous actor and the evaluation take turns on them).
        start_iteration: the first iteration to run (> 0 when resumed).
        resumed_from: the checkpoint resumed from (None: a fresh start).
        checkpoint_extra: name -> a function whose result every checkpoint also saves.
        on_close: callbacks :meth:`close` runs first (e.g. stopping a rollout actor).
        state: counters saved with checkpoints (``episodes``, ...).

    Methods:
        iterations: the iteration indices still to run (with a progress bar).
        episode_specs: the training episodes of an iteration for this process.
        collect_iteration: run the current policy on them.
        collect: run a policy on specs (trajectories written if configured).
        episode_metrics: ``{prefix}/...`` means over every process's episodes.
        evaluate_at_start, end_update, evaluate_when_due, log, maybe_checkpoint: the end
            of an iteration (:func:`~uirl_agents.trainers.loop.run_iterations`).
        publish_weights: hand the new weights to the rollout policy (vLLM).
        sum_all / max_all / sum_all_dict: reductions over processes.
        autocast: the context forward passes run in.
    """

    def __init__(self, config: TrainConfig, output_dir: str | Path, trainer: str) -> None:
        self.config = config
        self.output_dir = Path(output_dir)
        self.trainer = trainer
        self.accelerator = Accelerator(cpu=not torch.cuda.is_available())
        self.rank = self.accelerator.process_index
        self.world_size = self.accelerator.num_processes
        self.is_main = self.accelerator.is_main_process
        self.output_dir.mkdir(parents=True, exist_ok=True)
        check_world_size(config, self.world_size)
        # name -> what a trainer adds to every checkpoint (``ckpt.load_extra`` reads it).
        self.checkpoint_extra: dict[str, Callable[[], Any]] = {}
        self.on_close = contextlib.ExitStack()
        self.resumed_from = ckpt.latest_checkpoint(self.output_dir)
        self.state = ckpt.resumed_state(self.resumed_from, trainer, self.output_dir)
        self.start_iteration = int(self.state.get("iteration", 0))
        self._check_before_loading()
        loaded = self._load_model()
        self.optimizer, self.scheduler = optimizer_and_schedule(
            config,
            loaded,
            resumed_from=self.resumed_from,
            rank=self.rank,
            world_size=self.world_size,
        )
        # The in-process rollout policy and the evaluation policy, on the model trained.
        rollout, self.eval_policy = rollout_policies(loaded, config.rollout, config.eval)
        self.policy: Policy = rollout
        self.metrics = (
            run_metrics_logger(
                config.logging,
                self.output_dir,
                config_to_dict(config),
                start_step=self.start_iteration + 1,
            )
            if self.is_main
            else None
        )
        # Sessions last: nothing above can leave browsers (or pods) behind when it fails.
        self._open_sessions()
        try:
            self.publish_weights(self.start_iteration)
        except BaseException:
            self.close()
            raise

    # ---- what the constructor sets up, in order ------------------------------------------

    def _check_before_loading(self) -> None:
        """What can fail without a model said before one loads: metric backends, the
        runtime (unreachable servers, RBAC, too few servers), the Hub token; then the
        resolved config is saved and shown."""
        config = self.config
        check_backends(config.logging.report_to)  # before any model or session
        check_runtime(
            config.env, num_envs=config.env.num_envs, rank=self.rank, world_size=self.world_size
        )
        if config.hub.repo_id is not None and self.is_main:
            require_token(config.hub.repo_id)
        if sharding.launched_with_fsdp():  # the resolved config says what runs
            config.model.fsdp = True
            # Every check again, now with fsdp: quantized weights, PPO's value head and an
            # async actor refuse it in the config, whichever way FSDP was asked for.
            config.__post_init__()
        if self.is_main:
            save_config(config, self.output_dir / f"config_{self.trainer}.yaml")
            logger.info("%s config (resolved):\n%s", self.trainer, _pretty(config_to_dict(config)))
            if self.resumed_from is not None:
                logger.info(
                    "resuming from %s (iteration %d)", self.resumed_from, self.start_iteration
                )

    def _load_model(self) -> PolicyModel:
        """The policy model and what comes with it (:func:`load_policy_model`), its
        attributes on the run; PPO's value head saved with every checkpoint."""
        config = self.config
        loaded = load_policy_model(
            config,
            resolve_model_path(config.model, self.output_dir, self.accelerator),
            self.accelerator.device,
            rank=self.rank,
            resumed_from=self.resumed_from,
            reference_adapter=keep_reference_adapter(
                config.model, self.output_dir, self.accelerator
            ),
        )
        self.model, self.value_head, self.trainable = (
            loaded.model,
            loaded.value_head,
            loaded.trainable,
        )
        self.processor, self.format = loaded.processor, loaded.format
        self.compute_dtype, self.sharded = loaded.compute_dtype, loaded.sharded
        if self.value_head is not None:
            self.checkpoint_extra[VALUE_HEAD_CHECKPOINT] = self.value_head.state_dict
        return loaded

    def _open_sessions(self) -> None:
        """This process's runtime and sessions (closed again if opening them fails)."""
        env = self.config.env
        self.runtime = build_runtime(env, rank=self.rank, world_size=self.world_size)
        try:
            self.envs = vector_env(
                env,
                env.num_envs,
                runtime=self.runtime,
                reward_mode=env.reward_mode,
                image_format=env.image_format,
                screen_size=tuple(env.screen_size or DEFAULT_SCREEN),
            )
        except BaseException:
            if self.runtime is not None:
                self.runtime.close()
            raise
        logger.info(
            "process %d: %d sessions on %s",
            self.rank,
            env.num_envs,
            describe(env, self.rank, self.world_size),
        )
        self.envs_lock = threading.Lock()

    def autocast(self) -> contextlib.AbstractContextManager:
        """Forward passes in ``model.dtype`` over float32 master weights (full fine-tuning,
        LoRA's ``modules_to_save``): see :func:`needs_autocast`."""
        if not needs_autocast(self.config.model, self.compute_dtype):
            return contextlib.nullcontext()
        return torch.autocast(self.accelerator.device.type, dtype=self.compute_dtype)

    def __enter__(self) -> TrainingRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop this process's sessions and flush the metric sinks."""
        self.on_close.close()
        self.envs.close()
        if self.runtime is not None:
            self.runtime.close()
        if self.metrics is not None:
            self.metrics.close()

    # ---- iterations and episodes -------------------------------------------------------

    def iterations(self) -> Iterator[int]:
        bar = tqdm(
            range(self.start_iteration, self.config.iterations),
            initial=self.start_iteration,
            total=self.config.iterations,
            desc=self.trainer,
            unit="it",
            disable=not (self.is_main and self.config.logging.progress),
        )
        yield from bar

    def episode_specs(self, iteration: int) -> list[EpisodeSpec]:
        """This process's training episodes of ``iteration``: whole groups of G, seeded by
        ``(seed, iteration, rank)``."""
        r = self.config.rollout
        num_groups = r.episodes_per_iteration // (r.group_size * self.world_size)
        return self.task_specs(TRAIN_STREAM, iteration, num_groups, r.group_size, "it")

    def collect_iteration(self, iteration: int, policy: Policy | None = None) -> list[Episode]:
        """This process's training episodes of ``iteration``, sampled with ``policy``
        (default: ``self.policy``; trajectories under ``trajectories/iter_NNNNNN``)."""
        return self.collect(
            policy or self.policy, self.episode_specs(iteration), tag=f"iter_{iteration:06d}"
        )

    def eval_specs(self) -> list[EpisodeSpec]:
        """This process's share of the held-out evaluation instances (the same every time)."""
        return self.task_specs(
            EVAL_STREAM, 0, self.config.eval.episodes // self.world_size, 1, "ev"
        )

    def task_specs(
        self, stream: int, iteration: int, num_groups: int, group_size: int, tag: str
    ) -> list[EpisodeSpec]:
        """This process's specs of ``stream`` and ``iteration``: see :func:`derive_specs`."""
        return derive_specs(
            self.config.env,
            seed=self.config.seed,
            stream=stream,
            iteration=iteration,
            rank=self.rank,
            num_groups=num_groups,
            group_size=group_size,
            tag=tag,
        )

    def collect(
        self,
        policy: Policy,
        specs: Sequence[EpisodeSpec],
        *,
        tag: str,
        max_steps: int | None = None,
    ) -> list[Episode]:
        """Run ``policy`` on ``specs`` on this process's sessions.

        With ``logging.save_trajectories`` the episodes go to
        ``trajectories/{tag}/rank_{rank}``, which is emptied first (a resumed iteration
        replaces what an interrupted attempt wrote).
        """
        writer = None
        if self.config.logging.save_trajectories:
            run_dir = self.output_dir / TRAJECTORIES_DIR / tag / f"rank_{self.rank}"
            shutil.rmtree(run_dir, ignore_errors=True)
            writer = TrajectoryWriter(run_dir)
        # A sharded model runs each process's own model calls gathered whole; a vLLM
        # policy makes none here.
        local = isinstance(policy, HFPolicy)
        try:
            with (
                self.envs_lock,
                sharding.gathered(self.model) if local else contextlib.nullcontext(),
                self.autocast(),
            ):
                return collect_episodes(
                    policy,
                    self.envs,
                    specs,
                    max_steps=max_steps or self.config.env.max_steps,
                    writer=writer,
                    keep_screenshots=False,
                    progress=tag if self.config.logging.progress and self.is_main else False,
                    episode_prefix=f"{tag}-r{self.rank}",
                )
        finally:
            if writer is not None:
                writer.close()

    def episode_metrics(self, episodes: Sequence[Episode], prefix: str) -> dict[str, float]:
        """``{prefix}/reward_mean`` etc. over every process's episodes (call on all ranks)."""
        records = gather_object([episode_record(e) for e in episodes])
        return episode_metrics(records, prefix)

    # ---- reductions ----------------------------------------------------------------------

    def sum_all(self, value: float) -> float:
        if self.world_size == 1:
            return float(value)
        t = torch.tensor([float(value)], dtype=torch.float64, device=self.accelerator.device)
        return float(self.accelerator.reduce(t, reduction="sum").item())

    def max_all(self, value: float) -> float:
        if self.world_size == 1:
            return float(value)
        t = torch.tensor([float(value)], dtype=torch.float64, device=self.accelerator.device)
        return float(self.accelerator.gather(t).max().item())

    def sum_all_dict(self, values: dict[str, float]) -> dict[str, float]:
        """Per-key sums over processes of dicts whose keys may differ (missing: 0)."""
        if self.world_size == 1:
            return dict(values)
        total: dict[str, float] = defaultdict(float)
        for mine in gather_object([values]):
            for key, value in mine.items():
                total[key] += value
        return dict(total)

    # ---- end of an iteration -----------------------------------------------------------

    def evaluate_at_start(self) -> None:
        """Evaluate the initial weights (step 0), unless resumed or switched off."""
        if self.start_iteration == 0 and self.config.eval.at_start:
            self.log(self.evaluate(0), step=0)

    def end_update(self) -> dict[str, float]:
        """After an iteration's update: ``train/learning_rate`` (the rate the update used)
        and, with several processes, ``train/rank_divergence``; then the schedule moves
        on to the next iteration's rate."""
        metrics = {"train/learning_rate": float(self.scheduler.get_last_lr()[0])}
        if self.world_size > 1 and not self.sharded:  # sharded: one copy, nothing to compare
            metrics["train/rank_divergence"] = divergence = rank_divergence(self.trainable)
            if divergence > 0 and self.is_main:
                logger.warning("processes hold different weights (max |difference| %g)", divergence)
        self.scheduler.step()
        return metrics

    def evaluate_when_due(self, iterations_done: int) -> dict[str, float]:
        """``eval/*`` after every ``eval.every`` iterations and after the last one, else {}."""
        e = self.config.eval
        due = iterations_done % e.every == 0 or iterations_done == self.config.iterations
        return self.evaluate(iterations_done) if e.episodes and due else {}

    def evaluate(self, step: int) -> dict[str, float]:
        """``eval/*`` over the held-out instances, with :attr:`eval_policy`."""
        if self.config.eval.episodes == 0:
            return {}
        episodes = self.collect(
            self.eval_policy,
            self.eval_specs(),
            tag=f"eval_{step:06d}",
            max_steps=self.config.eval_max_steps,
        )
        return self.episode_metrics(episodes, "eval")

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self.metrics is not None:
            self.metrics.log(metrics, step)
            shown = {k: round(v, 4) for k, v in metrics.items() if k.split("/")[0] != "perf"}
            logger.info("step %d: %s", step, shown)

    def maybe_checkpoint(self, iterations_done: int) -> None:
        """Save after every ``checkpoint.every`` iterations and after the last one."""
        c = self.config.checkpoint
        if iterations_done % c.every and iterations_done != self.config.iterations:
            return
        self.state["iteration"] = iterations_done
        rng_states = gather_object([ckpt.rng_state()])
        model_state = sharding.saved_weights_state(self.model)  # collective when sharded
        optimizer_state = sharding.optimizer_state(self.model, self.optimizer)
        if self.is_main:
            ckpt.save_checkpoint(
                self.output_dir,
                iterations_done,
                model=self.model,
                model_state=model_state,
                optimizer_state=optimizer_state,
                scheduler=self.scheduler,
                rng_states=rng_states,
                state=self.state,
                keep_last=c.keep_last,
                extra={name: get() for name, get in self.checkpoint_extra.items()},
            )
        self.accelerator.wait_for_everyone()

    def publish_weights(self, iterations_done: int) -> None:
        """With the vLLM backend, serve the current adapter and sample from it next."""
        if self.config.rollout.backend != "vllm":
            return
        r = self.config.rollout
        name = f"{self.output_dir.name}-iter{iterations_done}"
        root = Path(r.vllm_adapter_dir or self.output_dir / "vllm_adapters")
        model_state = sharding.saved_weights_state(self.model)  # collective when sharded
        if self.is_main:
            self.model.save_pretrained(
                root / name, selected_adapters=["default"], state_dict=model_state
            )
            load_lora_adapter(r.vllm_base_url, name, str(root / name))
        self.accelerator.wait_for_everyone()
        blocked = vision_token_ids(self.model.config, self.processor.tokenizer)
        self.policy = vllm_policy(self.config, name, self.format.config, blocked)


def _pretty(data: dict[str, Any], indent: int = 2) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, indent=indent)

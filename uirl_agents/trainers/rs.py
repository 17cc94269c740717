"""Expert iteration (rejection sampling + SFT), readable top to bottom.

Per iteration:

1. **Collect.** Each process runs its share of the iteration's episodes with the
   current weights (sampling). In iteration 0 it can add demonstrations from the
   task's scripted expert, written in the model's own format (a cold start: a fresh
   model rarely produces a parseable action, so it has nothing to imitate yet).
2. **Filter.** Keep the episodes whose total reward reaches ``rs.reward_threshold``.
3. **Fine-tune.** Every step of a kept episode (but those whose output did not parse,
   with ``rs.drop_unparsed_steps``) becomes an SFT sample: its exact prompt and the
   token ids the policy sampled; the loss is their negative log-likelihood
   (:mod:`uirl_agents.trainers.sft`), through the same update loop as GRPO.
4. **Evaluate** on held-out task seeds (greedy), log, checkpoint.
"""

from __future__ import annotations

import logging
from pathlib import Path

from uirl_agents.policies.expert import ExpertPolicy
from uirl_agents.push import push_result
from uirl_agents.rollout import EpisodeSpec
from uirl_agents.trainers.common import (
    DEMO_STREAM,
    TrainingRun,
)
from uirl_agents.trainers.config import RSConfig
from uirl_agents.trainers.metrics import Stopwatch, perf_metrics, policy_seconds
from uirl_agents.trainers.sft import sft_samples, sft_update
from uirl_agents.trajectories import Episode

logger = logging.getLogger(__name__)


def demonstration_specs(run: TrainingRun, num_episodes: int) -> list[EpisodeSpec]:
    """This process's share of ``num_episodes`` expert episodes (task instances of their own)."""
    share = num_episodes // run.world_size + (run.rank < num_episodes % run.world_size)
    return run.task_specs(DEMO_STREAM, 0, share, 1, "demo")


def collect_demonstrations(run: TrainingRun) -> list[Episode]:
    """Expert episodes, each step written as the model would (prompt, images, text)."""
    cfg = run.config
    expert = ExpertPolicy(
        lambda i: run.envs.envs[i].oracle(),
        task=lambda i: run.envs.envs[i].episode_task,
        format=run.format,
        mode=cfg.rs.expert_mode,
        max_images=cfg.rollout.max_images,
    )
    specs = demonstration_specs(run, cfg.rs.expert_episodes)
    return run.collect(expert, specs, tag="demonstrations")


def train_rs(config: RSConfig, output_dir: str | Path) -> None:
    """Run (or resume) expert iteration in ``output_dir``; every process calls this.

    Raises:
        ValueError: the config does not fit the number of processes.
    """
    with TrainingRun(config, output_dir, "rs") as run:
        rs_iterations(run)
    push_result(config.hub, output_dir)  # sessions stopped; main process only


def rs_iterations(run: TrainingRun) -> None:
    """The iterations still to run (all of them, or the rest of a resumed run)."""
    config = run.config
    run.evaluate_at_start()
    for iteration in run.iterations():
        watch = Stopwatch()
        with watch.phase("rollout"):
            episodes = run.collect_iteration(iteration)
            demos = []
            if iteration == 0 and config.rs.expert_episodes:
                demos = collect_demonstrations(run)
        watch.add("policy", policy_seconds(episodes))
        kept = [e for e in [*demos, *episodes] if e.total_reward >= config.rs.reward_threshold]
        with watch.phase("train"):
            samples = sft_samples(run, kept, drop_unparsed=config.rs.drop_unparsed_steps)
            train = sft_update(run, samples, iteration)
        run.state["episodes"] += int(run.sum_all(len(episodes)))
        run.publish_weights(iteration + 1)
        tokens = train.pop("train/tokens_processed", 0.0)
        metrics = {
            **run.episode_metrics(episodes, "rollout"),
            **run.episode_metrics(demos, "demonstrations"),
            "rollout/kept_fraction": run.sum_all(len(kept))
            / max(1.0, run.sum_all(len(episodes) + len(demos))),
            **train,
            **perf_metrics(watch.totals, watch.elapsed(), tokens),
        }
        run.end_iteration(iteration, metrics)

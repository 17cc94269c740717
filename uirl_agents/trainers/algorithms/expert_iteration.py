"""Expert iteration (rejection sampling + SFT): the hooks :mod:`~uirl_agents.trainers.loop` runs.

Per iteration:

1. **Collect** (:meth:`ExpertIteration.collect`): each process runs its share of the
   iteration's episodes with the current weights (sampling). In iteration 0 it can add
   demonstrations from the task's scripted expert, written in the model's own format (a
   cold start), and its share of the episodes a person recorded
   (``rs.demonstrations``), written afresh in the run's format
   (:mod:`~uirl_agents.trainers.algorithms.demonstrations`).
2. **Select** (:meth:`ExpertIteration.select`): keep the episodes whose total reward
   reaches ``rs.reward_threshold``.
3. **Samples**: every step of a kept episode (but those whose output did not parse,
   with ``rs.drop_unparsed_steps``) becomes an SFT sample: its exact prompt and the
   token ids the policy sampled (:func:`~uirl_agents.trainers.algorithms.sft.sft_samples`).
4. **Loss**: their negative log-likelihood (:func:`~uirl_agents.trainers.algorithms.sft.sft_loss`);
   no scoring pass (the loss needs nothing from before the update).
"""

from __future__ import annotations

from collections.abc import Sequence

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.base import Policy
from uirl_agents.trainers.algorithms.demonstrations import (
    collect_demonstrations,
    load_demonstrations,
)
from uirl_agents.trainers.algorithms.sft import SFT_STREAM, sft_loss, sft_samples
from uirl_agents.trainers.config import RSConfig, config_as
from uirl_agents.trainers.loop import ROLLOUT, Algorithm, Sources
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import BatchLoss, TokenSample

DEMONSTRATIONS, RECORDED = "demonstrations", "recorded"


class ExpertIteration(Algorithm):
    """Expert iteration's hooks (``train_rs.py``, the ``rs`` section)."""

    name = "rs"
    seed_stream = SFT_STREAM

    def collect(self, run: TrainingRun, iteration: int, policy: Policy) -> Sources:
        """The policy's episodes; in iteration 0 also the expert's and the recorded ones."""
        rs = config_as(run.config, RSConfig).rs
        episodes = run.collect_iteration(iteration, policy)
        first = iteration == 0
        demos = collect_demonstrations(run) if first and rs.expert_episodes else []
        recorded = load_demonstrations(run) if first and rs.demonstrations else []
        return {ROLLOUT: episodes, DEMONSTRATIONS: demos, RECORDED: recorded}

    def select(self, run: TrainingRun, sources: Sources) -> tuple[list[Episode], dict[str, float]]:
        episodes = [*sources[DEMONSTRATIONS], *sources[RECORDED], *sources[ROLLOUT]]
        kept = [
            e
            for e in episodes
            if e.total_reward >= config_as(run.config, RSConfig).rs.reward_threshold
        ]
        fraction = run.sum_all(len(kept)) / max(1.0, run.sum_all(len(episodes)))
        return kept, {"rollout/kept_fraction": fraction}

    def samples(self, run: TrainingRun, episodes: Sequence[Episode]) -> list[TokenSample]:
        return sft_samples(
            run, episodes, drop_unparsed=config_as(run.config, RSConfig).rs.drop_unparsed_steps
        )

    def loss(self, run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
        return sft_loss(run, batch)

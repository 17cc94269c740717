"""The training loop every algorithm runs, in the order it runs (docs/training.md).

Per iteration, on every process:

1. **Collect** the iteration's episodes with the current weights
   (:meth:`Algorithm.collect`; sync, or ahead of the learner by an actor thread:
   :mod:`~uirl_agents.trainers.actor`).
2. **Select** the episodes to train on (:meth:`Algorithm.select`): GRPO's replay of
   past successes, expert iteration's reward filter. Episodes whose session failed
   (``Episode.error``: a session that died or timed out) are left out before, for
   every algorithm and source (:func:`without_session_failures`): the env, not the
   policy, ended them, so they teach nothing about its actions (nor set a GRPO group's
   baseline). ``train/session_failures`` counts them.
3. **Prepare samples** (:meth:`Algorithm.samples`): every trained step becomes a
   :class:`~uirl_agents.trainers.update.TokenSample` (its exact prompt and the sampled
   ids) with its weight, the advantage.
4. **Score** (:meth:`Algorithm.score`): the trainer's own logprobs before the update
   (:func:`~uirl_agents.trainers.forward.score_samples`); PPO's values and advantages.
5. **Update**: ``optim.epochs`` passes of :meth:`Algorithm.loss` over micro-batches,
   gradients summed over processes, clipped, AdamW
   (:func:`~uirl_agents.trainers.update.run_update`).
6. **Evaluate** when due, **log** at step ``iteration + 1``, **checkpoint** when due
   (:class:`~uirl_agents.trainers.run.TrainingRun`).

The algorithms (:mod:`uirl_agents.trainers.algorithms`) are
:class:`~uirl_agents.trainers.algorithms.expert_iteration.ExpertIteration`,
:class:`~uirl_agents.trainers.algorithms.grpo.GRPO` and
:class:`~uirl_agents.trainers.algorithms.ppo.PPO`; each supplies only its hooks. This
module imports none of them.
"""

from __future__ import annotations

import abc
import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.base import Policy
from uirl_agents.trainers.actor import iteration_rollouts
from uirl_agents.trainers.config import TrainConfig
from uirl_agents.trainers.image_features import cached_image_features
from uirl_agents.trainers.metrics import Stopwatch, perf_metrics
from uirl_agents.trainers.push import push_result
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import BatchLoss, TokenSample, run_update

logger = logging.getLogger(__name__)

# The key of the policy's own episodes among an iteration's episodes (its metrics prefix).
ROLLOUT = "rollout"
# An iteration's episodes by where they come from (metrics prefix -> episodes).
Sources = dict[str, list[Episode]]


class Algorithm(abc.ABC):
    """What an algorithm supplies to the loop: its hooks, each given the run.

    Attributes:
        name: the run's trainer name (``config_{name}.yaml``; a run folder holds one).
        seed_stream: the random stream of the update's data order.

    Methods:
        start: before the first iteration (restore and checkpoint the algorithm's state).
        collect: the iteration's episodes by source (default: the policy's own).
        select: the episodes to train on, and metrics (default: the policy's own).
        samples: the weighted token samples of the selected episodes.
        score: the samples to update on, scored, and metrics (default: as they are).
        trains: whether a sample takes part in the forward/backward passes.
        loss: a micro-batch's loss summed over its completion tokens.
    """

    name: ClassVar[str]
    seed_stream: ClassVar[int]

    def start(self, run: TrainingRun) -> None:  # noqa: B027 (most algorithms keep no state)
        """Before the first iteration (or the first of a resumed run)."""

    def collect(self, run: TrainingRun, iteration: int, policy: Policy) -> Sources:
        """Iteration ``iteration``'s episodes, sampled with ``policy``; runs in the rollout
        actor's thread in async mode (so: no collective call)."""
        return {ROLLOUT: run.collect_iteration(iteration, policy)}

    def select(self, run: TrainingRun, sources: Sources) -> tuple[list[Episode], dict[str, float]]:
        """The episodes to train on and metrics about the choice."""
        return list(sources[ROLLOUT]), {}

    @abc.abstractmethod
    def samples(self, run: TrainingRun, episodes: Sequence[Episode]) -> list[TokenSample]:
        """This process's samples of ``episodes``, each with its ``advantage``."""

    def score(
        self, run: TrainingRun, samples: Sequence[TokenSample]
    ) -> tuple[list[TokenSample], dict[str, float]]:
        """The samples to update on, with what the loss needs from before the update."""
        return list(samples), {}

    def trains(self, run: TrainingRun, sample: TokenSample) -> bool:
        """False: the sample adds no gradient, and is left out of the passes after the
        micro-batches and optimizer steps are laid out (compute saved, update unchanged)."""
        return True

    @abc.abstractmethod
    def loss(self, run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
        """The micro-batch's loss summed over its completion tokens (with gradients)."""


def train(config: TrainConfig, output_dir: str | Path, algorithm: Algorithm) -> None:
    """Run (or resume) ``algorithm`` in ``output_dir``; every process calls this.

    Raises:
        ValueError: the config does not fit the number of processes, or the folder
            holds another algorithm's run.
    """
    with TrainingRun(config, output_dir, algorithm.name) as run:
        run_iterations(run, algorithm)
    push_result(config.hub, output_dir)  # sessions stopped; main process only


def run_iterations(run: TrainingRun, algorithm: Algorithm) -> None:
    """The iterations still to run (all of them, or the rest of a resumed run)."""
    algorithm.start(run)
    run.evaluate_at_start()
    rollouts = iteration_rollouts(run, functools.partial(algorithm.collect, run))
    for iteration in run.iterations():
        watch = Stopwatch()
        # 1. Collect.
        with watch.phase("rollout"):
            collected = rollouts.take(iteration)
        sources = collected.data
        episodes = sources[ROLLOUT]
        watch.add("policy", rollouts.policy_seconds(episodes))
        # 2-5. Select, prepare samples, score, update.
        with watch.phase("train"):
            train = select_and_update(run, algorithm, sources, iteration)
        run.state["episodes"] += int(run.sum_all(len(episodes)))
        # The new weights go to whoever samples next (an actor thread, a vLLM server).
        rollouts.publish(iteration + 1)
        # Metrics over every process: each source's episodes, the update, timings.
        tokens = train.pop("train/tokens_processed", 0.0)
        metrics: dict[str, float] = {}
        for prefix, source in sources.items():
            metrics |= run.episode_metrics(source, prefix)
        metrics |= train
        metrics |= perf_metrics(watch.totals, watch.elapsed(), tokens)
        metrics |= rollouts.metrics(collected, len(episodes))
        metrics |= run.end_update()  # the learning rate used; the schedule steps
        # 6. Evaluate, log, checkpoint. Step = iterations done: iteration k's rollouts,
        # update and the evaluation of its result share step k + 1.
        done = iteration + 1
        metrics |= run.evaluate_when_due(done)
        run.log(metrics, step=done)
        run.maybe_checkpoint(done)


def without_session_failures(sources: Sources) -> tuple[Sources, int]:
    """The sources without the episodes whose session failed (``Episode.error``), and
    how many those were.

    A session that died or timed out ends its episode early with a reward the policy
    did not earn: as a GRPO failure it would get a negative advantage and pull its
    group's baseline down, and PPO would value its last state as terminal.
    """
    kept = {name: [e for e in episodes if e.error is None] for name, episodes in sources.items()}
    failures = sum(len(sources[name]) - len(kept[name]) for name in sources)
    if failures:
        logger.warning("%d episode(s) ended by a session failure: left out of the update", failures)
    return kept, failures


def select_and_update(
    run: TrainingRun, algorithm: Algorithm, sources: Sources, iteration: int
) -> dict[str, float]:
    """Steps 2-5 on an iteration's episodes: leave out the session failures, select,
    prepare samples, score, update.

    Returns:
        The selection's and the update's metrics, and ``train/session_failures`` (every
        process's episodes left out because their session failed).
    """
    finished, failures = without_session_failures(sources)
    trained, selection = algorithm.select(run, finished)
    metrics = update(run, algorithm, trained, iteration)
    return {**selection, "train/session_failures": run.sum_all(failures), **metrics}


def update(
    run: TrainingRun, algorithm: Algorithm, episodes: Sequence[Episode], iteration: int
) -> dict[str, float]:
    """Steps 3-5 on ``episodes``: prepare samples, score, update."""
    return update_samples(run, algorithm, algorithm.samples(run, episodes), iteration)


def update_samples(
    run: TrainingRun, algorithm: Algorithm, samples: Sequence[TokenSample], iteration: int
) -> dict[str, float]:
    """Steps 4-5: score ``samples``, then ``optim.epochs`` passes of the algorithm's loss
    (every process calls it; no sample on any process: no update). The images of the
    samples that train go through the vision tower once for both
    (:func:`~uirl_agents.trainers.image_features.cached_image_features`).

    Returns:
        :func:`~uirl_agents.trainers.update.run_update`'s metrics, the scoring's, and
        ``train/samples`` (every process's samples updated on).
    """
    passed = [s for s in samples if algorithm.trains(run, s)]
    budget = run.config.optim.micro_batch_tokens
    with cached_image_features(run, passed, micro_batch_tokens=budget):
        trained, scores = algorithm.score(run, samples)
        num_samples = run.sum_all(len(trained))
        if num_samples == 0:
            logger.info("iteration %d: no step to train on; no update", iteration)
            return {**scores, "train/samples": 0.0}
        metrics = run_update(
            run,
            trained,
            functools.partial(algorithm.loss, run),
            seed_stream=algorithm.seed_stream,
            iteration=iteration,
            keep=functools.partial(algorithm.trains, run),
        )
    return {**metrics, **scores, "train/samples": num_samples}

"""Where a trainer's iterations come from: collected in turn (sync) or by an actor thread
ahead of the learner, at most ``rollout.max_staleness`` updates behind (async).

Both trainers run the same loop over :class:`Rollouts`: ``take(i)`` gives iteration
``i``'s collected data, ``publish(i + 1)`` hands the updated weights on,
``metrics(...)`` reports on the iteration. :class:`SyncRollouts` collects inside
``take`` with the current weights, as the trainers always did. :class:`AsyncRollouts`
starts one actor thread per process that collects iterations ``start_iteration,
start_iteration + 1, ...`` with exactly the specs sync mode uses, so a resumed run
collects again what was collected but not trained before a kill, and nothing twice:

- before iteration ``i`` the actor waits until the learner's version (iterations
  trained) is at least ``i - max_staleness``, then loads the newest published weights
  (between iterations, never mid-episode);
- the learner trains iteration ``i`` at version ``i`` on data sampled at version
  ``b >= i - max_staleness``: staleness ``i - b`` never exceeds ``max_staleness``
  (checked on every take);
- the actor makes no collective call: every gather and reduction stays on the learner
  (main) thread, so processes stay in step however their actors are timed.

Weights: with the local HF backend the actor samples with its own copy of the policy
model; the frozen weights (the base model under LoRA, a frozen vision tower) are shared
with the learner, read-only, and only the trainable ones are copied. After each update
the learner publishes detached clones of the trainable weights, which the actor copies
in before its next iteration: the cost is twice the trainable weights (the actor's
copy and the published snapshot). The modules themselves are copied too: models keep
state between forward passes (Qwen2.5-VL caches ``rope_deltas`` in ``generate``), which
two threads must not share. With vLLM the adapter reload of
:meth:`~uirl_agents.trainers.run.TrainingRun.publish_weights` is the transfer: the
actor samples from the newest adapter the server has loaded.

The sessions serve one collection at a time (``TrainingRun.envs_lock``): an evaluation
waits for the actor's current iteration, and the actor for the evaluation.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import torch

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.base import Policy
from uirl_agents.policies.hf import HFPolicy
from uirl_agents.trainers.metrics import policy_seconds

if TYPE_CHECKING:
    from uirl_agents.trainers.run import TrainingRun

logger = logging.getLogger(__name__)

T = TypeVar("T")
# What the learner hands the actor: a snapshot of the trainable weights (HF; None: the
# actor's copy as it is), or the policy naming the newest adapter (vLLM).
Published = dict[str, torch.Tensor] | Policy | None
# What a trainer collects for iteration i with a policy (GRPO: episodes; RS: + demos).
CollectFn = Callable[[int, Policy], T]
STALENESS_HISTOGRAM = "staleness_histogram"  # run.state key: staleness -> episodes trained
_POLL_S = 0.5  # how often blocked waits look at whether the other side has stopped
_JOIN_S = 5.0


class ActorFailedError(RuntimeError):
    """The actor thread stopped before collecting the iteration the learner needs.

    Attributes:
        iteration: the iteration the learner was waiting for.
    """

    def __init__(self, iteration: int, reason: str = "it stopped") -> None:
        self.iteration = iteration
        super().__init__(f"the rollout actor failed before iteration {iteration}: {reason}")


@dataclass
class Collected(Generic[T]):
    """One iteration's data and the weights it was sampled with.

    Attributes:
        iteration: the iteration index.
        data: what the trainer's collect function returned.
        behaviour_version: the policy version (iterations trained) that sampled it.
        staleness: the learner's version when it took the data, minus behaviour_version.
        queue_depth: iterations ready when the learner asked for this one (async).
    """

    iteration: int
    data: T
    behaviour_version: int
    staleness: int = 0
    queue_depth: int = 0


class Rollouts(Protocol[T]):
    """Iterations for a trainer's loop."""

    def take(self, iteration: int) -> Collected[T]: ...

    def publish(self, version: int) -> None: ...

    def policy_seconds(self, episodes: Sequence[Episode]) -> float: ...

    def metrics(self, collected: Collected[T], num_episodes: int) -> dict[str, float]: ...


class SyncRollouts(Generic[T]):
    """Collect each iteration when the learner asks for it, with the current weights."""

    def __init__(self, run: TrainingRun, collect: CollectFn[T]) -> None:
        self._run, self._collect = run, collect

    def take(self, iteration: int) -> Collected[T]:
        return Collected(iteration, self._collect(iteration, self._run.policy), iteration)

    def publish(self, version: int) -> None:
        self._run.publish_weights(version)

    def policy_seconds(self, episodes: Sequence[Episode]) -> float:
        """Generation seconds on the learner's clock: all of the episodes'."""
        return policy_seconds(episodes)

    def metrics(self, collected: Collected[T], num_episodes: int) -> dict[str, float]:
        return {}


class _BusyClock:
    """Seconds spent inside ``busy()``, readable from another thread at any moment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = 0.0
        self._since: float | None = None

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            self._since = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._total += time.monotonic() - self._since
                self._since = None

    def seconds(self) -> float:
        with self._lock:
            running = time.monotonic() - self._since if self._since is not None else 0.0
            return self._total + running


class ActorWeights:
    """The actor's own HF policy: a copy of the trainable weights over the learner's
    frozen ones (shared, read-only), and a processor of its own (a fast tokenizer
    refuses concurrent calls from two threads: "Already borrowed").

    Attributes:
        policy: samples with the copy.
        bytes: the memory the copy takes (trainable weights only).
    """

    def __init__(self, run: TrainingRun) -> None:
        learner = run.policy
        if not isinstance(learner, HFPolicy):
            raise TypeError(f"expected the run's HF policy, got {type(learner).__name__}")
        self._learner = {n: p for n, p in run.model.named_parameters() if p.requires_grad}
        # deepcopy keeps what its memo maps: the frozen tensors are shared, not copied.
        shared = {id(p): p for p in run.model.parameters() if not p.requires_grad}
        model = copy.deepcopy(run.model, memo=shared).eval()
        params = dict(model.named_parameters())
        self._params = {name: params[name] for name in self._learner}
        for p in self._params.values():
            p.requires_grad_(False)
        self.bytes = sum(p.numel() * p.element_size() for p in self._params.values())
        self.policy = HFPolicy(model, copy.deepcopy(run.processor), run.format, learner.config)

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Detached clones of the learner's trainable weights (learner thread)."""
        return {n: p.detach().clone() for n, p in self._learner.items()}

    @torch.no_grad()
    def load(self, snapshot: dict[str, torch.Tensor]) -> None:
        """Copy a snapshot into the actor's weights (actor thread, between iterations)."""
        for name, value in snapshot.items():
            self._params[name].copy_(value)


class AsyncRollouts(Generic[T]):
    """An actor thread collects iterations ahead of the learner (see the module doc).

    Attributes:
        max_staleness: the most updates an iteration's weights may lag the learner's.
        version: the learner's policy version (iterations trained, published).
    """

    def __init__(self, run: TrainingRun, collect: CollectFn[T], *, max_staleness: int) -> None:
        self._run, self._collect = run, collect
        self.max_staleness = max_staleness
        self.version = run.start_iteration
        self._weights = ActorWeights(run) if run.config.rollout.backend == "hf" else None
        if self._weights is not None:
            logger.info(
                "actor: its own copy of the trainable weights, %.1f MB (+ as much "
                "for each published snapshot)",
                self._weights.bytes / 2**20,
            )
        self._cond = threading.Condition()
        # The newest weights: HF, a snapshot (None: the copy's own); vLLM, the policy.
        self._published: Published = None if self._weights is not None else run.policy
        self._loaded = self.version  # the version the actor's weights hold
        # Unbounded on purpose: the version gate keeps at most max_staleness + 1
        # iterations in it, and the actor never blocks on a put.
        self._queue: queue.Queue[Collected[T] | BaseException] = queue.Queue()
        self._stop = threading.Event()
        self._actor_clock, self._wait_s = _BusyClock(), 0.0
        self._window = (time.monotonic(), 0.0)  # (start, actor seconds then)
        self._thread = threading.Thread(
            target=self._act, name=f"uirl-actor-rank{run.rank}", daemon=True
        )

    def start(self) -> None:
        """Start the actor; :meth:`close` runs when the run closes."""
        self._run.on_close.callback(self.close)
        self._thread.start()

    def close(self) -> None:
        """Stop the actor; one mid-iteration finishes it (or fails when the sessions close)."""
        with self._cond:
            self._stop.set()
            self._cond.notify_all()
        self._thread.join(timeout=_JOIN_S)
        if self._thread.is_alive():
            logger.warning(
                "actor still collecting after %.0f s; left to stop with the sessions", _JOIN_S
            )

    # ---- the actor thread --------------------------------------------------------------

    def _act(self) -> None:
        try:
            for iteration in range(self._run.start_iteration, self._run.config.iterations):
                version, weights = self._newest_weights(at_least=iteration - self.max_staleness)
                if self._stop.is_set():
                    return
                policy = self._load(version, weights)
                logger.debug("actor: iteration %d with weights of version %d", iteration, version)
                with self._actor_clock.busy():
                    data = self._collect(iteration, policy)
                self._queue.put(Collected(iteration, data, version))
        except BaseException as exc:  # handed to the learner, which raises it
            if not self._stop.is_set():
                logger.exception("actor failed")
            self._queue.put(exc)

    def _newest_weights(self, at_least: int) -> tuple[int, Published]:
        with self._cond:
            while self.version < at_least and not self._stop.is_set():
                self._cond.wait(timeout=_POLL_S)
            return self.version, self._published

    def _load(self, version: int, weights: Published) -> Policy:
        if self._weights is None:  # vLLM: the policy naming the newest adapter
            assert weights is not None and not isinstance(weights, dict)
            return weights
        if version != self._loaded:
            assert isinstance(weights, dict)  # every publish after the first version
            self._weights.load(weights)
            self._loaded = version
        return self._weights.policy

    # ---- the learner (main thread) -----------------------------------------------------

    def take(self, iteration: int) -> Collected[T]:
        """Iteration ``iteration``'s data, waiting for the actor if need be.

        Raises:
            ActorFailedError: the actor failed (the cause is chained) or stopped.
            RuntimeError: the data is older than ``max_staleness`` updates (a bug).
        """
        depth = self._queue.qsize()
        start = time.monotonic()
        item = self._next(iteration)
        self._wait_s += time.monotonic() - start
        if isinstance(item, BaseException):
            raise ActorFailedError(iteration, repr(item)) from item
        staleness = self.version - item.behaviour_version
        if item.iteration != iteration or not 0 <= staleness <= self.max_staleness:
            raise RuntimeError(
                f"expected iteration {iteration} sampled at most {self.max_staleness} updates "
                f"before version {self.version}, got iteration {item.iteration} sampled at "
                f"version {item.behaviour_version}"
            )
        item.staleness, item.queue_depth = staleness, depth
        return item

    def _next(self, iteration: int) -> Collected[T] | BaseException:
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise ActorFailedError(iteration) from None

    def publish(self, version: int) -> None:
        """Hand the weights after ``version`` iterations to the actor (after an update)."""
        self._run.publish_weights(version)  # vLLM: the server loads the adapter
        weights = self._weights.snapshot() if self._weights is not None else self._run.policy
        with self._cond:
            self.version, self._published = version, weights
            self._cond.notify_all()

    def policy_seconds(self, episodes: Sequence[Episode]) -> float:
        """Generation seconds on the learner's clock: none (the actor generates)."""
        return 0.0

    def metrics(self, collected: Collected[T], num_episodes: int) -> dict[str, float]:
        """``async/*`` over every process (learner thread: reductions); counts the
        iteration's episodes into ``run.state``'s staleness histogram.

        Busy fractions are of the wall time since the previous call: the actor's time
        collecting, the learner's time not waiting for the actor.
        """
        run = self._run
        staleness = collected.staleness
        now, actor_s = time.monotonic(), self._actor_clock.seconds()
        wall = max(now - self._window[0], 1e-9)
        mine = {
            "staleness_sum": float(staleness * num_episodes),
            "episodes": float(num_episodes),
            "queue_depth": float(collected.queue_depth),
            "actor_busy": (actor_s - self._window[1]) / wall,
            "learner_busy": max(0.0, 1.0 - self._wait_s / wall),
            f"hist/{staleness}": float(num_episodes),
        }
        self._window, self._wait_s = (now, actor_s), 0.0
        total = run.sum_all_dict(mine)
        histogram = run.state.setdefault(STALENESS_HISTOGRAM, {})
        for key, count in total.items():
            if key.startswith("hist/"):
                value = key.removeprefix("hist/")
                histogram[value] = histogram.get(value, 0) + int(count)
        n = run.world_size
        return {
            "async/staleness_mean": total["staleness_sum"] / max(total["episodes"], 1.0),
            "async/staleness_max": run.max_all(staleness),
            "async/queue_depth": total["queue_depth"] / n,
            "async/actor_busy": total["actor_busy"] / n,
            "async/learner_busy": total["learner_busy"] / n,
        }


def iteration_rollouts(run: TrainingRun, collect: CollectFn[T]) -> Rollouts[T]:
    """The run's rollouts by ``rollout.mode``: :class:`SyncRollouts`, or
    :class:`AsyncRollouts` with its actor started (and stopped when the run closes)."""
    r = run.config.rollout
    if r.mode == "sync":
        return SyncRollouts(run, collect)
    rollouts = AsyncRollouts(run, collect, max_staleness=r.max_staleness)
    rollouts.start()
    return rollouts

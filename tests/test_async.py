"""Asynchronous rollouts (``rollout.mode: async``): the staleness gate, the importance
weight by hand, and both trainers end to end on real sessions (one and two processes,
a kill and a resume)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from model_fixtures import tiny_training_run  # noqa: E402
from test_trainers import (  # noqa: E402
    REPO,
    TINY_CPU,
    _assert_no_orphans,
    _check_ranks,
    _command,
    _grpo_config,
    _run,
    episodes_as_specified,
)

from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig  # noqa: E402
from uirl_agents.trainers import checkpoint as ckpt  # noqa: E402
from uirl_agents.trainers.actor import (  # noqa: E402
    STALENESS_HISTOGRAM,
    ActorFailedError,
    ActorWeights,
    AsyncRollouts,
)
from uirl_agents.trainers.cli import load_config  # noqa: E402
from uirl_agents.trainers.config import ASYNC_TIS_CAP, GRPOConfig  # noqa: E402
from uirl_agents.trainers.losses import truncated_importance_weight  # noqa: E402
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402

pytest_plugins = ["model_fixtures"]
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)
ASYNC = ["--rollout.mode", "async"]
WAIT_S = 60


# ---- the importance weight and the config ------------------------------------------------


def test_importance_weight_by_hand() -> None:
    # Learner (old) probabilities 0.5, 0.5, 0.2, 0.9 of tokens the actor sampled with
    # 0.1, 0.5, 0.4, 0.3: ratios 5, 1, 0.5, 3, truncated at 2.
    old = torch.log(torch.tensor([0.5, 0.5, 0.2, 0.9]))
    behaviour = torch.log(torch.tensor([0.1, 0.5, 0.4, 0.3])).requires_grad_(True)
    weight = truncated_importance_weight(old, behaviour, cap=2.0)
    torch.testing.assert_close(weight, torch.tensor([2.0, 1.0, 0.5, 2.0]))
    assert not weight.requires_grad  # a constant factor of the loss


def test_async_config_turns_the_correction_on_and_refuses_fsdp() -> None:
    assert load_config(GRPOConfig, TINY_CPU).grpo.tis_cap is None  # sync: unchanged
    on = load_config(GRPOConfig, TINY_CPU, {"rollout.mode": "async"})
    assert on.grpo.tis_cap == ASYNC_TIS_CAP and on.rollout.max_staleness == 1
    mine = load_config(GRPOConfig, TINY_CPU, {"rollout.mode": "async", "grpo.tis_cap": "5"})
    assert mine.grpo.tis_cap == 5
    with pytest.raises(ValueError, match=re.escape("rollout.max_staleness: expected >= 1")):
        load_config(GRPOConfig, TINY_CPU, {"rollout.max_staleness": "0"})
    with pytest.raises(ValueError, match=re.escape("set rollout.mode: sync with model.fsdp")):
        load_config(GRPOConfig, TINY_CPU, {"rollout.mode": "async", "model.fsdp": "true"})


def test_the_actor_shares_frozen_weights_and_loads_published_ones(
    tiny_qwen25vl_dir: Path,
) -> None:
    run = tiny_training_run(tiny_qwen25vl_dir, _grpo_config())
    run.policy = HFPolicy(run.model, run.processor, run.format, HFPolicyConfig(temperature=0.8))
    actor = ActorWeights(run)
    learner = dict(run.model.named_parameters())
    copied = dict(actor.policy.model.named_parameters())
    assert copied.keys() == learner.keys() and actor.policy.processor is not run.processor
    for name, p in learner.items():  # frozen: the same tensor; trainable: a copy of its own
        assert (copied[name].data_ptr() == p.data_ptr()) == (not p.requires_grad), name
    assert actor.bytes == sum(p.numel() * p.element_size() for p in run.trainable)
    lora_b = next(n for n, p in learner.items() if p.requires_grad and "lora_B" in n)
    with torch.no_grad():
        learner[lora_b].add_(1.0)  # an update
    assert not torch.equal(copied[lora_b], learner[lora_b])  # not seen mid-episode
    snapshot = actor.snapshot()
    with torch.no_grad():
        learner[lora_b].add_(1.0)  # the next update does not reach the snapshot
    actor.load(snapshot)
    torch.testing.assert_close(copied[lora_b], learner[lora_b] - 1.0)


# ---- the staleness gate, with a scripted collect function ----------------------------------


def _fake_run(iterations: int, start: int = 0) -> SimpleNamespace:
    """What AsyncRollouts uses of a TrainingRun; backend vllm: the weights it hands the
    actor are ``run.policy``, which :meth:`publish_weights` replaces by its version."""
    run = SimpleNamespace(
        sharded=False,
        start_iteration=start,
        rank=0,
        world_size=1,
        config=SimpleNamespace(iterations=iterations, rollout=SimpleNamespace(backend="vllm")),
        on_close=contextlib.ExitStack(),
        policy=f"weights-{start}",
        state={},
        sum_all_dict=dict,
        max_all=float,
    )
    run.publish_weights = lambda version: setattr(run, "policy", f"weights-{version}")
    return run


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_actor_runs_ahead_by_at_most_max_staleness(max_staleness: int) -> None:
    """A learner far slower than the actor: every iteration is trained exactly
    ``max_staleness`` updates late (never later), with the weights the actor loaded."""
    run = _fake_run(iterations=6)
    started: list[tuple[int, int, str]] = []
    rollouts: AsyncRollouts[str] = AsyncRollouts(
        run,
        lambda i, policy: started.append((i, rollouts.version, policy)) or f"data-{i}",
        max_staleness=max_staleness,
    )
    rollouts.start()
    try:
        for i in range(6):
            # Slow learner: wait until the actor is as far ahead as the gate lets it.
            deadline = time.monotonic() + WAIT_S
            while len(started) < min(i + max_staleness + 1, 6):
                assert time.monotonic() < deadline
                time.sleep(0.01)
            collected = rollouts.take(i)
            assert collected.data == f"data-{i}"
            assert collected.staleness == min(i, max_staleness)
            metrics = rollouts.metrics(collected, num_episodes=4)
            assert metrics["async/staleness_max"] == collected.staleness
            rollouts.publish(i + 1)
    finally:
        run.on_close.close()
    for i, version, policy in started:
        assert i - max_staleness <= version <= i and policy == f"weights-{version}"
    expected = {str(min(i, max_staleness)) for i in range(6)}
    assert set(run.state[STALENESS_HISTOGRAM]) == expected
    assert sum(run.state[STALENESS_HISTOGRAM].values()) == 6 * 4


def test_a_resumed_actor_starts_at_the_checkpoint_and_failures_reach_the_learner() -> None:
    run = _fake_run(iterations=5, start=3)
    seen: list[int] = []

    def collect(i: int, policy: str) -> str:
        seen.append(i)
        if i == 4:
            raise OSError("session lost")
        return policy

    rollouts: AsyncRollouts[str] = AsyncRollouts(run, collect, max_staleness=1)
    rollouts.start()
    try:
        assert rollouts.take(3).data == "weights-3"
        rollouts.publish(4)
        with pytest.raises(ActorFailedError, match="before iteration 4") as failed:
            rollouts.take(4)
        assert isinstance(failed.value.__cause__, OSError)
    finally:
        run.on_close.close()
    assert seen == [3, 4]


# ---- end to end, real sessions ---------------------------------------------------------------


def _async_records(out: Path) -> list[dict]:
    return [r for r in read_metrics(out) if "async/staleness_max" in r]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_async_resumes_after_a_kill_and_trains_every_iteration_once(tmp_path: Path) -> None:
    """Killed once the actor has started iteration 2 (checkpoint 1 written), resumed
    by the same command: the iterations not trained before the kill are collected
    again, and each iteration's episodes are trained exactly once."""
    mark = f"async-{uuid.uuid4().hex}"
    out = tmp_path / "grpo"
    cmd = _command("train_grpo.py", out, 1, "--iterations", "3", "--eval.episodes", "0", *ASYNC)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    first = subprocess.Popen(
        cmd, env={**env, "UIRL_TEST_MARK": mark}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    stderr = threading.Thread(target=first.stderr.read, daemon=True)  # never a full pipe
    stderr.start()
    deadline = time.monotonic() + 600
    started_2 = out / "trajectories" / "iter_000002" / "rank_0"
    while not ((out / "checkpoints" / "iter_000001").exists() and started_2.exists()):
        assert first.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "no checkpoint after iteration 1"
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    killed_at = time.time()
    resumed_from = ckpt.load_state(ckpt.latest_checkpoint(out))["iteration"]
    assert resumed_from in (1, 2)
    _assert_no_orphans(mark)
    result = _run(cmd, mark, timeout_s=600)
    assert f"(iteration {resumed_from})" in result.stderr
    _assert_no_orphans(mark)

    state = ckpt.load_state(ckpt.latest_checkpoint(out))
    assert state["iteration"] == 3 and state["episodes"] == 3 * 4
    # Every trained episode counted once, by the staleness it was trained at.
    histogram = state[STALENESS_HISTOGRAM]
    assert sum(histogram.values()) == 3 * 4 and set(histogram) <= {"0", "1"}
    records = _async_records(out)
    assert [r["step"] for r in records] == [1, 2, 3]  # one record per iteration
    for r in records:
        assert 0 <= r["async/staleness_mean"] <= r["async/staleness_max"] <= 1
        assert 0 <= r["async/learner_busy"] <= 1 and 0 <= r["async/actor_busy"] <= 1.01
        assert r["async/queue_depth"] >= 0 and r["rollout/episodes"] == 4
    for iteration in range(3):
        episodes_as_specified(out, iteration)
        folder = out / "trajectories" / f"iter_{iteration:06d}" / "rank_0"
        # What the killed run collected but did not train was collected again.
        rewritten = (folder / "episodes.jsonl").stat().st_mtime > killed_at
        assert rewritten == (iteration >= resumed_from), iteration


def _two_processes(trainer: str, out: Path, *args: str) -> list[dict]:
    """An async run on 2 processes: identical weights at the end, staleness within bounds."""
    report, _ = _check_ranks(trainer, out, f"a2-{uuid.uuid4().hex}", *ASYNC, *args)
    assert report["processes"] == 2
    assert report["max_abs_difference_at_start"] == report["max_abs_difference_at_end"] == 0
    records = _async_records(out)
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["rollout/episodes"] == 8 and r["train/rank_divergence"] == 0 for r in records)
    assert records[0]["async/staleness_max"] == 0  # nothing was trained before iteration 0
    assert all(r["async/staleness_max"] <= 1 for r in records)
    assert sum(r.get("train/grad_norm", 0.0) for r in records) > 0  # it trained something
    state = ckpt.load_state(ckpt.latest_checkpoint(out))
    assert sum(state[STALENESS_HISTOGRAM].values()) == 2 * 8
    return records


@pytest.fixture(scope="module")
def rs_async_two_processes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """Expert iteration, async, 2 processes (iteration 0: the learning demo's cold start)."""
    out = tmp_path_factory.mktemp("rs_async") / "run"
    rs = ["--optim.learning_rate", "0.01", "--optim.epochs", "16"]  # as test_trainers.py
    return out, _two_processes("rs", out, *rs)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_expert_iteration_async_two_processes(
    rs_async_two_processes: tuple[Path, list[dict]],
) -> None:
    _, records = rs_async_two_processes
    assert records[0]["demonstrations/episodes"] == 2  # collected by the actor


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_async_two_processes(
    rs_async_two_processes: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    """From the cold-start adapter (rewards differ within groups, so it trains)."""
    warm = ckpt.latest_checkpoint(rs_async_two_processes[0]) / ckpt.ADAPTER_DIR
    records = _two_processes(
        "grpo", tmp_path / "grpo", "--model.adapter_path", str(warm), "--grpo.kl_beta", "0.05"
    )
    # The actor's and the learner's logprobs agree where the weights are the same ones.
    assert records[0]["train/logprob_mismatch_max"] < 1e-3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rollout.mode", "async"], "set rollout.mode: sync with model.fsdp"),
        (["--algorithm", "ppo", "--rollout.group_size", "1"], "set model.fsdp: false"),
    ],
    ids=["async", "ppo"],
)
def test_an_fsdp_launch_refuses_what_cannot_shard_before_building_anything(
    tmp_path: Path, args: list[str], message: str
) -> None:
    # What `accelerate launch --config_file scripts/configs/accelerate/fsdp.yaml` sets.
    env = {**os.environ, "PYTHONPATH": str(REPO), "ACCELERATE_USE_FSDP": "true"}
    cmd = [sys.executable, str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU)]
    cmd += ["--output-dir", str(tmp_path / "run"), *args]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "run" / "tiny_model").exists()  # no model, no session

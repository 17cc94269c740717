"""Trainers: the math against hand-computed examples, configs, the loss pass on a tiny real
model, and both scripts end to end on real sessions (one and two processes, resume)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from model_fixtures import score_with_run_settings, tiny_training_run  # noqa: E402

from uirl_agents.episodes.trajectories import Episode, Step, load_episodes  # noqa: E402
from uirl_agents.loading.pretrained import load_processor  # noqa: E402
from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig, encode_prompts  # noqa: E402
from uirl_agents.trainers import checkpoint as ckpt  # noqa: E402
from uirl_agents.trainers import sharding  # noqa: E402
from uirl_agents.trainers.algorithms.grpo import GRPO, grpo_loss, step_samples  # noqa: E402
from uirl_agents.trainers.algorithms.sft import sft_loss, sft_samples  # noqa: E402
from uirl_agents.trainers.cli import config_markdown, load_config, parse_args  # noqa: E402
from uirl_agents.trainers.config import (  # noqa: E402
    VLLM_TIS_CAP,
    EnvConfig,
    GRPOConfig,
    ModelConfig,
    RSConfig,
    config_as,
)
from uirl_agents.trainers.forward import completion_logprobs  # noqa: E402
from uirl_agents.trainers.image_features import (  # noqa: E402
    cache_unavailable,
    with_image_features,
)
from uirl_agents.trainers.loop import select_and_update, update_samples  # noqa: E402
from uirl_agents.trainers.losses import (  # noqa: E402
    clipped_policy_loss,
    group_advantages,
    kl_k3,
    token_budget_batches,
)
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402
from uirl_agents.trainers.policy_model import (  # noqa: E402  # noqa: E402
    SCHEDULES,
    build_model,
    iteration_scheduler,
    needs_autocast,
)
from uirl_agents.trainers.specs import TRAIN_STREAM, derive_specs  # noqa: E402
from uirl_agents.trainers.update import (  # noqa: E402
    TokenSample,
    update_schedule,
    weigh_episode,
)
from uirl_agents.trainers.vllm import AdapterLoadError, load_lora_adapter  # noqa: E402
from uirl_gym.actions import Action, ActionType  # noqa: E402

pytest_plugins = ["model_fixtures"]
# peft calls a transformers method deprecated in 5.x; not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"


# ---- the math, by hand ------------------------------------------------------------------


def test_group_advantages_by_hand() -> None:
    # Group a: returns 1, 0 -> mean 0.5, sample std 0.7071; b: equal -> 0; c: alone -> 0.
    adv = group_advantages([1.0, 0.0, 2.0, 2.0, 3.0], ["a", "a", "b", "b", "c"], eps=0.0)
    np.testing.assert_allclose(adv, [0.70710678, -0.70710678, 0.0, 0.0, 0.0], atol=1e-7)
    # Leave-one-out on [1, 0, 2]: baselines (0+2)/2, (1+2)/2, (1+0)/2 = 1, 1.5, 0.5.
    loo = group_advantages([1.0, 0.0, 2.0], ["g"] * 3, leave_one_out=True, scale_by_std=False)
    np.testing.assert_allclose(loo, [0.0, -1.5, 1.5])
    # ... divided by the group's sample std, which is 1 here.
    scaled = group_advantages([1.0, 0.0, 2.0], ["g"] * 3, leave_one_out=True, eps=0.0)
    np.testing.assert_allclose(scaled, [0.0, -1.5, 1.5])
    with pytest.raises(ValueError, match="one group id per return"):
        group_advantages([1.0], ["a", "b"])


def test_negative_advantages_are_scaled_after_normalising() -> None:
    # Group [1, 0, 0, 0]: mean 0.25, sample std 0.5 -> [1.5, -0.5, -0.5, -0.5].
    returns, groups = [1.0, 0.0, 0.0, 0.0], ["g"] * 4
    plain = group_advantages(returns, groups, eps=0.0)
    np.testing.assert_allclose(plain, [1.5, -0.5, -0.5, -0.5])
    # The positive one keeps its value (the baseline and the std are the group's).
    half = group_advantages(returns, groups, eps=0.0, negative_scale=0.5)
    np.testing.assert_allclose(half, [1.5, -0.25, -0.25, -0.25])
    only_better = group_advantages(returns, groups, eps=0.0, negative_scale=0.0)
    np.testing.assert_allclose(only_better, [1.5, 0.0, 0.0, 0.0])


def test_clipped_policy_loss_by_hand() -> None:
    ratios = torch.tensor([1.5, 0.5, 1.0, 1.1, 0.5])
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0])
    logprobs = torch.log(ratios).requires_grad_(True)
    loss, clipped = clipped_policy_loss(logprobs, torch.zeros(5), advantages, clip_epsilon=0.2)
    # -min(r A, clip(r, 0.8, 1.2) A):
    #   1.5, +1 -> -min(1.5, 1.2) = -1.2 (clipped)   0.5, +1 -> -min(0.5, 0.8) = -0.5
    #   1.0, -1 -> 1.0                                1.1, -1 -> -min(-1.1, -1.1) = 1.1
    #   0.5, -1 -> -min(-0.5, -0.8) = 0.8 (clipped)
    torch.testing.assert_close(loss, torch.tensor([-1.2, -0.5, 1.0, 1.1, 0.8]))
    assert clipped.tolist() == [True, False, False, False, True]
    loss.sum().backward()
    # d/dlp of -r*A = -r*A where unclipped; 0 where the clipped term is active.
    torch.testing.assert_close(logprobs.grad, torch.tensor([0.0, -0.5, 1.0, 1.1, 0.0]))


def test_kl_k3_by_hand() -> None:
    lp = torch.log(torch.tensor([0.5, 0.25]))
    ref = torch.log(torch.tensor([0.25, 0.25]))
    # delta = ref - lp = log 0.5 -> 0.5 - log 0.5 - 1 = 0.19315; equal -> 0.
    torch.testing.assert_close(kl_k3(lp, ref), torch.tensor([0.5 + math.log(2) - 1, 0.0]))


def test_kl_k3_gradient_is_the_reverse_kl_gradient() -> None:
    """k3's value estimates KL(policy || ref), but as a loss on tokens sampled from the
    policy its expected gradient is that of KL(ref || policy) (docs/training.md)."""
    theta = torch.tensor([0.3, -1.2, 2.0, 0.0, 0.7], dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([1.0, 0.0, 0.5, -0.5, 0.2], dtype=torch.float64), -1)

    def grad(loss_of: object) -> torch.Tensor:
        theta.grad = None
        loss_of(torch.log_softmax(theta, -1)).backward()
        return theta.grad.clone()

    # The expectation over every token, each weighted by its (constant) sampling probability.
    k3 = grad(lambda lp: (lp.exp().detach() * kl_k3(lp, ref)).sum())
    reverse = grad(lambda lp: (ref.exp() * (ref - lp)).sum())  # KL(ref || policy)
    forward = grad(lambda lp: (lp.exp() * (lp - ref)).sum())  # KL(policy || ref)
    torch.testing.assert_close(k3, reverse)
    assert not torch.allclose(k3, forward)


def test_token_budget_batches() -> None:
    assert token_budget_batches([4, 4, 4, 1], lambda n: n, 8) == [[4, 4], [4, 1]]
    assert token_budget_batches([9, 1], lambda n: n, 8) == [[9], [1]]
    assert token_budget_batches([], lambda n: n, 8) == []


# ---- configs ----------------------------------------------------------------------------


def test_update_schedule_in_lockstep_gives_every_process_the_same_passes() -> None:
    """FSDP: a process with fewer micro-batches still runs every forward/backward pass
    (empty batches stand for the missing ones); replicated, it just runs fewer."""
    samples = [TokenSample([], [], [1], num_tokens=10) for _ in range(3)]
    common = {"micro_batch_tokens": 10, "grad_accumulation_steps": 2}
    # The other process: 7 micro-batches (4 steps), then 2, 2, 2, 1 of them per step.
    plain = update_schedule(samples, np.random.default_rng(0), **common, max_all=lambda n: 7)
    assert sorted(len(step) for step in plain) == [0, 1, 1, 1]  # its 3 samples over 4 steps
    others = iter([7, 2, 2, 2, 1])
    locked = update_schedule(
        samples,
        np.random.default_rng(0),
        **common,
        max_all=lambda n: max(n, next(others)),
        lockstep=True,
    )
    assert [len(step) for step in locked] == [2, 2, 2, 1]  # 7 passes, as the busiest process
    assert sum(len(batch) for step in locked for batch in step) == 3


def _padding(schedule: list[list[list[TokenSample]]]) -> int:
    """The schedule's padding: each micro-batch is as wide as its longest sample."""
    return sum(
        len(batch) * max(s.num_tokens for s in batch) - sum(s.num_tokens for s in batch)
        for step in schedule
        for batch in step
        if batch
    )


def test_sorting_by_length_within_a_step_pads_less_and_keeps_every_step() -> None:
    """Issue 43 item 6: prompts of 1 and 3 screenshots shuffled together pad the short
    ones up to the long ones; cut longest first, a micro-batch holds one kind. The
    optimizer steps hold the same samples either way (the same gradient sums)."""
    rng = np.random.default_rng(0)
    samples = [
        TokenSample([], [], [1] * int(rng.integers(50, 300)), num_tokens=int(n))
        for n in rng.choice([1_500, 4_200], size=48) + rng.integers(0, 600, size=48)
    ]
    common = {"micro_batch_tokens": 16_384, "grad_accumulation_steps": 4, "max_all": float}
    plain = update_schedule(samples, np.random.default_rng(1), **common)
    by_length = update_schedule(samples, np.random.default_rng(1), **common, sort_by_length=True)
    assert len(plain) == len(by_length) > 1

    def members(step: list[list[TokenSample]]) -> list[int]:
        return sorted(id(s) for batch in step for s in batch)

    assert [members(step) for step in plain] == [members(step) for step in by_length]
    for step in by_length:
        lengths = [s.num_tokens for batch in step for s in batch]
        assert lengths == sorted(lengths, reverse=True)
    assert _padding(by_length) < 0.5 * _padding(plain)
    assert sum(map(len, by_length)) <= sum(map(len, plain))  # no more forward passes


def _step_tokens(schedule: list[list[list[TokenSample]]]) -> list[int]:
    return [sum(len(s.completion_ids) for batch in step for s in batch) for step in schedule]


def test_every_optimizer_step_holds_each_process_in_its_share_of_the_tokens() -> None:
    """Two processes, one micro-batch of data and four: every step's gradient holds each
    process's tokens in about its overall share (not the small one's all in step 1)."""
    from two_process_update import MICRO_BATCH_TOKENS, process_samples

    data = [process_samples(rank) for rank in (0, 1)]
    micro = [token_budget_batches(d, lambda s: s.num_tokens, MICRO_BATCH_TOKENS) for d in data]
    assert [len(m) for m in micro] == [1, 4]
    for k in (1, 2):
        layouts = [
            update_schedule(
                d,
                np.random.default_rng(rank),
                micro_batch_tokens=MICRO_BATCH_TOKENS,
                grad_accumulation_steps=k,
                max_all=lambda n: 4,  # the busiest process's micro-batches
            )
            for rank, d in enumerate(data)
        ]
        tokens = np.array([_step_tokens(layout) for layout in layouts], dtype=float)
        assert tokens.shape == (2, 4 // k)
        overall = tokens.sum(axis=1) / tokens.sum()
        per_step = tokens / tokens.sum(axis=0)
        assert np.abs(per_step - overall[:, None]).max() < 0.02, (k, per_step, overall)
        scale = tokens.sum(axis=0) / tokens.mean(axis=1).sum()  # 1: a step's fair share
        assert np.abs(scale - 1).max() < 0.1, (k, scale)


@pytest.mark.timeout(120)
def test_two_processes_share_every_optimizer_step(tmp_path: Path) -> None:
    """The same on two real processes (gloo): run_update's steps, as each rank ran them."""
    out = tmp_path / "steps.json"
    cmd = [*TORCHRUN, str(REPO / "tests" / "two_process_update.py"), str(out)]
    _run(cmd, f"update2-{uuid.uuid4().hex}", timeout_s=100)
    report = json.loads(out.read_text())
    tokens = np.array(report["step_tokens"], dtype=float)
    assert report["optimizer_steps"] == 4 and tokens.shape == (2, 4)
    overall = tokens.sum(axis=1) / tokens.sum()
    assert np.abs(tokens / tokens.sum(axis=0) - overall[:, None]).max() < 0.02, tokens


def test_fsdp_launch_options_the_trainers_cannot_honour_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    assert not sharding.launched_with_fsdp()
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert sharding.launched_with_fsdp()
    monkeypatch.setenv("FSDP_OFFLOAD_PARAMS", "true")
    with pytest.raises(ValueError, match="fsdp_offload_params"):
        sharding.launched_with_fsdp()
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    with pytest.raises(ValueError, match="DeepSpeed is not supported"):
        sharding.launched_with_fsdp()


def test_optimizer_state_saved_with_fsdp_is_not_loaded_without_it() -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    by_name = {"state": {}, "param_groups": [{"params": ["weight", "bias"], "lr": 1e-3}]}
    with pytest.raises(ValueError, match="saved with FSDP and the run is without it"):
        sharding.load_optimizer_state(model, optimizer, by_name)
    sharding.load_optimizer_state(model, optimizer, optimizer.state_dict())  # the plain kind


def test_config_yaml_overrides_and_derived_fields() -> None:
    overrides = {
        "optim.learning_rate": "1e-4",
        "env.task_options": "{simple_data_entry: {rows: [0, 3]}}",
    }
    cfg = load_config(GRPOConfig, TINY_CPU, overrides)
    assert cfg.model.name == "tiny" and cfg.optim.learning_rate == 1e-4
    assert (
        cfg.env.task_options == {"simple_data_entry": {"rows": [0, 3]}} and cfg.grpo.kl_beta == 0.04
    )
    # The same file serves both trainers: each ignores the other one's section.
    assert load_config(RSConfig, TINY_CPU).rs.expert_episodes == 2
    # learning_rate None resolves by the kind of fine-tuning.
    assert GRPOConfig().optim.learning_rate == 2e-4
    assert GRPOConfig(model=ModelConfig(lora_rank=0)).optim.learning_rate == 1e-5
    cfg, out = parse_args(
        GRPOConfig, ["--output-dir", "x", "--optim.learning_rate", "3e-5", "--seed=7"], "t"
    )
    assert (cfg.optim.learning_rate, cfg.seed, out) == (3e-5, 7, Path("x"))
    # vLLM rollouts sample from another engine's distribution: truncated importance
    # sampling is on by default (TRL's cap), unless the config sets its own cap.
    assert load_config(GRPOConfig, TINY_CPU).grpo.tis_cap is None  # HF generate, sync
    vllm = load_config(GRPOConfig, TINY_CPU, {"rollout.backend": "vllm"})
    assert vllm.grpo.tis_cap == VLLM_TIS_CAP == 3.0
    mine = load_config(GRPOConfig, TINY_CPU, {"rollout.backend": "vllm", "grpo.tis_cap": "1.5"})
    assert mine.grpo.tis_cap == 1.5


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"optim.learnin_rate": "1"}, "did you mean 'optim.learning_rate'?"),
        ({"model.dtype": "bf16"}, "did you mean 'bfloat16'?"),
        ({"env.num_envs": "2.5"}, "env.num_envs: expected int, got 2.5"),
        ({"rollout.group_size": "1"}, "set rollout.group_size"),
        ({"rollout.episodes_per_iteration": "6"}, "multiple of rollout.group_size = 8"),
        ({"grpo.kl_beta": "0.1", "model.lora_rank": "0"}, "set model.lora_rank > 0"),
        ({"grpo.negative_advantage_scale": "-1"}, "grpo.negative_advantage_scale: expected >= 0"),
        (
            {"env.task_options": "{simple_data_entry: {rows: [1], row_pool: [1, 2]}}"},
            "env.task_options.simple_data_entry: rows and row_pool are both given",
        ),
        ({"env.rows": "[2]"}, "env.task_options: {simple_data_entry: {rows: [2]}}"),
        ({"optim.warmup_iterations": "1"}, "set optim.lr_scheduler: constant_with_warmup"),
        (
            {"rollout.backend": "vllm", "model.lora_modules_to_save": "[lm_head]"},
            "set model.lora_modules_to_save: [] or rollout.backend: hf",
        ),
    ],
)
def test_config_errors_say_what_to_set(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(GRPOConfig, None, overrides)


def test_a_trainers_config_is_narrowed_to_its_own_class_or_refused() -> None:
    rs = load_config(RSConfig, None)
    assert config_as(rs, RSConfig) is rs
    with pytest.raises(TypeError, match="expected a GRPOConfig, got a RSConfig"):
        config_as(rs, GRPOConfig)


def test_docs_field_table_is_generated_from_the_dataclasses() -> None:
    docs = (REPO / "docs" / "training.md").read_text()
    rows = config_markdown(GRPOConfig).splitlines()[2:] + config_markdown(RSConfig).splitlines()[2:]
    for row in rows:
        assert row in docs, f"docs/training.md is stale; regenerate: {row}"


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_lr_schedules_warm_up_from_above_zero_then_follow_transformers(schedule: str) -> None:
    from transformers import get_scheduler

    def rates(scheduler: torch.optim.lr_scheduler.LRScheduler, n: int) -> list[float]:
        out = []
        for _ in range(n):
            out.append(scheduler.get_last_lr()[0])
            scheduler.step()
        return out

    def optimizer() -> torch.optim.Optimizer:
        return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)

    ours = rates(iteration_scheduler(optimizer(), schedule, warmup_iterations=0, iterations=6), 6)
    theirs = rates(get_scheduler(schedule, optimizer(), 0, num_training_steps=6), 6)
    assert ours == pytest.approx(theirs)  # no warm-up: transformers' schedule
    warm = rates(iteration_scheduler(optimizer(), schedule, warmup_iterations=2, iterations=6), 6)
    assert warm[:3] == pytest.approx([1 / 3, 2 / 3, 1.0])  # the first iteration trains too
    if schedule == "linear":
        assert warm[3:] == pytest.approx([0.75, 0.5, 0.25])


def test_warm_up_trains_in_the_first_iteration_at_the_logged_rate(tmp_path: Path) -> None:
    """`--optim.warmup_iterations 1`, one iteration: the update moves the weights (it ran
    at rate 0 before), and AdamW's first step moves a weight by the rate it used: the
    largest LoRA B entry (0 at the start) equals the logged `train/learning_rate`."""
    mark = f"warmup-{uuid.uuid4().hex}"
    out = tmp_path / "rs"
    args = ["--iterations", "1", "--eval.episodes", "0", "--optim.lr_scheduler", "linear"]
    args += ["--optim.warmup_iterations", "1", "--optim.grad_accumulation_steps", "64"]
    _run(_command("train_rs.py", out, 1, *args), mark, timeout_s=180)
    _assert_no_orphans(mark)
    (record,) = [r for r in read_metrics(out) if "train/learning_rate" in r]
    assert record["train/optimizer_steps"] == 1
    assert record["train/learning_rate"] == pytest.approx(2e-4 / 2)  # (0 + 1) / (1 + 1)
    weights = _adapter_weights(ckpt.latest_checkpoint(out))
    moved = max(float(w.abs().max()) for n, w in weights.items() if "lora_B" in n)
    assert moved == pytest.approx(record["train/learning_rate"], rel=1e-3)


def test_episode_specs_are_a_function_of_seed_iteration_rank() -> None:
    env = EnvConfig(task_options={"simple_data_entry": {"row_pool": [0, 2, 4]}})

    def specs(iteration: int, rank: int) -> list:
        return derive_specs(
            env,
            seed=0,
            stream=TRAIN_STREAM,
            iteration=iteration,
            rank=rank,
            num_groups=3,
            group_size=2,
            tag="it",
        )

    assert specs(1, 0) == specs(1, 0)
    assert specs(1, 0) != specs(2, 0) and specs(1, 0) != specs(1, 1)
    first = specs(1, 0)
    assert first[0].seed == first[1].seed and first[0].group_id == first[1].group_id
    assert {s.seed for s in first} != {first[0].seed}  # a task seed per group
    assert all(s.options == {"row_pool": [0, 2, 4]} for s in first)


# ---- the model side: LoRA, scoring, the losses -----------------------------------------


def _grpo_config(**sections: dict) -> GRPOConfig:
    return load_config(
        GRPOConfig,
        None,
        {
            "model.name": "tiny",
            "model.lora_rank": "4",
            "rollout.temperature": "0.8",
            "optim.max_grad_norm": "0",
            **{f"{s}.{k}": str(v) for s, fields in sections.items() for k, v in fields.items()},
        },
    )


def _samples(run: SimpleNamespace, advantages: list[float], steps: int = 2) -> list[TokenSample]:
    """Real rollout steps of the run's model (sampled with HF generate): one sub-env per
    advantage, ``steps`` steps each (later steps have history in the prompt)."""
    policy = HFPolicy(
        run.model, run.processor, run.format, HFPolicyConfig(temperature=0.8, max_new_tokens=10)
    )
    rng = np.random.default_rng(0)
    texts = ("Copy row 3.", "Copy rows 5 to 9 into the form, one submission per row.")
    envs = list(range(len(advantages)))
    observations = [
        {
            "screenshot": rng.integers(0, 256, (800, 1280, 3), dtype=np.uint8),
            "instruction": texts[i % 2],
        }
        for i in envs
    ]
    torch.manual_seed(0)
    for i in envs:
        policy.begin_episode(i)
    out = []
    for _ in range(steps):
        out += policy.act(observations, envs)
    return [
        TokenSample(
            s.messages,
            s.images,
            s.completion_ids,
            len(s.prompt_ids) + len(s.completion_ids),
            advantage=a,
            rollout_logprobs=s.logprobs,
        )
        for s, a in zip(out, advantages * steps, strict=True)
    ]


def test_lora_targets_the_language_model_only_and_trains_the_adapter(
    tiny_qwen25vl_dir: Path,
) -> None:
    run = tiny_training_run(tiny_qwen25vl_dir, _grpo_config(grpo={"kl_beta": 0.1}))
    model = run.model
    lora_names = [n for n, _ in model.named_modules() if n.endswith("lora_A")]
    assert lora_names and not [n for n in lora_names if "visual" in n]
    assert all(re.search("language_model", n) for n in lora_names)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    samples = _samples(run, [1.0, -1.0])
    score_with_run_settings(run, samples)
    model.train()
    grpo_loss(run, samples, run.config.grpo, 0.8).loss_sum.backward()
    run.optimizer.step()
    after = dict(model.named_parameters())
    for name, value in before.items():
        changed = not torch.equal(after[name], value)
        assert changed == (name in trainable), name  # LoRA moves, nothing else does


def test_old_logprobs_come_from_the_trainer_not_the_rollout(tiny_qwen25vl_dir: Path) -> None:
    run = tiny_training_run(tiny_qwen25vl_dir, _grpo_config())
    samples = _samples(run, [0.5, -0.5])
    # A rollout engine that disagrees with the trainer (bf16 kernels, vLLM): shift its
    # numbers by 0.3 nats. The ratio must still be 1 before the first update.
    for s in samples:
        s.rollout_logprobs = [lp + 0.3 for lp in s.rollout_logprobs]
    metrics = score_with_run_settings(run, samples)
    assert metrics["train/logprob_mismatch_mean"] == pytest.approx(0.3, abs=1e-4)
    assert metrics["train/logprob_mismatch_max"] == pytest.approx(0.3, abs=1e-4)
    assert 0 < metrics["train/entropy"] < math.log(run.model.config.text_config.vocab_size) + 1e-3
    run.model.train()
    terms = grpo_loss(run, samples, run.config.grpo, 0.8)
    tokens = sum(len(s.completion_ids) for s in samples)
    assert terms.stats["clip_fraction"] == 0  # ratio == 1: nothing clipped
    assert terms.stats["abs_log_ratio"] / tokens < 1e-5


def test_trainer_logprobs_are_those_of_the_sampling_distribution(tiny_qwen25vl_dir: Path) -> None:
    # Sampling suppresses the vision special tokens: the trainer must score the same
    # distribution, not the raw logits (they differ by log(1 - P(vision tokens))).
    run = tiny_training_run(tiny_qwen25vl_dir, _grpo_config())
    model, processor = run.model, run.processor
    settings = HFPolicyConfig(temperature=0.8, top_p=1.0, top_k=0, max_new_tokens=10)
    policy = HFPolicy(model, processor, run.format, settings)
    (recorded,) = _samples(run, [1.0], steps=1)
    # What transformers samples from: its processed scores (temperature, suppression).
    inputs = encode_prompts(processor, [recorded.messages], [recorded.images])
    torch.manual_seed(1)
    out = model.generate(**inputs, generation_config=policy.generation_config(), output_scores=True)
    generated = out.sequences[0, inputs["input_ids"].shape[1] :]
    scores = torch.stack(out.scores, dim=1)[0].float()
    assert torch.isinf(scores[:, sorted(policy._suppressed_ids)]).all()
    sampled = scores.log_softmax(-1).gather(-1, generated[:, None]).squeeze(-1)
    with torch.no_grad():
        trained, of_recorded = completion_logprobs(
            model,
            processor,
            [recorded.messages] * 2,
            [recorded.images] * 2,
            [generated.tolist(), recorded.completion_ids],
            temperature=0.8,
        )
    torch.testing.assert_close(trained, sampled, rtol=0, atol=1e-5)
    # ... and HFPolicy records that distribution's logprobs.
    torch.testing.assert_close(
        of_recorded, torch.tensor(recorded.rollout_logprobs), rtol=0, atol=1e-5
    )


def test_truncated_importance_sampling_weights_the_loss(tiny_qwen25vl_dir: Path) -> None:
    capped = _grpo_config(grpo={"tis_cap": 2.0})
    run = tiny_training_run(tiny_qwen25vl_dir, capped)
    samples = _samples(run, [1.0, -1.0])
    score_with_run_settings(run, samples)
    run.model.train()
    plain = float(grpo_loss(run, samples, _grpo_config().grpo, 0.8).loss_sum.detach())
    # Rollout logprobs 5 nats below the trainer's: the weight exp(5) is capped at 2.
    for s in samples:
        s.rollout_logprobs = (s.old_logprobs - 5.0).tolist()
    weighted = float(grpo_loss(run, samples, capped.grpo, 0.8).loss_sum.detach())
    assert weighted == pytest.approx(2.0 * plain, rel=1e-5)
    with pytest.raises(ValueError, match="grpo.tis_cap: null"):
        step_samples([_episode_without_logprobs(samples[0])], capped.grpo)


def test_rollout_logprobs_before_the_temperature_stop_the_run(tiny_qwen25vl_dir: Path) -> None:
    # vLLM rollouts with TIS on: the server's logprobs must be temperature-scaled
    # (--logprobs-mode processed_logprobs); its default gives them before the
    # temperature, which the scoring pass finds on its first micro-batch.
    config = _grpo_config(rollout={"backend": "vllm"})
    assert config.grpo.tis_cap == 3.0 and config.rollout.temperature == 0.8
    run = tiny_training_run(tiny_qwen25vl_dir, config)
    samples = _samples(run, [1.0, -1.0])
    _, metrics = GRPO().score(run, samples)  # the sampled distribution's: accepted
    assert metrics["train/logprob_mismatch_mean"] < 1e-4
    with torch.no_grad():
        raw = completion_logprobs(
            run.model,
            run.processor,
            [s.messages for s in samples],
            [s.images for s in samples],
            [s.completion_ids for s in samples],
            temperature=1.0,
        )
    for sample, logprobs in zip(samples, raw, strict=True):
        sample.rollout_logprobs = logprobs.tolist()
    with pytest.raises(ValueError, match="--logprobs-mode processed_logprobs") as err:
        GRPO().score(run, samples)
    assert "at temperature 1 and by" in str(err.value)


def _episode_without_logprobs(sample: TokenSample) -> Episode:
    step = Step(
        screenshot=None,
        action=None,
        messages=sample.messages,
        model_images=sample.images,
        prompt_ids=[1],
        completion_ids=sample.completion_ids,
    )
    return Episode("e0", "hf", 0, {}, "", [], [step], group_id="g0")


def test_kl_reference_is_the_adapter_the_run_started_from(
    tiny_qwen25vl_dir: Path, tmp_path: Path
) -> None:
    # A trained adapter: LoRA B non-zero, so it differs from the base model.
    start = build_model(ModelConfig(lora_rank=4), str(tiny_qwen25vl_dir), torch.device("cpu"))
    with torch.no_grad():
        for name, p in start.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    start.save_pretrained(tmp_path / "start")
    config = _grpo_config(grpo={"kl_beta": 0.1}, model={"adapter_path": tmp_path / "start"})
    run = tiny_training_run(tiny_qwen25vl_dir, config)
    samples = _samples(run, [1.0, -1.0])
    score_with_run_settings(run, samples)
    run.model.train()
    terms = grpo_loss(run, samples, config.grpo, 0.8)
    tokens = sum(len(s.completion_ids) for s in samples)
    assert terms.stats["kl"] / tokens < 1e-6  # the reference is where the run started
    # ... and the base model is not: the same samples are far from it.
    with torch.no_grad(), run.model.disable_adapter():
        base = completion_logprobs(
            run.model,
            run.processor,
            [s.messages for s in samples],
            [s.images for s in samples],
            [s.completion_ids for s in samples],
            temperature=0.8,
        )
    kl_to_base = sum(
        float(kl_k3(s.old_logprobs, b).sum()) for s, b in zip(samples, base, strict=True)
    )
    assert kl_to_base / tokens > 1e-3
    # Only the trained adapter is trainable and saved; the reference stays frozen.
    assert all("reference" not in n for n, p in run.model.named_parameters() if p.requires_grad)
    run.model.save_pretrained(tmp_path / "saved", selected_adapters=["default"])
    assert not (tmp_path / "saved" / "reference").exists()


class _GradientRecorder(torch.optim.SGD):
    """An optimizer that keeps a copy of every step's gradients (and leaves weights alone)."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        super().__init__(params, lr=0.0)
        self.steps: list[list[torch.Tensor]] = []

    def step(self, closure: object = None) -> None:
        self.steps.append([p.grad.clone() for g in self.param_groups for p in g["params"]])


def test_skip_zero_advantage_leaves_the_gradient_unchanged(tiny_qwen25vl_dir: Path) -> None:
    grads = {}
    for skip in (False, True):
        config = _grpo_config(
            grpo={"skip_zero_advantage": skip, "kl_beta": 0},
            optim={"micro_batch_tokens": 1, "grad_accumulation_steps": 2},
        )
        run = tiny_training_run(tiny_qwen25vl_dir, config)
        run.optimizer = _GradientRecorder(run.trainable)
        samples = _samples(run, [1.0, 0.0, -1.0, 0.0], steps=2)[:7]
        metrics = update_samples(run, GRPO(), samples, iteration=0)
        grads[skip] = run.optimizer.steps
        assert metrics["train/optimizer_steps"] == 4  # 7 one-sample micro-batches, 2 a step
    assert len(grads[True]) == len(grads[False])
    for with_skip, without in zip(grads[True], grads[False], strict=True):
        for a, b in zip(with_skip, without, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-8)
    assert any(float(g.abs().max()) > 0 for step in grads[True] for g in step)


def _count_calls(module: torch.nn.Module) -> list[int]:
    """A list that grows by one with every forward call of ``module`` (a hook)."""
    calls: list[int] = []
    module.register_forward_hook(lambda *_: calls.append(1))
    return calls


def test_sorted_micro_batches_and_cached_image_features_train_the_same_weights(
    tiny_qwen25vl_dir: Path,
) -> None:
    """Issue 43 items 6 and 7: with the samples sorted by length within each optimizer
    step and every distinct screenshot through the vision tower once per iteration,
    two epochs of GRPO (with the KL's reference pass) end at the weights the plain
    update reaches, and the tower runs once instead of in every pass."""
    weights, calls, metrics = {}, {}, {}
    samples: list[TokenSample] = []
    for on in (False, True):
        config = _grpo_config(
            grpo={"kl_beta": 0.05},
            optim={
                "epochs": 2,
                "micro_batch_tokens": 160,
                "grad_accumulation_steps": 2,
                "sort_by_length": on,
                "cache_image_features": on,
            },
        )
        run = tiny_training_run(tiny_qwen25vl_dir, config)
        # The same rollout steps for both (sampled with the same initial weights).
        samples = samples or _samples(run, [1.0, -1.0, 0.5, -0.5], steps=3)
        initial = [p.detach().clone() for p in run.trainable]
        tower = _count_calls(run.model.get_base_model().model.visual)
        metrics[on] = update_samples(run, GRPO(), copy.deepcopy(samples), iteration=0)
        calls[on] = len(tower)
        weights[on] = [p.detach().clone() for p in run.trainable]
    assert metrics[True]["train/optimizer_steps"] == metrics[False]["train/optimizer_steps"] > 2
    for a, b in zip(weights[True], weights[False], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(a, b) for a, b in zip(weights[True], initial, strict=True))
    # Cached: one tower call (the screenshots fit one batch); plain: one per forward
    # pass of the scoring (policy + reference) and of both epochs.
    assert calls[True] == 1
    assert calls[False] > 2 * metrics[False]["train/optimizer_steps"]


def test_a_vision_tower_that_trains_is_encoded_in_every_pass(tiny_qwen25vl_dir: Path) -> None:
    """Full fine-tuning of the tower: its features change with every optimizer step, so
    none is cached (nor are those of a LoRA adapter inside the tower), and the tower
    trains."""
    config = _grpo_config(
        model={"lora_rank": 0, "freeze_vision_tower": "false"},
        optim={"micro_batch_tokens": 160, "learning_rate": 1e-3},
        grpo={"kl_beta": 0},
    )
    run = tiny_training_run(tiny_qwen25vl_dir, config)
    visual = run.model.model.visual
    assert cache_unavailable(run.model) == "the vision tower trains"
    samples = _samples(run, [1.0, -1.0], steps=2)
    before = [p.detach().clone() for p in visual.parameters()]
    tower = _count_calls(visual)
    metrics = update_samples(run, GRPO(), samples, iteration=0)
    assert len(tower) > metrics["train/optimizer_steps"] >= 2  # the scoring pass and each step
    assert any(not torch.equal(a, b) for a, b in zip(before, visual.parameters(), strict=True))
    assert all(s.image_features is None for s in samples)
    custom = _grpo_config(model={"lora_preset": "custom", "lora_target_modules": ".*qkv"})
    assert cache_unavailable(tiny_training_run(tiny_qwen25vl_dir, custom).model) == (
        "the vision tower trains"
    )


def test_image_features_leave_a_batch_without_images_alone() -> None:
    inputs = {"input_ids": torch.ones(2, 3, dtype=torch.long)}
    assert with_image_features(inputs, [[], []]) is inputs
    assert with_image_features(inputs, None) is inputs


def _episode_of(sample: TokenSample, steps: int, reward: float, name: str) -> Episode:
    """An episode of ``steps`` copies of one real rollout step, its return ``reward``."""
    step = dataclasses.asdict(
        Step(
            screenshot=None,
            action=None,
            messages=sample.messages,
            model_images=sample.images,
            prompt_ids=[1] * (sample.num_tokens - len(sample.completion_ids)),
            completion_ids=sample.completion_ids,
            logprobs=sample.rollout_logprobs,
        )
    )
    copies = [Step(**step) for _ in range(steps)]
    copies[-1].reward = reward
    return Episode(name, "hf", 0, {}, "", [], copies, group_id="g0")


def test_per_episode_normalisation_weighs_a_long_and_a_short_episode_alike(
    tiny_qwen25vl_dir: Path,
) -> None:
    # One group: a 30-step failure and a 3-step success made of the same step, so their
    # advantages are opposite (-0.71, +0.71) and each step's gradient is the same. Per
    # episode they pull equally and cancel; per token the failure pulls 10x harder.
    norms = {}
    for normalization in ("token", "episode"):
        config = _grpo_config(
            grpo={"loss_normalization": normalization}, optim={"micro_batch_tokens": 100_000}
        )
        run = tiny_training_run(tiny_qwen25vl_dir, config)
        run.optimizer = _GradientRecorder(run.trainable)
        step = _samples(run, [1.0], steps=1)[0]
        episodes = [_episode_of(step, 30, 0.0, "long"), _episode_of(step, 3, 1.0, "short")]
        samples = step_samples(episodes, config.grpo)
        advantages = [s.advantage for s in samples]
        assert advantages == pytest.approx([-0.7071] * 30 + [0.7071] * 3, abs=1e-4)
        metrics = update_samples(run, GRPO(), samples, iteration=0)
        ((*grads,),) = run.optimizer.steps  # one optimizer step
        norms[normalization] = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads)))
        assert math.isfinite(metrics["train/loss"])
    assert norms["token"] > 1e-3
    assert norms["episode"] < 1e-5 * norms["token"]


def test_per_episode_normalisation_keeps_the_loss_scale_with_more_steps_than_episodes(
    tiny_qwen25vl_dir: Path,
) -> None:
    # One episode of 3 steps, one step per optimizer step. Per episode its tokens weigh
    # 1 / its tokens and the normaliser counts 1 episode over 3 steps: each step's
    # gradient must be exactly the per-token one (one episode: the same mean). A floor
    # of 1 on the normaliser scaled it down 3-fold.
    grads, norms = {}, {}
    for normalization in ("token", "episode"):
        config = _grpo_config(
            grpo={"loss_normalization": normalization, "kl_beta": 0},
            optim={"micro_batch_tokens": 1, "grad_accumulation_steps": 1},
        )
        run = tiny_training_run(tiny_qwen25vl_dir, config)
        run.optimizer = _GradientRecorder(run.trainable)
        samples = weigh_episode(_samples(run, [1.0], steps=3), normalization)
        metrics = update_samples(run, GRPO(), samples, iteration=0)
        assert metrics["train/optimizer_steps"] == 3
        grads[normalization] = run.optimizer.steps
        norms[normalization] = metrics["train/grad_norm"]
    assert norms["episode"] == pytest.approx(norms["token"], rel=1e-4)
    for per_episode, per_token in zip(grads["episode"], grads["token"], strict=True):
        for a, b in zip(per_episode, per_token, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-8)
    assert norms["token"] > 1e-6


class _RecordingGRPO(GRPO):
    """GRPO that keeps the samples it was asked to score (what the update trains on)."""

    def score(self, run, samples):  # type: ignore[override]
        self.scored = list(samples)
        return super().score(run, samples)


def test_session_failures_are_left_out_of_the_update_and_the_baseline(
    tiny_qwen25vl_dir: Path,
) -> None:
    # One group: a success (1), a policy failure (0) and an episode whose session died
    # (0, Episode.error). The dead session's episode trains nothing, nor sets the
    # baseline: the two others get +-0.71, as a group of two.
    config = _grpo_config()
    run = tiny_training_run(tiny_qwen25vl_dir, config)
    step = _samples(run, [1.0], steps=1)[0]
    success, failure = _episode_of(step, 2, 1.0, "ok"), _episode_of(step, 2, 0.0, "bad")
    lost = _episode_of(step, 1, 0.0, "lost")
    lost.error = "the session's browser exited"
    algorithm = _RecordingGRPO()
    algorithm.start(run)
    metrics = select_and_update(run, algorithm, {"rollout": [success, failure, lost]}, 0)
    assert metrics["train/session_failures"] == 1
    assert metrics["train/samples"] == 4  # two steps each of the two finished episodes
    advantages = [s.advantage for s in algorithm.scored]
    assert advantages == pytest.approx([0.7071] * 2 + [-0.7071] * 2, abs=1e-4)
    # Nothing failed: counted as 0, every episode trained.
    metrics = select_and_update(run, algorithm, {"rollout": [success, failure]}, 1)
    assert metrics["train/session_failures"] == 0 and metrics["train/samples"] == 4


def test_sft_trains_on_the_sampled_ids_and_drops_unparsed_steps(tiny_qwen25vl_dir: Path) -> None:
    run = tiny_training_run(tiny_qwen25vl_dir, _grpo_config())
    sample = _samples(run, [1.0], steps=1)[0]
    tokenizer = run.processor.tokenizer
    text = "click(start_box='(3,4)')"
    # Sampled token by token: not the ids the tokenizer gives the whole text.
    sampled = [i for ch in text for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]
    assert sampled != tokenizer(text, add_special_tokens=False)["input_ids"]
    click = Action(ActionType.LEFT_CLICK, x=3, y=4)
    steps = [
        Step(
            None,
            click,
            text=text,
            messages=sample.messages,
            model_images=sample.images,
            prompt_ids=[1, 2],
            completion_ids=sampled,
        ),
        Step(
            None,
            None,
            text="nonsense",
            messages=sample.messages,
            model_images=sample.images,
            prompt_ids=[1, 2],
            completion_ids=[5, 6],
        ),
        Step(None, click, text=text, messages=sample.messages, model_images=sample.images),
    ]
    episode = Episode("e0", "hf", 0, {}, "", [], steps)
    kept = sft_samples(run, [episode], drop_unparsed=True)
    assert [s.completion_ids for s in kept[:1]] == [sampled]
    # A demonstration has no sampled ids: its text, then the end-of-turn token.
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert kept[1].completion_ids == [
        *tokenizer(text, add_special_tokens=False)["input_ids"],
        end_of_turn,
    ]
    assert len(kept) == 2
    assert len(sft_samples(run, [episode], drop_unparsed=False)) == 3
    loss = sft_loss(run, kept)
    assert float(loss.loss_sum.detach()) > 0


def test_full_fine_tuning_keeps_float32_master_weights(tiny_qwen25vl_dir: Path) -> None:
    cfg = ModelConfig(lora_rank=0, dtype="bfloat16")
    model = build_model(cfg, str(tiny_qwen25vl_dir), torch.device("cpu"))
    params = dict(model.named_parameters())
    assert all(p.dtype == torch.float32 for p in params.values())
    vision = [n for n in params if n.startswith(("visual.", "model.visual."))]
    assert vision and not any(params[n].requires_grad for n in vision)
    assert all(p.requires_grad for n, p in params.items() if n not in vision)
    # An update at 1e-5 survives (in bf16 it would round away for weights of size ~1).
    weight = next(p for n, p in params.items() if n not in vision and p.dim() == 2)
    before = weight.detach().clone()
    optimizer = torch.optim.AdamW([weight], lr=1e-5)
    weight.grad = torch.ones_like(weight)
    optimizer.step()
    assert not torch.equal(weight, before)


def test_lora_modules_to_save_keep_float32_master_weights(
    tiny_qwen25vl_dir: Path, tmp_path: Path
) -> None:
    """A bf16 base with LoRA and a fully trained lm_head: every trainable weight is a
    float32 master weight (peft makes the lm_head copy bf16), a forward pass runs (under
    the run's autocast), one AdamW step at 1e-5 moves every weight, and the weights come
    back exactly from the saved adapter (a resumed run)."""
    cfg = ModelConfig(lora_rank=4, dtype="bfloat16", lora_modules_to_save=["lm_head"])
    model = build_model(cfg, str(tiny_qwen25vl_dir), torch.device("cpu"))
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert any("lm_head.modules_to_save" in n for n in trainable)
    assert {p.dtype for p in trainable.values()} == {torch.float32}
    frozen = [p for p in model.parameters() if not p.requires_grad]
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)

    assert needs_autocast(cfg, torch.bfloat16)
    model.train()
    prompt = [{"role": "user", "content": [{"type": "text", "text": "Copy row 3."}]}]
    processor = load_processor(tiny_qwen25vl_dir)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logprobs = completion_logprobs(model, processor, [prompt], [[]], [[5, 6, 7]])
    (-logprobs[0].sum()).backward()
    assert all(p.grad is not None for n, p in trainable.items() if "lora_A" not in n)

    before = {n: p.detach().clone() for n, p in trainable.items()}
    optimizer = torch.optim.AdamW(trainable.values(), lr=1e-5)
    for p in trainable.values():
        p.grad = torch.ones_like(p)  # LoRA's A has no gradient while B is 0
    optimizer.step()
    for name, p in trainable.items():
        assert bool((p != before[name]).all()), name  # in bf16: 15.5% of lm_head moved

    model.save_pretrained(tmp_path / "adapter", selected_adapters=["default"])
    resumed = build_model(
        dataclasses.replace(cfg, adapter_path=str(tmp_path / "adapter")),
        str(tiny_qwen25vl_dir),
        torch.device("cpu"),
    )
    again = {n: p for n, p in resumed.named_parameters() if p.requires_grad}
    assert again.keys() == trainable.keys()
    for name, p in trainable.items():
        assert torch.equal(again[name], p), name


# ---- checkpoints and the vLLM hook -------------------------------------------------------


def test_checkpoints_keep_the_last_k(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    model.save_pretrained = lambda path, state_dict: Path(path).mkdir(parents=True)  # type: ignore[attr-defined]
    optimizer = torch.optim.AdamW(model.parameters())
    for it in (1, 2, 3):
        ckpt.save_checkpoint(
            tmp_path,
            it,
            model=model,
            optimizer_state=optimizer.state_dict(),
            rng_states=[ckpt.rng_state()],
            state={"episodes": 4 * it},
            keep_last=2,
        )
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["iter_000002", "iter_000003"]
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path)) == {"episodes": 12, "iteration": 3}
    (tmp_path / "checkpoints" / "iter_000004.tmp").mkdir()  # a save cut short: not a checkpoint
    assert ckpt.latest_checkpoint(tmp_path).name == "iter_000003"


def test_vllm_hook_posts_the_adapter() -> None:
    received: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.path, body))
            status = 200 if body["lora_name"] != "bad" else 400
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"rank too large")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        load_lora_adapter(base_url, "run-iter3", "/shared/run/iter3")
        assert received == [
            ("/v1/load_lora_adapter", {"lora_name": "run-iter3", "lora_path": "/shared/run/iter3"})
        ]
        with pytest.raises(AdapterLoadError, match="rank too large") as err:
            load_lora_adapter(base_url, "bad", "/x")
        assert err.value.status_code == 400
    finally:
        server.shutdown()


# ---- the scripts, end to end on real sessions --------------------------------------------


def _processes_with(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark`` (trainers, servers, browsers)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark.encode() in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _command(script: str, out: Path, nproc: int, *args: str) -> list[str]:
    launcher = [sys.executable]
    if nproc > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        launcher += [f"--nproc_per_node={nproc}"]
    common = ["--config", str(TINY_CPU), "--output-dir", str(out), "--logging.progress", "false"]
    return [*launcher, str(REPO / "scripts" / script), *common, *args]


def _run(cmd: list[str], mark: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "UIRL_TEST_MARK": mark}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def _assert_no_orphans(mark: str) -> None:
    deadline = time.monotonic() + 15  # session servers leave within a poll of their parent
    while _processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(mark), "session servers or browsers outlived the run"


@pytest.mark.slow
def test_grpo_resumes_after_a_kill_mid_iteration(tmp_path: Path) -> None:
    mark = f"grpo-{uuid.uuid4().hex}"
    out = tmp_path / "grpo"
    cmd = _command("train_grpo.py", out, 1, "--iterations", "2", "--eval.episodes", "0")
    cmd += ["--optim.lr_scheduler", "linear"]  # its state must survive the kill
    env = {**os.environ, "PYTHONPATH": str(REPO), "UIRL_TEST_MARK": mark}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill it once iteration 1 has started (checkpoint 1 written), like a preempted job.
    deadline = time.monotonic() + 180
    while not (out / "checkpoints" / "iter_000001").exists():
        assert first.poll() is None, first.stderr.read().decode()[-4000:]
        assert time.monotonic() < deadline, "no checkpoint after iteration 1"
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=60)
    first.stderr.close()
    _assert_no_orphans(mark)
    result = _run(cmd, mark)  # the same command again
    assert "resuming from" in result.stderr and "(iteration 1)" in result.stderr
    _assert_no_orphans(mark)

    state = ckpt.load_state(ckpt.latest_checkpoint(out))
    assert state["iteration"] == 2 and state["episodes"] == 2 * 4  # no episode counted twice
    steps = [r["step"] for r in read_metrics(out) if "rollout/reward_mean" in r]
    assert steps == [1, 2]  # one record per iteration: the killed attempt's are dropped
    records = [r for r in read_metrics(out) if "train/learning_rate" in r]
    # Linear decay over 2 iterations: 2e-4, then 1e-4 (restored, not restarted, at resume).
    assert [r["train/learning_rate"] for r in records] == pytest.approx([2e-4, 1e-4])
    for record in records:  # fp32 on CPU: HF generate and the trainer agree
        assert record.get("train/logprob_mismatch_max", 0.0) < 1e-4
    for iteration in (0, 1):
        episodes = episodes_as_specified(out, iteration)
        assert all(
            s.logprobs and len(s.logprobs) == len(s.completion_ids)
            for e in episodes
            for s in e.steps
        )


def episodes_as_specified(out: Path, iteration: int) -> list:
    """Rank 0's trajectories of ``iteration`` in a tiny_cpu.yaml GRPO run (2 groups of
    2), after checking they ran exactly the instances ``derive_specs`` gives."""
    folder = out / "trajectories" / f"iter_{iteration:06d}" / "rank_0"
    episodes = load_episodes(folder)
    expected = derive_specs(
        load_config(GRPOConfig, TINY_CPU).env,
        seed=0,
        stream=TRAIN_STREAM,
        iteration=iteration,
        rank=0,
        num_groups=2,
        group_size=2,
        tag="it",
    )
    assert [(e.seed, e.group_id) for e in episodes] == [(s.seed, s.group_id) for s in expected]
    return episodes


TINY_LEARN = REPO / "scripts" / "configs" / "tiny_learn.yaml"
# Two processes, one fixed task instance for both (the same prompts on both ranks), the
# learning demo's settings (tiny_learn.yaml), small.
TWO_PROCESS_ARGS = [
    "--config", str(TINY_LEARN), "--iterations", "2", "--env.num_envs", "1",
    "--env.task_seed", "7", "--rollout.episodes_per_iteration", "8",
    "--eval.episodes", "2", "--eval.every", "2", "--eval.at_start", "false",
    "--logging.save_trajectories", "true",
]  # fmt: skip


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
FSDP_CONFIG = REPO / "scripts" / "configs" / "accelerate" / "fsdp.yaml"
# The shipped FSDP config, as a user launches it (accelerate starts 2 CPU processes).
ACCELERATE_FSDP = [
    sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(FSDP_CONFIG),
    "--num_processes", "2",
]  # fmt: skip


def _check_ranks(
    trainer: str, out: Path, mark: str, *args: str, launcher: list[str] = TORCHRUN
) -> tuple[dict, str]:
    cmd = [*launcher, str(REPO / "scripts" / "check_ranks.py"), "--trainer", trainer]
    cmd += ["--output-dir", str(out), "--logging.progress", "false", *TWO_PROCESS_ARGS, *args]
    result = _run(cmd, mark, timeout_s=420)
    _assert_no_orphans(mark)
    return json.loads((out / "rank_check.json").read_text()), result.stderr


@pytest.fixture(scope="module")
def rs_two_processes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """Expert iteration on 2 processes (its first iteration: the learning demo's cold start)."""
    out = tmp_path_factory.mktemp("rs2") / "run"
    rs = ["--optim.learning_rate", "0.01", "--optim.epochs", "16"]
    report, stderr = _check_ranks("rs", out, f"rs2-{uuid.uuid4().hex}", *rs)
    return out, report, stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_expert_iteration_two_processes(rs_two_processes: tuple[Path, dict, str]) -> None:
    out, report, stderr = rs_two_processes
    assert report["processes"] == 2
    assert report["max_abs_difference_at_start"] == 0
    assert report["max_abs_difference_at_end"] == 0  # trained, and still the same everywhere
    records = [r for r in read_metrics(out) if "rollout/episodes" in r]
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["rollout/episodes"] == 8 for r in records)  # both processes' episodes
    assert records[0]["train/samples"] > 0 and records[0]["train/optimizer_steps"] >= 1
    assert all(r["train/rank_divergence"] == 0 for r in records)
    assert stderr.count(" step 1: ") == 1  # only the main process logs
    last = records[-1]
    for key in ("train/loss", "perf/tokens_per_s", "perf/time_share_env", "eval/reward_mean"):
        assert key in last
    # Iteration 0: 2 expert demonstrations on the same instance, written in the format.
    assert records[0]["demonstrations/episodes"] == 2
    adapter = ckpt.latest_checkpoint(out) / ckpt.ADAPTER_DIR
    assert (adapter / "adapter_model.safetensors").exists()
    assert (out / "config_rs.yaml").exists() and list((out / "tb").iterdir())
    # Same task instance and prompts on both ranks; after iteration 0's update each rank
    # must still sample with a stream of its own.
    texts = {}
    for rank in (0, 1):
        episodes = load_episodes(out / "trajectories" / "iter_000001" / f"rank_{rank}")
        assert {(e.seed, tuple(e.options["rows"])) for e in episodes} == {(7, (2,))}
        texts[rank] = [s.text for e in episodes for s in e.steps]
    assert texts[0] != texts[1]
    assert ckpt.latest_checkpoint(out).name == "iter_000002"


def _grpo_from_cold_start(rs_out: Path) -> list[str]:
    """GRPO from the 2-process RS run's adapter, with a KL term to it (the reference)."""
    warm = ckpt.latest_checkpoint(rs_out) / ckpt.ADAPTER_DIR
    return ["--model.adapter_path", str(warm), "--grpo.kl_beta", "0.05"]


@pytest.fixture(scope="module")
def grpo_two_processes(
    rs_two_processes: tuple[Path, dict, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("grpo2") / "run"
    args = _grpo_from_cold_start(rs_two_processes[0])
    report, _ = _check_ranks("grpo", out, f"grpo2-{uuid.uuid4().hex}", *args)
    return out, report


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_grpo_two_processes_train_one_model(grpo_two_processes: tuple[Path, dict]) -> None:
    out, report = grpo_two_processes
    assert report["max_abs_difference_at_start"] == 0
    assert report["max_abs_difference_at_end"] == 0
    records = [r for r in read_metrics(out) if "train/optimizer_steps" in r]
    assert sum(r["train/grad_norm"] for r in records) > 0  # it did learn something
    assert all(r["train/rank_divergence"] == 0 for r in records)
    # Old logprobs are the trainer's; in fp32 on CPU the rollout's agree with them.
    assert all(r["train/logprob_mismatch_max"] < 1e-3 for r in records)
    ranks = sorted(p.name for p in (out / "trajectories" / "iter_000000").iterdir())
    assert ranks == ["rank_0", "rank_1"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fsdp_shards_the_model_and_trains_the_same_weights(
    rs_two_processes: tuple[Path, dict, str],
    grpo_two_processes: tuple[Path, dict],
    tmp_path: Path,
) -> None:
    """Launched with the shipped accelerate FSDP config, GRPO holds each trainable
    tensor in shards and ends with the weights the replicated run trains."""
    replicated_out, replicated = grpo_two_processes
    out = tmp_path / "fsdp"
    args = _grpo_from_cold_start(rs_two_processes[0])
    report, _ = _check_ranks(
        "grpo", out, f"fsdp-{uuid.uuid4().hex}", *args, launcher=ACCELERATE_FSDP
    )
    assert report["fsdp"] and not replicated["fsdp"]
    assert yaml.safe_load((out / "config_grpo.yaml").read_text())["model"]["fsdp"] is True
    total = report["trainable_parameters"]
    assert total == replicated["trainable_parameters"]
    held = report["trainable_parameters_per_process"]
    assert sum(held) == total and max(held) < 0.6 * total  # each process: about half
    assert replicated["trainable_parameters_per_process"] == [total, total]
    # The same episodes (the rollouts ran on the gathered weights) and the same updates.
    keys = ("rollout/reward_mean", "train/samples", "train/optimizer_steps", "train/kl")
    sharded_records = [r for r in read_metrics(out) if "train/optimizer_steps" in r]
    replicated_records = [r for r in read_metrics(replicated_out) if "train/optimizer_steps" in r]
    assert len(sharded_records) == len(replicated_records) == 2
    assert [r[k] for r in sharded_records for k in keys] == pytest.approx(
        [r[k] for r in replicated_records for k in keys], abs=1e-6
    )
    assert sum(r["train/grad_norm"] for r in sharded_records) > 0
    a = _adapter_weights(ckpt.latest_checkpoint(out))
    b = _adapter_weights(ckpt.latest_checkpoint(replicated_out))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-5, msg=name)


@pytest.mark.timeout(300)
def test_fsdp_publish_gathers_the_adapter_alone(tiny_qwen25vl_dir: Path, tmp_path: Path) -> None:
    """Issue 43 item 8: a sharded LoRA model's checkpoint or vLLM publish gathers its
    adapter (LoRA matrices, modules_to_save) onto the main process, not the whole model,
    and writes the adapter the whole model gave."""
    from safetensors.torch import load_file

    script = REPO / "tests" / "two_process_publish.py"
    cmd = [*TORCHRUN, str(script), str(tiny_qwen25vl_dir), str(tmp_path), "--head"]
    _run(cmd, f"publish2-{uuid.uuid4().hex}", timeout_s=280)
    report = json.loads((tmp_path / "report.json").read_text())
    first, second = report["ranks_weight_sums"]
    assert first == second  # one model on both processes
    adapter = load_file(tmp_path / "adapter" / "adapter_model.safetensors")
    whole = load_file(tmp_path / "adapter_whole" / "adapter_model.safetensors")
    assert adapter.keys() == whole.keys()
    assert any("lora_B" in k for k in adapter) and any("lm_head" in k for k in adapter)
    for name in adapter:
        assert torch.equal(adapter[name], whole[name]), name
    assert report["gathered_bytes"] < report["whole_model_bytes"] / 4


def _adapter_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(checkpoint / ckpt.ADAPTER_DIR / "adapter_model.safetensors")


@pytest.mark.parametrize(
    ("preset", "kinds"),
    [
        ("attention", {"q_proj", "k_proj", "v_proj", "o_proj"}),
        ("mlp", {"gate_proj", "up_proj", "down_proj"}),
        (
            "attention+mlp",
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
        ),
        (
            "all-linear",
            {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"},
        ),
    ],
)
def test_lora_presets_wrap_the_language_models_layers_of_their_kind(
    tiny_qwen25vl_dir: Path, preset: str, kinds: set[str]
) -> None:
    from uirl_agents.loading.parts import lora_target_modules
    from uirl_agents.loading.pretrained import load_model

    model = load_model(tiny_qwen25vl_dir, dtype=torch.float32, device=torch.device("cpu"))
    names = lora_target_modules(model, preset)
    assert {n.rsplit(".", 1)[-1] for n in names} == kinds
    assert all(".language_model." in n for n in names)  # no vision tower, no lm_head
    layers = model.config.text_config.num_hidden_layers
    assert len(names) == layers * len(kinds)


def test_lora_custom_targets_and_their_errors(tiny_qwen25vl_dir: Path) -> None:
    config = _grpo_config(model={"lora_preset": "custom", "lora_target_modules": ".*(q_proj|qkv)"})
    run = tiny_training_run(tiny_qwen25vl_dir, config)
    lora = [n for n, _ in run.model.named_modules() if n.endswith("lora_A")]
    assert lora and all("q_proj" in n or "qkv" in n for n in lora)
    assert any("visual" in n for n in lora)  # custom takes what it names, vision included
    with pytest.raises(ValueError, match="goes with model.lora_preset: custom"):
        _grpo_config(model={"lora_target_modules": ".*q_proj"})
    with pytest.raises(ValueError, match="goes with model.lora_preset: custom"):
        _grpo_config(model={"lora_preset": "custom"})


def test_experiment_configs_override_their_base(tmp_path: Path) -> None:
    configs = REPO / "scripts" / "configs"
    base = load_config(GRPOConfig, configs / "qwen25vl_3b_lora.yaml")
    for name, preset in (("lora_attention", "attention"), ("lora_mlp", "mlp")):
        cfg = load_config(GRPOConfig, configs / "experiments" / f"{name}.yaml")
        assert cfg.model.lora_preset == preset
        assert cfg.model.lora_rank == base.model.lora_rank and cfg.rollout == base.rollout
    full = load_config(GRPOConfig, configs / "experiments" / "full_finetune.yaml")
    assert (full.model.lora_rank, full.optim.learning_rate) == (0, 1e-5)
    assert full.model.name == base.model.name and full.optim.epochs == base.optim.epochs
    loop = tmp_path / "a.yaml"
    loop.write_text("base: a.yaml\n")
    with pytest.raises(ValueError, match="loops back"):
        load_config(GRPOConfig, loop)

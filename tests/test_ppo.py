"""PPO (``algorithm: ppo``): GAE and the clipped value loss against hand-computed numbers,
the value head's state on a tiny real model, the final state of a truncated episode on
real sessions, and the trainer end to end (train, checkpoint, resume bit-identically;
two processes that end with the same adapter and value head)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes  # noqa: E402
from uirl_agents.episodes.trajectories import Episode, Step, TrajectoryWriter, load_episodes  # noqa: E402
from uirl_agents.formats import get_format  # noqa: E402
from uirl_agents.loading.pretrained import load_model_and_processor  # noqa: E402
from uirl_agents.policies.hf import (  # noqa: E402
    HFPolicy,
    HFPolicyConfig,
    encode_prompts,
    format_config_from_processor,
)
from uirl_agents.trainers import checkpoint as ckpt  # noqa: E402
from uirl_agents.trainers.algorithms.ppo import EpisodeStates, set_advantages  # noqa: E402
from uirl_agents.trainers.cli import load_config  # noqa: E402
from uirl_agents.trainers.config import GRPOConfig, PPOConfig  # noqa: E402
from uirl_agents.trainers.forward import completion_logprobs  # noqa: E402
from uirl_agents.trainers.losses import clipped_value_loss, gae_advantages  # noqa: E402
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402
from uirl_agents.trainers.update import TokenSample  # noqa: E402
from uirl_agents.trainers.value import VALUE_HEAD_CHECKPOINT, ValueHead  # noqa: E402
from uirl_gym.runtimes.local import LocalRuntime  # noqa: E402
from uirl_gym.vector import SessionVectorEnv  # noqa: E402

pytest_plugins = ["model_fixtures"]
# peft calls a transformers method deprecated in 5.x; not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"


# ---- the math, by hand ------------------------------------------------------------------


def test_gae_by_hand_terminated_and_truncated() -> None:
    gamma, lam = 0.9, 0.8  # gamma * lam = 0.72
    values = [0.5, 0.6, 0.8]
    # Terminated: nothing after the last step, whatever last_value says.
    #   d2 = 1 - 0.8 = 0.2                 A2 = 0.2
    #   d1 = 0 + 0.9*0.8 - 0.6 = 0.12      A1 = 0.12 + 0.72*0.2   = 0.264
    #   d0 = 0 + 0.9*0.6 - 0.5 = 0.04      A0 = 0.04 + 0.72*0.264 = 0.23008
    adv, ret = gae_advantages(
        [0.0, 0.0, 1.0], values, terminated=True, last_value=5.0, gamma=gamma, lam=lam
    )
    np.testing.assert_allclose(adv, [0.23008, 0.264, 0.2])
    np.testing.assert_allclose(ret, [0.73008, 0.864, 1.0])
    # Truncated: bootstrapped from the value of the state it stopped in (1.0).
    #   d2 = 0 + 0.9*1.0 - 0.8 = 0.1       A2 = 0.1
    #   d1 = 0.12                          A1 = 0.12 + 0.72*0.1   = 0.192
    #   d0 = 0.1 + 0.54 - 0.5 = 0.14       A0 = 0.14 + 0.72*0.192 = 0.27824
    rewards = [0.1, 0.0, 0.0]
    adv, ret = gae_advantages(
        rewards, values, terminated=False, last_value=1.0, gamma=gamma, lam=lam
    )
    np.testing.assert_allclose(adv, [0.27824, 0.192, 0.1])
    np.testing.assert_allclose(ret, [0.77824, 0.792, 0.9])
    # The same rewards ending in a terminal state: A2 = -0.8, A1 = 0.12 - 0.576, ...
    adv, _ = gae_advantages(rewards, values, terminated=True, last_value=1.0, gamma=gamma, lam=lam)
    np.testing.assert_allclose(adv, [-0.18832, -0.456, -0.8])
    # lam = 1, gamma = 1: the Monte Carlo return minus the value.
    adv, ret = gae_advantages(rewards, values, terminated=True, last_value=0, gamma=1, lam=1)
    np.testing.assert_allclose(adv, [0.1 - 0.5, -0.6, -0.8])
    np.testing.assert_allclose(ret, [0.1, 0.0, 0.0], atol=1e-12)
    with pytest.raises(ValueError, match="one value per reward, got 2 values for 3 rewards"):
        gae_advantages(rewards, values[:2], terminated=True, last_value=0, gamma=1, lam=1)


def _states(rewards: list[float], values: list[float], final_value: float | None) -> EpisodeStates:
    """An episode's scored states as the trainer holds them after its scoring pass."""
    steps = [Step(screenshot=None, action=None, reward=r) for r in rewards]
    episode = Episode("e", "hf", 0, {}, "", [], steps=steps)
    samples = [TokenSample([], [], [1], 1, old_value=v) for v in values]
    final = None if final_value is None else TokenSample([], [], [], 1, old_value=final_value)
    return EpisodeStates(episode, samples, final)


def test_the_trainer_bootstraps_only_from_a_truncated_episodes_final_state() -> None:
    values = [0.5, 0.6, 0.8]
    truncated = _states([0.1, 0.0, 0.0], values, final_value=1.0)
    terminated = _states([0.1, 0.0, 0.0], values, final_value=None)
    set_advantages([truncated, terminated], gamma=0.9, lam=0.8)
    assert [s.advantage for s in truncated.steps] == pytest.approx([0.27824, 0.192, 0.1])
    assert [s.value_target for s in truncated.steps] == pytest.approx([0.77824, 0.792, 0.9])
    assert [s.advantage for s in terminated.steps] == pytest.approx([-0.18832, -0.456, -0.8])


def test_clipped_value_loss_by_hand() -> None:
    values = torch.tensor([1.0, 0.0, 0.5], requires_grad=True)
    old = torch.tensor([0.5, 0.5, 0.5])
    returns = torch.tensor([2.0, 1.0, 0.4])
    loss, clipped = clipped_value_loss(values, old, returns, value_clip=0.2)
    # 0.5 * max((V - R)^2, (V_old + clip(V - V_old, -0.2, 0.2) - R)^2):
    #   V 1.0: (1 - 2)^2 = 1 vs (0.7 - 2)^2 = 1.69  -> 0.845 (clipped term active)
    #   V 0.0: (0 - 1)^2 = 1 vs (0.3 - 1)^2 = 0.49  -> 0.5
    #   V 0.5: (0.1)^2 = 0.01 both                  -> 0.005
    torch.testing.assert_close(loss, torch.tensor([0.845, 0.5, 0.005]))
    assert clipped.tolist() == [True, False, False]
    loss.sum().backward()
    # The clipped term does not depend on V once the move is past the clip: no gradient.
    torch.testing.assert_close(values.grad, torch.tensor([0.0, -1.0, 0.1]))
    plain, never = clipped_value_loss(values.detach(), old, returns, value_clip=None)
    torch.testing.assert_close(plain, torch.tensor([0.5, 0.5, 0.005]))
    assert not never.any()


def test_step_advantages_are_normalised_then_negatives_scaled() -> None:
    from uirl_agents.trainers.algorithms.ppo import shape_advantages
    from uirl_agents.trainers.update import TokenSample

    def samples(values: list[float]) -> list[TokenSample]:
        return [TokenSample([], [], [1], num_tokens=1, advantage=v) for v in values]

    raw = [1.0, 2.0, 3.0, 6.0]
    kept = samples(raw)
    shape_advantages(kept, normalize=True, negative_scale=1.0, sum_all=float)
    z = (np.array(raw) - 3.0) / np.std(raw, ddof=1)
    assert [s.advantage for s in kept] == pytest.approx(z.tolist())
    # grpo.negative_advantage_scale applies to PPO's step advantages too (the learning
    # demo's config sets 0): below-average steps are then not pushed down.
    off = samples(raw)
    shape_advantages(off, normalize=True, negative_scale=0.0, sum_all=float)
    assert [s.advantage for s in off] == pytest.approx(np.where(z < 0, 0.0, z).tolist())
    plain = samples([-0.5, 0.25])
    shape_advantages(plain, normalize=False, negative_scale=0.5, sum_all=float)
    assert [s.advantage for s in plain] == [-0.25, 0.25]


def test_advantages_that_are_only_the_critics_noise_are_not_blown_up() -> None:
    # Iteration 16 of a 20-iteration PPO run on the learning demo (15/16 successes): every
    # return ~1, the critic at 0.9997, step advantages ~1e-4. Scaled to std 1 they made an
    # update that took the policy to 0 successes; the floor keeps them ~1e-3.
    from uirl_agents.trainers.algorithms.ppo import shape_advantages
    from uirl_agents.trainers.update import TokenSample

    raw = [3e-4, -1e-4, 2e-4, -2e-4]
    kept = [TokenSample([], [], [1], num_tokens=1, advantage=v) for v in raw]
    std = shape_advantages(kept, normalize=True, negative_scale=1.0, sum_all=float, std_floor=0.1)
    assert std == pytest.approx(np.std(raw, ddof=1))
    assert [s.advantage for s in kept] == pytest.approx(((np.array(raw) - 5e-5) / 0.1).tolist())
    assert max(abs(s.advantage) for s in kept) < 0.01
    # Above the floor it is the plain normalisation.
    wide = [TokenSample([], [], [1], num_tokens=1, advantage=v) for v in (1.0, -1.0)]
    shape_advantages(wide, normalize=True, negative_scale=1.0, sum_all=float, std_floor=0.1)
    assert [s.advantage for s in wide] == pytest.approx([2**-0.5, -(2**-0.5)])


def test_ppo_config_fields_and_errors() -> None:
    cfg = load_config(GRPOConfig, TINY_CPU, {"algorithm": "ppo", "rollout.group_size": "1"})
    assert cfg.trains_value_head and (cfg.ppo.gamma, cfg.ppo.lam) == (1.0, 0.95)
    assert not load_config(GRPOConfig, TINY_CPU).trains_value_head
    # The learning demo's setting runs as PPO (scripts/learning_demo.py --algorithm ppo
    # switches its GRPO replay off).
    demo = load_config(
        GRPOConfig,
        REPO / "scripts" / "configs" / "tiny_task.yaml",
        {"algorithm": "ppo", "grpo.replay": "false"},
    )
    assert demo.trains_value_head
    with pytest.raises(ValueError, match="GRPO needs >= 2 episodes per task instance"):
        load_config(GRPOConfig, TINY_CPU, {"rollout.group_size": "1"})
    with pytest.raises(ValueError, match=r"ppo.lam: expected in \[0, 1\], got 1.5"):
        load_config(GRPOConfig, TINY_CPU, {"algorithm": "ppo", "ppo.lam": "1.5"})
    with pytest.raises(ValueError, match="set grpo.replay: false with algorithm: ppo"):
        load_config(GRPOConfig, TINY_CPU, {"algorithm": "ppo", "grpo.replay": "true"})
    with pytest.raises(ValueError, match="set model.fsdp: false, or algorithm: grpo"):
        load_config(GRPOConfig, TINY_CPU, {"algorithm": "ppo", "model.fsdp": "true"})


def test_ppo_has_its_own_config_and_the_grpo_spelling_warns() -> None:
    """PPOConfig (scripts/train_ppo.py) reads every PPO setting from its ppo section; a
    GRPO config's algorithm: ppo still runs the same PPO, with a DeprecationWarning that
    names the new spelling (issue 40)."""
    cfg = load_config(PPOConfig, TINY_CPU, {"rollout.group_size": "1", "grpo.kl_beta": "0.9"})
    assert cfg.trains_value_head and cfg.algorithm == "ppo"
    assert (cfg.ppo.clip_epsilon, cfg.ppo.kl_beta) == (0.2, 0.04)  # tiny_cpu.yaml's ppo
    with pytest.warns(DeprecationWarning, match=r"scripts/train_ppo.py .*grpo.kl_beta -> ppo"):
        old = load_config(GRPOConfig, TINY_CPU, {"algorithm": "ppo", "rollout.group_size": "1"})
    converted = old.as_ppo()
    converted.env.kubernetes.run_id = cfg.env.kubernetes.run_id  # drawn per config
    assert converted == cfg
    with pytest.raises(ValueError, match="ppo.kl_beta = 0.5 but grpo.kl_beta = 0.04"):
        load_config(
            GRPOConfig,
            TINY_CPU,
            {"algorithm": "ppo", "rollout.group_size": "1", "ppo.kl_beta": "0.5"},
        )
    with pytest.raises(ValueError, match="ppo.clip_epsilon: expected > 0, got 0.0"):
        load_config(PPOConfig, TINY_CPU, {"ppo.clip_epsilon": "0"})
    with pytest.raises(ValueError, match=r"ppo.kl_beta > 0 needs a reference model"):
        load_config(PPOConfig, TINY_CPU, {"model.lora_rank": "0"})


# ---- the value head's state, on a tiny real model ---------------------------------------


def test_the_value_head_starts_at_zero_and_stays_float32_under_autocast() -> None:
    head = ValueHead(8)
    hidden = torch.randn(3, 8, dtype=torch.bfloat16)
    assert head(hidden).tolist() == [0.0, 0.0, 0.0]
    torch.nn.init.normal_(head.linear.weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # full fine-tuning's forward passes
        values = head(hidden)
    assert values.dtype == torch.float32
    torch.testing.assert_close(values, head.linear(hidden.float()).squeeze(-1))


@pytest.fixture(scope="module")
def tiny_policy(tiny_qwen25vl_dir: Path) -> HFPolicy:
    model, processor = load_model_and_processor(tiny_qwen25vl_dir)
    fmt = get_format("qwen2.5-vl", format_config_from_processor(processor))
    return HFPolicy(model, processor, fmt, HFPolicyConfig(max_images=2, max_new_tokens=8))


def test_the_value_reads_the_prompts_last_state_whatever_follows(tiny_policy: HFPolicy) -> None:
    """A state's value is the same from a training pass (prompt + completion) and from a
    value-only pass (no completion, as for a truncated episode's final state)."""
    rng = np.random.default_rng(0)
    observation = {"screenshot": rng.integers(0, 256, (800, 1280, 3), np.uint8), "instruction": "x"}
    torch.manual_seed(0)
    step = tiny_policy.act([observation], [0])[0]
    model, processor = tiny_policy.model, tiny_policy.processor
    head = ValueHead.for_model(model, torch.device("cpu"))
    torch.nn.init.normal_(head.linear.weight)
    values, states = [], []
    for completion in (step.completion_ids, []):
        completion_logprobs(
            model, processor, [step.messages], [step.images], [completion], prompt_states=states
        )
        assert states[-1].shape == (model.config.get_text_config().hidden_size,)
        values.append(head(states[-1][None]))
    torch.testing.assert_close(values[0], values[1])
    # It is the model's own last hidden state (after the final norm) at the prompt's end.
    inputs = encode_prompts(processor, [step.messages], [step.images])
    with torch.no_grad():
        hidden = model(**inputs, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(states[-1].detach(), hidden[0, -1])
    values[0].sum().backward()  # the value's gradient reaches the model (a shared trunk)
    assert head.linear.weight.grad is not None


def test_a_truncated_episode_keeps_its_final_prompt_in_memory_only(
    tiny_policy: HFPolicy, tmp_path: Path
) -> None:
    """Run on real sessions, an episode cut by the step limit holds the prompt the policy
    would have acted on next (the state PPO bootstraps from); nothing of it is written."""
    runtime = LocalRuntime()
    envs = SessionVectorEnv(1, runtime=runtime)
    try:
        with TrajectoryWriter(tmp_path) as writer:
            [episode] = collect_episodes(
                tiny_policy, envs, [EpisodeSpec(seed=3)], max_steps=2, writer=writer,
                keep_screenshots=False, progress=False,
            )  # fmt: skip
    finally:
        envs.close()
        runtime.close()
    assert episode.steps[-1].truncated and not episode.steps[-1].terminated
    messages, images = episode.final_prompt
    # The prompt of a third step: two earlier outputs as history, the latest 2 screenshots.
    assert sum(m["role"] == "assistant" for m in messages) == 2
    assert len(images) == 2 and images[0] is episode.steps[-1].model_images[-1]
    [loaded] = load_episodes(tmp_path)
    assert loaded.final_prompt is None and loaded.total_reward == episode.total_reward


# ---- the trainer, end to end on real sessions ---------------------------------------------


def _run(cmd: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "UIRL_TEST_MARK": f"ppo-{uuid.uuid4().hex}"}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def _ppo_command(out: Path) -> list[str]:
    return [
        sys.executable, str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU),
        "--output-dir", str(out), "--logging.progress", "false", "--algorithm", "ppo",
        "--eval.episodes", "0", "--rollout.group_size", "1",
    ]  # fmt: skip


def _trained_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    weights = load_file(checkpoint / ckpt.ADAPTER_DIR / "adapter_model.safetensors")
    head = ckpt.load_extra(checkpoint, VALUE_HEAD_CHECKPOINT)
    return weights | {f"value_head.{k}": v for k, v in head.items()}


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_trains_the_value_head_checkpoints_and_resumes_bit_identically(
    tmp_path: Path,
) -> None:
    out = tmp_path / "ppo"
    _run(_ppo_command(out))
    records = [r for r in read_metrics(out) if "train/value_loss" in r]
    assert [r["step"] for r in records] == [1, 2]
    for r in records:
        assert math.isfinite(r["train/loss"]) and r["train/value_loss"] > 0
        assert r["train/samples"] > 0 and r["train/optimizer_steps"] >= 1
    assert yaml_algorithm(out / "config_ppo.yaml") == "ppo"
    first, last = ckpt.list_checkpoints(out)
    head_1 = ckpt.load_extra(first, VALUE_HEAD_CHECKPOINT)
    head_2 = ckpt.load_extra(last, VALUE_HEAD_CHECKPOINT)
    assert head_1["linear.weight"].abs().sum() > 0  # it starts at 0: trained
    assert not torch.equal(head_1["linear.weight"], head_2["linear.weight"])
    # Resume from checkpoint 1 in a copy: iteration 1 again, the same weights to the bit.
    resumed = tmp_path / "resumed"
    shutil.copytree(out, resumed)
    shutil.rmtree(resumed / ckpt.CHECKPOINTS_DIR / last.name)
    result = _run(_ppo_command(resumed))
    assert "resuming from" in result.stderr and "(iteration 1)" in result.stderr
    expected, got = _trained_weights(last), _trained_weights(ckpt.latest_checkpoint(resumed))
    assert expected.keys() == got.keys() and "value_head.linear.weight" in got
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_train_ppo_script_trains_from_the_ppo_section(tmp_path: Path) -> None:
    out = tmp_path / "ppo"
    _run([
        sys.executable, str(REPO / "scripts" / "train_ppo.py"), "--config", str(TINY_CPU),
        "--output-dir", str(out), "--logging.progress", "false", "--iterations", "1",
        "--eval.episodes", "0", "--rollout.group_size", "1",
    ])  # fmt: skip
    assert yaml_algorithm(out / "config_ppo.yaml") == "ppo"
    [record] = [r for r in read_metrics(out) if "train/value_loss" in r]
    assert record["train/value_loss"] > 0 and record["train/kl"] >= 0


def yaml_algorithm(path: Path) -> str:
    import yaml

    return yaml.safe_load(path.read_text())["algorithm"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ppo_two_processes_end_with_the_same_adapter_and_value_head(tmp_path: Path) -> None:
    out = tmp_path / "ppo2"
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"]
    launcher += ["--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    launcher += ["--dynamo_backend", "no"]
    cmd = [*launcher, str(REPO / "scripts" / "check_ranks.py"), "--trainer", "ppo"]
    cmd += _ppo_command(out)[2:]  # the same settings as the one-process run
    _run(cmd, timeout_s=420)
    report = json.loads((out / "rank_check.json").read_text())
    assert report["processes"] == 2
    assert report["max_abs_difference_at_start"] == 0
    assert report["max_abs_difference_at_end"] == 0  # adapter and value head, compared
    adapter_tensors = len(_trained_weights(ckpt.latest_checkpoint(out))) - 2
    assert report["trainable_tensors"] == adapter_tensors + 2  # + the head's weight and bias
    records = [r for r in read_metrics(out) if "train/value_loss" in r]
    assert len(records) == 2 and all(r["train/rank_divergence"] == 0 for r in records)
    assert all(r["train/value_loss"] > 0 for r in records)

"""GRPO's replay of successes (``grpo.replay``): which failures a stored success
replaces, what the advantages become, that the replay survives a checkpoint, and that
on a rarely solved instance it keeps the policy learning where plain GRPO stops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import score_with_run_settings, tiny_training_run

from uirl_agents.episodes.rollout import to_step
from uirl_agents.episodes.trajectories import Episode, Step
from uirl_agents.loading.pretrained import load_model
from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.algorithms.grpo import GRPO, replayed_episodes, step_samples
from uirl_agents.trainers.algorithms.replay import SuccessReplay, instance_key
from uirl_agents.trainers.cli import load_config
from uirl_agents.trainers.config import GRPOConfig, GRPOSection
from uirl_agents.trainers.loop import update
from uirl_agents.trainers.update import TokenSample

pytest_plugins = ["model_fixtures"]


def episode(
    group: str, seed: int, reward: float, success: bool, task: str = "form_fill"
) -> Episode:
    """A one-step episode whose completion says what it was (for telling them apart)."""
    step = Step(
        screenshot=np.zeros((8, 8, 3), np.uint8),
        action=None,
        messages=[{"role": "user", "content": f"{group}/{seed}"}],
        model_images=[np.zeros((4, 4, 3), np.uint8)],
        prompt_ids=[1, 2],
        completion_ids=[int(reward * 10) + 100],
        reward=reward,
    )
    return Episode(
        episode_id=f"{group}-{seed}-{reward}",
        agent="test",
        seed=seed,
        options={"num_fields": 2, "split": "train"},
        instruction="",
        target_rows=[],
        steps=[step],
        success=success,
        group_id=group,
        task=task,
    )


def test_a_group_without_a_success_gets_a_stored_one_in_place_of_its_worst_failure() -> None:
    replay = SuccessReplay(per_instance=1, max_instances=4)
    assert replay.add([episode("old", 7, 1.0, True), episode("old", 7, 0.0, False)]) == 1
    # Stored with the screenshots dropped (training uses the model's images).
    group = [episode("g", 7, 0.2, False), episode("g", 7, -0.5, False)]
    solved = [episode("h", 7, 1.0, True), episode("h", 7, 0.0, False)]
    unknown = [episode("u", 8, 0.0, False), episode("u", 8, 0.0, False)]
    filled, replaced = replay.fill(group + solved + unknown)
    assert replaced == 1
    assert [e.episode_id for e in filled] == [
        "g-7-0.2", "g-7--0.5-replay", "h-7-1.0", "h-7-0.0", "u-8-0.0", "u-8-0.0",
    ]  # fmt: skip
    assert filled[1].group_id == "g" and filled[1].success and filled[1].steps[0].screenshot is None
    # The group now has a signal: the replayed success above its baseline, the rest below.
    samples = step_samples(filled[:2], GRPOSection(replay=True))
    assert samples[1].advantage > 0 > samples[0].advantage
    assert samples[1].completion_ids == [110]  # the stored episode's own tokens


def test_instances_are_task_seed_and_options_and_the_oldest_go_first() -> None:
    a = episode("a", 1, 1.0, True)
    assert instance_key(a) != instance_key(episode("a", 1, 1.0, True, task="settings_nav"))
    assert instance_key(a) != instance_key(episode("a", 2, 1.0, True))
    test_split = episode("a", 1, 1.0, True)
    test_split.options["split"] = "test"
    assert instance_key(a) == instance_key(test_split)  # the split is not the instance
    replay = SuccessReplay(per_instance=2, max_instances=2)
    replay.add([episode("x", s, 1.0, True) for s in (1, 2, 1, 1)])
    assert len(replay) == 3  # instance 1 keeps its latest 2
    replay.fill([episode("y", 2, 0.0, False)])  # instance 2 used: now the most recent
    replay.add([episode("z", 3, 1.0, True)])
    assert [k for k, _ in replay.state()] == [instance_key(episode("", s, 0, True)) for s in (2, 3)]
    with pytest.raises(ValueError, match=">= 1"):
        SuccessReplay(per_instance=0)


def test_the_replay_is_saved_with_the_checkpoint_and_restored(
    tiny_qwen25vl_dir: Path, tmp_path: Path
) -> None:
    replay = SuccessReplay()
    replay.add([episode("g", 5, 1.0, True)])
    model = load_model(tiny_qwen25vl_dir, dtype=torch.float32, device=torch.device("cpu"))
    optimizer = torch.optim.AdamW([p for p in model.parameters()][:1])
    path = ckpt.save_checkpoint(
        tmp_path, 1, model=model, optimizer_state=optimizer.state_dict(),
        rng_states=[ckpt.rng_state()], state={}, keep_last=1, extra={"replay": replay.state()},
    )  # fmt: skip
    restored = SuccessReplay()
    restored.load(ckpt.load_extra(path, "replay"))
    filled, replaced = restored.fill([episode("new", 5, 0.0, False), episode("new", 5, 0, False)])
    assert replaced == 1 and filled[0].steps[0].completion_ids == [110]
    assert ckpt.load_extra(path, "absent") is None


def _rollout_episodes(policy: HFPolicy, group: str, observation: dict, n: int) -> list[Episode]:
    """``n`` one-step episodes of one task instance, sampled by ``policy``."""
    for i in range(n):
        policy.begin_episode(i)
    steps = policy.act([observation] * n, list(range(n)))
    no_reward = (observation, 0.0, True, False, {})  # failed unless the test says otherwise
    return [
        Episode(
            episode_id=f"{group}-{i}",
            agent="hf",
            seed=3,
            options={"split": "train"},
            instruction=observation["instruction"],
            target_rows=[],
            steps=[to_step(observation, s, no_reward, policy_time_s=0.0, env_time_s=0.0)],
            group_id=group,
        )
        for i, s in enumerate(steps)
    ]


def _logprob(run: object, step: Step) -> float:
    """log P(the step's completion | its prompt) under the run's current weights."""
    sample = TokenSample(step.messages, step.model_images, step.completion_ids, 1)
    score_with_run_settings(run, [sample])
    return float(sample.old_logprobs.sum())


def test_on_a_rarely_solved_instance_the_replay_keeps_learning_where_plain_grpo_stops(
    tiny_qwen25vl_dir: Path,
) -> None:
    # One task instance whose solution is one particular 8-token output: the run finds it
    # once, in iteration 1's group, and its later groups (sampled by the policy) all fail.
    # Plain GRPO learns from iteration 1 and then from nothing (every advantage 0: only
    # Adam's momentum still moves the weights); with a replay each failed group gets the
    # stored success back, so P(solution) keeps rising.
    rng = np.random.default_rng(0)
    observation = {
        "screenshot": rng.integers(0, 256, (800, 1280, 3), dtype=np.uint8),
        "instruction": "Copy row 3.",
    }
    gains = {}
    for replay_on in (False, True):
        config = load_config(
            GRPOConfig,
            None,
            {
                "model.name": "tiny",
                "model.lora_rank": "4",
                "rollout.temperature": "1.0",
                "optim.learning_rate": "0.01",
                "optim.max_grad_norm": "0",
                "grpo.replay": str(replay_on).lower(),
            },
        )
        run = tiny_training_run(tiny_qwen25vl_dir, config)
        policy = HFPolicy(
            run.model,
            run.processor,
            run.format,
            HFPolicyConfig(temperature=1.0, max_new_tokens=8),
        )
        replay = SuccessReplay() if replay_on else None
        torch.manual_seed(0)
        first = _rollout_episodes(policy, "it1", observation, 4)
        solution = first[0].steps[0]
        first[0].success, first[0].steps[0].reward = True, 1.0
        trained, _ = replayed_episodes(replay, first, gather=lambda x: x)
        update(run, GRPO(), trained, iteration=1)
        after_first = _logprob(run, solution)
        replayed = 0
        for iteration in (2, 3, 4):
            episodes = _rollout_episodes(policy, f"it{iteration}", observation, 4)
            assert all(e.steps[0].completion_ids != solution.completion_ids for e in episodes)
            trained, n = replayed_episodes(replay, episodes, gather=lambda x: x)
            replayed += n
            update(run, GRPO(), trained, iteration=iteration)
        gains[replay_on] = _logprob(run, solution) - after_first
        assert replayed == (3 if replay_on else 0)
    # Measured: -0.50 nats without the replay (momentum), +1.17 with it.
    assert gains[True] > 0.5, gains
    assert gains[True] > gains[False] + 1.0, gains

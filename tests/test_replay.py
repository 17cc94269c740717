"""GRPO's replay of successes (``grpo.replay``): which failures a stored success
replaces, what the advantages become, and that the replay survives a checkpoint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from uirl_agents.models import load_model
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.config import GRPOSection
from uirl_agents.trainers.grpo import step_samples
from uirl_agents.trainers.replay import SuccessReplay, instance_key
from uirl_agents.trajectories import Episode, Step

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

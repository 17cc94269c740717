"""Every model family on a real session: a tiny random model of each, built offline,
loads through the normal path, takes a rollout step with HFPolicy, one SFT step and
one GRPO step (LoRA on the language model only)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")  # ships the chat templates the tiny models use

from model_fixtures import tiny_training_run  # noqa: E402

from uirl_agents.episodes.rollout import EpisodeSpec, collect_episodes  # noqa: E402
from uirl_agents.episodes.trajectories import Episode, Step  # noqa: E402
from uirl_agents.loading.parts import VISION_TOWER  # noqa: E402
from uirl_agents.loading.pretrained import detect_format  # noqa: E402
from uirl_agents.policies.hf import (  # noqa: E402
    HFPolicy,
    HFPolicyConfig,
    vision_token_ids,
)
from uirl_agents.testing.tiny_model import FAMILIES, build_tiny_model  # noqa: E402
from uirl_agents.testing.tiny_model import main as tiny_model_main  # noqa: E402
from uirl_agents.trainers.algorithms.expert_iteration import ExpertIteration  # noqa: E402
from uirl_agents.trainers.algorithms.grpo import GRPO, step_samples  # noqa: E402
from uirl_agents.trainers.algorithms.sft import sft_loss, sft_samples  # noqa: E402
from uirl_agents.trainers.cli import load_config  # noqa: E402
from uirl_agents.trainers.config import GRPOConfig  # noqa: E402
from uirl_agents.trainers.forward import completion_logprobs  # noqa: E402
from uirl_agents.trainers.loop import update_samples  # noqa: E402
from uirl_gym.actions import Action, ActionType  # noqa: E402
from uirl_gym.vector import SessionVectorEnv  # noqa: E402

# peft calls a transformers method deprecated in 5.x, PaliGemma's processor a numpy 1
# idiom; not ours to fix.
pytestmark = [
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:__array__ implementation doesn't accept a copy keyword"),
]

ROOT = Path(__file__).resolve().parents[1]
# family -> (model class, default format)
EXPECTED = {
    "qwen2.5-vl": ("Qwen2_5_VLForConditionalGeneration", "qwen2.5-vl"),
    "qwen2-vl": ("Qwen2VLForConditionalGeneration", "qwen2.5-vl"),
    "qwen3-vl": ("Qwen3VLForConditionalGeneration", "text"),
    "llava": ("LlavaForConditionalGeneration", "text"),
    "llava-next": ("LlavaNextForConditionalGeneration", "text"),
    "idefics3": ("Idefics3ForConditionalGeneration", "text"),
    "smolvlm": ("SmolVLMForConditionalGeneration", "text"),
    "paligemma": ("PaliGemmaForConditionalGeneration", "text"),
    "gemma3": ("Gemma3ForConditionalGeneration", "text"),
}
# SmolVLM's processor imports num2words (for video prompts) when it is built.
SKIPS = {
    "smolvlm": "SmolVLMProcessor needs the num2words package (pip install num2words)"
    if importlib.util.find_spec("num2words") is None
    else None,
}
FAMILY_PARAMS = [
    pytest.param(f, marks=pytest.mark.skip(reason=SKIPS[f])) if SKIPS.get(f) else f
    for f in EXPECTED
]


def test_every_family_is_covered() -> None:
    assert set(EXPECTED) == set(FAMILIES)


@pytest.fixture(scope="module")
def envs(runtime) -> Iterator[SessionVectorEnv]:
    """Two real sessions shared by every family."""
    envs = SessionVectorEnv(2, runtime=runtime)
    try:
        yield envs
    finally:
        envs.close()


@pytest.fixture(scope="module", params=FAMILY_PARAMS)
def family_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    family = request.param
    # Matrices this small gain nothing from threads; a second thread next to the
    # sessions' Chromium slows a busy box down.
    torch.set_num_threads(1)
    return family, build_tiny_model(family, tmp_path_factory.mktemp(family))


def _grpo_config(format_name: str) -> GRPOConfig:
    overrides = {
        "model.name": "tiny",
        "model.format": format_name,
        "model.lora_rank": "4",
        "rollout.temperature": "1.0",
        "optim.max_grad_norm": "0",
    }
    return load_config(GRPOConfig, None, overrides)


def test_rollout_sft_and_grpo_steps_on_a_real_session(family_dir, envs) -> None:
    family, model_dir = family_dir
    model_class, format_name = EXPECTED[family]
    assert detect_format(model_dir) == format_name
    run = tiny_training_run(model_dir, _grpo_config(format_name))
    assert type(run.model.get_base_model()).__name__ == model_class
    assert "torchvision" not in sys.modules

    # freeze_vision_tower finds this family's vision encoder; GRPO knows its image token.
    names = [n for n, _ in run.model.named_parameters()]
    vision = [n for n in names if VISION_TOWER.search(n)]
    assert vision and not [n for n in vision if re.search(r"language_model|text_model", n)]
    assert run.model.config.image_token_id in vision_token_ids(run.model.config)

    # LoRA wraps the language model's layers only.
    lora_modules = [n for n, _ in run.model.named_modules() if n.endswith("lora_A")]
    assert lora_modules
    assert all(re.search(r"\.(language_model|text_model)\.layers\.\d+\.", n) for n in lora_modules)

    # One rollout step per sub-env with HFPolicy on real sessions.
    policy = HFPolicy(
        run.model, run.processor, run.format, HFPolicyConfig(temperature=1.0, max_new_tokens=8)
    )
    torch.manual_seed(0)
    episodes = collect_episodes(
        policy,
        envs,
        [EpisodeSpec(seed=0, group_id="g"), EpisodeSpec(seed=0, group_id="g")],
        max_steps=1,
        progress=False,
    )
    steps = [e.steps[0] for e in episodes]
    for step in steps:
        assert (step.action is None) != (step.error is None)
        assert 1 <= len(step.completion_ids) <= 8
        assert step.model_images[0].shape[:2] == (
            run.format.geometry().image_height,
            run.format.geometry().image_width,
        )
    # The trainer's forward pass gives back the logprobs the rollout sampled with.
    with torch.no_grad():
        recomputed = completion_logprobs(
            run.model,
            run.processor,
            [s.messages for s in steps],
            [s.model_images for s in steps],
            [s.completion_ids for s in steps],
        )
    for step, logprobs in zip(steps, recomputed, strict=True):
        torch.testing.assert_close(logprobs, torch.tensor(step.logprobs), atol=1e-5, rtol=0)

    # One SFT step on a demonstration of the step's screen: its likelihood goes up.
    click = Action(ActionType.LEFT_CLICK, x=640, y=400)
    demo_text = run.format.render(click, run.format.geometry(), thought="Click the field.")
    demo = Step(
        None, click, text=demo_text, messages=steps[0].messages, model_images=steps[0].model_images
    )
    samples = sft_samples(
        run, [Episode("demo", "expert", 0, {}, "", [], [demo])], drop_unparsed=True
    )
    trainable_before = [p.detach().clone() for p in run.trainable]
    base_before = {
        n: p.detach().clone() for n, p in run.model.named_parameters() if "lora_" not in n
    }
    with torch.no_grad():
        nll_before = float(sft_loss(run, samples).loss_sum)
    run.model.train()
    metrics = update_samples(run, ExpertIteration(), samples, iteration=0)
    run.model.eval()
    with torch.no_grad():
        nll_after = float(sft_loss(run, samples).loss_sum)
    assert metrics["train/samples"] == 1
    assert nll_after < nll_before

    # One GRPO step on the rollout (rewards 1 and 0 in one group: advantages +-).
    episodes[0].steps[0].reward, episodes[1].steps[0].reward = 1.0, 0.0
    samples = step_samples(episodes, run.config.grpo, vision_token_ids(run.model.config))
    run.model.train()
    metrics = update_samples(run, GRPO(), samples, iteration=1)
    run.model.eval()
    assert metrics["train/samples"] == len(samples) >= 1
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(trainable_before, run.trainable, strict=True))
    for name, param in run.model.named_parameters():
        if name in base_before:
            assert torch.equal(param, base_before[name]), name  # LoRA moves, nothing else


def test_cli_builds_a_family(tmp_path: Path) -> None:
    tiny_model_main(["--family", "llava", str(tmp_path / "llava")])
    config = json.loads((tmp_path / "llava" / "config.json").read_text())
    assert config["model_type"] == "llava"
    with pytest.raises(SystemExit):
        tiny_model_main(["--family", "llama", str(tmp_path / "x")])


def test_evaluate_runs_a_tiny_llava_end_to_end(tmp_path: Path) -> None:
    """``evaluate.py --agent hf:tiny-llava``: builds the tiny LLaVA, picks the ``text``
    format from its config, plays an episode on a real session and reports it."""
    out = tmp_path / "eval"
    cmd = [sys.executable, "scripts/evaluate.py", "--agent", "hf:tiny-llava,max_tokens=8"]
    cmd += ["--episodes", "1", "--num-envs", "1", "--max-steps", "2", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (agent,) = json.loads((out / "results.json").read_text())["agents"]
    assert (agent["agent"], agent["format"], agent["episodes"]) == ("hf:tiny-llava", "text", 1)
    assert "| hf:tiny-llava | text | 1 |" in done.stdout

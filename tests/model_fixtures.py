"""Tiny real models built offline, as pytest fixtures.

Use from a test module with ``pytest_plugins = ["model_fixtures"]`` (tests/ is on
``sys.path``); needs the train extra (torch, transformers, tokenizers, trl).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_qwen25vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint folder (~0.2M params), built once per session."""
    pytest.importorskip("trl")  # ships the Qwen2.5-VL chat template
    from uirl_agents.testing.tiny_model import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("tiny-qwen25vl"))


def tiny_training_run(model_dir: Path, config: Any, **model_overrides: object) -> SimpleNamespace:
    """What the update functions use of a TrainingRun, for one process, in-process.

    ``config`` is a trainer config (``GRPOConfig``, ``RSConfig``); the format is its
    ``model.format``, sized like the checkpoint's processor.
    """
    import torch

    from uirl_agents.formats import get_format
    from uirl_agents.loading.pretrained import load_processor
    from uirl_agents.policies.hf import format_config_from_processor
    from uirl_agents.trainers.policy_model import build_model, trainable_parameters

    torch.manual_seed(0)
    model = build_model(config.model, str(model_dir), torch.device("cpu"), **model_overrides)
    processor = load_processor(model_dir)
    trainable = trainable_parameters(model)
    return SimpleNamespace(
        config=config,
        model=model,
        processor=processor,
        format=get_format(config.model.format, format_config_from_processor(processor)),
        rank=0,
        world_size=1,
        sharded=False,
        trainable=trainable,
        optimizer=torch.optim.AdamW(trainable, lr=1e-2),
        sum_all=float,
        sum_all_dict=dict,
        max_all=float,
        autocast=contextlib.nullcontext,
    )


def score_with_run_settings(run: Any, samples: list[Any]) -> dict[str, float]:
    """The scoring pass over ``samples`` with the run's config (as GRPO's ``score`` runs it)."""
    from uirl_agents.trainers.forward import score_samples

    c = run.config
    return score_samples(
        run,
        samples,
        temperature=c.rollout.temperature,
        kl_beta=c.grpo.kl_beta,
        micro_batch_tokens=c.optim.micro_batch_tokens,
    )

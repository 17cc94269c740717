"""Tiny real models built offline, as pytest fixtures.

Use from a test module with ``pytest_plugins = ["model_fixtures"]`` (tests/ is on
``sys.path``); needs the train extra (torch, transformers, tokenizers, trl).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_qwen25vl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2.5-VL checkpoint folder (~0.2M params), built once per session."""
    pytest.importorskip("trl")  # ships the Qwen2.5-VL chat template
    from uirl_agents.tiny_model import build_tiny_qwen25vl

    return build_tiny_qwen25vl(tmp_path_factory.mktemp("tiny-qwen25vl"))

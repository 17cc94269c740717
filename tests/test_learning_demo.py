"""The learning demo's commands parse: its config with each phase's overrides loads.

The demo itself (~15 minutes) is not run here; docs/training.md has its numbers.
"""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "learning_demo.py"


def test_help_renders() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:")
    assert "--output-dir" in proc.stdout


def test_each_phase_config_loads(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # the trainers' modules import it
    from uirl_agents.trainers.cli import parse_args
    from uirl_agents.trainers.config import GRPOConfig, RSConfig

    demo = runpy.run_path(str(SCRIPT))  # the module's constants; main() is not called
    common = ["--config", str(demo["CONFIG"]), "--output-dir", str(tmp_path)]
    cold, _ = parse_args(RSConfig, [*common, *demo["COLD_START"]], "cold start")
    assert cold.iterations == 1
    assert cold.rs.expert_episodes >= 1
    assert cold.model.lora_modules_to_save == ["lm_head"]
    grpo, _ = parse_args(GRPOConfig, [*common, "--model.adapter_path", str(tmp_path)], "grpo")
    baseline, _ = parse_args(
        GRPOConfig,
        [
            *common,
            "--model.adapter_path",
            str(tmp_path),
            "--optim.learning_rate",
            demo["BASELINE_LR"],
        ],
        "baseline",
    )
    # The fixed task instance, and a baseline that differs only in its learning rate.
    assert (grpo.env.task_seed, grpo.env.rows) == (0, [2])
    assert grpo.eval.episodes == 0
    assert 0 < baseline.optim.learning_rate < 1e-9
    baseline.optim.learning_rate = grpo.optim.learning_rate
    assert baseline == grpo

"""The learning demo's commands parse (its config with each phase's overrides loads), and
its report (tables, the GRPO-vs-baseline test, the plot) comes out of metrics files.

The demo itself (5-10 minutes) is not run here; docs/training.md has its numbers.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "learning_demo.py"


def test_help_renders() -> None:
    # This checkout's package, whatever is installed (as the other script tests do).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], cwd=ROOT, env=env, capture_output=True, text=True
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
    cold, _ = parse_args(RSConfig, [*common, *demo["cold_start_args"]()], "cold start")
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
    assert grpo.env.task_seed == 0
    assert grpo.env.task_options == {"simple_data_entry": {"rows": [2]}}
    assert grpo.eval.episodes == 0
    # What makes GRPO learn here (docs/training.md): the negatives off, the replay on, 4
    # groups an iteration.
    assert grpo.grpo.negative_advantage_scale == 0 and grpo.grpo.replay
    assert grpo.rollout.episodes_per_iteration == 4 * grpo.rollout.group_size
    assert 0 < baseline.optim.learning_rate < 1e-9
    baseline.optim.learning_rate = grpo.optim.learning_rate
    assert baseline == grpo
    # --compare-replay: a second trained arm that differs from the first only by grpo.replay.
    arms = demo["trained_arms"]("grpo", True, tmp_path)
    assert list(arms)[-1].startswith("baseline") and len(arms) == 3
    no_replay_args = arms["GRPO without replay"][1]
    without, _ = parse_args(
        GRPOConfig, [*common, "--model.adapter_path", str(tmp_path), *no_replay_args], "plain"
    )
    assert not without.grpo.replay
    without.grpo.replay = True
    assert without == grpo
    # PPO runs the same config without the replay (PPO refuses it).
    ppo, _ = parse_args(GRPOConfig, [*common, *demo["common_args"]("ppo", 6, [])], "ppo")
    assert ppo.trains_value_head and not ppo.grpo.replay and ppo.iterations == 6


def _write_metrics(run_dir: Path, success_rates: list[float], episodes: int) -> None:
    run_dir.mkdir(parents=True)
    records = [{"step": 0}] + [
        {
            "step": i + 1,
            "rollout/success_rate": rate,
            "rollout/reward_mean": rate,
            "rollout/invalid_action_rate": 0.0,
            "rollout/episodes": float(episodes),
            "train/loss": 0.1,
        }
        for i, rate in enumerate(success_rates)
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_report_from_metrics(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    demo = runpy.run_path(str(SCRIPT))
    _write_metrics(tmp_path / "cold", [0.0], 2)
    _write_metrics(tmp_path / "grpo", [0.5, 0.75, 1.0], 16)
    _write_metrics(tmp_path / "base", [0.5, 0.5, 0.5], 16)
    cold, grpo, base = (demo["curve"](tmp_path / n) for n in ("cold", "grpo", "base"))
    assert sorted(grpo) == [1, 2, 3] and grpo[2]["rollout/success_rate"] == 0.75
    # Pooled after the first update (iterations 2-3): 28/32 against 16/32.
    assert demo["successes"](grpo, 2) == (28, 32)
    assert demo["successes"](base, 2) == (16, 32)
    text = demo["comparison"](grpo, base)
    assert "GRPO 28/32" in text and "baseline 16/32" in text
    text = demo["comparison"](base, grpo, "GRPO + replay", "GRPO")
    assert "GRPO + replay 16/32" in text and ", GRPO 28/32" in text
    # Fisher's exact test, one-sided: by hand for a 2x2 table, and a tie is no evidence.
    assert demo["fisher_one_sided"]((8, 10), (2, 10)) == pytest.approx(0.01151, abs=1e-5)
    assert demo["fisher_one_sided"]((5, 10), (5, 10)) > 0.5
    assert "| 3 | 1.000 |" in demo["table"]("GRPO", grpo, 60.0)
    demo["plot"](cold, {"GRPO": grpo, "baseline": base}, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0


def test_overrides_after_the_separator_are_checked_before_anything_runs(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # the trainers' config modules import it
    demo = runpy.run_path(str(SCRIPT))
    out = ["--output-dir", str(tmp_path / "demo")]
    args, overrides = demo["parse_cli"](
        [*out, "--algorithm", "ppo", "--", "--optim.learning_rate", "0.0005"]
    )
    assert args.algorithm == "ppo" and overrides == ["--optim.learning_rate", "0.0005"]
    for bad in (
        ["--", "--optim.learnig_rate", "0.0005"],  # no such field
        ["--", "--optim.learning_rate", "fast"],  # not a number
        ["--compare-replay", "--algorithm", "ppo"],  # PPO has no replay
        ["--replya"],  # the demo's own options are not passed on
    ):
        with pytest.raises(SystemExit):
            demo["parse_cli"]([*out, *bad])
    assert not (tmp_path / "demo").exists()  # nothing ran


def test_report_over_seeds(tmp_path: Path) -> None:
    demo = runpy.run_path(str(SCRIPT))
    rates = {0: ([0.5, 1.0, 1.0], [0.5, 0.5, 0.5]), 1: ([0.25, 0.25, 0.0], [0.25, 0.5, 0.25])}
    by_seed = {}
    for seed, (grpo_rates, base_rates) in rates.items():
        _write_metrics(tmp_path / f"{seed}g", grpo_rates, 16)
        _write_metrics(tmp_path / f"{seed}b", base_rates, 16)
        by_seed[seed] = {
            "GRPO": demo["curve"](tmp_path / f"{seed}g"),
            "baseline": demo["curve"](tmp_path / f"{seed}b"),
        }
    # Seed 0: 32/32 against 16/32; seed 1: 4/32 against 12/32 (below its baseline).
    line = demo["pooled_line"](by_seed, "GRPO", "baseline")
    assert "GRPO 36/64, baseline 28/64" in line
    p = demo["fisher_one_sided"]((36, 64), (28, 64))
    assert f"p = {p:.2g}" in line and 0.05 < p < 0.5
    assert line.endswith("seeds below baseline: 1")
    # Against another trained run, named as such.
    by_seed[0]["GRPO + x"], by_seed[1]["GRPO + x"] = by_seed[0]["GRPO"], by_seed[1]["baseline"]
    other = demo["pooled_line"](by_seed, "GRPO + x", "GRPO")
    assert "GRPO + x 44/64, GRPO 36/64" in other and other.endswith("seeds below GRPO: none")
    summary = demo["seed_summary"](by_seed, ["GRPO"], "baseline")
    assert "| 0 | 32/32 | 16/32 |" in summary and "| 1 | 4/32 | 12/32 |" in summary
    curves = demo["seed_curves"](by_seed)
    assert "| 0 | GRPO | 8 | 16 | 16 | 32/32 |" in curves
    assert "| 1 | baseline | 4 | 8 | 4 | 12/32 |" in curves
    # The mean curve: per iteration, rates averaged over seeds, episodes summed.
    mean = demo["pooled_curve"]([by_seed[0]["GRPO"], by_seed[1]["GRPO"]])
    assert mean[1]["rollout/success_rate"] == pytest.approx(0.375)
    assert mean[3]["rollout/episodes"] == 32


def test_seed_lists() -> None:
    demo = runpy.run_path(str(SCRIPT))
    assert demo["seed_list"]("0,1,2,3,4") == [0, 1, 2, 3, 4]
    for bad in ("0,x", "1,1", ""):
        with pytest.raises(Exception, match="integers|repeated"):
            demo["seed_list"](bad)

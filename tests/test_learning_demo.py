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
    # Each parsed config would draw its own Kubernetes run id (its pods' label): fixed
    # here so that the configs compare equal.
    common = ["--config", str(demo["CONFIG"]), "--output-dir", str(tmp_path)]
    common += ["--env.kubernetes.run_id", "demo"]
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
    arms = demo["trained_arms"]("grpo", tmp_path, compare_replay=True)
    assert list(arms)[-1].startswith("baseline") and len(arms) == 3
    no_replay_args = arms["GRPO without replay"][1]
    without, _ = parse_args(
        GRPOConfig, [*common, "--model.adapter_path", str(tmp_path), *no_replay_args], "plain"
    )
    assert not without.grpo.replay
    without.grpo.replay = True
    assert without == grpo
    # --compare-normalization: a second trained arm with the other loss normalisation.
    args, _ = demo["parse_cli"](["--output-dir", str(tmp_path), "--compare-normalization"])
    other = args.other_normalization
    assert {other, grpo.grpo.loss_normalization} == {"token", "episode"}
    assert args.iterations == grpo.iterations
    arms = demo["trained_arms"]("grpo", tmp_path, compare_normalization=other)
    assert len(arms) == 3
    normalised, _ = parse_args(
        GRPOConfig,
        [*common, "--model.adapter_path", str(tmp_path), *arms[f"GRPO per-{other}"][1]],
        "normalisation",
    )
    assert normalised.grpo.loss_normalization == other
    normalised.grpo.loss_normalization = grpo.grpo.loss_normalization
    assert normalised == grpo
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
    assert "GRPO 28/32" in text and "baseline 16/32" in text and "(difference +12)" in text
    text = demo["comparison"](base, grpo, "GRPO + replay", "GRPO")
    assert "GRPO + replay 16/32" in text and ", GRPO 28/32" in text
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
            "baseline (lr 1e-12)": demo["curve"](tmp_path / f"{seed}b"),
        }
    # Seed 0: 32/32 against 16/32; seed 1: 4/32 against 12/32 (below its baseline).
    assert demo["seed_differences"](by_seed, "GRPO", "baseline (lr 1e-12)") == {0: 16, 1: -8}
    line = demo["seed_test"](by_seed, "GRPO", "baseline (lr 1e-12)")
    assert "GRPO minus baseline" in line and "per seed: 0: +16, 1: -8" in line
    assert "(32 episodes a seed)" in line and "above on 1, equal on 0, below on 1" in line
    # Of the 4 sign assignments of (16, 8), two sum to >= 8: (+16, +8) and (+16, -8).
    assert "sign-flip p = 0.5 (of 2^2 sign assignments)" in line
    assert "paired t = 0.33 (df 1), one-sided p = 0.4" in line
    # Against another trained run, named as such.
    by_seed[0]["GRPO + x"] = by_seed[0]["GRPO"]
    by_seed[1]["GRPO + x"] = by_seed[1]["baseline (lr 1e-12)"]
    other = demo["seed_test"](by_seed, "GRPO + x", "GRPO")
    assert "GRPO + x minus GRPO" in other and "per seed: 0: +0, 1: +8" in other
    summary = demo["seed_summary"](by_seed, ["GRPO"], "baseline (lr 1e-12)")
    assert "| 0 | 32/32 | 16/32 | +16 |" in summary and "| 1 | 4/32 | 12/32 | -8 |" in summary
    curves = demo["seed_curves"](by_seed)
    assert "| 0 | GRPO | 8 | 16 | 16 | 32/32 |" in curves
    assert "| 1 | baseline (lr 1e-12) | 4 | 8 | 4 | 12/32 |" in curves
    # The mean curve: per iteration, rates averaged over seeds, episodes summed.
    mean = demo["pooled_curve"]([by_seed[0]["GRPO"], by_seed[1]["GRPO"]])
    assert mean[1]["rollout/success_rate"] == pytest.approx(0.375)
    assert mean[3]["rollout/episodes"] == 32


def test_seed_level_tests_by_hand() -> None:
    demo = runpy.run_path(str(SCRIPT))
    sign_flip, paired_t = demo["sign_flip_p"], demo["paired_t"]
    # Ten seeds all above: only the observed signs reach the sum, 1/1024.
    assert sign_flip([3, 1, 4, 1, 5, 9, 2, 6, 5, 3]) == 1 / 1024
    # One seed below by the smallest difference: the observed and the flip of the +1.
    assert sign_flip([3, -1, 4, 1, 5, 9, 2, 6, 5, 3]) == pytest.approx(3 / 1024)
    assert sign_flip([0, 0, 0]) == 1.0  # ties carry no evidence
    # Paired t against the textbook: d = 1..4, t = 2.5 / (1.291 / 2) = 3.873, df 3.
    t, p = paired_t([1, 2, 3, 4])
    assert t == pytest.approx(3.8730, abs=1e-4) and p == pytest.approx(0.01523, abs=1e-5)
    # Student's t tail against tabled quantiles (one-sided 0.05 and 0.01).
    sf = demo["student_t_sf"]
    for df, q05, q01 in ((1, 6.314, 31.821), (4, 2.132, 3.747), (9, 1.833, 2.821)):
        assert sf(q05, df) == pytest.approx(0.05, abs=2e-4)
        assert sf(q01, df) == pytest.approx(0.01, abs=1e-4)
        assert sf(-q05, df) == pytest.approx(0.95, abs=2e-4)


def test_a_finished_run_is_not_run_again(tmp_path: Path) -> None:
    demo = runpy.run_path(str(SCRIPT))
    _write_metrics(tmp_path / "done", [0.5, 0.5, 0.5], 16)
    _write_metrics(tmp_path / "cut", [0.5], 16)
    assert demo["finished"](tmp_path / "done", 3)
    assert not demo["finished"](tmp_path / "cut", 3)
    assert not demo["finished"](tmp_path / "absent", 3)
    # Skipped without starting anything (the script does not exist).
    assert demo["run"]("no_such_script.py", tmp_path / "done", iterations=3) is None


def test_seed_lists() -> None:
    demo = runpy.run_path(str(SCRIPT))
    assert demo["seed_list"]("0,1,2,3,4") == [0, 1, 2, 3, 4]
    for bad in ("0,x", "1,1", ""):
        with pytest.raises(Exception, match="integers|repeated"):
            demo["seed_list"](bad)

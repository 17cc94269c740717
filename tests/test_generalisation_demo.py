"""scripts/generalisation_demo.py: its statistics, its report from stored runs, and one
seed end to end on real sessions (a tiny budget)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
TASKS = ("miniwob.click-test-2", "miniwob.focus-text-2")


@pytest.fixture
def demo(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "scripts"))
    import generalisation_demo

    return generalisation_demo


def test_sign_flip_and_paired_t(demo) -> None:
    # Exact: of the 2^3 sign assignments of (1, 2, 3), only all-plus reaches a sum of 6;
    # (1, -1, 3) sums to 3, reached by 3 of 8 (the two 1s are interchangeable).
    assert demo.sign_flip_p([1, 2, 3]) == 1 / 8
    assert demo.sign_flip_p([1, -1, 3]) == 3 / 8
    assert demo.sign_flip_p([0.1] * 10) == 1 / 1024
    # One-sided paired t, as scipy.stats.ttest_1samp(d, 0, alternative="greater").
    assert demo.paired_t_p([1, 2, 3, 4]) == pytest.approx(0.015233145831085489, rel=1e-9)
    assert demo.paired_t_p([0.05, -0.01, 0.03, 0.02, 0.04]) == pytest.approx(
        0.032492955171060316, rel=1e-9
    )
    assert demo.paired_t_p([-0.05, -0.01, 0.03]) == pytest.approx(0.64638501094228, rel=1e-9)
    assert demo.paired_t_p([0.1, 0.1]) == 0.0 and math.isnan(demo.paired_t_p([0.1]))


def test_advantages_from_success_make_every_failure_alike() -> None:
    """``grpo.advantage_from: success`` (the demo's setting): a MiniWoB++ group without a
    success, whose clicks on nothing (0) beat its clicks on a wrong button (-1), teaches
    nothing; from the return, the clicks on nothing would be reinforced."""
    import numpy as np

    from uirl_agents.episodes.trajectories import Episode, Step
    from uirl_agents.trainers.algorithms.grpo import step_samples
    from uirl_agents.trainers.config import GRPOSection

    def episode(group: str, reward: float, success: bool) -> Episode:
        step = Step(
            screenshot=None,
            action=None,
            messages=[{"role": "user", "content": "x"}],
            model_images=[np.zeros((4, 4, 3), np.uint8)],
            prompt_ids=[1, 2],
            completion_ids=[3],
            reward=reward,
        )
        return Episode(f"{group}{reward}", "test", 0, {}, "", [], [step], success, group_id=group)

    failing = [episode("a", 0.0, False), episode("a", -1.0, False)]
    solved = [episode("b", 1.0, True), episode("b", -1.0, False), episode("b", 0.0, False)]
    from_return = [s.advantage for s in step_samples(failing + solved, GRPOSection())]
    assert from_return[0] > 0 > from_return[1]  # the click on nothing reinforced
    cfg = GRPOSection(advantage_from="success")
    from_success = [s.advantage for s in step_samples(failing + solved, cfg)]
    assert from_success[:2] == [0.0, 0.0]
    assert from_success[2] > 0 > from_success[3] == from_success[4]


def write_run(folder: Path, trainer: str, iterations: int, evals: dict[int, dict]) -> None:
    """A run folder as the trainers leave it: metrics.jsonl (evaluations per task, and
    training rollouts), the resolved config and the last checkpoint's state."""
    folder.mkdir(parents=True)
    lines = []
    for step, per_task in evals.items():
        wins, total = (sum(c[i] for c in per_task.values()) for i in (0, 1))
        record = {"step": step, "eval/success_rate": wins / total, "eval/episodes": total}
        for task, (w, n) in per_task.items():
            record |= {f"eval/task/{task}/success_rate": w / n, f"eval/task/{task}/episodes": n}
        lines.append(record)
    lines += [{"step": s, "rollout/success_rate": 0.5} for s in range(1, iterations + 1)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (folder / f"config_{trainer}.yaml").write_text(yaml.safe_dump({"iterations": iterations}))
    state = folder / "checkpoints" / f"iter_{iterations:06d}"
    state.mkdir(parents=True)
    (state / "trainer_state.json").write_text(json.dumps({"iteration": iterations}))


def write_seed(out: Path, seed: int, sft: tuple[int, int], rl: tuple[int, int]) -> None:
    """A finished seed: the random model 0/10 on each task, SFT and SFT+RL with the given
    successes on the two tasks (of 10 each)."""
    zero = {t: (0, 10) for t in TASKS}
    write_run(
        out / f"seed_{seed}" / "sft",
        "rs",
        1,
        {0: zero, 1: {t: (w, 10) for t, w in zip(TASKS, sft, strict=True)}},
    )
    write_run(
        out / f"seed_{seed}" / "rl",
        "grpo",
        8,
        {4: zero, 8: {t: (w, 10) for t, w in zip(TASKS, rl, strict=True)}},
    )


def test_the_report_from_stored_runs(demo, tmp_path: Path) -> None:
    # Ten seeds where RL adds 1 to 3 successes out of 20, one where it loses 1, and one
    # seed whose RL run stopped before its last iteration (left out).
    gains = {100 + i: (i % 3) + 1 for i in range(10)}
    for seed, gain in gains.items():
        write_seed(tmp_path, seed, (5, 6), (5 + gain, 6))
    timings = [("sft", 600, 300), ("rl", 1000, 500), ("rl", 200, 40)]  # rl: resumed once
    (tmp_path / "seed_100" / "timings.jsonl").write_text(
        "".join(
            json.dumps({"phase": p, "seconds": w, "cpu_seconds": c}) + "\n" for p, w, c in timings
        )
    )
    write_seed(tmp_path, 110, (8, 8), (8, 7))
    write_seed(tmp_path, 111, (1, 1), (9, 9))
    stopped = tmp_path / "seed_111" / "rl" / "checkpoints"
    (stopped / "iter_000008").rename(stopped / "iter_000004")
    (stopped / "iter_000004" / "trainer_state.json").write_text('{"iteration": 4}')
    demo.main(["--output-dir", str(tmp_path), "--report-only"])
    differences = [g / 20 for g in gains.values()] + [-1 / 20]
    sign_flip = demo.sign_flip_p(differences)
    paired_t = demo.paired_t_p(differences)
    assert 0 < sign_flip < 0.01 and 0 < paired_t < 0.01
    sft = 10 * 11 + 16  # 5+6 on seeds 100-109, 8+8 on seed 110
    rl = sft + sum(gains.values()) - 1
    line = (
        f"held-out success: random 0.0%, SFT {100 * sft / 220:.1f}%, SFT+RL "
        f"{100 * rl / 220:.1f}%; RL vs SFT over 11 seeds: sign-flip p = {sign_flip:.2g}, "
        f"paired t p = {paired_t:.2g}"
    )
    text = (tmp_path / "report.md").read_text()
    assert text.rstrip().endswith(line)
    # seed, arms, gain, wall and CPU minutes of SFT and RL
    assert "| 100 | 0/20 | 11/20 | 12/20 | +5.0 | 10.0, 20.0 | 5.0, 9.0 |" in text
    assert "| 110 | 0/20 | 16/20 | 15/20 | -5.0 |" in text
    assert "| 111 |" not in text
    # Per task pooled over seeds: click-test-2 gains, focus-text-2 loses seed 110's one.
    rl_click = 50 + sum(gains.values()) + 8
    assert f"| miniwob.click-test-2 | 0/110 (0.0%) | 58/110 (52.7%) | {rl_click}/110" in text
    assert "| miniwob.focus-text-2 | 0/110 (0.0%) | 68/110 (61.8%) | 67/110 (60.9%) |" in text
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["line"] == line and sorted(saved["seeds"]) == [str(s) for s in range(100, 111)]
    assert (tmp_path / "report.png").stat().st_size > 0
    # Asking for seeds gives the report on those only.
    demo.main(["--output-dir", str(tmp_path), "--report-only", "--seeds", "100,101"])
    assert "over 2 seeds" in (tmp_path / "report.md").read_text()


def test_the_report_refuses_an_empty_folder(demo, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no finished seed"):
        demo.main(["--output-dir", str(tmp_path), "--report-only"])


def test_a_bad_override_fails_before_any_run(demo, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        demo.main(["--output-dir", str(tmp_path), "--seeds", "0", "--rl-args", "--optim.lr 1"])
    assert "optim.lr" in capsys.readouterr().err
    assert not list(tmp_path.glob("seed_*"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_one_seed_end_to_end_then_resumed(demo, tmp_path: Path) -> None:
    """The three phases of one seed on real sessions, at a tiny budget; a second call
    finds every phase done and runs nothing."""
    pytest.importorskip("miniwob")
    small = "--env.num_envs 2 --eval.episodes 4 --rollout.max_new_tokens 4"
    args = ["--output-dir", str(tmp_path), "--seeds", "7"]
    sft = "--rs.expert_episodes 4 --optim.epochs 1 --rollout.episodes_per_iteration 2"
    args += ["--sft-args", f"{small} {sft}"]
    rl = f"{small} --iterations 1 --rollout.episodes_per_iteration 4 --rollout.group_size 2"
    args += ["--rl-args", rl]
    demo.main(args)
    seed = tmp_path / "seed_7"
    phases = [json.loads(line)["phase"] for line in (seed / "timings.jsonl").open()]
    assert phases == ["model", "sft", "rl"]
    report = json.loads((tmp_path / "report.json").read_text())
    arms = report["seeds"]["7"]["arms"]
    assert {arm: arms[arm]["all"][1] for arm in demo.ARMS} == {a: 4 for a in demo.ARMS}
    assert report["line"].startswith("held-out success: random ")
    # Resumed: nothing left to run.
    demo.main(args)
    assert len((seed / "timings.jsonl").read_text().splitlines()) == 3

"""evaluate.py end to end, the agent syntax, the report maths, the HTML replay."""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from terminal import check_one_bar_per_job

from uirl_agents.episodes.trajectories import Episode, TrajectoryWriter, load_episodes
from uirl_agents.evaluation.agents import AgentSpecError, parse_agent
from uirl_agents.evaluation.benchmark import (
    load_finished,
    summarise,
    wilson_interval,
    write_reports,
)

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


def test_parse_agent() -> None:
    assert parse_agent("expert").kind == "expert"
    spec = parse_agent("hf:/models/ui-tars,lora=/runs/a/adapter,format=qwen2.5-vl,max_tokens=64")
    assert (spec.kind, spec.target, spec.lora, spec.format, spec.max_tokens) == (
        "hf",
        "/models/ui-tars",
        "/runs/a/adapter",
        "qwen2.5-vl",
        64,
    )
    spec = parse_agent("openai:ByteDance-Seed/UI-TARS-1.5-7B@http://127.0.0.1:8000/v1")
    assert (spec.target, spec.url) == ("ByteDance-Seed/UI-TARS-1.5-7B", "http://127.0.0.1:8000/v1")
    for bad in ("gpt", "hf:", "openai:model", "hf:x,colour=red", "hf:x,max_tokens=-1"):
        with pytest.raises(AgentSpecError, match="agent"):
            parse_agent(bad)


def test_a_new_agent_type_is_one_registration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The registry is the one place that knows the agent types: one ``register_agent``
    and the type parses, builds, shows in the syntax and is refused twice."""
    import doctest

    import uirl_agents.evaluation.agents as agents
    from uirl_agents.policies.random import RandomPolicy

    assert doctest.testmod(agents).failed == 0
    monkeypatch.setattr(agents, "AGENTS", dict(agents.AGENTS))
    kind = agents.AgentKind(
        "coin",
        "coin[:SEED]",
        parse=lambda text, rest: agents.AgentSpec(kind="coin", target=rest or "0", label=text),
        build=lambda spec, ctx: (RandomPolicy(seed=int(spec.target)), None),
    )
    agents.register_agent(kind)
    assert agents.agent_syntax().endswith(" | coin[:SEED]")
    spec = parse_agent("coin:7")
    policy, format_name = agents.build_policy(spec, lambda i: {}, tmp_path, seed=0)
    assert isinstance(policy, RandomPolicy) and format_name is None
    with pytest.raises(ValueError, match="already registered"):
        agents.register_agent(kind)
    with pytest.raises(AgentSpecError, match=re.escape("coin[:SEED]")):
        parse_agent("dice:1")  # an unknown type's error lists every type


def test_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and 0.69 < lo < 0.73  # 10/10 is not proof of 100%
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(1 - hi)


@pytest.mark.parametrize("outcome", ["all-success", "all-failure"])
def test_wilson_interval_holds_the_rate_at_the_extremes(outcome: str) -> None:
    # Rounding once gave 6/6 an upper bound of 0.9999999999999999 (a negative error bar).
    for n in range(1, 201):
        successes = n if outcome == "all-success" else 0
        lo, hi = wilson_interval(successes, n)
        assert 0.0 <= lo <= successes / n <= hi <= 1.0, (n, lo, hi)
        assert (hi == 1.0) if successes else (lo == 0.0)


def test_plot_at_the_extremes(tmp_path: Path) -> None:
    results = [
        summarise("six-of-six", [_episode(True)] * 6),
        summarise("none-of-eleven", [_episode(False)] * 11),
    ]
    written = write_reports(tmp_path, results, {"rows": "1"})
    assert (tmp_path / "results.png") in written
    assert (tmp_path / "results.png").stat().st_size > 1000


def _episode(success: bool, episode_id: str = "ep-0") -> Episode:
    return Episode(episode_id, "a", 0, {}, "copy", [1], success=success)


def test_load_finished_drops_a_cut_line(tmp_path: Path) -> None:
    with TrajectoryWriter(tmp_path) as writer:
        for k in range(3):
            writer.write(_episode(True, f"ep-{k}"))
        writer.write(_episode(True, "ep-1"))  # a repeat
    path = tmp_path / "episodes.jsonl"
    path.write_text(path.read_text() + '{"episode_id": "ep-3", "ste')  # killed mid-write
    assert [e.episode_id for e in load_finished(tmp_path)] == ["ep-0", "ep-1", "ep-2"]
    with TrajectoryWriter(tmp_path) as writer:  # appending goes on from a clean line
        writer.write(_episode(False, "ep-3"))
    assert [e.episode_id for e in load_finished(tmp_path)] == ["ep-0", "ep-1", "ep-2", "ep-3"]


def readme_quickstart() -> list[str]:
    """The README's quickstart command, after ``bash scripts/install.sh &&``."""
    readme = (ROOT / "README.md").read_text()
    line = next(li for li in readme.splitlines() if li.startswith("bash scripts/install.sh && "))
    return shlex.split(line.split("&&", 1)[1])


def announced_files(stdout: str) -> list[Path]:
    """The files evaluate.py says it wrote (the indented lines after ``wrote:``)."""
    tail = stdout.split("\nwrote:\n", 1)[1]
    return [Path(li.split()[0]) for li in tail.splitlines() if li.startswith("  ")]


@pytest.mark.slow
def test_readme_quickstart(tmp_path: Path) -> None:
    """The README's quickstart, with fewer and shorter episodes and a leaderboard."""
    cmd = readme_quickstart()
    assert cmd[:2] == ["python", "scripts/evaluate.py"]
    out, board = tmp_path / "quickstart", tmp_path / "leaderboard.md"
    cmd[0] = sys.executable
    cmd[cmd.index("--episodes") + 1] = "2"
    cmd[cmd.index("--out") + 1] = str(out)
    cmd += ["--max-steps", "12", "--leaderboard", str(board)]
    # Bytes: text mode would turn the bars' carriage returns into newlines.
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=600)
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr[-3000:]
    files = announced_files(stdout)
    assert {f.name for f in files} == {"results.json", "results.md", "results.png",
                                       "summary.json", "index.html"}  # fmt: skip
    assert len(files) == 4 + 2 * 3  # results.*, the index; per agent: summary, replay
    for f in files:
        assert (ROOT / f).is_file() and (ROOT / f).stat().st_size > 0, f
    results = json.loads((out / "results.json").read_text())
    by_agent = {a["agent"]: a for a in results["agents"]}
    assert set(by_agent) == {"expert", "random", "hf:tiny"}
    assert all(a["episodes"] == 2 for a in by_agent.values())
    assert by_agent["expert"]["invalid_action_rate"] == 0.0
    # hf:tiny is a Qwen2.5-VL model: its format comes from its config, and says so.
    assert by_agent["hf:tiny"]["format"] == "qwen2.5-vl"
    assert "| hf:tiny | qwen2.5-vl | 2 |" in stdout
    assert "| expert | - | 2 |" in (out / "results.md").read_text()
    assert board.read_text().count("| hf:tiny (qwen2.5-vl) |") == 1
    # The tiny model's output is nonsense: invalid actions are counted, never raised.
    tiny = load_episodes(out / "hf_tiny", load_images=False)
    assert len(tiny) == 2 and all(e.steps[0].completion_ids for e in tiny)
    assert by_agent["hf:tiny"]["invalid_action_rate"] == pytest.approx(
        sum(s.error is not None for e in tiny for s in e.steps) / sum(e.length for e in tiny)
    )
    summary = json.loads((out / "hf_tiny" / "summary.json").read_text())
    assert summary["result"] == by_agent["hf:tiny"]
    check_replay_opens_in_chromium(out / "expert" / "index.html", episodes=2)
    check_one_bar_per_job(stderr, ["expert", "random", "hf:tiny"])


def test_several_tasks_report_per_task_and_index_the_replays(tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    cmd = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--agent", "expert"]
    cmd += ["--agent", "random", "--task", "settings_nav,simple_data_entry", "--rows", "1"]
    cmd += ["--episodes", "2", "--max-steps", "30", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["tasks"] == ["settings_nav", "simple_data_entry"]
    by_agent = {a["agent"]: a for a in results["agents"]}
    assert by_agent["expert"]["episodes"] == 4
    for task in ("settings_nav", "simple_data_entry"):
        assert by_agent["expert"]["per_task"][task]["successes"] == 2
        assert by_agent["random"]["per_task"][task]["successes"] == 0
    table = (out / "results.md").read_text()
    assert "| agent | settings_nav | simple_data_entry | mean |" in table
    assert "| expert | 100% (" in table and table.rstrip().endswith("| 0% |")
    index = (out / "index.html").read_text()
    assert 'href="expert/index.html#task-settings-nav">2/2<' in index
    assert 'href="random/index.html#task-simple-data-entry">0/2<' in index
    replay = (out / "expert" / "index.html").read_text()
    assert 'id="task-settings-nav"' in replay and 'id="task-simple-data-entry"' in replay
    bad = subprocess.run(
        [*cmd[:2], "--agent", "expert", "--task", "form_fil"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "Did you mean 'form_fill'?" in bad.stderr


def run_evaluate(*args: str, **popen: Any) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(ROOT / "scripts" / "evaluate.py"), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def episode_ids(run_dir: Path) -> list[str]:
    path = run_dir / "episodes.jsonl"
    if not path.exists():
        return []
    return [
        json.loads(li)["episode_id"] for li in path.read_text().splitlines() if li.endswith("}")
    ]


@pytest.mark.slow
def test_resume_after_a_kill(tmp_path: Path) -> None:
    """A run killed midway resumes where it stopped; while it lives, a second run on
    its folder (a scheduler restarting the job) fails at once instead of playing the
    episodes again, interleaving episodes.jsonl and overwriting results.json."""
    out = tmp_path / "eval"
    args = ["--agent", "expert", "--agent", "random", "--episodes", "4", "--num-envs", "2",
            "--rows", "1", "--max-steps", "4", "--out", str(out)]  # fmt: skip
    proc = run_evaluate(*args)
    try:
        deadline = time.monotonic() + 240
        while not (out / "run.json").exists():  # the run has its folder
            assert proc.poll() is None and time.monotonic() < deadline, "no run.json in 240 s"
            time.sleep(0.02)
        # Stopped, the first run is alive (and holds its lock) however long the second takes.
        proc.send_signal(signal.SIGSTOP)
        try:
            played = {d.name: episode_ids(d) for d in out.iterdir() if d.is_dir()}
            second = run_evaluate(*args, "--resume")
            _, stderr = second.communicate(timeout=120)
            assert second.returncode == 2, stderr[-3000:]
            assert f"is in use by another evaluate.py run (pid {proc.pid})" in stderr
            assert {d.name: episode_ids(d) for d in out.iterdir() if d.is_dir()} == played
        finally:
            proc.send_signal(signal.SIGCONT)
        while not episode_ids(out / "random") and proc.poll() is None:
            assert time.monotonic() < deadline, "no random episode in 240 s"
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no cleanup of any kind
    finally:
        proc.kill()
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, stderr[-3000:]
    # The agent that finished has its summary and is in the reports; the other has not.
    expert_file = (out / "expert" / "episodes.jsonl").read_bytes()
    expert = json.loads((out / "expert" / "summary.json").read_text())["result"]
    assert expert["episodes"] == 4
    assert [a["agent"] for a in json.loads((out / "results.json").read_text())["agents"]] == [
        "expert"
    ]
    before = episode_ids(out / "random")
    assert 1 <= len(before) < 4 and not (out / "random" / "summary.json").exists()

    # A rerun without --resume refuses to wipe it; with other settings it cannot resume.
    again = run_evaluate(*args)
    assert again.wait(timeout=120) == 2 and "--resume" in again.communicate()[1]
    other = run_evaluate(*args, "--resume", "--seed", "1")
    assert other.wait(timeout=120) == 2 and "seed 0 then, 1 now" in other.communicate()[1]

    resumed = run_evaluate(*args, "--resume")
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    ids = episode_ids(out / "random")
    assert ids[: len(before)] == before
    assert sorted(ids) == [f"ep-{k}" for k in range(4)]  # all played, none twice
    assert (out / "expert" / "episodes.jsonl").read_bytes() == expert_file  # not replayed
    results = {a["agent"]: a for a in json.loads((out / "results.json").read_text())["agents"]}
    assert results["expert"] == expert and results["random"]["episodes"] == 4
    random_summary = json.loads((out / "random" / "summary.json").read_text())["result"]
    assert random_summary == results["random"]
    assert f"{out / 'random' / 'summary.json'}" in stdout


def check_replay_opens_in_chromium(page_path: Path, episodes: int) -> None:
    from playwright.sync_api import sync_playwright

    from uirl_gym.session.browser.chromium import find_browser

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_browser())
        page = browser.new_page()
        page.goto(page_path.as_uri())
        assert page.locator("details").count() == episodes
        page.locator("details").first.evaluate("d => d.open = true")
        images = page.locator("details[open] img")
        images.first.wait_for()
        page.wait_for_function(
            "() => [...document.querySelectorAll('details[open] img')].every(i => i.complete)"
        )
        widths = images.evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
        assert widths and all(w == 1280 for w in widths)
        assert page.locator("details[open] .mark").count() >= 1
        browser.close()

"""evaluate.py end to end, the agent syntax, the report maths, the HTML replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from uirl_agents.evaluate import AgentSpecError, parse_agent, wilson_interval
from uirl_agents.trajectories import load_episodes

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


def test_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and 0.69 < lo < 0.73  # 10/10 is not proof of 100%
    lo, hi = wilson_interval(5, 10)
    assert lo == pytest.approx(1 - hi)


def test_evaluate_three_agents_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    board = tmp_path / "leaderboard.md"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "evaluate.py"),
        "--agent", "expert",
        "--agent", "random",
        "--agent", "hf:tiny,max_tokens=16",
        "--episodes", "3",
        "--num-envs", "2",
        "--rows", "1",
        "--max-steps", "16",
        "--out", str(out),
        "--leaderboard", str(board),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    by_agent = {a["agent"]: a for a in results["agents"]}
    assert set(by_agent) == {"expert", "random", "hf:tiny"}
    assert by_agent["expert"]["success_rate"] == 1.0
    assert by_agent["expert"]["invalid_action_rate"] == 0.0
    assert all(a["episodes"] == 3 for a in by_agent.values())
    assert (out / "results.png").stat().st_size > 1000
    assert "| expert | 3 | 100%" in (out / "results.md").read_text()
    assert board.read_text().count("| hf:tiny |") == 1
    # The tiny model's output is nonsense: invalid actions are counted, never raised.
    tiny = load_episodes(out / "hf_tiny", load_images=False)
    assert len(tiny) == 3 and all(e.steps[0].completion_ids for e in tiny)
    assert by_agent["hf:tiny"]["invalid_action_rate"] == pytest.approx(
        sum(s.error is not None for e in tiny for s in e.steps) / sum(e.length for e in tiny)
    )
    check_replay_opens_in_chromium(out / "expert" / "index.html")


def check_replay_opens_in_chromium(page_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from uirl_gym.server.browser import find_browser

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_browser())
        page = browser.new_page()
        page.goto(page_path.as_uri())
        assert page.locator("details").count() == 3
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

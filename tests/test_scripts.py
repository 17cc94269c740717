"""Every script's ``--help`` renders: no argparse internals, no unexpanded ``%(...)``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from terminal import check_one_bar_per_job

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


# One interpreter runs every script's ``--help`` in turn (each script's code fresh, through
# runpy, as ``python script.py --help`` runs it): the imports (torch, transformers) are
# paid once instead of once per script (22 interpreters took ~90 s on 2 cores).
HELP_OF_EACH = """
import contextlib, io, json, os, runpy, sys
out = {}
paths = sys.argv[1:]
sys.path.insert(0, os.path.dirname(paths[0]))  # as `python scripts/x.py`: its folder first
for path in paths:
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv = [path, "--help"]
    code = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code or 0
        except Exception as exc:
            code, stderr = 1, io.StringIO(repr(exc))
    out[path] = [code, stdout.getvalue(), stderr.getvalue()]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_every_script_help_renders() -> None:
    pytest.importorskip("torch")  # the train scripts import the trainers
    done = subprocess.run(
        [sys.executable, "-c", HELP_OF_EACH, *map(str, SCRIPTS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    helps = {Path(path).name: tuple(v) for path, v in json.loads(done.stdout).items()}
    assert {"evaluate.py", "train_rs.py", "train_grpo.py", "train_trl.py"} <= set(helps)
    assert len(helps) == len(SCRIPTS)
    for name, (code, stdout, stderr) in helps.items():
        assert code == 0, f"{name}: {stderr[-2000:]}"
        assert stdout.startswith("usage:"), name
        # A stray "%" in a help string makes argparse print its own internals.
        assert "option_strings" not in stdout, name
        assert "%(" not in stdout, name
        if name in ("train_rs.py", "train_grpo.py"):  # uirl's trainer configs
            assert "~30% slower" in stdout, name  # the help that once broke it


# Runs a train script's main() with the trainer replaced by a job that logs while its
# progress bar is drawn: the script's own logging setup decides what the terminal shows.
FAKE_TRAINER = """
import logging, runpy, sys
from tqdm.auto import tqdm

def fake_trainer(config, output_dir):
    bar = tqdm(total=2, desc="job")
    bar.update(1)
    logging.getLogger("uirl_agents.trainers").info("a log line while the bar is drawn")
    bar.update(1)
    bar.close()

script, trainer, out = sys.argv[1:]
main = runpy.run_path(script)["main"]
main.__globals__[trainer] = fake_trainer
main(["--config", "scripts/configs/tiny_cpu.yaml", "--output-dir", out])
"""


@pytest.mark.slow
def test_train_scripts_log_above_the_bars(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    procs = {
        script: subprocess.Popen(
            [
                sys.executable,
                "-c",
                FAKE_TRAINER,
                f"scripts/{script}.py",
                script,
                str(tmp_path / script),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,  # bytes: text mode turns the bars' \r into newlines
        )
        for script in ("train_rs", "train_grpo")
    }
    for script, proc in procs.items():
        stderr = proc.communicate(timeout=300)[1].decode()
        assert proc.returncode == 0, f"{script}: {stderr[-3000:]}"
        assert "a log line while the bar is drawn" in stderr, script
        check_one_bar_per_job(stderr, ["job"], log_line="a log line while the bar is drawn")


@pytest.mark.slow
def test_task_report_writes_the_table_and_screenshots(tmp_path: Path) -> None:
    doc = tmp_path / "tasks.md"
    doc.write_text(
        "# Tasks\n\nbefore\n<!-- task_report:start -->\nold\n<!-- task_report:end -->\nafter\n"
    )
    images = tmp_path / "images"
    cmd = [sys.executable, "scripts/task_report.py", "--task", "simple_data_entry"]
    cmd += ["--episodes", "2", "--random-episodes", "1", "--max-steps", "8"]
    cmd += ["--doc", str(doc), "--images", str(images)]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    text = doc.read_text()
    assert text.startswith("# Tasks\n\nbefore\n") and text.endswith("after\n")
    assert "old" not in text
    row = next(line for line in text.splitlines() if "uirl/SimpleDataEntry-v0" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    # The expert solves both test-split episodes (7 steps); the random agent is cut at 8.
    assert cells[2:] == ["100% (2/2)", "7.0", "0% (0/1)", "8.0"]
    from PIL import Image

    assert Image.open(images / "simple_data_entry.png").size == (1280, 800)


def test_bench_trl_reads_both_trainers_logs(tmp_path: Path) -> None:
    """bench_trl.py's figures from a TRL trainer_state.json and a uirl metrics.jsonl."""
    import json
    import runpy

    bench = runpy.run_path(str(ROOT / "scripts" / "bench_trl.py"))
    # The tiny Qwen2.5-VL's image processor: at most 16 merged 28x28 patches per image.
    processor = {
        "patch_size": 14,
        "merge_size": 2,
        "size": {"shortest_edge": 3136, "longest_edge": 12544},
    }
    for model in ("tiny-qwen2.5-vl", "tiny_model"):
        (tmp_path / model).mkdir()
        (tmp_path / model / "preprocessor_config.json").write_text(json.dumps(processor))
    steps = [
        {"step": i + 1, "num_tokens": 800.0 * (i + 1), "step_time": t, "uirl/images": 4.0}
        for i, t in enumerate([9.0, 5.0, 6.0])
    ]
    history = [*steps, {"step": 3, "train_runtime": 20.0}]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    trl = bench["trl_figures"](tmp_path)
    assert trl["tokens"] == 100 and trl["update_s"] == 6.0 and trl["updates_s"] == 20.0
    assert trl["screenshots"] == trl["per_sample"] == 4.0 and trl["image_tokens"] == 60
    perf = {"perf/iteration_s": 4.0, "perf/time_share_train": 0.5, "perf/tokens_per_s": 200.0}
    rows = [{"step": 0, "eval/success_rate": 0.0}]  # an evaluation before any update
    rows += [{"step": i, **perf, "rollout/episodes": 8.0, "train/samples": 24.0} for i in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    uirl = bench["uirl_figures"](tmp_path)
    assert uirl["tokens"] == 50 and uirl["screenshots"] == 3.0 and uirl["image_tokens"] == 45
    assert uirl["update_s"] == 4.0 and uirl["train_share"] == 0.5 and uirl["updates_s"] == 8.0
    table = bench["table"]({**trl, "rss": 1.0, "wall": 30.0}, {**uirl, "rss": 0.5, "wall": 10.0})
    assert "| training share of an update | n/a | 50% |" in table
    assert "| of which outside the updates (s) | 10 | 2 |" in table

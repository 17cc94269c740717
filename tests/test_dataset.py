"""Trajectories as Hugging Face datasets (issue 44): ``python -m uirl_agents.dataset``.

A real evaluate.py run (the expert and the tiny model, 4 episodes each) is exported and
read back with ``datasets`` (every screenshot pixel-equal to its PNG, steps, rewards and
actions as in ``episodes.jsonl``); a killed run, bad input, text observations and shards
on synthetic runs (the writer's layout, real PNGs); the push through ``huggingface_hub``
to a stand-in of the Hub (tests/hub_standin.py), resumed and read back; TRL's
``SFTTrainer`` on the steps (docs/datasets.md's recipe, with a tiny Qwen2.5-VL); and a
training run's rollouts exported and fed back to ``train_rs.py`` as demonstrations.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

datasets = pytest.importorskip("datasets")

from hub_standin import HubStandIn  # noqa: E402

from uirl_agents.dataset.export import ExportConfig, ExportIncompleteError, export_dataset  # noqa: E402
from uirl_agents.dataset.rows import OBSERVATION_FEATURES, chat_message  # noqa: E402
from uirl_agents.dataset.runs import EmptyRunError, RunLayoutError  # noqa: E402
from uirl_agents.formats import FormatConfig, get_format  # noqa: E402
from uirl_agents.testing.synthetic_runs import write_synthetic_run  # noqa: E402
from uirl_gym.env import TEXT_OBSERVATIONS  # noqa: E402

pytest_plugins = ["model_fixtures"]

REPO = Path(__file__).resolve().parents[1]
TOKEN = "hf_standin_token"
TINY_MAX_PIXELS = 28 * 28 * 16  # the tiny Qwen2.5-VL's processor's


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "uirl_agents.dataset", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def tree_state(folder: Path) -> dict[str, str]:
    """Every file under ``folder``: its content's hash (to show nothing was written)."""
    return {
        str(p.relative_to(folder)): hashlib.sha1(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def pixels(image: Any) -> np.ndarray:
    return np.asarray(
        image.convert("RGB") if isinstance(image, Image.Image) else Image.open(image).convert("RGB")
    )


def load(folder: Path, config: str, cache: Path) -> Any:
    return datasets.load_dataset(str(folder), config, split="train", cache_dir=str(cache))


# ---- a real evaluate.py run, exported ------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """2 agents x 4 episodes (the expert, which succeeds, and the tiny model, whose
    prompts are recorded); and the state of its files before any export."""
    out = tmp_path_factory.mktemp("eval") / "run"
    cmd = [sys.executable, str(REPO / "scripts" / "evaluate.py"), "--agent", "expert"]
    cmd += ["--agent", "hf:tiny,max_tokens=16", "--episodes", "4", "--num-envs", "2"]
    cmd += ["--rows", "1", "--max-steps", "10", "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, tree_state(out)


@pytest.fixture(scope="module")
def exported(
    evaluated: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The run exported by the command line; the expert's steps written as the tiny
    model's format would write them (its processor's image size)."""
    run, _ = evaluated
    out = tmp_path_factory.mktemp("dataset") / "evals"
    args = ["--format", "qwen2.5-vl", "--max-pixels", str(TINY_MAX_PIXELS), "--license", "mit"]
    done = cli("export", str(run), str(out), *args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"exported 8 episode(s) of 2 run folder(s) to {out}" in done.stdout
    return out


def test_the_export_reads_back_as_the_run(
    evaluated: tuple[Path, dict[str, str]], exported: Path, tmp_path: Path
) -> None:
    run, before = evaluated
    assert tree_state(run) == before  # nothing in RUN_DIR was written
    episodes = load(exported, "episodes", tmp_path / "cache")
    files = sorted(str(p) for p in (exported / "episodes").glob("*.parquet"))
    as_parquet = datasets.load_dataset(
        "parquet", data_files=files, split="train", cache_dir=str(tmp_path / "cache2")
    )
    assert episodes.num_rows == as_parquet.num_rows == 8
    assert as_parquet.features == episodes.features
    for row in episodes:
        folder = run / row["run"]
        [record] = [r for r in records(folder) if r["episode_id"] == row["episode_id"]]
        assert row["agent"] == record["agent"] and row["seed"] == record["seed"]
        assert json.loads(row["options"]) == record["options"] and row["task"] == record["task"]
        assert row["num_steps"] == len(row["steps"]) == len(record["steps"])
        assert row["success"] == record["success"]
        assert row["total_reward"] == pytest.approx(record["total_reward"])
        for step, written in zip(row["steps"], record["steps"], strict=True):
            assert step["reward"] == written["reward"]
            action = {k: v for k, v in (step["action"] or {}).items() if v is not None}
            assert action == (written["action"] or {})
            assert step["action_text"] == written["text"]
            shot = folder / "images" / written["screenshot"]
            assert np.array_equal(pixels(step["screenshot"]), pixels(shot))
    by_agent = {r["agent"]: r for r in episodes}
    assert by_agent["expert"]["success"] and by_agent["expert"]["model"] is None
    assert (by_agent["hf:tiny"]["model"], by_agent["hf:tiny"]["format"]) == ("tiny", "qwen2.5-vl")


def test_the_steps_are_the_prompts_the_policy_saw(
    evaluated: tuple[Path, dict[str, str]], exported: Path, tmp_path: Path
) -> None:
    run, _ = evaluated
    steps = load(exported, "steps", tmp_path / "cache")
    tiny = {(r["episode_id"], s): r for r in steps if r["agent"] == "hf:tiny" for s in [r["step"]]}
    recorded = records(run / "hf_tiny")
    assert len(tiny) == sum(len(r["steps"]) for r in recorded)
    for record in recorded:
        for n, step in enumerate(record["steps"]):
            row = tiny[(record["episode_id"], n)]
            assert row["messages"][:-1] == [chat_message(m) for m in step["messages"]]
            assert row["messages"][-1] == {
                "role": "assistant",
                "content": [{"type": "text", "text": step["text"]}],
            }
            assert len(row["images"]) == len(step["model_images"])
            for image, name in zip(row["images"], step["model_images"], strict=True):
                assert np.array_equal(pixels(image), pixels(run / "hf_tiny" / "images" / name))
    # The expert recorded no prompt: its steps are written in the format asked for, and
    # the completion says the action it performed.
    fmt = get_format("qwen2.5-vl", FormatConfig(min_pixels=28 * 28 * 4, max_pixels=TINY_MAX_PIXELS))
    expert = [r for r in steps if r["agent"] == "expert"]
    assert len(expert) == sum(len(r["steps"]) for r in records(run / "expert"))
    for row in expert:
        assert row["format"] == "qwen2.5-vl" and row["episode_success"]
        geometry = fmt.geometry(1280, 800)
        assert [(i.width, i.height) for i in row["images"]] == [
            (geometry.image_width, geometry.image_height)
        ]
        parsed = fmt.parse(row["messages"][-1]["content"][0]["text"], geometry).action
        assert parsed is not None and parsed.type == row["action"]["type"]


def test_the_card_has_the_hubs_metadata(exported: Path) -> None:
    text = (exported / "README.md").read_text()
    _, block, body = text.split("---\n", 2)
    metadata = yaml.safe_load(block)
    assert [c["config_name"] for c in metadata["configs"]] == ["episodes", "steps"]
    assert metadata["configs"][0]["default"] is True
    infos = {i["config_name"]: i for i in metadata["dataset_info"]}
    assert infos["episodes"]["splits"][0]["num_examples"] == 8
    assert {f["name"] for f in infos["steps"]["features"]} >= {"messages", "images", "action"}
    assert metadata["license"] == "mit" and metadata["size_categories"] == ["n<1K"]
    assert {"uirl", "simple_data_entry"} <= set(metadata["tags"])
    assert "| expert | - | - | 4 | 100% |" in body and "| hf:tiny | tiny | qwen2.5-vl | 4 |" in body
    assert "written in `qwen2.5-vl`'s format" in body
    assert "python -m uirl_agents.dataset export" in body and "## Preview" in body
    assert f'load_dataset("{exported}", "steps", split="train")' in body


# ---- killed runs, bad input ------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic run: 4 episodes of 3 steps at 160x210."""
    return write_synthetic_run(
        tmp_path_factory.mktemp("small") / "run", episodes=4, steps=3, screen=(160, 210)
    )


def test_a_killed_run_exports_what_is_complete(small_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "killed"
    shutil.copytree(small_run, run)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    # The kill cut the last line short, after a PNG of episode 1 went missing.
    gone = json.loads(lines[1])["steps"][2]["screenshot"]
    assert all(gone not in line for n, line in enumerate(lines) if n != 1)
    (run / "images" / gone).unlink()
    (run / "episodes.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:200])
    before = tree_state(run)
    done = cli("export", str(run), str(tmp_path / "out"), "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "exported 2 episode(s)" in done.stdout
    assert f"line 2: episode ep-1 step 2: images/{gone} is missing" in done.stdout
    assert "line 4: incomplete line (a run killed while writing it)" in done.stdout
    summary = json.loads((tmp_path / "out" / "uirl_export.json").read_text())
    assert len(summary["left_out"]) == 2
    strict = cli("export", str(run), str(tmp_path / "strict"), "--strict", "--no-progress")
    assert strict.returncode == 1 and "strict export: 2 thing(s) incomplete" in strict.stderr
    assert not (tmp_path / "strict").exists()
    assert not list(tmp_path.glob(".strict*"))  # no temporary folder left either
    assert tree_state(run) == before


def test_bad_input_is_a_clear_error(small_run: Path, tmp_path: Path) -> None:
    quiet = ExportConfig(progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        RunLayoutError,
        match=re.escape("no episodes.jsonl in it or in its subfolders; expected a run directory"),
    ):
        export_dataset(tmp_path / "empty", tmp_path / "out", quiet)
    with pytest.raises(RunLayoutError, match="no such folder"):
        export_dataset(tmp_path / "missing", tmp_path / "out", quiet)
    (tmp_path / "blank" / "images").mkdir(parents=True)
    (tmp_path / "blank" / "episodes.jsonl").write_text("")
    with pytest.raises(EmptyRunError, match="no complete episode to export"):
        export_dataset(tmp_path / "blank", tmp_path / "out", quiet)
    with pytest.raises(ValueError, match="Did you mean 'ui-tars'"):
        ExportConfig(format="ui_tars")
    with pytest.raises(ValueError, match="is inside the run folder"):
        export_dataset(small_run, small_run / "dataset", quiet)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="pass --overwrite"):
        export_dataset(small_run, tmp_path / "mine", quiet)
    overwrite = ExportConfig(progress=False, overwrite=True)
    with pytest.raises(FileExistsError, match="something other than an exported dataset"):
        export_dataset(small_run, tmp_path / "mine", overwrite)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    export_dataset(small_run, tmp_path / "out", quiet)
    export_dataset(small_run, tmp_path / "out", overwrite)  # an earlier export is replaced
    # The command line says the same, exit status 2.
    done = cli("export", str(tmp_path / "empty"), str(tmp_path / "x"))
    assert (
        done.returncode == 2
        and "error: " in done.stderr
        and "expected a run directory" in done.stderr
    )
    done = cli("export", str(small_run), str(tmp_path / "x"), "--format", "ui_tars")
    assert done.returncode == 2 and "Did you mean 'ui-tars'?" in done.stderr


def test_strict_export_raises_and_writes_nothing(small_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    with open(run / "episodes.jsonl", "a") as f:
        f.write('{"episode_id": "ep-9", "steps": [')
    with pytest.raises(ExportIncompleteError, match="line 5: incomplete line"):
        export_dataset(run, tmp_path / "out", ExportConfig(progress=False, strict=True))
    assert not (tmp_path / "out").exists()


# ---- text observations, shards ----------------------------------------------------------------


def test_every_text_observation_has_a_column_type() -> None:
    assert set(OBSERVATION_FEATURES) == set(TEXT_OBSERVATIONS)


def test_text_observations_become_columns_when_the_steps_carry_them(tmp_path: Path) -> None:
    elements = [{"bid": "12", "bbox": [10.0, 20.0, 30.0, 40.0], "visibility": 1.0,
                 "clickable": 1, "set_of_marks": 1}]  # fmt: skip
    observed = {
        "axtree": "[1] RootWebArea 'Sheet'",
        "url": "http://127.0.0.1/task",
        "elements": elements,
    }
    run = write_synthetic_run(
        tmp_path / "run", episodes=2, steps=2, screen=(160, 210), observations=observed
    )
    lines = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    for record in lines:  # the set-of-marks screenshot: a PNG of the run, as screenshots are
        for step in record["steps"]:
            step["observation"]["som"] = step["screenshot"]
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    export_dataset(run, tmp_path / "out", ExportConfig(progress=False))
    episodes = load(tmp_path / "out", "episodes", tmp_path / "cache")
    steps = load(tmp_path / "out", "steps", tmp_path / "cache")
    assert {"axtree", "url", "elements", "som"} <= set(steps.column_names)
    assert "html" not in steps.column_names  # only what the steps carry
    step = episodes[0]["steps"][1]
    assert step["axtree"] == observed["axtree"] and step["url"] == observed["url"]
    assert step["elements"] == elements
    assert np.array_equal(pixels(step["som"]), pixels(step["screenshot"]))
    assert steps[0]["axtree"] == observed["axtree"]
    # A run whose steps carry none has none of these columns.
    plain = write_synthetic_run(tmp_path / "plain", episodes=1, steps=1, screen=(160, 210))
    export_dataset(plain, tmp_path / "plain-out", ExportConfig(progress=False))
    columns = load(tmp_path / "plain-out", "steps", tmp_path / "cache").column_names
    assert not set(TEXT_OBSERVATIONS) & set(columns)


def test_shards_are_numbered_and_read_back_in_order(small_run: Path, tmp_path: Path) -> None:
    result = export_dataset(
        small_run, tmp_path / "out", ExportConfig(progress=False, max_shard_mb=0.01)
    )
    files = result.summary.configs["episodes"].files
    assert files == [f"episodes/train-0000{k}-of-00004.parquet" for k in range(4)]
    episodes = load(tmp_path / "out", "episodes", tmp_path / "cache")
    assert [r["episode_id"] for r in episodes] == [f"ep-{k}" for k in range(4)]
    # The same run exports to the same bytes: a push of it again sends nothing.
    export_dataset(small_run, tmp_path / "again", ExportConfig(progress=False, max_shard_mb=0.01))
    for name in files:
        assert (tmp_path / "again" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


def test_the_config_takes_datasets_as_demonstrations(small_run: Path, tmp_path: Path) -> None:
    from uirl_agents.trainers.config import RSConfig, RSSection

    export_dataset(small_run, tmp_path / "out", ExportConfig(progress=False))
    sources = [str(small_run), str(tmp_path / "out"), "hf://datasets/me/demos@v1"]
    assert RSConfig(rs=RSSection(demonstrations=sources)).rs.demonstrations == sources
    with pytest.raises(ValueError, match=r"is neither a run directory .* nor an exported dataset"):
        RSConfig(rs=RSSection(demonstrations=[str(tmp_path / "missing")]))
    with pytest.raises(ValueError, match=re.escape("expected hf://datasets/USER/NAME[@REVISION]")):
        RSConfig(rs=RSSection(demonstrations=["hf://datasets/no-user"]))


# ---- the Hub ---------------------------------------------------------------------------------


@pytest.fixture
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as standin:
        yield standin


def test_push_is_private_resumes_and_reads_back(
    small_run: Path, hub: HubStandIn, tmp_path: Path
) -> None:
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "home"), "HF_TOKEN": TOKEN}
    out = tmp_path / "out"
    # Without a token, it stops before exporting.
    no_token = cli("export", str(small_run), str(out), "--push-to-hub", "me/demos",
                   env={**env, "HF_TOKEN": ""})  # fmt: skip
    assert no_token.returncode == 2 and "needs a Hugging Face token" in no_token.stderr
    assert not out.exists()
    # The Hub refuses the card's commit once: the data is there, the card is not.
    hub.refuse_commits_with.add("README.md")
    first = cli("export", str(small_run), str(out), "--push-to-hub", "me/demos", env=env)
    assert first.returncode == 1
    assert f"run `python -m uirl_agents.dataset push {out} me/demos` to resume" in first.stderr
    repo = hub.repos["me/demos"]
    assert repo.repo_type == "dataset" and repo.private
    data = ["episodes/train-00000-of-00001.parquet", "steps/train-00000-of-00001.parquet"]
    assert repo.committed == [[*data, "uirl_export.json"]]
    # Run again: only what is missing is sent.
    again = cli("push", str(out), "me/demos", env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.strip().startswith(f"{hub.url}/datasets/me/demos/commit/")
    assert repo.committed[1:] == [["README.md"]]
    for name in data:
        assert repo.files[name] == (out / name).read_bytes()
    card = repo.files["README.md"].decode()
    assert 'load_dataset("me/demos", "steps", split="train")' in card
    assert hub.card_metadata("me/demos")["configs"][0]["config_name"] == "episodes"
    assert set(hub.authorizations) == {f"Bearer {TOKEN}"}
    # Read back from the Hub as demonstrations are.
    code = (
        "from uirl_agents.dataset.load import iter_source_episodes\n"
        "for e in iter_source_episodes('hf://datasets/me/demos'):\n"
        "    print(e.episode_id, len(e.steps), e.steps[0].screenshot.shape, e.steps[0].action.type)\n"
    )
    back = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO), **env},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert back.returncode == 0, back.stderr[-3000:]
    expected = [
        f"ep-{k} 3 (210, 160, 3) {r['steps'][0]['action']['type']}"
        for k, r in enumerate(records(small_run))
    ]
    assert back.stdout.splitlines() == expected
    # Exported again in 4 files and pushed: the repo holds those, not the earlier one too
    # (its train-* would be read with them).
    export_dataset(small_run, out, ExportConfig(progress=False, overwrite=True, max_shard_mb=0.01))
    assert cli("push", str(out), "me/demos", env=env).returncode == 0
    parquet = sorted(n for n in repo.files if n.startswith("episodes/"))
    assert parquet == [f"episodes/train-0000{k}-of-00004.parquet" for k in range(4)]


# ---- training on it --------------------------------------------------------------------------


def recipe() -> dict[str, Any]:
    """docs/datasets.md's SFT recipe (its ``python file=sft_steps.py`` block), loaded."""
    text = (REPO / "docs" / "datasets.md").read_text()
    code = re.search(r"^```python file=sft_steps.py\n(.*?)^```$", text, re.M | re.S)
    assert code, "docs/datasets.md lost its SFT recipe"
    namespace: dict[str, Any] = {"__name__": "sft_steps"}
    exec(compile(code[1], "sft_steps.py", "exec"), namespace)
    return namespace


@pytest.mark.train
@pytest.mark.slow
def test_trls_sft_trainer_trains_on_the_steps(
    exported: Path, tiny_qwen25vl_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    trainer = recipe()["train"](
        str(exported), str(tiny_qwen25vl_dir), str(tmp_path / "sft"),
        max_steps=2, per_device_train_batch_size=2, learning_rate=1e-2,
        use_cpu=True, bf16=False, report_to="none", save_strategy="no", logging_steps=1,
    )  # fmt: skip
    from uirl_agents.loading.pretrained import load_model

    losses = [r["loss"] for r in trainer.state.log_history if "loss" in r]
    assert len(losses) == 2 and all(np.isfinite(losses))
    # It trained: every weight moved from the checkpoint's.
    before = dict(load_model(tiny_qwen25vl_dir, device="cpu").named_parameters())
    after = dict(trainer.model.named_parameters())
    assert set(before) == set(after)
    assert not [n for n, p in after.items() if torch.equal(before[n], p.detach().cpu())]


@pytest.mark.slow
def test_rollouts_exported_train_as_demonstrations(tmp_path: Path) -> None:
    from uirl_agents.trainers.metrics import read_metrics

    tiny = [sys.executable, str(REPO / "scripts" / "train_rs.py"), "--config",
            str(REPO / "scripts" / "configs" / "tiny_cpu.yaml"), "--iterations", "1",
            "--logging.progress", "false", "--logging.report_to", "[]", "--env.num_envs", "1",
            "--rollout.max_new_tokens", "8", "--rollout.episodes_per_iteration", "1",
            "--rollout.group_size", "1", "--eval.episodes", "0"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # A run whose trajectories hold a success: the expert's demonstration.
    first = tmp_path / "first"
    cmd = [*tiny, "--output-dir", str(first), "--env.max_steps", "10", "--rs.expert_episodes", "1"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    dataset = tmp_path / "rollouts"
    exported = cli("export", str(first), str(dataset), "--no-progress")
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "exported 2 episode(s) of 2 run folder(s)" in exported.stdout
    # The next run trains on them: only the success passes the threshold.
    second = tmp_path / "second"
    cmd = [*tiny, "--output-dir", str(second), "--env.max_steps", "1", "--rs.expert_episodes", "0"]
    cmd += ["--rs.reward_threshold", "1.0", "--rs.demonstrations", json.dumps([str(dataset)])]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    [record] = [r for r in read_metrics(second) if "recorded/episodes" in r]
    assert record["recorded/episodes"] == 2 and record["recorded/success_rate"] == 0.5
    assert record["train/samples"] >= 1 and record["train/optimizer_steps"] >= 1

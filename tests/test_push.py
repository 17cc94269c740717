"""Sharing on the Hub: a trainer's --push-to-hub and ``python -m uirl_agents.trainers.push``,
through the real huggingface_hub client, against a stand-in of the Hub's upload
endpoints on 127.0.0.1 (tests/hub_standin.py, set through HF_ENDPOINT)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("huggingface_hub")

from hub_standin import HubStandIn  # noqa: E402
from safetensors.torch import load  # noqa: E402

from uirl_agents.evaluation.benchmark import AgentResult, write_reports  # noqa: E402
from uirl_agents.trainers.push import RunNotPushableError, read_run  # noqa: E402

pytestmark = pytest.mark.slow  # a trainer run and the push commands, each a subprocess

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"
TOKEN = "hf_standin_token"
PROCESSOR_FILES = {"processor_config.json", "tokenizer.json", "tokenizer_config.json"}


@pytest.fixture(scope="module")
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as standin:
        yield standin


def _run(cmd: list[str], hub: HubStandIn, home: Path, token: str | None = TOKEN):
    # HF_HOME: no saved login of the machine's leaks into the test.
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_ENDPOINT": hub.url, "HF_HOME": str(home)}
    env.pop("HF_TOKEN", None)
    if token is not None:
        env["HF_TOKEN"] = token
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def _ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


@pytest.fixture(scope="module")
def trained(hub: HubStandIn, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small QLoRA (8-bit) expert-iteration run (a demonstration kept, evaluated),
    pushed by the trainer."""
    out = tmp_path_factory.mktemp("run") / "tiny-rs"
    cmd = [sys.executable, str(REPO / "scripts" / "train_rs.py"), "--config", str(TINY_CPU)]
    cmd += ["--output-dir", str(out), "--iterations", "1", "--logging.progress", "false"]
    cmd += ["--logging.report_to", "[]", "--env.num_envs", "1", "--env.max_steps", "1"]
    cmd += ["--rollout.max_new_tokens", "8", "--rollout.episodes_per_iteration", "2"]
    cmd += ["--rs.expert_episodes", "1", "--eval.episodes", "1", "--model.load_in_8bit", "true"]
    cmd += ["--push-to-hub", "me/tiny-rs"]
    _ok(_run(cmd, hub, tmp_path_factory.mktemp("home")))
    return out


def test_trainer_pushes_adapter_processor_config_and_card(hub: HubStandIn, trained: Path) -> None:
    repo = hub.repos["me/tiny-rs"]
    assert repo.commits == ["uirl rs: iter_000001 of tiny-rs"]  # one push, at the end
    files = set(repo.files)
    assert {"adapter_model.safetensors", "adapter_config.json", "config_rs.yaml"} <= files
    assert PROCESSOR_FILES <= files and "README.md" in files
    assert not any(name.startswith("model") and name.endswith(".safetensors") for name in files)
    # The adapter uploaded is the last checkpoint's, byte for byte.
    saved = trained / "checkpoints" / "iter_000001" / "adapter" / "adapter_model.safetensors"
    assert repo.files["adapter_model.safetensors"] == saved.read_bytes()
    # The processor names the model's own class: it loads with AutoProcessor anywhere.
    processor = json.loads(repo.files["processor_config.json"])
    assert processor["processor_class"] == "Qwen2_5_VLProcessor"
    assert yaml.safe_load(repo.files["config_rs.yaml"])["hub"]["repo_id"] == "me/tiny-rs"
    metadata = hub.card_metadata("me/tiny-rs")
    assert metadata["library_name"] == "peft"
    assert {"uirl", "rs", "lora", "qlora"} <= set(metadata["tags"])
    assert "base_model" not in metadata  # the tiny model is a local folder, not a Hub id
    card = repo.files["README.md"].decode()
    assert "## Evaluation during training (step 1)" in card and "| eval/reward_mean |" in card
    assert "lora=me/tiny-rs,format=qwen2.5-vl" in card
    assert set(hub.authorizations) == {f"Bearer {TOKEN}"}


def test_push_cli_merged_with_the_evaluation_table(
    hub: HubStandIn, trained: Path, tmp_path: Path
) -> None:
    results = tmp_path / "eval"
    agent = AgentResult(
        "hf:tiny-rs", 4, 0.25, (0.05, 0.7), 0.1, 3.0, 0.5, 0.1, 0.2, 0, "qwen2.5-vl"
    )
    write_reports(results, [agent], {"tasks": ["simple_data_entry"], "episodes": 4})
    cmd = [sys.executable, "-m", "uirl_agents.trainers.push", str(trained), "org/tiny-merged"]
    cmd += ["--merged", "--private", "--results", str(results)]
    result = _ok(_run(cmd, hub, tmp_path / "home"))
    assert result.stdout.strip().startswith(f"{hub.url}/org/tiny-merged/commit/")
    repo = hub.repos["org/tiny-merged"]
    assert repo.private
    assert "adapter_config.json" not in repo.files and "config.json" in repo.files
    # Merged into the unquantized base: the base's weights plus B @ A * scale.
    merged = load(repo.files["model.safetensors"])
    base = load((trained / "tiny_model" / "model.safetensors").read_bytes())
    name = next(n for n in merged if n.endswith("layers.0.self_attn.q_proj.weight"))
    assert not torch.equal(merged[name], base[name])
    assert hub.card_metadata("org/tiny-merged")["library_name"] == "transformers"
    card = repo.files["README.md"].decode()
    assert "## Evaluation\n" in card
    assert (results / "results.md").read_text().strip() in card  # evaluate.py's own table
    assert "--agent hf:org/tiny-merged,format=qwen2.5-vl" in card


def test_push_without_a_run_or_a_token_fails_with_the_fix(hub: HubStandIn, tmp_path: Path) -> None:
    with pytest.raises(RunNotPushableError, match=re.escape("expected a training run folder")):
        read_run(tmp_path)
    cmd = [sys.executable, str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU)]
    cmd += ["--output-dir", str(tmp_path / "run"), "--push-to-hub", "me/x"]
    result = _run(cmd, hub, tmp_path / "home", token=None)
    assert result.returncode != 0
    assert "no Hugging Face token is set: export HF_TOKEN" in result.stderr
    # It failed before building a model or starting a session.
    assert not (tmp_path / "run" / "tiny_model").exists()
    assert "me/x" not in hub.repos


def test_only_the_main_process_pushes(hub: HubStandIn, tmp_path: Path) -> None:
    out = tmp_path / "two"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    cmd += [str(REPO / "scripts" / "train_grpo.py"), "--config", str(TINY_CPU)]
    cmd += ["--output-dir", str(out), "--iterations", "1", "--logging.progress", "false"]
    cmd += ["--logging.report_to", "[]", "--env.num_envs", "1", "--env.max_steps", "1"]
    cmd += ["--rollout.max_new_tokens", "4", "--rollout.episodes_per_iteration", "4"]
    cmd += ["--eval.episodes", "0", "--push-to-hub", "me/two-processes"]
    _ok(_run(cmd, hub, tmp_path / "home"))
    assert (out / "trajectories" / "iter_000000" / "rank_1").is_dir()  # two did train
    repo = hub.repos["me/two-processes"]
    assert repo.commits == ["uirl grpo: iter_000001 of two"]  # one commit, from rank 0
    assert "config_grpo.yaml" in repo.files


def test_a_ppo_run_is_read_with_the_grpo_trainers_config(tmp_path: Path) -> None:
    from uirl_agents.trainers import checkpoint as ckpt
    from uirl_agents.trainers.cli import save_config
    from uirl_agents.trainers.config import GRPOConfig

    config = GRPOConfig()
    config.algorithm = "ppo"
    save_config(config, tmp_path / "config_ppo.yaml")
    checkpoint = tmp_path / ckpt.CHECKPOINTS_DIR / "iter_000002"
    checkpoint.mkdir(parents=True)
    (checkpoint / ckpt.STATE_FILE).write_text(json.dumps({"iteration": 2}))
    run = read_run(tmp_path)
    assert (run.trainer, run.config.algorithm, run.iterations) == ("ppo", "ppo", 2)

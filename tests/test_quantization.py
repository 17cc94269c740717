"""Quantized weights (bitsandbytes): the checks, 8/4-bit loading of the tiny real model,
a quantized agent in evaluate.py and QLoRA in both trainers, on CPU (real sessions).

bitsandbytes >= 0.45 runs on CPU, so everything here runs without a GPU;
scripts/gpu_check.sh repeats the loading and a QLoRA step on CUDA.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
bnb = pytest.importorskip("bitsandbytes", reason="the quant extra: pip install -e '.[quant]'")

from safetensors.torch import load_file  # noqa: E402

from uirl_agents.evaluation.agents import AgentSpecError, parse_agent  # noqa: E402
from uirl_agents.loading.pretrained import load_model  # noqa: E402
from uirl_agents.trainers import checkpoint as ckpt  # noqa: E402
from uirl_agents.trainers.config import GRPOConfig, ModelConfig, RSConfig  # noqa: E402
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402

pytest_plugins = ["model_fixtures"]
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning",
    "ignore:MatMul8bitLt. inputs will be cast:UserWarning",
)

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"
QUANT_LAYERS = {"8bit": bnb.nn.Linear8bitLt, "4bit": bnb.nn.Linear4bit}


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            {"load_in_8bit": True, "load_in_4bit": True},
            "model.load_in_8bit and model.load_in_4bit are both set: choose one",
        ),
        (
            {"load_in_4bit": True, "lora_rank": 0},
            "model.load_in_4bit with model.lora_rank 0 (full fine-tuning): quantized weights "
            "cannot be trained; set model.lora_rank > 0",
        ),
        (
            {"load_in_8bit": True, "fsdp": True},
            "model.load_in_8bit with model.fsdp (or the FSDP accelerate config): FSDP shards",
        ),
    ],
    ids=["8-and-4-bit", "quantized-full-finetune", "fsdp-quantized"],
)
@pytest.mark.parametrize("config_cls", [RSConfig, GRPOConfig], ids=["rs", "grpo"])
def test_bad_combinations_fail_at_construction(config_cls: type, model: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        config_cls(model=ModelConfig(**model))


def test_agent_spec_takes_a_quantization() -> None:
    spec = parse_agent("hf:/models/qwen,lora=/runs/a/adapter,load_in_8bit=1")
    assert (spec.quantization, spec.lora) == ("8bit", "/runs/a/adapter")
    assert spec.label == "hf:qwen+adapter@8bit"  # its own row in the reports
    assert parse_agent("hf:tiny,load_in_4bit=1,load_in_8bit=0").quantization == "4bit"
    assert parse_agent("hf:tiny").quantization is None
    for bad, message in [
        ("hf:tiny,load_in_8bit=1,load_in_4bit=1", "are both set: choose one"),
        ("hf:tiny,load_in_4bit=yes", "load_in_4bit takes 0 or 1"),
        ("openai:m@http://127.0.0.1:8000/v1,load_in_8bit=1", "quantized by its server"),
    ]:
        with pytest.raises(AgentSpecError, match=re.escape(message)):
            parse_agent(bad)


@pytest.mark.parametrize("mode", ["8bit", "4bit"])
def test_language_model_loads_quantized_and_the_rest_does_not(
    tiny_qwen25vl_dir: Path, mode: str
) -> None:
    full = load_model(tiny_qwen25vl_dir, device="cpu")
    model = load_model(tiny_qwen25vl_dir, device="cpu", quantization=mode)
    linear = {n: type(m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    language = [n for n in linear if ".language_model." in n]
    assert language and all(issubclass(linear[n], QUANT_LAYERS[mode]) for n in language)
    # The vision encoder, its merger and the head stay in float (the LoRA presets' split).
    rest = [n for n in linear if n not in language]
    assert any(".visual." in n for n in rest) and "lm_head" in rest
    assert all(not issubclass(linear[n], QUANT_LAYERS[mode]) for n in rest)
    ids = torch.tensor([[1, 5, 9, 33, 70, 2]])
    with torch.no_grad():  # the no-grad inference path (bitsandbytes' CPU kernels)
        logits = model(input_ids=ids).logits
        reference = full(input_ids=ids).logits
    assert torch.isfinite(logits).all()
    # Quantized weights change the numbers a little, not the model (measured on the tiny
    # model: cosine 0.99999 at 8 bits, 0.981 at 4 bits).
    cosine = torch.nn.functional.cosine_similarity(logits.flatten(), reference.flatten(), dim=0)
    assert cosine > (0.999 if mode == "8bit" else 0.95), f"{mode}: cosine {cosine:.4f}"


def _run(cmd: list[str], timeout_s: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


@pytest.mark.slow
def test_evaluate_runs_a_4bit_agent_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    cmd = [
        sys.executable,
        str(REPO / "scripts" / "evaluate.py"),
        "--agent",
        "hf:tiny,load_in_4bit=1",
    ]
    cmd += ["--episodes", "1", "--num-envs", "1", "--max-steps", "1", "--out", str(out)]
    result = _run(cmd)
    assert "language model in 4bit" in result.stderr
    (agent,) = json.loads((out / "results.json").read_text())["agents"]
    assert agent["agent"] == "hf:tiny@4bit" and agent["episodes"] == 1
    assert agent["session_errors"] == 0


# One iteration of one group of 2 one-step episodes on one session: quantized CPU
# matmuls are slow, and the machinery is what is tested.
SMALL = [
    "--iterations", "1", "--env.num_envs", "1", "--env.max_steps", "1",
    "--rollout.max_new_tokens", "8", "--rollout.episodes_per_iteration", "2",
    "--logging.progress", "false", "--logging.report_to", "[]",
]  # fmt: skip


def _train(script: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(REPO / "scripts" / script), "--config", str(TINY_CPU)]
    return _run([*cmd, "--output-dir", str(out), *SMALL, *args])


@pytest.mark.slow
def test_qlora_expert_iteration_trains_the_adapter_on_a_4bit_base(tmp_path: Path) -> None:
    out = tmp_path / "rs"
    # A demonstration kept (threshold 0) to train on; evaluated quantized too.
    args = ["--model.load_in_4bit", "true", "--rs.expert_episodes", "1", "--eval.episodes", "1"]
    result = _train("train_rs.py", out, *args)
    assert "language model in 4bit" in result.stderr
    adapter = ckpt.latest_checkpoint(out) / ckpt.ADAPTER_DIR
    weights = load_file(adapter / "adapter_model.safetensors")
    # LoRA B starts at 0: a non-zero B is a trained adapter; only adapter weights are saved.
    assert all("lora_" in name for name in weights)
    assert any(w.abs().max() > 0 for n, w in weights.items() if "lora_B" in n)
    (record,) = [r for r in read_metrics(out) if "train/loss" in r]
    assert record["train/samples"] > 0 and record["train/grad_norm"] > 0
    assert "eval/reward_mean" in record


@pytest.mark.slow
def test_qlora_grpo_iteration_on_a_4bit_base(tmp_path: Path) -> None:
    out = tmp_path / "grpo"
    # kl_beta > 0 (tiny_cpu.yaml): the reference is the quantized base, adapter disabled.
    result = _train("train_grpo.py", out, "--model.load_in_4bit", "true", "--eval.episodes", "0")
    assert "language model in 4bit" in result.stderr
    (record,) = [r for r in read_metrics(out) if "train/loss" in r]
    assert record["train/samples"] > 0 and record["rollout/episodes"] == 2
    # The trainer's logprobs match the rollout's on the same quantized weights.
    assert record["train/logprob_mismatch_max"] < 1e-3
    assert (ckpt.latest_checkpoint(out) / ckpt.ADAPTER_DIR / "adapter_config.json").exists()


@pytest.mark.slow
def test_fsdp_launch_with_a_quantized_base_fails_before_building_anything(
    tmp_path: Path,
) -> None:
    # What `accelerate launch --config_file scripts/configs/accelerate/fsdp.yaml` sets.
    env = {**os.environ, "PYTHONPATH": str(REPO), "ACCELERATE_USE_FSDP": "true"}
    cmd = [sys.executable, str(REPO / "scripts" / "train_rs.py"), "--config", str(TINY_CPU)]
    cmd += ["--output-dir", str(tmp_path / "run"), "--model.load_in_4bit", "true"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "model.load_in_4bit with model.fsdp (or the FSDP accelerate config)" in result.stderr
    assert not (tmp_path / "run" / "tiny_model").exists()  # no model, no session

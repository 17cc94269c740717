"""Trainers: the math against hand-computed examples, configs, the loss pass on a tiny real
model, and both scripts end to end on real sessions (one and two processes, resume)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from uirl_agents.policies.hf import HFPolicy, HFPolicyConfig  # noqa: E402
from uirl_agents.trainers import checkpoint as ckpt  # noqa: E402
from uirl_agents.trainers.cli import config_markdown, load_config, parse_args  # noqa: E402
from uirl_agents.trainers.common import (  # noqa: E402
    TRAIN_STREAM,
    build_model,
    derive_specs,
    trainable_parameters,
)
from uirl_agents.trainers.config import (  # noqa: E402
    LANGUAGE_MODEL_LINEARS,
    EnvConfig,
    GRPOConfig,
    ModelConfig,
    RSConfig,
)
from uirl_agents.trainers.grpo import StepSample, loss_terms  # noqa: E402
from uirl_agents.trainers.losses import (  # noqa: E402
    clipped_policy_loss,
    group_advantages,
    kl_k3,
    token_budget_batches,
)
from uirl_agents.trainers.metrics import read_metrics  # noqa: E402
from uirl_agents.trainers.vllm import AdapterLoadError, load_lora_adapter  # noqa: E402
from uirl_agents.trajectories import load_episodes  # noqa: E402

pytest_plugins = ["model_fixtures"]
# peft calls a transformers method deprecated in 5.x; not ours to fix.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"
)

REPO = Path(__file__).resolve().parents[1]
TINY_CPU = REPO / "scripts" / "configs" / "tiny_cpu.yaml"


# ---- the math, by hand ------------------------------------------------------------------


def test_group_advantages_by_hand() -> None:
    # Group a: returns 1, 0 -> mean 0.5, sample std 0.7071; b: equal -> 0; c: alone -> 0.
    adv = group_advantages([1.0, 0.0, 2.0, 2.0, 3.0], ["a", "a", "b", "b", "c"], eps=0.0)
    np.testing.assert_allclose(adv, [0.70710678, -0.70710678, 0.0, 0.0, 0.0], atol=1e-7)
    # Leave-one-out on [1, 0, 2]: baselines (0+2)/2, (1+2)/2, (1+0)/2 = 1, 1.5, 0.5.
    loo = group_advantages([1.0, 0.0, 2.0], ["g"] * 3, leave_one_out=True, scale_by_std=False)
    np.testing.assert_allclose(loo, [0.0, -1.5, 1.5])
    # ... divided by the group's sample std, which is 1 here.
    scaled = group_advantages([1.0, 0.0, 2.0], ["g"] * 3, leave_one_out=True, eps=0.0)
    np.testing.assert_allclose(scaled, [0.0, -1.5, 1.5])
    with pytest.raises(ValueError, match="one group id per return"):
        group_advantages([1.0], ["a", "b"])


def test_clipped_policy_loss_by_hand() -> None:
    ratios = torch.tensor([1.5, 0.5, 1.0, 1.1, 0.5])
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0])
    logprobs = torch.log(ratios).requires_grad_(True)
    loss, clipped = clipped_policy_loss(logprobs, torch.zeros(5), advantages, clip_epsilon=0.2)
    # -min(r A, clip(r, 0.8, 1.2) A):
    #   1.5, +1 -> -min(1.5, 1.2) = -1.2 (clipped)   0.5, +1 -> -min(0.5, 0.8) = -0.5
    #   1.0, -1 -> 1.0                                1.1, -1 -> -min(-1.1, -1.1) = 1.1
    #   0.5, -1 -> -min(-0.5, -0.8) = 0.8 (clipped)
    torch.testing.assert_close(loss, torch.tensor([-1.2, -0.5, 1.0, 1.1, 0.8]))
    assert clipped.tolist() == [True, False, False, False, True]
    loss.sum().backward()
    # d/dlp of -r*A = -r*A where unclipped; 0 where the clipped term is active.
    torch.testing.assert_close(logprobs.grad, torch.tensor([0.0, -0.5, 1.0, 1.1, 0.0]))


def test_kl_k3_by_hand() -> None:
    lp = torch.log(torch.tensor([0.5, 0.25]))
    ref = torch.log(torch.tensor([0.25, 0.25]))
    # delta = ref - lp = log 0.5 -> 0.5 - log 0.5 - 1 = 0.19315; equal -> 0.
    torch.testing.assert_close(kl_k3(lp, ref), torch.tensor([0.5 + math.log(2) - 1, 0.0]))


def test_token_budget_batches() -> None:
    assert token_budget_batches([4, 4, 4, 1], lambda n: n, 8) == [[4, 4], [4, 1]]
    assert token_budget_batches([9, 1], lambda n: n, 8) == [[9], [1]]
    assert token_budget_batches([], lambda n: n, 8) == []


# ---- configs ----------------------------------------------------------------------------


def test_config_yaml_overrides_and_derived_fields() -> None:
    cfg = load_config(GRPOConfig, TINY_CPU, {"optim.learning_rate": "1e-4", "env.rows": "[0, 3]"})
    assert cfg.model.name == "tiny" and cfg.optim.learning_rate == 1e-4
    assert cfg.env.rows == [0, 3] and cfg.grpo.kl_beta == 0.04
    # The same file serves both trainers: each ignores the other one's section.
    assert load_config(RSConfig, TINY_CPU).rs.expert_episodes == 2
    # learning_rate None resolves by the kind of fine-tuning.
    assert GRPOConfig().optim.learning_rate == 2e-4
    assert GRPOConfig(model=ModelConfig(lora_rank=0)).optim.learning_rate == 1e-5
    cfg, out = parse_args(
        GRPOConfig, ["--output-dir", "x", "--optim.learning_rate", "3e-5", "--seed=7"], "t"
    )
    assert (cfg.optim.learning_rate, cfg.seed, out) == (3e-5, 7, Path("x"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"optim.learnin_rate": "1"}, "did you mean 'optim.learning_rate'?"),
        ({"model.dtype": "bf16"}, "did you mean 'bfloat16'?"),
        ({"env.num_envs": "2.5"}, "env.num_envs: expected int, got 2.5"),
        ({"rollout.group_size": "1"}, "set rollout.group_size"),
        ({"rollout.episodes_per_iteration": "6"}, "multiple of rollout.group_size = 8"),
        ({"grpo.kl_beta": "0.1", "model.lora_rank": "0"}, "set model.lora_rank > 0"),
        ({"env.rows": "[1]", "env.row_pool": "[1, 2]"}, "set one (or neither)"),
    ],
)
def test_config_errors_say_what_to_set(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_config(GRPOConfig, None, overrides)


def test_docs_field_table_is_generated_from_the_dataclasses() -> None:
    docs = (REPO / "docs" / "training.md").read_text()
    rows = config_markdown(GRPOConfig).splitlines()[2:] + config_markdown(RSConfig).splitlines()[2:]
    for row in rows:
        assert row in docs, f"docs/training.md is stale; regenerate: {row}"


def test_episode_specs_are_a_function_of_seed_iteration_rank() -> None:
    env = EnvConfig(row_pool=[0, 2, 4])

    def specs(iteration: int, rank: int) -> list:
        return derive_specs(
            env,
            seed=0,
            stream=TRAIN_STREAM,
            iteration=iteration,
            rank=rank,
            num_groups=3,
            group_size=2,
            tag="it",
        )

    assert specs(1, 0) == specs(1, 0)
    assert specs(1, 0) != specs(2, 0) and specs(1, 0) != specs(1, 1)
    first = specs(1, 0)
    assert first[0].seed == first[1].seed and first[0].group_id == first[1].group_id
    assert all(s.options["rows"][0] in (0, 2, 4) for s in first)


# ---- the model side: LoRA and the loss pass ---------------------------------------------


@pytest.fixture(scope="module")
def lora_policy(tiny_qwen25vl_dir: Path) -> HFPolicy:
    from uirl_agents.formats import get_format
    from uirl_agents.models import load_processor
    from uirl_agents.policies.hf import format_config_from_processor

    model = build_model(ModelConfig(lora_rank=4), str(tiny_qwen25vl_dir), torch.device("cpu"))
    processor = load_processor(tiny_qwen25vl_dir)
    fmt = get_format("qwen2.5-vl", format_config_from_processor(processor))
    return HFPolicy(model, processor, fmt, HFPolicyConfig(temperature=0.8, max_new_tokens=10))


def _samples(policy: HFPolicy, advantages: list[float]) -> list[StepSample]:
    rng = np.random.default_rng(0)
    observations = [
        {"screenshot": rng.integers(0, 256, (800, 1280, 3), dtype=np.uint8), "instruction": text}
        for text in ("Copy row 3.", "Copy rows 5 to 9 into the form, one submission per row.")
    ]
    torch.manual_seed(0)
    for i in range(2):
        policy.begin_episode(i)
    steps = policy.act(observations, [0, 1])
    steps += policy.act(observations, [0, 1])  # second steps: history in the prompt
    return [
        StepSample(s.messages, s.images, s.completion_ids, s.logprobs, a, len(s.prompt_ids))
        for s, a in zip(steps, advantages * 2, strict=True)
    ]


def test_lora_targets_the_language_model_only_and_trains_the_adapter(lora_policy) -> None:
    model = lora_policy.model
    lora_names = [n for n, _ in model.named_modules() if n.endswith("lora_A")]
    assert lora_names and not [n for n in lora_names if "visual" in n]
    assert all(re.search("language_model", n) for n in lora_names)
    assert LANGUAGE_MODEL_LINEARS.startswith(".*language_model")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    vision_before = {n: p.detach().clone() for n, p in model.named_parameters() if "visual" in n}
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=1e-2)
    model.train()
    terms = loss_terms(
        model,
        lora_policy.processor,
        _samples(lora_policy, [1.0, -1.0]),
        clip_epsilon=0.2,
        kl_beta=0.1,
        temperature=0.8,
    )
    terms.loss_sum.backward()
    optimizer.step()
    model.eval()
    for name, before in vision_before.items():
        assert torch.equal(dict(model.named_parameters())[name], before), name
    changed = [n for n, p in model.named_parameters() if n in lora_before]
    assert all(not torch.equal(dict(model.named_parameters())[n], lora_before[n]) for n in changed)


def test_loss_pass_reproduces_rollout_logprobs_ratio_one(tiny_qwen25vl_dir: Path) -> None:
    from uirl_agents.formats import get_format
    from uirl_agents.models import load_processor
    from uirl_agents.policies.hf import format_config_from_processor

    model = build_model(ModelConfig(lora_rank=4), str(tiny_qwen25vl_dir), torch.device("cpu"))
    processor = load_processor(tiny_qwen25vl_dir)
    fmt = get_format("qwen2.5-vl", format_config_from_processor(processor))
    policy = HFPolicy(model, processor, fmt, HFPolicyConfig(temperature=0.8, max_new_tokens=10))
    samples = _samples(policy, [0.5, -0.5])
    model.train()  # the trainer's loss pass runs in train mode (LoRA dropout 0)
    terms = loss_terms(model, processor, samples, clip_epsilon=0.2, kl_beta=0.1, temperature=0.8)
    assert terms.ratio_error_max < 1e-4  # ratio == 1 at the first update
    assert terms.num_clipped == 0
    assert terms.kl_sum == pytest.approx(0.0, abs=1e-6)  # fresh adapter == reference
    assert terms.num_tokens == sum(len(s.completion_ids) for s in samples)


# ---- checkpoints and the vLLM hook -------------------------------------------------------


def test_checkpoints_keep_the_last_k(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    model.save_pretrained = lambda path: Path(path).mkdir(parents=True)  # type: ignore[attr-defined]
    optimizer = torch.optim.AdamW(model.parameters())
    for it in (1, 2, 3):
        ckpt.save_checkpoint(
            tmp_path,
            it,
            model=model,
            optimizer=optimizer,
            rng_states=[ckpt.rng_state()],
            state={"episodes": 4 * it},
            keep_last=2,
        )
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["iter_000002", "iter_000003"]
    assert ckpt.load_state(ckpt.latest_checkpoint(tmp_path)) == {"episodes": 12, "iteration": 3}
    (tmp_path / "checkpoints" / "iter_000004.tmp").mkdir()  # a save cut short: not a checkpoint
    assert ckpt.latest_checkpoint(tmp_path).name == "iter_000003"


def test_vllm_hook_posts_the_adapter() -> None:
    received: list[tuple[str, dict]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            received.append((self.path, body))
            status = 200 if body["lora_name"] != "bad" else 400
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"rank too large")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        load_lora_adapter(base_url, "run-iter3", "/shared/run/iter3")
        assert received == [
            ("/v1/load_lora_adapter", {"lora_name": "run-iter3", "lora_path": "/shared/run/iter3"})
        ]
        with pytest.raises(AdapterLoadError, match="rank too large") as err:
            load_lora_adapter(base_url, "bad", "/x")
        assert err.value.status_code == 400
    finally:
        server.shutdown()


# ---- the scripts, end to end on real sessions --------------------------------------------


def _processes_with(mark: str) -> list[int]:
    """Live processes whose environment holds ``mark`` (trainers, servers, browsers)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark.encode() in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _command(script: str, out: Path, nproc: int, *args: str) -> list[str]:
    launcher = [sys.executable]
    if nproc > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        launcher += [f"--nproc_per_node={nproc}"]
    common = ["--config", str(TINY_CPU), "--output-dir", str(out), "--logging.progress", "false"]
    return [*launcher, str(REPO / "scripts" / script), *common, *args]


def _run(cmd: list[str], mark: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "UIRL_TEST_MARK": mark}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result


def _assert_no_orphans(mark: str) -> None:
    deadline = time.monotonic() + 15  # session servers leave within a poll of their parent
    while _processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _processes_with(mark), "session servers or browsers outlived the run"


@pytest.mark.slow
def test_grpo_resumes_after_a_kill_mid_iteration(tmp_path: Path) -> None:
    mark = f"grpo-{uuid.uuid4().hex}"
    out = tmp_path / "grpo"
    cmd = _command("train_grpo.py", out, 1, "--iterations", "2", "--eval.episodes", "0")
    env = {**os.environ, "PYTHONPATH": str(REPO), "UIRL_TEST_MARK": mark}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    # Kill it once iteration 1 has started (checkpoint 1 written), like a preempted job.
    deadline = time.monotonic() + 180
    while not (out / "checkpoints" / "iter_000001").exists():
        assert first.poll() is None, first.stderr.read().decode()[-4000:]
        assert time.monotonic() < deadline, "no checkpoint after iteration 1"
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)
    first.wait(timeout=60)
    first.stderr.close()
    _assert_no_orphans(mark)
    result = _run(cmd, mark)  # the same command again
    assert "resuming from" in result.stderr and "(iteration 1)" in result.stderr
    _assert_no_orphans(mark)

    state = ckpt.load_state(ckpt.latest_checkpoint(out))
    assert state["iteration"] == 2 and state["episodes"] == 2 * 4  # no episode counted twice
    steps = [r["step"] for r in read_metrics(out) if "rollout/reward_mean" in r]
    assert steps == [1, 2]  # one record per iteration: the killed attempt's are dropped
    for record in read_metrics(out):
        if "train/ratio_error_first_step" in record:  # on-policy: ratio == 1 at first
            assert record["train/ratio_error_first_step"] < 1e-4
    cfg = load_config(GRPOConfig, TINY_CPU)
    for iteration in (0, 1):
        episodes = load_episodes(out / "trajectories" / f"iter_{iteration:06d}" / "rank_0")
        expected = derive_specs(
            cfg.env,
            seed=0,
            stream=TRAIN_STREAM,
            iteration=iteration,
            rank=0,
            num_groups=2,
            group_size=2,
            tag="it",
        )
        assert [(e.seed, e.group_id) for e in episodes] == [(s.seed, s.group_id) for s in expected]
        assert all(
            s.logprobs and len(s.logprobs) == len(s.completion_ids)
            for e in episodes
            for s in e.steps
        )


@pytest.mark.slow
def test_rs_one_process_end_to_end(tmp_path: Path) -> None:
    mark = f"rs-{uuid.uuid4().hex}"
    out = tmp_path / "rs"
    _run(_command("train_rs.py", out, 1, "--iterations", "1"), mark)
    _assert_no_orphans(mark)
    (record,) = [r for r in read_metrics(out) if "train/examples" in r]
    # tiny_cpu.yaml: 2 expert demonstrations (reward >= 0) pass the threshold.
    assert record["train/examples"] >= 3 and record["train/optimizer_steps"] >= 1
    assert record["rollout/episodes"] == 4 and record["demonstrations/episodes"] == 2
    for key in ("train/loss", "perf/tokens_per_s", "perf/time_share_env", "rollout/success_rate"):
        assert key in record
    assert any("eval/reward_mean" in r for r in read_metrics(out))
    adapter = ckpt.latest_checkpoint(out) / ckpt.ADAPTER_DIR
    assert (adapter / "adapter_model.safetensors").exists()
    assert (out / "config_rs.yaml").exists() and list((out / "tb").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("script", ["train_grpo.py", "train_rs.py"])
def test_two_processes_end_to_end(tmp_path: Path, script: str) -> None:
    mark = f"ddp-{uuid.uuid4().hex}"
    out = tmp_path / script.removesuffix(".py")
    result = _run(_command(script, out, 2, "--iterations", "1", "--env.num_envs", "1"), mark, 300)
    _assert_no_orphans(mark)
    (record,) = [r for r in read_metrics(out) if "rollout/episodes" in r]
    assert record["rollout/episodes"] == 4  # both processes' episodes, gathered
    assert (record.get("train/examples") or record.get("train/samples", 0)) > 0
    assert record["train/optimizer_steps"] >= 1
    ranks = sorted(p.name for p in (out / "trajectories" / "iter_000000").iterdir())
    assert ranks == ["rank_0", "rank_1"]
    assert ckpt.latest_checkpoint(out).name == "iter_000001"
    assert result.stderr.count(" step 1: ") == 1  # only the main process logs

"""HFPolicy on a tiny real Qwen2.5-VL built offline: batching, context, logprobs, loading."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from uirl_agents.formats import get_format  # noqa: E402
from uirl_agents.loading.pretrained import load_model, load_model_and_processor  # noqa: E402
from uirl_agents.policies.context import EpisodeContexts  # noqa: E402
from uirl_agents.policies.hf import (  # noqa: E402
    HFPolicy,
    HFPolicyConfig,
    encode_prompts,
    format_config_from_processor,
    selective_log_softmax,
    vision_token_ids,
)
from uirl_agents.testing.tiny_model import main as tiny_model_main  # noqa: E402
from uirl_agents.trainers.forward import completion_logprobs, softmax_entropy  # noqa: E402
from uirl_gym.actions import Action  # noqa: E402

pytest_plugins = ["model_fixtures"]

INSTRUCTIONS = [
    "Copy row 1 into the form.",
    "Copy rows 3 to 5 of the spreadsheet into the form, submitting once per row.",
]


@pytest.fixture(scope="module")
def model_and_processor(tiny_qwen25vl_dir: Path):
    return load_model_and_processor(tiny_qwen25vl_dir)


def _observations(seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {"screenshot": rng.integers(0, 256, (800, 1280, 3), dtype=np.uint8), "instruction": text}
        for text in INSTRUCTIONS  # different lengths: the batch is left-padded
    ]


def _recomputed_logprobs(model, processor, steps, temperature: float = 1.0) -> list:
    """The trainer's forward pass over the steps' prompts and sampled ids."""
    with torch.no_grad():
        return completion_logprobs(
            model,
            processor,
            [s.messages for s in steps],
            [s.images for s in steps],
            [s.completion_ids for s in steps],
            temperature=temperature,
        )


def _policy(model_and_processor, fmt: str = "ui-tars", **config) -> HFPolicy:
    model, processor = model_and_processor
    return HFPolicy(
        model,
        processor,
        get_format(fmt, format_config_from_processor(processor)),
        HFPolicyConfig(**config),
    )


def test_tiny_model_loads_like_a_checkpoint(tiny_qwen25vl_dir: Path, model_and_processor) -> None:
    model, processor = model_and_processor
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert sum(p.numel() for p in model.parameters()) < 300_000
    assert (tiny_qwen25vl_dir / "model.safetensors").stat().st_size < 1_000_000
    # A subclass of the model's own processor class, without the video processor.
    assert type(processor).__mro__[1].__name__ == "Qwen2_5_VLProcessor"
    tokenizer = processor.tokenizer
    for token in ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|image_pad|>", "<tool_call>"):
        assert tokenizer.convert_tokens_to_ids(token) != tokenizer.unk_token_id
    assert len(tokenizer("<|im_start|><|image_pad|><tool_call>")["input_ids"]) == 3
    # <tool_call> is a plain added token, as in Qwen2.5: decoding keeps it.
    ids = tokenizer("<tool_call>{}</tool_call><|im_end|>")["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<tool_call>{}</tool_call>"
    assert "torchvision" not in sys.modules


def test_acts_on_a_batch_and_logprobs_match_recomputation(model_and_processor) -> None:
    policy = _policy(model_and_processor, max_images=2, temperature=0.7, max_new_tokens=12)
    model, processor = model_and_processor
    image_pad = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    torch.manual_seed(0)
    for step_index in range(3):
        steps = policy.act(_observations(step_index), [0, 1])
        assert len(steps) == 2
        for step in steps:
            num_images = min(step_index + 1, 2)
            assert len(step.images) == num_images
            assert all(image.shape == (84, 140, 3) for image in step.images)
            placeholders = [
                part
                for m in step.messages
                if isinstance(m["content"], list)
                for part in m["content"]
            ]
            assert sum(p["type"] == "image" for p in placeholders) == num_images
            assert sum(m["role"] == "assistant" for m in step.messages) == step_index
            # 84x140 -> 6x10 patches of 14 px -> 15 tokens after the 2x2 merge.
            assert step.prompt_ids.count(image_pad) == 15 * num_images
            assert 1 <= len(step.completion_ids) <= 12
            assert len(step.logprobs) == len(step.completion_ids)
            assert all(lp <= 0 for lp in step.logprobs)
            assert step.text == processor.tokenizer.decode(
                step.completion_ids, skip_special_tokens=True
            )
            # A random model's output: an invalid step, never an exception.
            assert (step.action is None) == (step.error is not None)
            if step.error:
                assert step.error.startswith("ParseError: ")
        recomputed = _recomputed_logprobs(model, processor, steps, temperature=0.7)
        for step, logprobs in zip(steps, recomputed, strict=True):
            assert torch.allclose(logprobs, torch.tensor(step.logprobs), atol=1e-4, rtol=0)
    # History: the previous outputs come back as assistant turns, oldest first.
    assert steps[0].messages[-2]["role"] == "assistant"
    policy.begin_episode(0)
    step = policy.act(_observations(9)[:1], [0])[0]
    assert [m["role"] for m in step.messages] == ["system", "user"]


def test_sampling_ignores_checkpoint_generation_defaults(model_and_processor) -> None:
    # The tiny checkpoint ships Qwen2.5-VL's defaults (top_k=1, repetition_penalty=1.05,
    # temperature=0.1); sampled tokens must follow logits / T and nothing else.
    policy = _policy(model_and_processor, temperature=0.7, max_new_tokens=6)
    model, processor = model_and_processor
    prompt = EpisodeContexts(policy.format).observe(0, _observations(0)[0])
    inputs = encode_prompts(processor, [prompt.messages], [prompt.images])
    config = policy.generation_config()
    config.output_scores = True
    with torch.no_grad():
        out = model.generate(**inputs, generation_config=config)
    blocked = sorted(vision_token_ids(model.config, processor.tokenizer))
    for scores, logits in zip(out.scores, out.logits, strict=True):
        assert torch.isneginf(scores[:, blocked]).all()  # vision tokens: never sampled
        scores[:, blocked] = logits[:, blocked] / 0.7
        assert torch.allclose(scores, logits / 0.7, atol=1e-6)


def test_vision_special_tokens_are_never_generated(tiny_qwen25vl_dir: Path) -> None:
    # A model that prefers the vision tokens by far (+30 on their logits, as an untrained
    # or drifting model may): fed back, a generated <|image_pad|> would be an image slot
    # without an image.
    model, processor = load_model_and_processor(tiny_qwen25vl_dir)
    blocked = vision_token_ids(model.config, processor.tokenizer)
    names = {"<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"}
    names.add("<|vision_pad|>")
    assert blocked == {processor.tokenizer.convert_tokens_to_ids(n) for n in names}
    index = torch.tensor(sorted(blocked))

    def favour_vision_tokens(_module, _args, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()
        logits[..., index] += 30.0
        return logits

    model.lm_head.register_forward_hook(favour_vision_tokens)
    policy = _policy((model, processor), temperature=1.0, max_new_tokens=8)
    torch.manual_seed(0)
    steps = policy.act(_observations(0), [0, 1])
    for step in steps:
        assert len(step.completion_ids) == 8
        assert not blocked.intersection(step.completion_ids)
    # The recorded logprobs are those of the distribution sampled from, the vision
    # tokens left out (the raw logits would put every sampled token below -20), and the
    # trainer scores the same distribution.
    recomputed = _recomputed_logprobs(model, processor, steps)
    for step, logprobs in zip(steps, recomputed, strict=True):
        assert torch.allclose(logprobs, torch.tensor(step.logprobs), atol=1e-4, rtol=0)
        assert min(step.logprobs) > -20


def test_greedy_decoding_records_temperature_one_logprobs(model_and_processor) -> None:
    policy = _policy(model_and_processor, do_sample=False, max_new_tokens=5)
    model, processor = model_and_processor
    step = policy.act(_observations(1)[:1], [0])[0]
    with torch.no_grad():
        (recomputed,) = completion_logprobs(
            model, processor, [step.messages], [step.images], [step.completion_ids]
        )
    assert torch.allclose(recomputed, torch.tensor(step.logprobs), atol=1e-4, rtol=0)


def test_completion_logprobs_batches_and_backpropagates(model_and_processor) -> None:
    model, processor = model_and_processor
    policy = _policy(model_and_processor, fmt="qwen2.5-vl")
    contexts = EpisodeContexts(policy.format)
    prompts = [contexts.observe(i, obs) for i, obs in enumerate(_observations(2))]
    tokenize = processor.tokenizer
    completions = [
        tokenize(
            '<tool_call>{"name": "computer_use", "arguments": {"action": "wait"}}</tool_call>'
        )["input_ids"],
        tokenize("Thought: click\nAction: click(start_box='(3,4)')")["input_ids"],
    ]
    args = ([p.messages for p in prompts], [p.images for p in prompts])
    batched = completion_logprobs(model, processor, *args, completions, temperature=0.9)
    assert [len(x) for x in batched] == [len(c) for c in completions]
    # Padding does not change a sample's logprobs.
    alone = completion_logprobs(
        model, processor, [args[0][1]], [args[1][1]], [completions[1]], temperature=0.9
    )
    assert torch.allclose(batched[1], alone[0], atol=1e-4, rtol=0)
    sum(x.sum() for x in batched).backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    with pytest.raises(ValueError, match="one messages/images/completion_ids entry per sample"):
        completion_logprobs(model, processor, *args, completions[:1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_selective_log_softmax_equals_the_full_log_softmax(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunked log-softmax (values, gradients, entropy) equals the float32 copy of the
    whole vocabulary it replaces, within 1e-5, over several chunks."""
    import uirl_agents.policies.hf as hf

    monkeypatch.setattr(hf, "LOG_SOFTMAX_CHUNK_BYTES", 4 * 1000 * 3)  # 3 rows a chunk
    generator = torch.Generator().manual_seed(0)
    base = (torch.randn(2, 5, 1000, generator=generator) * 4).to(dtype)
    index = torch.randint(0, 1000, (2, 5), generator=generator)
    weights = torch.randn(2, 5, generator=generator)
    results = []
    for chunked in (False, True):
        logits = base.clone().requires_grad_(True)
        if chunked:
            logprobs = selective_log_softmax(logits, index, 0.7)
            entropy = softmax_entropy(logits, 0.7)
        else:  # what completion_logprobs computed before
            full = torch.log_softmax(logits.float() / 0.7, dim=-1)
            logprobs = full.gather(-1, index.unsqueeze(-1)).squeeze(-1)
            entropy = -(full.exp() * full).sum(-1).detach()
        (logprobs * weights).sum().backward()
        results.append((logprobs.detach(), entropy, logits.grad.float()))
    for new, old in zip(results[1], results[0], strict=True):
        assert new.dtype == old.dtype
        torch.testing.assert_close(new, old, rtol=0, atol=1e-5)


def test_format_sized_unlike_the_processor_is_rejected(model_and_processor) -> None:
    model, processor = model_and_processor
    with pytest.raises(ValueError, match=re.escape("format_config_from_processor(processor)")):
        HFPolicy(model, processor, get_format("ui-tars"))  # sized for 1288x812, not 140x84


# peft calls a transformers method deprecated in 5.x; not ours to fix.
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
def test_lora_adapter_loads_through_the_same_function(
    tiny_qwen25vl_dir: Path, tmp_path: Path
) -> None:
    peft = pytest.importorskip("peft")
    base = load_model(tiny_qwen25vl_dir)
    lora = peft.get_peft_model(
        base,
        peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
    lora.save_pretrained(tmp_path / "adapter")
    model, processor = load_model_and_processor(
        tiny_qwen25vl_dir, adapter_path=tmp_path / "adapter"
    )
    assert isinstance(model, peft.PeftModel)
    policy = HFPolicy(
        model,
        processor,
        get_format("ui-tars", format_config_from_processor(processor)),
        HFPolicyConfig(max_new_tokens=4),
    )
    step = policy.act(_observations(3)[:1], [0])[0]
    with torch.no_grad():
        (with_adapter,) = completion_logprobs(
            model, processor, [step.messages], [step.images], [step.completion_ids]
        )
        (without,) = completion_logprobs(
            load_model(tiny_qwen25vl_dir),
            processor,
            [step.messages],
            [step.images],
            [step.completion_ids],
        )
    assert torch.allclose(with_adapter, torch.tensor(step.logprobs), atol=1e-4, rtol=0)
    assert not torch.allclose(with_adapter, without, atol=1e-4)


def test_cli_writes_a_checkpoint(tmp_path: Path) -> None:
    tiny_model_main([str(tmp_path / "tiny"), "--seed", "1"])
    config = json.loads((tmp_path / "tiny" / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_vl"
    assert (tmp_path / "tiny" / "chat_template.jinja").exists()


@pytest.mark.parametrize("fmt", ["text", "json", "coordinates"])
def test_generic_formats_drive_the_model(model_and_processor, fmt: str) -> None:
    """A model with no GUI syntax of its own is prompted in a generic format: the prompt
    renders through its chat template, it samples, and the reply is parsed (the random
    tiny model's reply is no action: a parse error, not a crash)."""
    policy = _policy(model_and_processor, fmt, max_new_tokens=8)
    torch.manual_seed(0)
    steps = policy.act(_observations(0), [0, 1])
    for step in steps:
        assert "drag" in step.messages[1]["content"][0]["text"]  # the syntax is taught
        assert (step.action is None) != (step.error is None)
        assert 1 <= len(step.completion_ids) <= 8
    demo = policy.format.render(Action("left_click", 640, 400), policy.format.geometry())
    assert policy.format.parse(demo, policy.format.geometry()).action.type == "left_click"

"""A tiny random Qwen2.5-VL, built offline in seconds, for tests and smoke runs.

:func:`build_tiny_qwen25vl` writes a real transformers checkpoint folder (config,
safetensors weights, byte-level BPE tokenizer, the Qwen2.5-VL chat template, image
processor config) that loads through :func:`uirl_agents.models.load_model_and_processor`
exactly like a Hub checkpoint:

- model: ``Qwen2_5_VLForConditionalGeneration``, 2 text layers and 2 vision blocks of
  width 32, about 0.2M parameters (< 1 MB); weights random (seeded).
- tokenizer: ``Qwen2Tokenizer`` (Qwen's pre-tokenizer regex, byte-level BPE) trained
  here with ``tokenizers`` on our prompts and both formats' action syntax, with the
  Qwen special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|vision_start|>``,
  ``<|image_pad|>``, ...) and ``<tool_call>``/``</tool_call>`` as plain added tokens,
  as in Qwen2.5.
- image processor: the Qwen2-VL one with ``max_pixels = 28*28*16``: a 1280x800
  screenshot becomes a 140x84 image, 15 visual tokens.
- generation config: Qwen2.5-VL's sampling defaults (top_k=1, repetition_penalty 1.05,
  ...) on purpose, so that tests catch a policy that lets them leak into sampling.

CLI: ``python -m uirl_agents.tiny_model OUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
import logging
from importlib import resources
from pathlib import Path

import torch
from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers, trainers
from transformers import GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

from uirl_gym.actions import Action, ActionType

from .formats import FormatConfig, get_format

logger = logging.getLogger(__name__)

TINY_MIN_PIXELS = 28 * 28 * 4
TINY_MAX_PIXELS = 28 * 28 * 16
VOCAB_SIZE = 1024
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Qwen2.5 adds these as ordinary (non-special) tokens: decoding keeps them.
PLAIN_ADDED_TOKENS = ("<tool_call>", "</tool_call>")


def _corpus() -> list[str]:
    """Text the tokenizer learns from: prompts, instructions, both formats' outputs."""
    names = ["Alice", "Bob", "Carmen", "Dmitri", "Eve", "Farah", "Gustavo", "Hana"]
    instructions = [
        f"Copy row {i} of the spreadsheet ({n} {n[::-1].title()}, {n.lower()}@example.com) "
        "into the form and press Submit."
        for i, n in enumerate(names, start=1)
    ]
    actions = [
        Action(ActionType.LEFT_CLICK, x=640, y=400),
        Action(ActionType.DOUBLE_CLICK, x=120, y=75),
        Action(ActionType.RIGHT_CLICK, x=1000, y=700),
        Action(ActionType.TYPE, text="alice@example.com\n"),
        Action(ActionType.KEYS, keys="ctrl+c"),
        Action(ActionType.KEYS, keys="ctrl+v"),
        Action(ActionType.SCROLL, x=300, y=500, direction="down"),
        Action(ActionType.SCREENSHOT),
        Action(ActionType.FINISH, text="done"),
    ]
    texts: list[str] = []
    for name in ("ui-tars", "qwen2.5-vl"):
        fmt = get_format(name)
        geometry = fmt.geometry()
        texts += [fmt.system_prompt(geometry), fmt.task_prompt(instructions[0], geometry)]
        texts += [fmt.render(a, geometry, thought="I click the First name field.") for a in actions]
    return (texts + instructions) * 4


def build_tokenizer() -> Qwen2Tokenizer:
    """A byte-level BPE ``Qwen2Tokenizer`` trained on :func:`_corpus` (deterministic)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE - len(PLAIN_ADDED_TOKENS),
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(), trainer)
    state = json.loads(bpe.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    tokenizer = Qwen2Tokenizer(
        vocab=state["vocab"],
        merges=merges,
        unk_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(SPECIAL_TOKENS)})
    tokenizer.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t in PLAIN_ADDED_TOKENS]
    )
    tokenizer.chat_template = (
        resources.files("trl").joinpath("chat_templates/qwen2_5_vl.jinja").read_text("utf-8")
    )
    return tokenizer


def tiny_config(tokenizer: Qwen2Tokenizer) -> Qwen2_5_VLConfig:
    ids = tokenizer.convert_tokens_to_ids
    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 8192,
            # head_dim 16 -> 8 rotary frequencies split over (time, height, width).
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e6,
                "mrope_section": [2, 3, 3],
            },
            "bos_token_id": ids("<|endoftext|>"),
            "eos_token_id": ids("<|im_end|>"),
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [1],
            "window_size": 56,
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )


def build_tiny_qwen25vl(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint to ``out_dir`` and return its path.

    Args:
        out_dir: the folder to write (created; existing files are overwritten).
        seed: seeds the weights; the tokenizer is deterministic.

    Returns:
        ``Path(out_dir)``, loadable with ``load_model_and_processor``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = tiny_config(tokenizer)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    eos = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id]
    # Qwen2.5-VL-Instruct's shipped defaults, kept so tests see the real hazard.
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        repetition_penalty=1.05,
        temperature=0.1,
        top_p=0.001,
        top_k=1,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    Qwen2VLImageProcessorPil(
        min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS
    ).save_pretrained(out)
    logger.info(
        "built tiny Qwen2.5-VL in %s (%d params, vocab %d)",
        out,
        sum(p.numel() for p in model.parameters()),
        len(tokenizer),
    )
    return out


def tiny_format_config() -> FormatConfig:
    """The :class:`FormatConfig` matching the tiny model's image processor."""
    return FormatConfig(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the checkpoint to")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build_tiny_qwen25vl(args.out_dir, seed=args.seed)


if __name__ == "__main__":
    main()

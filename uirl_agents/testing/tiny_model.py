"""Tiny random vision-language models of each supported family, built offline in seconds.

:func:`build_tiny_model` writes a real transformers checkpoint folder (config,
safetensors weights, a tokenizer trained here, the family's chat template, image
processor and processor configs) that loads through
:func:`uirl_agents.loading.pretrained.load_model_and_processor` exactly like a Hub checkpoint.
One builder per family (:data:`FAMILIES`); they share the tokenizer training
(:func:`train_bpe`), the tiny text sizes (:data:`TEXT_SIZES`) and the saving
(:func:`_save`).

- models: the family's own class from its transformers config, 2 text layers and 2
  vision layers of width 32 (100k-160k parameters, under 1 MB on disk); weights
  random (seeded).
- tokenizers: byte-level BPE trained with ``tokenizers`` on our prompts and every
  format's action syntax (:func:`_corpus`), with the family's special tokens. The
  Qwen families use ``Qwen2Tokenizer`` (Qwen's pre-tokenizer regex); the others a
  plain ``TokenizersBackend`` (byte-level, where the real checkpoints ship
  SentencePiece-style vocabularies: the token ids differ, the chat and image-token
  layout is the family's).
- images: each family's smallest sensible image size, so that a forward pass on a
  1280x800 screenshot takes 30-90 ms on one CPU thread (Qwen: ``max_pixels =
  28*28*16``, a 140x84 image, 15 visual tokens; the fixed-size families: a 28 or
  56 px square, 1 to 14 image tokens).

``qwen2.5-vl`` (:func:`build_tiny_qwen25vl`) also keeps Qwen2.5-VL's sampling
defaults (top_k=1, repetition_penalty 1.05, ...) on purpose, so that tests catch a
policy that lets them leak into sampling.

CLI: ``python -m uirl_agents.testing.tiny_model [--family NAME] OUT_DIR`` (default family:
``qwen2.5-vl``).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoModelForImageTextToText,
    Gemma3Config,
    Gemma3Processor,
    GenerationConfig,
    Idefics3Config,
    Idefics3Processor,
    LlavaConfig,
    LlavaNextConfig,
    LlavaNextProcessor,
    LlavaProcessor,
    PaliGemmaConfig,
    PaliGemmaProcessor,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Qwen2_5_VLConfig,
    Qwen2VLConfig,
    Qwen3VLConfig,
    SmolVLMConfig,
    SmolVLMProcessor,
)
from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil
from transformers.models.llava.image_processing_pil_llava import LlavaImageProcessorPil
from transformers.models.llava_next.image_processing_pil_llava_next import (
    LlavaNextImageProcessorPil,
)
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil
from transformers.processing_utils import ProcessorMixin
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from uirl_agents.formats import FORMATS, get_format
from uirl_agents.loading.pretrained import image_only_processor_class
from uirl_gym.actions import Action, ActionType

logger = logging.getLogger(__name__)

TINY_MIN_PIXELS = 28 * 28 * 4
TINY_MAX_PIXELS = 28 * 28 * 16
VOCAB_SIZE = 1024
QWEN_SPECIAL_TOKENS = (
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
# Qwen3(-VL) adds the tool-response and thinking markers too (also non-special).
QWEN3_PLAIN_ADDED_TOKENS = (
    *PLAIN_ADDED_TOKENS,
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)
# The text model of every family: 2 layers of width 32, grouped-query attention.
# Qwen's byte-level vocabulary has no unknown token (transformers' default is one).
QWEN_TOKENIZER_TOKENS: dict[str, Any] = {
    "unk_token": None,
    "eos_token": "<|im_end|>",
    "pad_token": "<|endoftext|>",
}
TEXT_SIZES: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 8192,
}
# A ViT of 2 layers of width 32 on 14 px patches (the CLIP / SigLIP / Idefics3 towers).
VISION_SIZES = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "patch_size": 14,
}
# LLaVA-1.5's conversation layout (Vicuna v1): system, "USER: ... ASSISTANT: ...</s>".
LLAVA_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'][0]['text'] + ' ' }}"
    "{% elif message['role'] == 'user' %}{{ 'USER: ' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] }}{% endfor %}{{ ' ' }}"
    "{% else %}{{ 'ASSISTANT: ' + message['content'][0]['text'] + eos_token }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


def _corpus() -> list[str]:
    """Text the tokenizer learns from: prompts, instructions, every format's outputs."""
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


def _tool_call_corpus() -> list[str]:
    """Tool-calling text (TRL's ``environment_factory``): tool schemas and calls in
    Qwen's ``<tool_call>`` JSON layout, so that the Qwen3-VL tokenizer learns them."""
    calls = [
        '{"name": "click", "arguments": {"x": 120, "y": 75}}',
        '{"name": "type_text", "arguments": {"text": "alice@example.com"}}',
        '{"name": "press_keys", "arguments": {"keys": "ctrl+c"}}',
        '{"name": "scroll", "arguments": {"x": 300, "y": 200, "direction": "down"}}',
        '{"name": "finish", "arguments": {}}',
    ]
    schema = (
        '{"type": "function", "function": {"name": "click", "description": "Click the left '
        'mouse button at a point of the screenshot.", "parameters": {"type": "object", '
        '"properties": {"x": {"type": "integer", "description": "pixel column"}, "y": '
        '{"type": "integer", "description": "pixel row"}}, "required": ["x", "y"]}}}'
    )
    return [f"<tool_call>\n{c}\n</tool_call>" for c in calls] + [schema]


def _generic_corpus() -> list[str]:
    """:func:`_corpus` plus the generic formats' prompts and outputs (the non-Qwen
    families default to ``text``)."""
    action = Action(ActionType.LEFT_CLICK, x=640, y=400)
    texts = []
    pixel_formats = {name for name, f in FORMATS.items() if f.mode == "pixels"}
    for name in sorted(pixel_formats - {"ui-tars", "qwen2.5-vl"}):
        fmt = get_format(name)
        geometry = fmt.geometry()
        texts += [fmt.task_prompt("Copy row 1 into the form.", geometry)]
        texts += [fmt.render(action, geometry, thought="I click the First name field.")]
    return _corpus() + texts * 4


def train_bpe(
    corpus: Sequence[str], special_tokens: Sequence[str], vocab_size: int, *, qwen_regex: bool
) -> Tokenizer:
    """A byte-level BPE trained on ``corpus`` (deterministic), ``special_tokens`` first.

    Args:
        corpus: the training text.
        special_tokens: tokens that get the first ids and are never split.
        vocab_size: the BPE's vocabulary size, special tokens included.
        qwen_regex: split words with Qwen's pre-tokenizer regex first (as
            ``Qwen2Tokenizer`` does); else GPT-2's byte-level split.
    """
    bpe = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not qwen_regex)
    bpe.pre_tokenizer = (
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        if qwen_regex
        else byte_level
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    bpe.decoder = decoders.ByteLevel()
    return bpe


def build_tokenizer(
    *,
    corpus: Sequence[str] | None = None,
    plain_added_tokens: Sequence[str] = PLAIN_ADDED_TOKENS,
    chat_template: str | None = None,
) -> Qwen2Tokenizer:
    """The Qwen2.5-VL tokenizer: a byte-level BPE ``Qwen2Tokenizer`` trained on
    :func:`_corpus` (deterministic), with the Qwen special tokens and chat template.

    Args:
        corpus: the training text (default: :func:`_corpus`).
        plain_added_tokens: non-special added tokens (Qwen2.5's ``<tool_call>`` pair).
        chat_template: default: Qwen2.5-VL's.
    """
    bpe = train_bpe(
        _corpus() if corpus is None else corpus,
        QWEN_SPECIAL_TOKENS,
        VOCAB_SIZE - len(plain_added_tokens),
        qwen_regex=True,
    )
    state = json.loads(bpe.to_str())["model"]
    # Pairs: tokenizers' BPE takes (left, right) tuples, whatever transformers annotates.
    merges: list[Any] = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]
    ]
    tokenizer = Qwen2Tokenizer(
        vocab=state["vocab"],
        merges=merges,
        **QWEN_TOKENIZER_TOKENS,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(QWEN_SPECIAL_TOKENS)})
    tokenizer.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t in plain_added_tokens]
    )
    tokenizer.chat_template = chat_template or _trl_chat_template("qwen2_5_vl")
    return tokenizer


def _generic_tokenizer(
    *,
    bos: str,
    eos: str,
    pad: str,
    extra_special: Sequence[str] = (),
    named_special: dict[str, str] | None = None,
    chat_template: str | None,
) -> TokenizersBackend:
    """A byte-level BPE tokenizer with a family's special tokens and chat template.

    Args:
        bos, eos, pad: the family's begin/end-of-text and padding tokens.
        extra_special: more special tokens (image tokens, turn markers).
        named_special: special tokens the family's processor reads as tokenizer
            attributes (e.g. Gemma 3's ``boi_token``); their values are added too.
        chat_template: the family's chat template (None: the family ships none).
    """
    named_special = named_special or {}
    specials = list(dict.fromkeys([pad, bos, eos, *extra_special, *named_special.values()]))
    bpe = train_bpe(_generic_corpus(), specials, VOCAB_SIZE, qwen_regex=False)
    tokenizer = TokenizersBackend(
        tokenizer_object=bpe,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        extra_special_tokens=named_special or None,
    )
    others = [t for t in specials if t not in (bos, eos, pad, *named_special.values())]
    tokenizer.add_special_tokens(
        {"additional_special_tokens": others}, replace_extra_special_tokens=False
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def _trl_chat_template(name: str) -> str:
    """A family's original chat template, as TRL ships it."""
    return resources.files("trl").joinpath(f"chat_templates/{name}.jinja").read_text("utf-8")


def _random_model(config: PretrainedConfig, seed: int) -> PreTrainedModel:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return AutoModelForImageTextToText.from_config(config)


class _Saveable(Protocol):
    def save_pretrained(self, save_directory: str | Path, /) -> Any: ...


def _save(out: Path, model: PreTrainedModel, *parts: _Saveable) -> Path:
    """Write the model and its processing parts (processor, or tokenizer and image
    processor) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for part in parts:
        part.save_pretrained(out)
    logger.info(
        "built tiny %s in %s (%d params)",
        type(model).__name__,
        out,
        sum(p.numel() for p in model.parameters()),
    )
    return out


def _token_ids(tokenizer: PreTrainedTokenizerBase, **tokens: str) -> dict[str, Any]:
    """Config fields (``image_token_id=...``) set to the ids of the tokens named."""
    return {key: tokenizer.convert_tokens_to_ids(token) for key, token in tokens.items()}


# ---- the Qwen families --------------------------------------------------------------


def _qwen_text_config(tokenizer: Qwen2Tokenizer) -> dict:
    return {
        "vocab_size": len(tokenizer),
        **TEXT_SIZES,
        # head_dim 16 -> 8 rotary frequencies split over (time, height, width).
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        **_token_ids(
            tokenizer,
            bos_token_id="<|endoftext|>",
            eos_token_id="<|im_end|>",
            pad_token_id="<|endoftext|>",
        ),
    }


def _qwen_vision_token_ids(tokenizer: Qwen2Tokenizer) -> dict[str, Any]:
    return _token_ids(
        tokenizer,
        image_token_id="<|image_pad|>",
        video_token_id="<|video_pad|>",
        vision_start_token_id="<|vision_start|>",
        vision_end_token_id="<|vision_end|>",
    )


def tiny_config(tokenizer: Qwen2Tokenizer) -> Qwen2_5_VLConfig:
    """The tiny Qwen2.5-VL's config."""
    return Qwen2_5_VLConfig(
        text_config=_qwen_text_config(tokenizer),
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [1],
            "window_size": 56,
        },
        **_qwen_vision_token_ids(tokenizer),
    )


def _qwen_image_processor() -> Qwen2VLImageProcessorPil:
    return Qwen2VLImageProcessorPil(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS)


def build_tiny_qwen25vl(out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL checkpoint to ``out_dir`` and return its path.

    Args:
        out_dir: the folder to write (created; existing files are overwritten).
        seed: seeds the weights; the tokenizer is deterministic.

    Returns:
        ``Path(out_dir)``, loadable with ``load_model_and_processor``.
    """
    tokenizer = build_tokenizer()
    model = _random_model(tiny_config(tokenizer), seed)
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
    return _save(Path(out_dir), model, tokenizer, _qwen_image_processor())


def build_tiny_qwen2vl(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random Qwen2-VL: the Qwen2.5-VL tokenizer and image processor, the
    Qwen2-VL vision tower (no window attention, LayerNorm)."""
    tokenizer = build_tokenizer()
    config = Qwen2VLConfig(
        text_config=_qwen_text_config(tokenizer),
        vision_config={
            "depth": 2,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 2,
            "mlp_ratio": 2,
        },
        **_qwen_vision_token_ids(tokenizer),
    )
    return _save(Path(out_dir), _random_model(config, seed), tokenizer, _qwen_image_processor())


def build_tiny_qwen3vl(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random Qwen3-VL: its own tokenizer (the Qwen one, also trained on tool
    calls, with Qwen3's tool-response and thinking markers), Qwen3-VL's chat template
    (which supports tool calling: TRL's ``environment_factory`` takes it as it is), the
    Qwen3-VL vision tower (16 px patches, DeepStack) and image processor."""
    tokenizer = build_tokenizer(
        corpus=_corpus() + _tool_call_corpus() * 4,
        plain_added_tokens=QWEN3_PLAIN_ADDED_TOKENS,
        chat_template=_trl_chat_template("qwen3_vl"),
    )
    text = _qwen_text_config(tokenizer)
    # Qwen3-VL's interleaved M-RoPE over head_dim 16 (8 frequencies: time, height, width).
    text["head_dim"] = 16
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 5e6,
        "mrope_section": [2, 3, 3],
        "mrope_interleaved": True,
    }
    config = Qwen3VLConfig(
        text_config=text,
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [1],
        },
        **_qwen_vision_token_ids(tokenizer),
    )
    # 16 px patches merged 2x2: 32 px per visual token; the same 4..16 token budget.
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16, merge_size=2, min_pixels=32 * 32 * 4, max_pixels=32 * 32 * 16
    )
    return _save(Path(out_dir), _random_model(config, seed), tokenizer, image_processor)


# A small Qwen3-VL for learning from pixels on MiniWoB++'s 160x210 screen
# (scripts/generalisation_demo.py). Qwen3-VL because its vision tower adds learned
# absolute position embeddings (interpolated to the image's patch grid) to its patches:
# each visual token carries where it is, so "which token shows the target" becomes "which
# digits to write" through attention and an MLP. Qwen2.5-VL's tower has rotary positions
# only, which a model trained from scratch has to turn into absolute ones itself.
SMALL_TEXT_SIZES: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
}
SMALL_VISION_SIZES = {
    "depth": 3,
    "hidden_size": 96,
    "intermediate_size": 192,
    "num_heads": 3,
}
# MiniWoB++'s 160x210 screen at full resolution: 224x160 (7x5 visual tokens of 32 px).
SMALL_MAX_PIXELS = 32 * 32 * 35


def _miniwob_corpus() -> list[str]:
    """The generic formats' prompts and replies on MiniWoB++-like instructions, so that
    the small model's prompts tokenize into words (a short prompt is a fast step)."""
    instructions = [
        "Click button ONE.",
        'Click on the "Submit" button.',
        "Focus into the 2nd input textbox.",
        'Close the dialog box by clicking the "x".',
        'Enter "Karrie" into the text field and press Submit.',
        "Click on Tab #1.",
    ]
    texts = []
    for name in ("text", "coordinates", "json"):
        fmt = get_format(name)
        geometry = fmt.geometry(160, 210)
        for instruction in instructions:
            texts.append(fmt.task_prompt(instruction, geometry))
        texts.append(fmt.render(Action(ActionType.LEFT_CLICK, x=80, y=105), geometry))
    return (texts + instructions) * 8


def build_small_qwen3vl(
    out_dir: str | Path,
    *,
    seed: int = 0,
    text_sizes: dict | None = None,
    vision_sizes: dict | None = None,
    max_pixels: int = SMALL_MAX_PIXELS,
) -> Path:
    """A small random Qwen3-VL (~1.6M parameters) that can learn to point from pixels.

    The tiny builders make models that load and run; this one is sized to learn (on
    one CPU thread, minutes): a 4-layer text model of width 128, a 3-layer vision tower
    of width 96 with 16 px patches and learned position embeddings, and an image
    processor that keeps a 160x210 screenshot at full resolution (224x160, 35 visual
    tokens). Its tokenizer also knows the generic formats' prompts (``text``,
    ``coordinates``), so a MiniWoB++ prompt is ~120 tokens.

    Args:
        out_dir: the folder to write (created; existing files are overwritten).
        seed: seeds the weights; the tokenizer is deterministic.
        text_sizes, vision_sizes: override :data:`SMALL_TEXT_SIZES`,
            :data:`SMALL_VISION_SIZES` (keys of the text / vision config).
        max_pixels: the image processor's (and so the format's) largest image.
    """
    tokenizer = build_tokenizer(
        corpus=_corpus() + _tool_call_corpus() * 4 + _miniwob_corpus(),
        plain_added_tokens=QWEN3_PLAIN_ADDED_TOKENS,
        chat_template=_trl_chat_template("qwen3_vl"),
    )
    text = _qwen_text_config(tokenizer) | SMALL_TEXT_SIZES | (text_sizes or {})
    # Interleaved M-RoPE: head_dim / 2 frequencies over (time, height, width).
    half = text["head_dim"] // 2
    spatial = half * 3 // 8
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 5e6,
        "mrope_section": [half - 2 * spatial, spatial, spatial],
        "mrope_interleaved": True,
    }
    vision = SMALL_VISION_SIZES | (vision_sizes or {})
    config = Qwen3VLConfig(
        text_config=text,
        vision_config={
            **vision,
            "out_hidden_size": text["hidden_size"],
            "patch_size": 16,
            "spatial_merge_size": 2,
            "num_position_embeddings": 256,  # a 16x16 grid, interpolated to the image's
            "deepstack_visual_indexes": [vision["depth"] - 2],
        },
        **_qwen_vision_token_ids(tokenizer),
    )
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16, merge_size=2, min_pixels=32 * 32 * 4, max_pixels=max_pixels
    )
    return _save(Path(out_dir), _random_model(config, seed), tokenizer, image_processor)


# ---- LLaVA 1.5 and LLaVA-NeXT -------------------------------------------------------------


def _llava_tokenizer(chat_template: str) -> TokenizersBackend:
    return _generic_tokenizer(
        bos="<s>", eos="</s>", pad="<unk>", extra_special=("<image>",), chat_template=chat_template
    )


def _llama_text_config(
    tokenizer: TokenizersBackend, *, bos: str = "<s>", eos: str = "</s>", pad: str = "<unk>"
) -> dict:
    return {
        "model_type": "llama",
        "vocab_size": len(tokenizer),
        **TEXT_SIZES,
        **_token_ids(tokenizer, bos_token_id=bos, eos_token_id=eos, pad_token_id=pad),
    }


def _clip_vision_config(image_size: int) -> dict:
    return {"model_type": "clip_vision_model", **VISION_SIZES, "image_size": image_size}


def _llava_processor(
    cls: type[ProcessorMixin], image_processor: object, tokenizer: TokenizersBackend
) -> ProcessorMixin:
    return cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=VISION_SIZES["patch_size"],
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's class token, dropped by "default"
        chat_template=tokenizer.chat_template,
    )


def build_tiny_llava(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random LLaVA-1.5: CLIP tower on a 28 px square (4 image tokens), Llama text."""
    tokenizer = _llava_tokenizer(LLAVA_CHAT_TEMPLATE)
    config = LlavaConfig(
        vision_config=_clip_vision_config(28),
        text_config=_llama_text_config(tokenizer),
        **_token_ids(tokenizer, image_token_index="<image>"),
        projector_hidden_act="gelu",
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    image_processor = LlavaImageProcessorPil(
        size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}
    )
    processor = _llava_processor(LlavaProcessor, image_processor, tokenizer)
    return _save(Path(out_dir), _random_model(config, seed), processor)


def build_tiny_llava_next(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random LLaVA-NeXT (1.6): CLIP tower on 28 px tiles, any-resolution grids
    up to 56x56, Llama text and the Llama-2 ``[INST]`` chat template."""
    tokenizer = _llava_tokenizer(_trl_chat_template("llava_next"))
    pinpoints = [[28, 56], [56, 28], [56, 56]]
    config = LlavaNextConfig(
        vision_config=_clip_vision_config(28),
        text_config=_llama_text_config(tokenizer),
        **_token_ids(tokenizer, image_token_index="<image>"),
        image_grid_pinpoints=pinpoints,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    image_processor = LlavaNextImageProcessorPil(
        size={"shortest_edge": 28},
        crop_size={"height": 28, "width": 28},
        image_grid_pinpoints=pinpoints,
    )
    processor = _llava_processor(LlavaNextProcessor, image_processor, tokenizer)
    return _save(Path(out_dir), _random_model(config, seed), processor)


# ---- Idefics3 and SmolVLM --------------------------------------------------------------


_IDEFICS3_TOKENS = ("<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>")


def _idefics3_like(
    config_cls: Callable[..., PretrainedConfig],
    image_processor_cls: type,
    processor_cls: type[ProcessorMixin],
    bos: str,
    chat_template: str,
    out_dir: str | Path,
    seed: int,
) -> Path:
    """Idefics3 and SmolVLM share the layout: a SigLIP-like tower, pixel shuffle by 2,
    a Llama text model; one 28 px image (no splitting) = 4 patches = 1 image token."""
    tokenizer = _generic_tokenizer(
        bos=bos,
        eos="<end_of_utterance>",
        pad="<|endoftext|>",
        extra_special=_IDEFICS3_TOKENS,
        chat_template=chat_template,
    )
    config = config_cls(
        vision_config={**VISION_SIZES, "image_size": 28},
        text_config=_llama_text_config(
            tokenizer, bos=bos, eos="<end_of_utterance>", pad="<|endoftext|>"
        ),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    image_processor = image_processor_cls(
        size={"longest_edge": 28}, max_image_size={"longest_edge": 28}, do_image_splitting=False
    )
    if "video_processor" in processor_cls.get_attributes():
        processor_cls = image_only_processor_class(processor_cls)  # SmolVLM
    processor = processor_cls(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_len=1,
        chat_template=chat_template,
    )
    return _save(Path(out_dir), _random_model(config, seed), processor)


def build_tiny_idefics3(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random Idefics3 (``User: ...<end_of_utterance>`` chat)."""
    return _idefics3_like(
        Idefics3Config,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
        "<|begin_of_text|>",
        _trl_chat_template("idefics3"),
        out_dir,
        seed,
    )


def build_tiny_smolvlm(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random SmolVLM (Idefics3's architecture, SmolLM's ``<|im_start|>``)."""
    return _idefics3_like(
        SmolVLMConfig,
        SmolVLMImageProcessorPil,
        SmolVLMProcessor,
        "<|im_start|>",
        _trl_chat_template("smolvlm"),
        out_dir,
        seed,
    )


# ---- PaliGemma and Gemma 3 ----------------------------------------------------------------


def _gemma_text_config(tokenizer: TokenizersBackend) -> dict:
    return {
        "vocab_size": len(tokenizer),
        **TEXT_SIZES,
        "head_dim": 16,
        **_token_ids(tokenizer, bos_token_id="<bos>", eos_token_id="<eos>", pad_token_id="<pad>"),
    }


def _siglip_vision_config(image_size: int) -> dict:
    return {"model_type": "siglip_vision_model", **VISION_SIZES, "image_size": image_size}


def build_tiny_paligemma(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random PaliGemma: SigLIP on a 28 px square (4 image tokens), Gemma text.

    PaliGemma checkpoints ship no chat template; this one neither, so it loads with
    :data:`uirl_agents.loading.pretrained.PLAIN_CHAT_TEMPLATE` like a real one.
    """
    tokenizer = _generic_tokenizer(
        bos="<bos>", eos="<eos>", pad="<pad>", extra_special=("<image>",), chat_template=None
    )
    image_processor = SiglipImageProcessorPil(size={"height": 28, "width": 28}, image_seq_length=4)
    # The processor adds PaliGemma's 1024 <locNNNN> and 128 <segNNN> tokens: size the
    # vocabulary after it.
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)
    config = PaliGemmaConfig(
        vision_config=_siglip_vision_config(28) | {"projection_dim": 32},
        text_config={"model_type": "gemma", **_gemma_text_config(processor.tokenizer)},
        image_token_index=processor.image_token_id,
        projection_dim=32,
    )
    return _save(Path(out_dir), _random_model(config, seed), processor)


def build_tiny_gemma3(out_dir: str | Path, *, seed: int = 0) -> Path:
    """A tiny random Gemma 3: SigLIP on a 56 px square pooled to 4 image tokens, Gemma 3
    text (sliding-window and global layers) and its ``<start_of_turn>`` chat template."""
    named = {
        "boi_token": "<start_of_image>",
        "eoi_token": "<end_of_image>",
        "image_token": "<image_soft_token>",
    }
    tokenizer = _generic_tokenizer(
        bos="<bos>",
        eos="<end_of_turn>",
        pad="<pad>",
        extra_special=("<eos>", "<start_of_turn>"),
        named_special=named,
        chat_template=_trl_chat_template("gemma3"),
    )
    text = _gemma_text_config(tokenizer) | _token_ids(tokenizer, eos_token_id="<end_of_turn>")
    config = Gemma3Config(
        vision_config=_siglip_vision_config(56),
        text_config=text
        | {"sliding_window": 16, "layer_types": ["sliding_attention", "full_attention"]},
        mm_tokens_per_image=4,
        **_token_ids(
            tokenizer,
            boi_token_index=named["boi_token"],
            eoi_token_index=named["eoi_token"],
            image_token_index=named["image_token"],
        ),
    )
    image_processor = Gemma3ImageProcessorPil(size={"height": 56, "width": 56})
    processor = Gemma3Processor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        image_seq_length=4,
        chat_template=tokenizer.chat_template,
    )
    return _save(Path(out_dir), _random_model(config, seed), processor)


FAMILIES: dict[str, Callable[..., Path]] = {
    "qwen2.5-vl": build_tiny_qwen25vl,
    "qwen2-vl": build_tiny_qwen2vl,
    "qwen3-vl": build_tiny_qwen3vl,
    "llava": build_tiny_llava,
    "llava-next": build_tiny_llava_next,
    "idefics3": build_tiny_idefics3,
    "smolvlm": build_tiny_smolvlm,
    "paligemma": build_tiny_paligemma,
    "gemma3": build_tiny_gemma3,
}


def build_tiny_model(family: str, out_dir: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random checkpoint of ``family`` (a key of :data:`FAMILIES`).

    Raises:
        ValueError: an unknown family.
    """
    if family not in FAMILIES:
        raise ValueError(f"Unknown family {family!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[family](out_dir, seed=seed)


def tiny_family(name: str) -> str | None:
    """The family a tiny-model name asks for: ``tiny`` -> ``qwen2.5-vl``,
    ``tiny-FAMILY`` -> ``FAMILY``; None for any other name (a checkpoint).

    >>> tiny_family("tiny"), tiny_family("tiny-llava"), tiny_family("/models/x")
    ('qwen2.5-vl', 'llava', None)
    """
    if name == "tiny":
        return "qwen2.5-vl"
    return name.removeprefix("tiny-") if name.startswith("tiny-") else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="folder to write the checkpoint to")
    parser.add_argument(
        "--family", default="qwen2.5-vl", choices=sorted(FAMILIES), help="the model family"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    build_tiny_model(args.family, args.out_dir, seed=args.seed)


if __name__ == "__main__":
    main()

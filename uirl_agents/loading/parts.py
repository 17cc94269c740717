"""A vision-language model's parts by module name: the ones outside its language model
(one list for every place that must tell them apart), and the language model's layers
a LoRA preset wraps.

- LoRA presets wrap only the language model (:func:`lora_target_modules`);
- quantization keeps everything else in float (:mod:`uirl_agents.loading.quantization`);
- full fine-tuning freezes the vision tower (``model.freeze_vision_tower``);
- FSDP keeps the vision tower's blocks in the root unit (:mod:`uirl_agents.trainers.sharding`).

Names as the model families transformers ships spell them: the vision encoder
(Qwen2-VL / Qwen2.5-VL ``visual``, LLaVA-style ``vision_tower``, Idefics / PaliGemma
``vision_model``), the projector between the two, the output head.

>>> bool(VISION_TOWER.search("model.visual.blocks.0.attn.qkv.weight"))
True
>>> bool(NOT_LANGUAGE.search("model.language_model.layers.0.self_attn.q_proj"))
False
"""

from __future__ import annotations

import re

import torch

VISION_PARTS = ("visual", "vision_tower", "vision_model")
PROJECTOR_PARTS = ("multi_modal_projector", "mm_projector", "connector")
HEAD_PARTS = ("lm_head",)


def part_pattern(parts: tuple[str, ...]) -> re.Pattern[str]:
    """Matches a module (or parameter) name that is one of ``parts`` or lies under one."""
    return re.compile(r"(^|\.)(" + "|".join(map(re.escape, parts)) + r")(\.|$)")


# The vision encoder, or a module or parameter under it.
VISION_TOWER = part_pattern(VISION_PARTS)
# Not the language model: the vision encoder, the projector, the head.
NOT_LANGUAGE = part_pattern(VISION_PARTS + PROJECTOR_PARTS + HEAD_PARTS)

# LoRA presets: kinds of linear layers of the language model, by their last name part.
ATTENTION = frozenset({"q_proj", "k_proj", "v_proj", "o_proj"})
MLP = frozenset({"gate_proj", "up_proj", "down_proj", "fc1", "fc2"})
PRESET_KINDS: dict[str, frozenset[str] | None] = {
    "attention": ATTENTION,
    "mlp": MLP,
    "attention+mlp": ATTENTION | MLP,
    "all-linear": None,  # every linear layer of the language model
}


def lora_target_modules(
    model: torch.nn.Module, preset: str, custom: str | None = None
) -> list[str] | str:
    """The modules LoRA wraps in ``model`` for ``preset``.

    A preset names *kinds* of layers of the language model; the module names differ per
    family (Qwen2.5-VL ``model.language_model.layers.N.self_attn.q_proj``, LLaVA
    ``model.language_model.layers...``, Idefics3 ``model.text_model.layers...``), so a
    preset is resolved by walking the model: every ``nn.Linear`` outside the vision
    encoder, the multimodal projector and the output head, whose last name part is of the
    preset's kind. The result is the exact list of module names handed to peft.

    Args:
        model: the base model (before peft).
        preset: a key of :data:`PRESET_KINDS`, or ``custom``.
        custom: with ``custom``, a regex (peft fullmatch) or a comma-separated list of
            module names, passed to peft as given.

    Returns:
        The sorted module names (a preset), or ``custom`` as peft takes it.

    Raises:
        ValueError: an unknown preset, ``custom`` without modules, or a preset that
            matches no module of this model.
    """
    if preset == "custom":
        if not custom:
            raise ValueError(
                "model.lora_preset: custom needs model.lora_target_modules (a regex or a "
                "comma-separated list of module names)"
            )
        return [m.strip() for m in custom.split(",")] if "," in custom else custom
    if preset not in PRESET_KINDS:
        raise ValueError(
            f"model.lora_preset: unknown {preset!r}; allowed: {[*PRESET_KINDS, 'custom']}"
        )
    kinds = PRESET_KINDS[preset]
    names = sorted(
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear)
        and not NOT_LANGUAGE.search(name)
        and (kinds is None or name.rsplit(".", 1)[-1] in kinds)
    )
    if not names:
        raise ValueError(
            f"model.lora_preset: {preset!r} matches no linear layer of the language model of "
            f"{type(model).__name__}; name the modules with lora_preset: custom and "
            "lora_target_modules"
        )
    return names

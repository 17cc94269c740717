"""The parts of a vision-language model outside its language model, by module name: one
list for every place that must tell them apart.

- LoRA presets wrap only the language model (:mod:`uirl_agents.trainers.lora`);
- quantization keeps everything else in float (:mod:`uirl_agents.quantization`);
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

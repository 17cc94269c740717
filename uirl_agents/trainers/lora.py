"""Which modules LoRA wraps: presets resolved against the model's own module names.

A preset names *kinds* of layers of the language model; the module names differ per
family (Qwen2.5-VL ``model.language_model.layers.N.self_attn.q_proj``, LLaVA
``model.language_model.layers...``, Idefics3 ``model.text_model.layers...``), so a
preset is resolved by walking the model: every ``nn.Linear`` outside the vision
encoder, the multimodal projector and the output head, whose last name part is of the
preset's kind. The result is the exact list of module names handed to peft.
"""

from __future__ import annotations

import torch

from uirl_agents.model_parts import NOT_LANGUAGE

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

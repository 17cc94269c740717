"""The policy model a trainer trains: base + LoRA (QLoRA on a quantized base) or all
weights, float32 master weights, the reference policy for the KL.

- :func:`resolve_model_path`: the checkpoint to load (``tiny``: built into the run folder);
- :func:`build_model`: the trainable model, restored from a trainer checkpoint;
- :func:`needs_autocast`: whether forward passes autocast over float32 master weights;
- :func:`reference_policy`: forward passes inside run the starting policy, frozen.

Which modules LoRA wraps: :mod:`~uirl_agents.loading.parts`; what is quantized:
:mod:`uirl_agents.loading.quantization`; both split the model by :mod:`uirl_agents.loading.parts`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator

from uirl_agents.loading.parts import VISION_TOWER, lora_target_modules
from uirl_agents.loading.pretrained import load_model, resolve_dtype
from uirl_agents.loading.quantization import quantization_mode, use_plain_cpu_layout
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers.config import TINY_MODEL, TINY_MODEL_DIR, ModelConfig

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

REFERENCE_ADAPTER = "reference"


def resolve_model_path(cfg: ModelConfig, output_dir: Path, accelerator: Accelerator) -> str:
    """The checkpoint to load; ``tiny`` builds the tiny Qwen2.5-VL (main process, once)."""
    if cfg.name != TINY_MODEL:
        return cfg.name
    path = output_dir / TINY_MODEL_DIR
    if accelerator.is_main_process and not (path / "config.json").exists():
        from uirl_agents.testing.tiny_model import build_tiny_qwen25vl

        build_tiny_qwen25vl(path)
    accelerator.wait_for_everyone()
    return str(path)


def compute_dtype(cfg: ModelConfig, device: torch.device) -> torch.dtype:
    """The dtype forward passes run in (``model.dtype``, auto: bf16 on GPU, fp32 on CPU)."""
    return resolve_dtype(cfg.dtype, device)


def build_model(
    cfg: ModelConfig,
    model_path: str,
    device: torch.device,
    checkpoint: Path | None = None,
    reference_adapter: str | Path | None = None,
) -> PreTrainedModel | PeftModel:
    """The trainable policy model: base + LoRA (or all weights), restored from a checkpoint.

    Args:
        cfg: the model section.
        model_path: the base checkpoint.
        device: where the weights go.
        checkpoint: a trainer checkpoint to restore the adapter (or full weights) from.
        reference_adapter: an adapter loaded frozen as the ``reference`` adapter
            (:func:`reference_policy`); default: ``cfg.adapter_path``, the starting policy.

    Returns:
        A ``PeftModel`` with a trainable adapter (``lora_rank > 0``; on an 8/4-bit base
        with ``load_in_8bit`` / ``load_in_4bit``: QLoRA; every trainable weight float32,
        ``modules_to_save`` included: :func:`upcast_trainable`), else the model with every weight
        trainable (float32 master weights: mixed precision, and the vision tower frozen
        with ``freeze_vision_tower``); in eval mode.
    """
    dtype = compute_dtype(cfg, device)
    if cfg.lora_rank == 0:
        source = checkpoint / ckpt.MODEL_DIR if checkpoint is not None else model_path
        # AdamW on bf16 weights loses updates below bf16's resolution (1e-5 * 1 rounds
        # away): the weights stay float32 and forward passes autocast to `dtype`.
        model: PreTrainedModel | PeftModel = load_model(
            source, dtype=torch.float32, device=device, attn_implementation=cfg.attn_implementation
        )
        model.requires_grad_(True)
        if cfg.freeze_vision_tower:
            frozen = [p for n, p in model.named_parameters() if VISION_TOWER.search(n)]
            for p in frozen:
                p.requires_grad_(False)
            logger.info("vision tower frozen: %d parameters", sum(p.numel() for p in frozen))
    else:
        import peft

        quantization = quantization_mode(
            load_in_8bit=cfg.load_in_8bit, load_in_4bit=cfg.load_in_4bit
        )
        model = load_model(
            model_path,
            dtype=dtype,
            quantization=quantization,
            device=device,
            attn_implementation=cfg.attn_implementation,
        )
        if quantization is not None:
            # peft's QLoRA recipe: the quantized base frozen, the layers kept in float
            # (norms, embeddings, head) upcast to float32 for stable adapter gradients.
            model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
            use_plain_cpu_layout(model, training=True)
        adapter = checkpoint / ckpt.ADAPTER_DIR if checkpoint is not None else cfg.adapter_path
        reference_adapter = reference_adapter or cfg.adapter_path
        if adapter is not None:
            model = peft.PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
        else:
            targets = lora_target_modules(model, cfg.lora_preset, cfg.lora_target_modules)
            logger.info(
                "LoRA (%s): %s",
                cfg.lora_preset,
                f"{len(targets)} modules" if isinstance(targets, list) else targets,
            )
            lora = peft.LoraConfig(
                r=cfg.lora_rank,
                lora_alpha=cfg.lora_alpha,
                lora_dropout=cfg.lora_dropout,
                target_modules=targets,
                modules_to_save=list(cfg.lora_modules_to_save) or None,
                task_type="CAUSAL_LM",
            )
            model = peft.get_peft_model(model, lora)
        if reference_adapter is not None:
            model.load_adapter(str(reference_adapter), REFERENCE_ADAPTER, is_trainable=False)
            model.set_adapter("default")
        if upcast_trainable(model) and adapter is not None:
            # The saved float32 weights went into the bf16 copies first: load them again,
            # exactly (a resumed run continues bit-identical).
            peft.set_peft_model_state_dict(model, peft.utils.load_peft_weights(str(adapter)))
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.lora_rank > 0:
            # Frozen embeddings would leave checkpointed blocks without a grad path.
            model.enable_input_require_grads()
    return model.eval()


def trainable_parameters(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def upcast_trainable(model: torch.nn.Module) -> bool:
    """Make every trainable weight of ``model`` a float32 master weight; returns whether
    any was not.

    peft creates its ``modules_to_save`` copies (e.g. ``lm_head``) in the base model's
    dtype: AdamW on bf16 weights rounds most small updates away (at lr 1e-5, one step
    moved 15.5% of the tiny model's ``lm_head``). The LoRA matrices are float32 already
    (peft's ``autocast_adapter_dtype``). Forward passes then run under autocast
    (:func:`needs_autocast`).
    """
    low = [p for p in trainable_parameters(model) if p.dtype != torch.float32]
    for p in low:
        p.data = p.data.float()
    return bool(low)


def needs_autocast(cfg: ModelConfig, compute_dtype: torch.dtype) -> bool:
    """Whether forward passes need ``torch.autocast`` to ``compute_dtype``: float32
    master weights next to a lower compute dtype (full fine-tuning, or the modules LoRA
    trains in full; a quantized base has its own float32 layers, as before)."""
    if compute_dtype == torch.float32:
        return False
    if cfg.lora_rank == 0:
        return True
    quantized = cfg.load_in_8bit or cfg.load_in_4bit
    return bool(cfg.lora_modules_to_save) and not quantized


@contextlib.contextmanager
def reference_policy(model: torch.nn.Module) -> Iterator[None]:
    """Forward passes inside run the reference policy (the starting policy, frozen).

    With a run that started from an adapter, that is the adapter as it was loaded
    (kept as a second, frozen peft adapter); else the base model (adapter disabled).

    Raises:
        TypeError: ``model`` has no LoRA adapter (the config asks for one with a KL term).
    """
    from peft import PeftModel

    if not isinstance(model, PeftModel):
        raise TypeError(f"the reference policy needs a LoRA model, got {type(model).__name__}")
    if REFERENCE_ADAPTER in model.peft_config:
        model.set_adapter(REFERENCE_ADAPTER, inference_mode=True)
        try:
            yield
        finally:
            model.set_adapter("default")  # trainable again (peft toggles requires_grad)
    else:
        with model.disable_adapter():
            yield

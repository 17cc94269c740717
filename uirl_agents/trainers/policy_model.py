"""The policy model a run trains: base + LoRA (QLoRA on a quantized base) or all weights,
float32 master weights, the reference policy for the KL, its optimizer and learning-rate
schedule.

- :func:`resolve_model_path`: the checkpoint to load (``tiny``: built into the run folder);
- :func:`build_model`: the trainable model (:func:`full_weights_model` or
  :func:`lora_model`), restored from a trainer checkpoint;
- :func:`load_policy_model`: all a run loads of it (:class:`PolicyModel`: the model, PPO's
  value head, sharding, the trainable parameters, processor and format);
- :func:`optimizer_and_schedule`: AdamW and the learning-rate schedule over iterations
  (:func:`iteration_scheduler`), restored when resumed;
- :func:`needs_autocast`: whether forward passes autocast over float32 master weights;
- :func:`reference_policy`: forward passes inside run the starting policy, frozen.

Which modules LoRA wraps: :mod:`~uirl_agents.loading.parts`; what is quantized:
:mod:`uirl_agents.loading.quantization`; both split the model by :mod:`uirl_agents.loading.parts`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.optim.lr_scheduler import LambdaLR
from transformers.processing_utils import ProcessorMixin

from uirl_agents.formats import ModelFormat, get_format
from uirl_agents.loading.parts import VISION_TOWER, lora_target_modules
from uirl_agents.loading.pretrained import load_model, load_processor, resolve_dtype
from uirl_agents.loading.quantization import quantization_mode, use_plain_cpu_layout
from uirl_agents.policies.hf import (
    HFPolicy,
    HFPolicyConfig,
    VisionLanguageModel,
    format_config_from_processor,
)
from uirl_agents.trainers import checkpoint as ckpt
from uirl_agents.trainers import sharding
from uirl_agents.trainers.config import (
    TINY_MODEL,
    TINY_MODEL_DIR,
    EvalConfig,
    ModelConfig,
    RolloutConfig,
    TrainConfig,
)
from uirl_agents.trainers.value import VALUE_HEAD_CHECKPOINT, ValueHead

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

REFERENCE_ADAPTER = "reference"
REFERENCE_ADAPTER_DIR = "reference_adapter"  # the starting adapter, kept in the run folder


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
    model: PreTrainedModel | PeftModel
    if cfg.lora_rank == 0:
        source = checkpoint / ckpt.MODEL_DIR if checkpoint is not None else model_path
        model = full_weights_model(cfg, source, device)
    else:
        adapter = checkpoint / ckpt.ADAPTER_DIR if checkpoint is not None else cfg.adapter_path
        model = lora_model(cfg, model_path, device, adapter, reference_adapter or cfg.adapter_path)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.lora_rank > 0:
            # Frozen embeddings would leave checkpointed blocks without a grad path.
            model.enable_input_require_grads()
    return model.eval()


def full_weights_model(
    cfg: ModelConfig, source: str | Path, device: torch.device
) -> PreTrainedModel | PeftModel:
    """Every weight trainable, in float32 (the vision tower frozen with
    ``freeze_vision_tower``): ``source`` is the base checkpoint or a trainer checkpoint's
    full weights."""
    # AdamW on bf16 weights loses updates below bf16's resolution (1e-5 * 1 rounds
    # away): the weights stay float32 and forward passes autocast to the compute dtype.
    model = load_model(
        source, dtype=torch.float32, device=device, attn_implementation=cfg.attn_implementation
    )
    model.requires_grad_(True)
    if cfg.freeze_vision_tower:
        frozen = [p for n, p in model.named_parameters() if VISION_TOWER.search(n)]
        for p in frozen:
            p.requires_grad_(False)
        logger.info("vision tower frozen: %d parameters", sum(p.numel() for p in frozen))
    return model


def lora_model(
    cfg: ModelConfig,
    model_path: str,
    device: torch.device,
    adapter: str | Path | None,
    reference_adapter: str | Path | None,
) -> PeftModel:
    """The base in the compute dtype (8/4-bit with ``load_in_8bit`` / ``load_in_4bit``:
    QLoRA), frozen, under a trainable adapter: ``adapter`` (a start or a checkpoint's)
    or a fresh one of ``cfg``'s preset; ``reference_adapter`` frozen beside it."""
    import peft

    quantization = quantization_mode(load_in_8bit=cfg.load_in_8bit, load_in_4bit=cfg.load_in_4bit)
    model = load_model(
        model_path,
        dtype=compute_dtype(cfg, device),
        quantization=quantization,
        device=device,
        attn_implementation=cfg.attn_implementation,
    )
    if quantization is not None:
        # peft's QLoRA recipe: the quantized base frozen, the layers kept in float
        # (norms, embeddings, head) upcast to float32 for stable adapter gradients.
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        use_plain_cpu_layout(model, training=True)
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
    return model


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


# ---- the learning-rate schedule over iterations -------------------------------------

SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")


def lr_multiplier(
    schedule: str, iteration: int, *, warmup_iterations: int, iterations: int
) -> float:
    """The fraction of the learning rate iteration ``iteration`` (from 0) runs at.

    Warm-up: the first ``W = optim.warmup_iterations`` iterations run at ``(i + 1) /
    (W + 1)`` of the rate, rising linearly; none at 0. transformers' ``get_scheduler``
    warms up over optimizer steps from a rate of 0, which per iteration means a whole
    first iteration at rate 0 (its AdamW moments advance, the weights do not move).
    After the warm-up, the schedules are transformers' (``linear``: down to 0 over the
    remaining iterations, ``cosine``: half a cosine, the ``constant`` ones: flat),
    unchanged.

    >>> [round(lr_multiplier("linear", i, warmup_iterations=2, iterations=5), 3) for i in range(5)]
    [0.333, 0.667, 1.0, 0.667, 0.333]

    Raises:
        ValueError: an unknown ``schedule``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"optim.lr_scheduler: unknown {schedule!r}; allowed: {list(SCHEDULES)}")
    if iteration < warmup_iterations:
        return (iteration + 1) / (warmup_iterations + 1)
    if schedule in ("constant", "constant_with_warmup"):
        return 1.0
    progress = (iteration - warmup_iterations) / max(1, iterations - warmup_iterations)
    if schedule == "linear":
        return max(0.0, 1.0 - progress)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def iteration_scheduler(
    optimizer: torch.optim.Optimizer, schedule: str, *, warmup_iterations: int, iterations: int
) -> LambdaLR:
    """A scheduler for :func:`lr_multiplier`, to step once per iteration (a ``LambdaLR``
    like transformers' schedulers: checkpoints of either load into the other)."""
    multiplier = functools.partial(
        lr_multiplier, schedule, warmup_iterations=warmup_iterations, iterations=iterations
    )
    return LambdaLR(optimizer, multiplier)


# ---- a run's policy model, loaded ----------------------------------------------------


@dataclasses.dataclass
class PolicyModel:
    """What a run trains, loaded on this process.

    Attributes:
        model: the policy model (``PeftModel`` with LoRA; sharded with FSDP).
        value_head: PPO's :class:`~uirl_agents.trainers.value.ValueHead` (None otherwise).
        processor, format: the model's processor and prompt format.
        compute_dtype: the dtype of forward passes (:func:`needs_autocast`).
        sharded: FSDP holds the model (:mod:`~uirl_agents.trainers.sharding`).
        trainable: the trainable parameters (the adapter or the unfrozen weights, and the
            value head's), as the optimizer gets them.
    """

    model: VisionLanguageModel
    value_head: ValueHead | None
    processor: ProcessorMixin
    format: ModelFormat
    compute_dtype: torch.dtype
    sharded: bool
    trainable: list[torch.nn.Parameter]


def load_policy_model(
    config: TrainConfig,
    model_path: str,
    device: torch.device,
    *,
    rank: int,
    resumed_from: Path | None,
    reference_adapter: Path | None,
) -> PolicyModel:
    """The policy model (restored from ``resumed_from``), PPO's value head, sharded with
    FSDP, their trainable parameters, the processor and the prompt format.

    Seeds: the model is built under ``config.seed`` on every process (so a fresh LoRA
    adapter starts equal everywhere), then each process samples with ``seed + rank``.
    """
    set_seed(config.seed)  # the same initial weights on every process
    model: VisionLanguageModel = build_model(
        config.model, model_path, device, resumed_from, reference_adapter=reference_adapter
    )
    value_head = (
        restored_value_head(model, device, resumed_from) if config.trains_value_head else None
    )
    set_seed(config.seed + rank)  # then a sampling stream of its own
    dtype = compute_dtype(config.model, device)
    if config.model.fsdp:
        units = sharding.shard_model(model, dtype)
        logger.info("FSDP: weights sharded, %d units", units)
    # After sharding: FSDP replaces the parameters with sharded ones.
    trainable = trainable_parameters(model)
    if value_head is not None:
        trainable += list(value_head.parameters())
    processor = load_processor(model_path)
    fmt = get_format(config.model.format, format_config_from_processor(processor))
    return PolicyModel(model, value_head, processor, fmt, dtype, config.model.fsdp, trainable)


def rollout_policies(
    policy: PolicyModel, rollout: RolloutConfig, evaluation: EvalConfig
) -> tuple[HFPolicy, HFPolicy]:
    """The in-process rollout policy (``rollout``'s sampling) and the evaluation policy
    (``eval.temperature``), both on the model being trained."""
    sampling = HFPolicyConfig(
        max_images=rollout.max_images,
        max_history=rollout.max_history,
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_new_tokens=rollout.max_new_tokens,
    )
    # Evaluation differs from rollouts only in how it samples.
    greedy = dataclasses.replace(
        sampling, do_sample=evaluation.temperature > 0, temperature=evaluation.temperature or 1.0
    )
    return (
        HFPolicy(policy.model, policy.processor, policy.format, sampling),
        HFPolicy(policy.model, policy.processor, policy.format, greedy),
    )


def restored_value_head(
    model: VisionLanguageModel, device: torch.device, checkpoint: Path | None
) -> ValueHead:
    """PPO's value head for ``model``, restored from ``checkpoint`` (fresh without one).

    Raises:
        ValueError: the checkpoint holds no value head.
    """
    head = ValueHead.for_model(model, device)
    if checkpoint is not None:
        saved = ckpt.load_extra(checkpoint, VALUE_HEAD_CHECKPOINT)
        if saved is None:
            raise ValueError(f"{checkpoint} holds no value head ({VALUE_HEAD_CHECKPOINT}.pt)")
        head.load_state_dict(saved)
    return head


def keep_reference_adapter(
    cfg: ModelConfig, output_dir: Path, accelerator: Accelerator
) -> Path | None:
    """The starting adapter, copied into the run folder: the KL reference, and still
    there when a resumed run needs it again (whatever happened to the original)."""
    if cfg.adapter_path is None or cfg.lora_rank == 0:
        return None
    kept = output_dir / REFERENCE_ADAPTER_DIR
    if accelerator.is_main_process and not kept.exists():
        shutil.copytree(cfg.adapter_path, kept.with_suffix(".tmp"), dirs_exist_ok=True)
        kept.with_suffix(".tmp").rename(kept)
    accelerator.wait_for_everyone()
    return kept


def optimizer_and_schedule(
    config: TrainConfig,
    policy: PolicyModel,
    *,
    resumed_from: Path | None,
    rank: int,
    world_size: int,
) -> tuple[torch.optim.Optimizer, LambdaLR]:
    """AdamW over the trainable parameters and its learning-rate schedule, with their
    state (and this process's random state) restored when resumed."""
    optim = config.optim
    if optim.learning_rate is None:
        raise ValueError("optim.learning_rate: unresolved (TrainConfig.__post_init__ sets it)")
    optimizer = torch.optim.AdamW(
        policy.trainable, lr=optim.learning_rate, weight_decay=optim.weight_decay
    )
    scheduler = iteration_scheduler(
        optimizer,
        optim.lr_scheduler,
        warmup_iterations=optim.warmup_iterations,
        iterations=config.iterations,
    )
    if resumed_from is not None:
        saved = ckpt.load_optimizer(resumed_from, scheduler)
        sharding.load_optimizer_state(policy.model, optimizer, saved)
        ckpt.load_rng(resumed_from, rank, world_size)
    return optimizer, scheduler

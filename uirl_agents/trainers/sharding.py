"""FSDP: the trained weights, their gradients and optimizer state split over processes.

Full fine-tuning of a 7B model does not fit one 80 GB GPU with AdamW: float32 weights,
gradients and two moments take 16 bytes a parameter (112 GB). With ``model.fsdp: true``
(or when launched with accelerate's FSDP config,
``scripts/configs/accelerate/fsdp.yaml``) each of N processes keeps 1/N of them:
PyTorch's FSDP2 (``fully_shard``) on every decoder layer of the language model, and on
the model as a whole for the rest (embeddings, vision tower, head). The trainers apply
it themselves, as they sum gradients themselves without DDP (see
:mod:`~uirl_agents.trainers.update`); accelerate only launches the processes.

A sharded layer gathers its weights inside every forward pass, a collective call:
every process must run the same forward passes in the same order. The update does
(:func:`~uirl_agents.trainers.update.run_update` pads a process short of
micro-batches with zero-weight ones). Rollouts and GRPO's scoring pass do not: each
process's episodes take their own number of model calls, of their own lengths. They
run inside :func:`gathered`: every layer unsharded at once (in the compute dtype: 2
bytes a parameter in bf16), so that forward passes need no collective, and sharded
again after. Peak memory is therefore the full weights in the compute dtype plus the
shards, not the shards alone; the optimizer state, the float32 master weights and the
gradients stay sharded throughout.

Gradients are summed over processes, not averaged (the loss is already divided by the
iteration's tokens over every process), as without FSDP.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any, cast

import torch

from uirl_agents.loading.parts import VISION_TOWER


def launched_with_fsdp() -> bool:
    """``accelerate launch`` with an FSDP config (it sets ``ACCELERATE_USE_FSDP``).

    Raises:
        ValueError: launched with DeepSpeed, or with FSDP options the trainers do not
            support (parameter offload to CPU).
    """
    if _env_flag("ACCELERATE_USE_DEEPSPEED"):
        raise ValueError(
            "DeepSpeed is not supported: the trainers sum gradients themselves and never "
            "hand the model to a DeepSpeed engine. To shard weights, gradients and "
            "optimizer state, launch with scripts/configs/accelerate/fsdp.yaml (FSDP2)"
        )
    if not _env_flag("ACCELERATE_USE_FSDP"):
        return False
    if _env_flag("FSDP_OFFLOAD_PARAMS"):
        raise ValueError(
            "fsdp_offload_params is not supported (rollouts gather the whole model on the "
            "device): set it to false in the accelerate config"
        )
    return True


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").strip().lower() in ("1", "true", "yes")


def shard_model(model: torch.nn.Module, compute_dtype: torch.dtype) -> int:
    """Shard ``model`` in place over the default process group; returns the number of
    sharded units (decoder layers + the root).

    Forward passes run in ``compute_dtype`` (gathered weights are cast to it); the
    stored shards keep their own dtype (float32 master weights for full fine-tuning and
    for LoRA adapters); gradients are reduced in float32.
    """
    from peft import PeftModel
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    root = model.get_base_model() if isinstance(model, PeftModel) else model
    layer_classes = set(getattr(root, "_no_split_modules", None) or ())
    if not layer_classes:
        raise ValueError(
            f"{type(root).__name__} names no decoder layer class (_no_split_modules): "
            "FSDP does not know what to shard it by"
        )
    policy = MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)
    # The vision tower's blocks stay in the root unit, so that a text-only forward pass
    # gathers the same units as one with images.
    layers = [
        module
        for name, module in root.named_modules()
        if type(module).__name__ in layer_classes and not VISION_TOWER.search(name)
    ]
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(root, mp_policy=policy)
    for unit in _units(model):
        unit.set_gradient_divide_factor(1.0)  # sum over processes
        # Gloo has no pre-multiplied sum; NCCL does not need it either way.
        unit.set_force_sum_reduction_for_comms(True)
        # A step without images leaves the vision tower without gradients on one
        # process only: its shards still take part in the reduction, with zeros.
        unit.set_reduce_scatter_unused_params(True, recurse=False)
    return len(layers) + 1


def is_sharded(model: torch.nn.Module) -> bool:
    return any(True for _ in _units(model))


def _units(model: torch.nn.Module) -> Iterator[Any]:
    from torch.distributed.fsdp import FSDPModule

    return (m for m in model.modules() if isinstance(m, FSDPModule))


@contextlib.contextmanager
def gathered(model: torch.nn.Module) -> Iterator[None]:
    """Forward passes inside need no collective: every sharded unit holds its whole
    weights (every process enters and leaves together). No-op for an unsharded model."""
    units = list(_units(model))
    for unit in units:
        unit.unshard()
        unit.set_reshard_after_forward(False, recurse=False)
    try:
        yield
    finally:
        for unit in units:
            unit.set_reshard_after_forward(True, recurse=False)
            unit.reshard()


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """The whole value of a (possibly sharded) tensor: a collective for a sharded one."""
    from torch.distributed.tensor import DTensor

    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def saved_weights_state(model: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """What a checkpoint or a weight publish writes of a sharded model, whole, on the
    main process (CPU; empty on the others); every process calls it. None for an
    unsharded model (its own ``state_dict`` will do).

    A LoRA model writes its trained adapter only, so only the adapter is gathered
    (:func:`adapter_state`: ~0.3 GB for rank 64 on a 7B model, not the ~15 GB of the
    whole model); full fine-tuning writes, and gathers, the whole model
    (:func:`full_model_state`).
    """
    if not is_sharded(model):
        return None
    from peft import PeftModel

    if isinstance(model, PeftModel):
        return adapter_state(model)
    return full_model_state(model)


def adapter_state(model: Any, adapter_name: str = "default") -> dict[str, torch.Tensor]:
    """The tensors peft saves of ``adapter_name`` (its LoRA weights, its
    ``modules_to_save``), under the model's own state-dict names, each gathered whole
    one at a time (a collective) and kept on the main process's CPU.

    peft chooses them (``get_peft_model_state_dict``, as ``save_pretrained`` does),
    from the model's sharded tensors: nothing else is gathered.

    Raises:
        RuntimeError: peft returned a tensor that is not one of the model's (a copy:
            its name cannot be told).
    """
    import torch.distributed as dist
    from peft import get_peft_model_state_dict

    everything = model.state_dict(keep_vars=True)  # the sharded tensors, not copies
    chosen = get_peft_model_state_dict(model, state_dict=everything, adapter_name=adapter_name)
    wanted = {id(t) for t in chosen.values()}
    names = [name for name, t in everything.items() if id(t) in wanted]
    if len(names) != len(wanted):
        raise RuntimeError(
            f"peft's adapter state holds {len(wanted)} tensors, {len(names)} of them the "
            "model's own: cannot gather the adapter alone"
        )
    main = not dist.is_initialized() or dist.get_rank() == 0
    state = {}
    for name in names:  # the same order on every process: each is a collective
        tensor = whole(everything[name].detach())
        if main:
            state[name] = tensor.cpu()
    return state


def full_model_state(model: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """The whole model's state dict on the main process (CPU), for saving; every
    process calls it. None for an unsharded model (its own ``state_dict`` will do)."""
    if not is_sharded(model):
        return None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    # Whole tensors on CPU with these options (the annotation also allows sharded ones).
    return cast(dict[str, torch.Tensor], get_model_state_dict(model, options=options))


def optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's state dict to save (every process calls it). Sharded: the whole
    state, keyed by parameter name, on the main process (CPU)."""
    if not is_sharded(model):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(model, optimizer, options=options)


def load_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
) -> None:
    """Restore what :func:`optimizer_state` saved (sharded again when the model is).

    Raises:
        ValueError: the state was saved with FSDP and this run has none, or the reverse.
    """
    groups = state.get("param_groups", [])
    keyed_by_name = any(isinstance(p, str) for g in groups for p in g["params"])
    if keyed_by_name != is_sharded(model):
        saved, now = ("with", "without") if keyed_by_name else ("without", "with")
        raise ValueError(
            f"this checkpoint's optimizer state was saved {saved} FSDP and the run is "
            f"{now} it: resume with the launch it was saved with (model.fsdp)"
        )
    if not keyed_by_name:
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer, state, options=options)

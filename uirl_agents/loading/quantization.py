"""8-bit and 4-bit weights through bitsandbytes (the optional ``quant`` extra).

:func:`bnb_config` is what :func:`uirl_agents.loading.pretrained.load_model` hands transformers
for ``quantization="8bit"`` (LLM.int8) or ``"4bit"`` (NF4 with double quantization and
compute in the model's dtype, as in QLoRA). Only the language model is quantized: the
vision encoder, the projector and the output head keep the compute dtype, the same
split as the LoRA presets (:mod:`uirl_agents.loading.parts`), so that a QLoRA adapter
trains on top of exactly the layers that were quantized.

bitsandbytes (0.50, what the extra asks for) runs on CUDA and on CPU (slowly: tests and
smoke runs).

>>> quantization_mode(load_in_8bit=False, load_in_4bit=True)
'4bit'
>>> quantization_mode(load_in_8bit=False, load_in_4bit=False) is None
True
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the configs import this module without the ML stack
    import torch

Quantization = Literal["8bit", "4bit"]
QUANTIZATIONS: tuple[Quantization, ...] = ("8bit", "4bit")


class QuantizationUnavailableError(ImportError):
    """Quantized weights were asked for but bitsandbytes is not installed."""

    def __init__(self, mode: str) -> None:
        super().__init__(
            f"{mode} weights need bitsandbytes, which is not installed: "
            "pip install -e '.[quant]' (or pip install bitsandbytes)"
        )
        self.mode = mode


def quantization_mode(
    *, load_in_8bit: bool, load_in_4bit: bool, prefix: str = ""
) -> Quantization | None:
    """The one quantization the two flags ask for (None: full-precision weights).

    Args:
        load_in_8bit, load_in_4bit: the flags.
        prefix: where the flags live, for the error (``"model."``).

    Raises:
        ValueError: both flags are set.
    """
    if load_in_8bit and load_in_4bit:
        raise ValueError(
            f"{prefix}load_in_8bit and {prefix}load_in_4bit are both set: choose one (8bit: "
            "LLM.int8, closest to the original; 4bit: NF4, half of 8bit's memory, QLoRA)"
        )
    return "8bit" if load_in_8bit else "4bit" if load_in_4bit else None


def require_bitsandbytes(mode: str) -> None:
    """Raises :class:`QuantizationUnavailableError` when bitsandbytes is missing."""
    if importlib.util.find_spec("bitsandbytes") is None:
        raise QuantizationUnavailableError(mode)


def bnb_config(mode: Quantization, compute_dtype: torch.dtype):  # noqa: ANN201 (lazy import)
    """The ``BitsAndBytesConfig`` for ``mode``, language model only.

    Args:
        mode: ``"8bit"`` or ``"4bit"``.
        compute_dtype: what 4-bit matmuls dequantize to (the model's dtype).

    Raises:
        QuantizationUnavailableError: bitsandbytes is not installed.
        ValueError: an unknown mode.
    """
    from transformers import BitsAndBytesConfig

    from uirl_agents.loading.parts import NOT_LANGUAGE

    require_bitsandbytes(mode)
    # transformers matches a skip pattern from the start of a module name (up to a
    # dot); `.*?` lets the non-language pattern match at any depth.
    skip = [".*?" + NOT_LANGUAGE.pattern]
    if mode == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=skip)
    if mode == "4bit":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=compute_dtype,
            llm_int8_skip_modules=skip,
        )
    raise ValueError(f"quantization: expected one of {list(QUANTIZATIONS)}, got {mode!r}")


def use_plain_cpu_layout(model: torch.nn.Module, *, training: bool) -> int:
    """Keep 4-bit layers on CPU in bitsandbytes' plain layout; returns how many were set.

    bitsandbytes (0.50) repacks a 4-bit weight on its first no-grad CPU forward on a
    CPU with AVX512-BF16, for faster inference. That layout has no backward (a training
    step after a rollout fails with "a view of a leaf Variable ... in-place"), and it
    needs input widths that are multiples of the block size (64), which the tiny test
    model's are not. So a model that trains, and any layer too narrow, keep the plain
    layout.
    """
    import bitsandbytes as bnb

    kept = 0
    for module in model.modules():
        if not isinstance(module, bnb.nn.Linear4bit) or module.weight.device.type != "cpu":
            continue
        weight = module.weight
        assert isinstance(weight, bnb.nn.Params4bit)  # what Linear4bit holds
        blocksize = weight.quant_state.blocksize
        if training or module.in_features % blocksize:
            module.support_avx512bf16_for_cpu = False
            kept += 1
    return kept

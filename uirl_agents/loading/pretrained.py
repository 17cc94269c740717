"""Load any ``AutoModelForImageTextToText`` checkpoint and its processor, without torchvision.

transformers 5.x treats the video processor of Qwen2-VL-style processors as a required
part, and that video processor needs torchvision (which does not install cleanly next
to our torch). We never feed videos, so :func:`load_processor` builds the processor
from its image processor (PIL backend by default) and tokenizer only, through a
subclass of the model's own processor class that has no ``video_processor`` slot;
the processor's own settings (LLaVA's ``patch_size``, Idefics3's ``image_seq_len``,
Gemma 3's ``image_seq_length``, ...) come from its ``processor_config.json``.
A checkpoint without a chat template (PaliGemma) gets :data:`PLAIN_CHAT_TEMPLATE`.
Real checkpoints (Qwen2.5-VL, UI-TARS-1.5, LLaVA, Idefics3, PaliGemma, Gemma 3, ...)
and the tiny test models (:mod:`uirl_agents.testing.tiny_model`) load through the same
functions.

Dtypes: bf16 on GPU, fp32 on CPU (logprob tests compare in fp32).
"""

from __future__ import annotations

import inspect
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import (
    AutoConfig,
    AutoImageProcessor,
    AutoModelForImageTextToText,
    AutoTokenizer,
    PreTrainedModel,
)
from transformers.models.auto.processing_auto import (
    PROCESSOR_MAPPING_NAMES,
    processor_class_from_name,
)
from transformers.processing_utils import ProcessorMixin
from transformers.utils import cached_file

from uirl_agents.formats import infer_format
from uirl_agents.loading.quantization import Quantization, bnb_config, use_plain_cpu_layout

if TYPE_CHECKING:
    from peft import PeftModel

logger = logging.getLogger(__name__)

# Where transformers keeps a processor's chat template, newest convention first.
_CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")
# Processor config entries that are parts or bookkeeping, not processor settings.
_NOT_PROCESSOR_SETTINGS = frozenset(
    {"processor_class", "image_processor", "video_processor", "tokenizer", "chat_template"}
)
# For checkpoints that ship no chat template (PaliGemma: a prefix, then the answer).
# The images first (PaliGemma's processor puts <bos> after the last image token), then
# each turn as "role: text" lines; an assistant turn ends with the EOS token so that
# generation stops and SFT learns to stop. {image_token} is filled per processor.
PLAIN_CHAT_TEMPLATE = (
    "{%- for message in messages if message['content'] is not string -%}"
    "{%- for part in message['content'] if part['type'] == 'image' -%}{image_token}"
    "{%- endfor -%}{%- endfor -%}"
    "{%- for message in messages -%}{{ message['role'] + ': ' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] if part['type'] == 'text' -%}"
    "{{ part['text'] }}{%- endfor -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}{{ eos_token }}{%- endif -%}{{ '\\n' }}"
    "{%- endfor -%}{%- if add_generation_prompt -%}{{ 'assistant: ' }}{%- endif -%}"
)


# One subclass per processor class (a dict, not functools.cache: classes of a few
# processors do not type as hashable).
_IMAGE_ONLY_CLASSES: dict[type[ProcessorMixin], type[ProcessorMixin]] = {}


def image_only_processor_class(cls: type[ProcessorMixin]) -> type[ProcessorMixin]:
    """``cls`` without its video processor slot (the same class for the same ``cls``).

    ProcessorMixin derives the required parts from the ``__init__`` signature, so an
    ``__init__`` without ``video_processor`` makes the processor whole without one.
    """
    if cls in _IMAGE_ONLY_CLASSES:
        return _IMAGE_ONLY_CLASSES[cls]

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):  # noqa: ANN001
        # Some classes (SmolVLM) take video_processor positionally; ProcessorMixin drops
        # the None for want of a slot.
        cls.__init__(
            self,
            image_processor=image_processor,
            tokenizer=tokenizer,
            video_processor=None,
            chat_template=chat_template,
            **kwargs,
        )

    # The class's own signature less video_processor: saving and loading read the
    # processor's settings (image_seq_len, ...) from it.
    signature = inspect.signature(cls.__init__)
    vars(__init__)["__signature__"] = signature.replace(
        parameters=[p for name, p in signature.parameters.items() if name != "video_processor"]
    )
    doc = f"{cls.__name__} for images and text only (no video processor, no torchvision)."
    # A class's own apply_chat_template adds video defaults from its video processor
    # (SmolVLM reads video_processor.num_frames even for images); without one, the
    # generic rendering is the whole of it.
    namespace = {
        "__init__": __init__,
        "__doc__": doc,
        "apply_chat_template": ProcessorMixin.apply_chat_template,
    }
    # The parent's own name: a saved processor (processor_config.json's processor_class,
    # e.g. in a Hub upload) then loads with AutoProcessor anywhere.
    return _IMAGE_ONLY_CLASSES.setdefault(cls, type(cls.__name__, (cls,), namespace))


def _resolve_chat_template(name_or_path: str, tokenizer: Any) -> str | None:
    for filename in _CHAT_TEMPLATE_FILES:
        resolved = cached_file(name_or_path, filename, _raise_exceptions_for_missing_entries=False)
        if resolved is None:
            continue
        text = Path(resolved).read_text(encoding="utf-8")
        return json.loads(text)["chat_template"] if filename.endswith(".json") else text
    return tokenizer.chat_template


def _processor_settings(name_or_path: str, cls: type[ProcessorMixin]) -> dict[str, Any]:
    """The settings in the checkpoint's ``processor_config.json`` that ``cls`` takes."""
    resolved = cached_file(
        name_or_path, "processor_config.json", _raise_exceptions_for_missing_entries=False
    )
    if resolved is None:
        return {}
    saved = json.loads(Path(resolved).read_text(encoding="utf-8"))
    accepted = inspect.signature(cls.__init__).parameters
    return {k: v for k, v in saved.items() if k not in _NOT_PROCESSOR_SETTINGS and k in accepted}


def load_processor(
    name_or_path: str | Path, *, image_backend: str = "pil", trust_remote_code: bool = False
) -> ProcessorMixin:
    """The model's processor (image processor + tokenizer + chat template), no video part.

    Args:
        name_or_path: a local checkpoint folder or a Hub id (already in the cache
            when offline).
        image_backend: the image processor backend, "pil" (numpy, no torchvision) or
            "torchvision" when it is installed.
        trust_remote_code: passed to transformers.

    Returns:
        An instance of the model's processor class (e.g. ``Qwen2_5_VLProcessor``).

    Raises:
        ValueError: the model type has no processor class in transformers.
    """
    name_or_path = str(name_or_path)
    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    image_processor = AutoImageProcessor.from_pretrained(
        name_or_path, backend=image_backend, trust_remote_code=trust_remote_code
    )
    tokenizer = AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    class_name = PROCESSOR_MAPPING_NAMES.get(config.model_type)
    cls = processor_class_from_name(class_name) if class_name else None
    if cls is None:
        raise ValueError(
            f"Expected a model type with a transformers processor class, got "
            f"{config.model_type!r} ({name_or_path}); load a vision-language checkpoint such "
            f"as Qwen2.5-VL or UI-TARS-1.5"
        )
    settings = _processor_settings(name_or_path, cls)
    if "video_processor" in cls.get_attributes():
        cls = image_only_processor_class(cls)
    processor = cls(image_processor=image_processor, tokenizer=tokenizer, **settings)
    chat_template = _resolve_chat_template(name_or_path, tokenizer)
    if chat_template is None:
        image_token = getattr(processor, "image_token", None)
        if image_token is None:
            logger.warning("%s has no chat template; apply_chat_template will fail", name_or_path)
        else:
            logger.info("%s has no chat template; using the plain one", name_or_path)
            chat_template = PLAIN_CHAT_TEMPLATE.replace("{image_token}", image_token)
    processor.chat_template = chat_template
    return processor


def detect_format(name_or_path: str | Path, *, trust_remote_code: bool = False) -> str:
    """The format a checkpoint speaks, from its name and ``config.json``.

    ``"ui-tars"`` for a UI-TARS checkpoint (its name or config mentions UI-TARS),
    ``"qwen2.5-vl"`` for any other Qwen2-VL / Qwen2.5-VL model (the tiny test model
    included), the generic ``"text"`` for any other; see
    :func:`uirl_agents.formats.infer_format`.
    """
    name_or_path = str(name_or_path)
    config = AutoConfig.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    resolved = cached_file(name_or_path, "config.json", _raise_exceptions_for_missing_entries=False)
    config_text = Path(resolved).read_text(encoding="utf-8") if resolved else ""
    return infer_format(name_or_path, config.model_type, config_text)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on GPU (what the checkpoints ship in), fp32 on CPU (bf16 matmuls are slow there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """A dtype by name (``"bfloat16"``, ...), or with ``"auto"`` :func:`default_dtype`."""
    return default_dtype(device) if name == "auto" else getattr(torch, name)


def load_model(
    name_or_path: str | Path,
    *,
    adapter_path: str | Path | None = None,
    adapter_trainable: bool = False,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    attn_implementation: str | None = None,
    trust_remote_code: bool = False,
    quantization: Quantization | None = None,
) -> PreTrainedModel | PeftModel:
    """Load an ``AutoModelForImageTextToText`` checkpoint, optionally with a LoRA adapter.

    Args:
        name_or_path: a local checkpoint folder or a cached Hub id.
        adapter_path: a peft adapter folder to put on top (``PeftModel``).
        adapter_trainable: load the adapter weights trainable (training resumes).
        device: default: CUDA when available, else CPU.
        dtype: default: bf16 on GPU, fp32 on CPU.
        attn_implementation: e.g. "sdpa", "flash_attention_2"; default: transformers'.
        trust_remote_code: passed to transformers.
        quantization: ``"8bit"`` / ``"4bit"``: the language model's weights through
            bitsandbytes (:mod:`uirl_agents.loading.quantization`); None: all in ``dtype``.

    Returns:
        The model in eval mode on ``device`` (a ``PeftModel`` when ``adapter_path`` is set).

    Raises:
        QuantizationUnavailableError: ``quantization`` without bitsandbytes installed.
    """
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or default_dtype(device)
    kwargs: dict[str, Any] = {"dtype": dtype, "trust_remote_code": trust_remote_code}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    if quantization is not None:
        # bitsandbytes places the weights as it quantizes them; `.to` would refuse.
        kwargs |= {
            "quantization_config": bnb_config(quantization, dtype),
            "device_map": {"": device},
        }
        model = AutoModelForImageTextToText.from_pretrained(str(name_or_path), **kwargs)
        use_plain_cpu_layout(model, training=False)
    else:
        model = AutoModelForImageTextToText.from_pretrained(str(name_or_path), **kwargs)
        # In place. transformers wraps `to` in functools.wraps(Module.to), whose type drops self.
        model.to(device)  # type: ignore[arg-type]
    loaded: PreTrainedModel | PeftModel = model
    if adapter_path is not None:
        from peft import PeftModel  # only adapter users need peft

        loaded = PeftModel.from_pretrained(model, str(adapter_path), is_trainable=adapter_trainable)
    logger.info(
        "loaded %s%s on %s (%s%s, %.1fM params)",
        name_or_path,
        f" + adapter {adapter_path}" if adapter_path else "",
        device,
        dtype,
        f", language model in {quantization}" if quantization else "",
        sum(p.numel() for p in loaded.parameters()) / 1e6,
    )
    return loaded.eval()


def load_model_and_processor(
    name_or_path: str | Path,
    *,
    adapter_path: str | Path | None = None,
    image_backend: str = "pil",
    **model_kwargs: Any,
) -> tuple[PreTrainedModel | PeftModel, ProcessorMixin]:
    """:func:`load_model` and :func:`load_processor` for one checkpoint.

    ``model_kwargs`` go to :func:`load_model` (device, dtype, attn_implementation, ...).
    """
    processor = load_processor(
        name_or_path,
        image_backend=image_backend,
        trust_remote_code=model_kwargs.get("trust_remote_code", False),
    )
    model = load_model(name_or_path, adapter_path=adapter_path, **model_kwargs)
    return model, processor

"""Each image of an iteration through the vision tower once (issue 43, item 7).

The scoring pass, the reference pass and every epoch of the update feed the same
samples to the model, and a screenshot is in several samples' prompts (a group's first
step is every member's; with ``rollout.max_images: k`` a screenshot is in the prompts of
k steps). With a frozen vision tower its output depends on the pixels alone, so
:func:`cached_image_features` runs every distinct image (by content) through the tower
once, before the scoring pass, and the forward passes take those features in place of
the pixels (transformers' ``mm_encoder_outputs``; :func:`with_image_features`). The
language model still reads every prompt in full: only the tower's work is shared.

It is the same computation only where :func:`cache_unavailable` finds nothing against
it, and the passes encode the pixels as before otherwise:

- the family's forward takes precomputed features, one tensor per image, each
  independent of the other images of the batch (Qwen2-VL, Qwen2.5-VL);
- no weight of the vision tower trains (full fine-tuning with ``freeze_vision_tower:
  false``, a custom LoRA target inside it) and no adapter sits in it (the reference
  pass switches adapters): a trained tower's features would go stale after the first
  optimizer step;
- no dropout in the tower (the update's train mode would draw new masks).

Memory: the features stay on the device for the iteration, one ``(tokens, hidden)``
tensor in the compute dtype per distinct image (UI-TARS-1.5-7B at 1288x812: 1334 x
3584 in bf16, 9.6 MB an image).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from uirl_agents.loading.parts import VISION_TOWER
from uirl_agents.policies.hf import VisionLanguageModel, encode_prompts
from uirl_agents.trainers import sharding
from uirl_agents.trainers.losses import token_budget_batches

if TYPE_CHECKING:
    from uirl_agents.trainers.run import TrainingRun
    from uirl_agents.trainers.update import TokenSample

logger = logging.getLogger(__name__)

# Families whose image features are one tensor per image, computed per image (the
# tower's attention stays within an image), and whose forward takes them in place of
# the pixels (mm_encoder_outputs, transformers 5).
PER_IMAGE_FEATURES = frozenset({"qwen2_vl", "qwen2_5_vl"})
# One image alone, to encode its pixels exactly as a prompt holding it would.
_IMAGE_PROMPT = [{"role": "user", "content": [{"type": "image"}]}]


def cache_unavailable(model: VisionLanguageModel) -> str | None:
    """Why the image features of ``model`` cannot be computed once and reused (None:
    they can)."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    model_type = base.config.model_type
    if model_type not in PER_IMAGE_FEATURES:
        return f"{model_type}: not a family with per-image features ({sorted(PER_IMAGE_FEATURES)})"
    if "mm_encoder_outputs" not in inspect.signature(base.forward).parameters:
        return "this transformers version's forward takes no precomputed image features"
    tower = [(n, m) for n, m in base.named_modules() if VISION_TOWER.search(n)]
    if any(p.requires_grad for _, m in tower for p in m.parameters(recurse=False)):
        return "the vision tower trains"
    if any(isinstance(m, BaseTunerLayer) for _, m in tower):
        return "an adapter sits in the vision tower"
    dropout = [n for n, m in tower if isinstance(m, torch.nn.Dropout) and m.p > 0]
    if dropout or any(getattr(m, "attention_dropout", 0.0) for _, m in tower):
        return "the vision tower has dropout"
    return None


def image_key(image: np.ndarray) -> bytes:
    """An image's identity by content (shape, dtype, pixels)."""
    data = np.ascontiguousarray(image)
    # sha256: hashlib's fastest where the CPU has SHA instructions (~5 ms a screenshot).
    digest = hashlib.sha256(f"{data.shape}{data.dtype}".encode())
    digest.update(data.data)
    return digest.digest()


@contextlib.contextmanager
def cached_image_features(
    run: TrainingRun, samples: Sequence[TokenSample], *, micro_batch_tokens: int
) -> Iterator[None]:
    """Inside, every sample of ``samples`` holds its images' features
    (``TokenSample.image_features``, shared between samples holding the same image),
    which :func:`~uirl_agents.trainers.forward.sample_logprobs` passes in place of the
    pixels; they are dropped on the way out.

    Nothing is computed with ``optim.cache_image_features: false`` or where
    :func:`cache_unavailable` says why not (the passes encode pixels, as before).
    Every process calls it (with FSDP the tower runs on the gathered weights: a
    collective, with or without images on this process).
    """
    reason = (
        cache_unavailable(run.model)
        if run.config.optim.cache_image_features
        else "optim.cache_image_features is false"
    )
    if reason is not None:
        logger.debug("image features encoded in every pass: %s", reason)
        yield
        return
    keys: dict[int, bytes] = {}  # id(image) -> key: each array hashed once
    distinct: dict[bytes, np.ndarray] = {}
    for sample in samples:
        for image in sample.images:
            if id(image) not in keys:
                keys[id(image)] = key = image_key(image)
                distinct.setdefault(key, image)
    features = _encoded(run, distinct, micro_batch_tokens)
    for sample in samples:
        sample.image_features = [features[keys[id(image)]] for image in sample.images]
    try:
        yield
    finally:
        for sample in samples:
            sample.image_features = None


def _encoded(
    run: TrainingRun, images: dict[bytes, np.ndarray], micro_batch_tokens: int
) -> dict[bytes, torch.Tensor]:
    """Each image's features (no gradient), images batched by about ``micro_batch_tokens``
    image tokens a tower call."""
    if run.sharded and run.sum_all(len(images)) == 0:
        return {}  # no process has an image: no gathering for nothing
    model = run.model
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    image_processor = run.processor.image_processor
    side = int(getattr(image_processor, "patch_size", 14)) * int(
        getattr(image_processor, "merge_size", 2)
    )

    def tokens(item: tuple[bytes, np.ndarray]) -> int:  # about what the processor makes of it
        height, width = item[1].shape[:2]
        return math.ceil(height / side) * math.ceil(width / side)

    device = next(model.parameters()).device
    features: dict[bytes, torch.Tensor] = {}
    with torch.no_grad(), sharding.gathered(model), run.autocast():
        for chunk in token_budget_batches(list(images.items()), tokens, micro_batch_tokens):
            inputs = encode_prompts(
                run.processor, [_IMAGE_PROMPT] * len(chunk), [[image] for _, image in chunk]
            )
            out = base.get_image_features(
                inputs["pixel_values"].to(device), inputs["image_grid_thw"].to(device)
            )
            for (key, _), feature in zip(chunk, out.pooler_output, strict=True):
                features[key] = feature
    logger.debug("image features: %d distinct images encoded once", len(features))
    return features


def with_image_features(
    model_inputs: dict[str, Any], image_features: Sequence[Sequence[torch.Tensor]] | None
) -> dict[str, Any]:
    """``model_inputs`` with the images' features (per sample, one tensor per image, in
    placeholder order) in place of their pixels; unchanged without either."""
    if image_features is None or "pixel_values" not in model_inputs:
        return model_inputs
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    # The families of PER_IMAGE_FEATURES read a tuple of per-image tensors here (what
    # their get_image_features returns), where the annotation says one tensor.
    flat: Any = tuple(feature for sample in image_features for feature in sample)
    inputs = {k: v for k, v in model_inputs.items() if k != "pixel_values"}
    inputs["mm_encoder_outputs"] = {"image": BaseModelOutputWithPooling(pooler_output=flat)}
    return inputs

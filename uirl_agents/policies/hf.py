"""HFPolicy: a local transformers VLM as a batched policy (sampling only; the trainers'
forward pass is :func:`uirl_agents.trainers.forward.completion_logprobs`).

One :meth:`HFPolicy.act` call runs one ``generate`` over all sub-envs in the batch
(prompts left-padded). Per sub-env the policy keeps the episode's instruction, its
latest ``max_images`` screenshots and its earlier outputs; the prompt is built by the
:class:`~uirl_agents.formats.ModelFormat` (history as assistant turns, the latest
screenshots as images).

Images: each screenshot is resized by the format (:meth:`ModelFormat.prepare_image`,
the model's own smart-resize size) before it reaches the processor, whose resize is
then a no-op (checked at construction). ``PolicyStep.images`` holds exactly these
resized uint8 arrays, so ``(messages, images)`` reproduce the prompt bit for bit and
the model's coordinates are pixels of those images.

Logprob convention: ``PolicyStep.logprobs[t] = log_softmax(logits_t / T)[token_t]``
with ``T`` the sampling temperature (``T = 1`` for greedy decoding), from the raw
logits (``output_logits``), before top-k/top-p truncation: the same quantity TRL's
GRPO computes, and what :func:`~uirl_agents.trainers.forward.completion_logprobs`
recomputes with one forward pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BatchFeature, GenerationConfig
from transformers.processing_utils import ProcessorMixin

from uirl_agents.formats import FormatConfig, ModelFormat, get_format
from uirl_agents.formats.base import Message, text_part
from uirl_agents.loading.pretrained import detect_format, load_model_and_processor
from uirl_agents.policies.base import PolicyStep
from uirl_agents.policies.context import EpisodeContexts

logger = logging.getLogger(__name__)

# A vision-language model the policy samples from and the trainers train: any
# AutoModelForImageTextToText, peft-wrapped or not. No one class types them all: a
# PeftModel is no PreTrainedModel, and PreTrainedModel has no ``generate`` of its own
# (transformers 5 mixes GenerationMixin into each model class).
VisionLanguageModel = Any


@dataclass
class HFPolicyConfig:
    """How :class:`HFPolicy` builds prompts and samples."""

    # Context
    max_images: int = 1
    """Screenshots in the prompt: the latest ones, the current one included."""
    max_history: int | None = None
    """Earlier outputs kept as assistant turns (the latest ones); None keeps all."""

    # Sampling
    do_sample: bool = True
    """Sample; False decodes greedily (logprobs then use T = 1)."""
    temperature: float = 1.0
    """Softmax temperature for sampling and for the recorded logprobs."""
    top_p: float = 1.0
    """Nucleus sampling mass (1.0: off). Does not change the recorded logprobs."""
    top_k: int = 0
    """Sample among the k most likely tokens (0: off). Does not change the logprobs."""
    max_new_tokens: int = 256
    """Longest completion; longer ones are cut (and usually fail to parse)."""

    def __post_init__(self) -> None:
        # max_images / max_history are checked by EpisodeContexts.
        if self.do_sample and self.temperature <= 0:
            raise ValueError(
                f"temperature: expected > 0 when sampling, got {self.temperature}; "
                "set do_sample=False for greedy decoding"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: expected 0 < top_p <= 1, got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: expected >= 1, got {self.max_new_tokens}")

    @property
    def logprob_temperature(self) -> float:
        """The temperature the recorded logprobs are computed with."""
        return self.temperature if self.do_sample else 1.0


# Config fields that name a token the processor expands into (or wraps around) image
# features, across the families transformers ships (Qwen2-VL..Qwen3-VL, LLaVA,
# Idefics3, PaliGemma, Gemma 3).
VISION_TOKEN_FIELDS = (
    "image_token_id",
    "video_token_id",
    "vision_start_token_id",
    "vision_end_token_id",
    "boi_token_id",
    "eoi_token_id",
)
# Vision special tokens some families have besides those (Qwen's unused <|vision_pad|>,
# Idefics3's image wrappers).
VISION_TOKENS = (
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<fake_token_around_image>",
    "<global-img>",
)


# A logit bias that blocks a token on an OpenAI-compatible server (vLLM clamps biases to
# +-100, as OpenAI does): its probability drops by e^-100.
BLOCKED_LOGIT_BIAS = -100.0


def vision_token_ids(model_config: object, tokenizer: Any = None) -> frozenset[int]:
    """The vision special tokens: ids a processor expands into image slots or wraps
    around them. A model must never generate one: fed back, the processor counts it as
    an image slot without an image (TRL then drops ``pixel_values`` for the batch, or
    stops with a mismatch). :class:`HFPolicy` suppresses them in ``generate``, the vLLM
    rollouts bias them away, and the trainers leave out a step that holds one.

    Args:
        model_config: the model's config (its ``image_token_id``-style fields), or None.
        tokenizer: when given, also the ids of :data:`VISION_TOKENS` in its vocabulary.
    """
    ids = {getattr(model_config, name, None) for name in VISION_TOKEN_FIELDS}
    if tokenizer is not None:
        vocab = tokenizer.get_vocab()
        ids |= {vocab.get(token) for token in VISION_TOKENS}
    return frozenset(i for i in ids if isinstance(i, int) and i >= 0)


def _to_pil(image: np.ndarray) -> Image.Image:
    return Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8))


def with_content_parts(message: Message) -> Message:
    """``message`` with a string ``content`` as one text part.

    Formats write system and assistant turns as strings; several families' chat
    templates (LLaVA, Idefics3, SmolVLM) read only lists of parts. The templates that
    take both (Qwen2.5-VL, Gemma 3) render the two alike.
    """
    if isinstance(message["content"], str):
        return {**message, "content": [text_part(message["content"])]}
    return message


def encode_prompts(
    processor: ProcessorMixin,
    messages: Sequence[list[Message]],
    images: Sequence[Sequence[np.ndarray]],
) -> BatchFeature:
    """Tokenize a batch of prompts with their images, left-padded, generation prompt added.

    Args:
        processor: the model's processor.
        messages: per sample, chat messages with ``{"type": "image"}`` placeholders.
        images: per sample, the images in placeholder order.

    Returns:
        The processor's tensors (``input_ids``, ``attention_mask``, ``pixel_values``, ...).
    """
    texts = [
        processor.apply_chat_template(
            [with_content_parts(message) for message in m],
            tokenize=False,
            add_generation_prompt=True,
        )
        for m in messages
    ]
    # Nested per sample: processors that count images per prompt (Gemma 3) need it.
    nested = [[_to_pil(image) for image in sample] for sample in images]
    encoded = processor(
        text=texts,
        images=nested if any(nested) else None,
        padding=True,
        padding_side="left",
        return_tensors="pt",
    )
    # PaliGemma's processor returns the prompt as labels too; a model given labels
    # computes a loss of its own, over the prompt. Ours are over completions only.
    encoded.pop("labels", None)
    return encoded


# Rows of logits turned into float32 at once by the log-softmax functions below: ~64 MB
# for a 152k vocabulary (Qwen2.5-VL), where one float32 copy of a micro-batch's logits
# is ~1.5 GB.
LOG_SOFTMAX_CHUNK_BYTES = 64 * 2**20


def logit_row_chunks(rows: int, vocab: int) -> list[tuple[int, int]]:
    """``(start, end)`` row ranges of a ``(rows, vocab)`` logit matrix, each at most
    :data:`LOG_SOFTMAX_CHUNK_BYTES` in float32."""
    step = max(1, LOG_SOFTMAX_CHUNK_BYTES // (4 * max(vocab, 1)))
    return [(start, min(start + step, rows)) for start in range(0, rows, step)]


def sampling_logits(
    logits: torch.Tensor, temperature: float, blocked_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits as the policy samples from them: float32, divided by ``temperature``, the
    ``blocked_ids`` (the vision special tokens, :func:`vision_token_ids`) at -inf.

    The one definition of the sampling distribution: the logprobs :class:`HFPolicy`
    records and the trainer's (``completion_logprobs``) both come from it, so that the
    trained distribution is the sampled one (vLLM biases the same ids by -100).
    """
    scaled = logits.float() / temperature  # a new tensor: the fill below is safe
    if blocked_ids is not None and blocked_ids.numel():
        blocked_ids = blocked_ids.to(scaled.device)
        # A tokenizer id past the logits (a head narrower than the vocabulary) is never sampled.
        scaled.index_fill_(-1, blocked_ids[blocked_ids < scaled.shape[-1]], -torch.inf)
    return scaled


def blocked_id_tensor(blocked_ids: Sequence[int] | frozenset[int]) -> torch.Tensor | None:
    """``blocked_ids`` as the index tensor :func:`sampling_logits` takes (None: none)."""
    return torch.tensor(sorted(blocked_ids), dtype=torch.long) if blocked_ids else None


class _SelectiveLogSoftmax(torch.autograd.Function):
    """``log_softmax`` of :func:`sampling_logits` at one index per row, in float32, a
    chunk of rows at a time; the backward pass recomputes each chunk's softmax instead of
    keeping a float32 copy of every row (it keeps only the logits, in their own dtype)."""

    @staticmethod
    def forward(
        ctx: Any,
        logits: torch.Tensor,
        index: torch.Tensor,
        temperature: float,
        blocked: torch.Tensor | None,
    ) -> torch.Tensor:
        out = torch.empty(index.shape, dtype=torch.float32, device=logits.device)
        for start, end in logit_row_chunks(logits.shape[0], logits.shape[-1]):
            scaled = sampling_logits(logits[start:end], temperature, blocked)
            picked = scaled.gather(-1, index[start:end, None]).squeeze(-1)
            out[start:end] = picked - torch.logsumexp(scaled, dim=-1)
        ctx.save_for_backward(logits, index)
        ctx.temperature = temperature
        ctx.blocked = blocked
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None, None]:
        logits, index = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for start, end in logit_row_chunks(logits.shape[0], logits.shape[-1]):
            g = grad_out[start:end, None].float()
            # d logp[y] / d logit_j = (1[j = y] - softmax_j) / T (0 for a blocked j)
            scaled = sampling_logits(logits[start:end], ctx.temperature, ctx.blocked)
            chunk = torch.softmax(scaled, dim=-1) * -g
            chunk.scatter_add_(-1, index[start:end, None], g)
            grad[start:end] = chunk / ctx.temperature
        return grad, None, None, None


def selective_log_softmax(
    logits: torch.Tensor,
    index: torch.Tensor,
    temperature: float = 1.0,
    blocked_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """``log_softmax(sampling_logits(logits, temperature, blocked_ids), -1).gather(-1,
    index)``, without a float32 copy of the whole vocabulary for every position (with
    gradients).

    Args:
        logits: ``(..., V)`` in any float dtype.
        index: ``(...)`` token ids.
        temperature: divides the logits.
        blocked_ids: token ids left out of the distribution (:func:`blocked_id_tensor`).

    Returns:
        ``(...)`` float32 logprobs of ``index`` (-inf for a blocked one).
    """
    vocab = logits.shape[-1]
    if blocked_ids is not None:
        blocked_ids = blocked_ids.to(logits.device)
    flat = _SelectiveLogSoftmax.apply(
        logits.reshape(-1, vocab), index.reshape(-1).long(), float(temperature), blocked_ids
    )
    return flat.view(index.shape)


def format_config_from_processor(processor: ProcessorMixin) -> FormatConfig:
    """The image sizing that matches a processor.

    Qwen2-VL-style image processors (they return ``image_grid_thw``) resize with
    ``smart_resize`` between their ``min_pixels`` and ``max_pixels``: the format uses
    the same bounds and factor, so that their resize is a no-op.

    The others (LLaVA, LLaVA-NeXT, Idefics3, PaliGemma, Gemma 3, ...) resize every image
    to a size of their own, often a square. The format then keeps the screen's aspect
    ratio and shrinks it to at most the pixel count the processor's largest input
    holds (no more detail than the model gets), and the model's coordinates are pixels
    of that image: what the prompt states and the recorded step keeps.
    """
    image_processor = processor.image_processor
    size = image_processor.size
    if "image_grid_thw" in image_processor.model_input_names:
        return FormatConfig(
            min_pixels=int(size["shortest_edge"]),
            max_pixels=int(size["longest_edge"]),
            factor=int(image_processor.patch_size * image_processor.merge_size),
        )
    max_pixels = _input_pixels(size, image_processor)
    return FormatConfig(min_pixels=1, max_pixels=max_pixels, factor=1)


def _input_pixels(size: Any, image_processor: Any) -> int:
    """The pixel count of the largest image a fixed-size image processor hands on."""
    if size.get("height") and size.get("width"):
        pixels = int(size["height"]) * int(size["width"])
    else:
        edge = size.get("longest_edge") or size.get("shortest_edge")
        if not edge:
            raise ValueError(
                f"Cannot tell the input size of {type(image_processor).__name__} from its size "
                f"{dict(size)}; build the format with an explicit FormatConfig"
            )
        pixels = int(edge) ** 2
    # LLaVA-NeXT tiles an image into a grid of crops: the largest grid is the input.
    pinpoints = image_processor.to_dict().get("image_grid_pinpoints") or []
    return max([pixels, *(int(h) * int(w) for h, w in pinpoints)])


def check_processor_keeps_size(processor: ProcessorMixin, fmt: ModelFormat) -> None:
    """Check that the processor does not resize the format's images again.

    Raises:
        ValueError: the processor would resize a ``fmt``-sized screenshot.
    """
    geometry = fmt.geometry()
    image = np.zeros((geometry.image_height, geometry.image_width, 3), dtype=np.uint8)
    out = processor.image_processor(images=[_to_pil(image)], return_tensors="np")
    if "image_grid_thw" not in out:
        logger.debug("cannot check the image size for %s", type(processor).__name__)
        return
    _, grid_h, grid_w = (int(v) for v in out["image_grid_thw"][0])
    patch = int(processor.image_processor.patch_size)
    if (grid_h * patch, grid_w * patch) != (geometry.image_height, geometry.image_width):
        raise ValueError(
            f"The processor resizes the format's {geometry.image_width}x{geometry.image_height} "
            f"images to {grid_w * patch}x{grid_h * patch}, so the model's coordinates would not "
            f"be pixels of the recorded images. Build the format with "
            f"format_config_from_processor(processor) (got {fmt.config})"
        )


class HFPolicy:
    """A transformers VLM acting through a :class:`ModelFormat`.

    Attributes:
        name: "hf".
        model: the model (a peft ``PeftModel`` when an adapter is loaded).
        processor: its processor.
        format: prompt building and parsing.
        config: :class:`HFPolicyConfig`.

    Methods:
        begin_episode: forget sub-env ``i``'s history.
        act: one batched generate -> one :class:`PolicyStep` per sub-env.
        from_pretrained: load a checkpoint (+ LoRA adapter) and build the policy.
    """

    name = "hf"

    def __init__(
        self,
        model: VisionLanguageModel,
        processor: ProcessorMixin,
        format: ModelFormat,
        config: HFPolicyConfig | None = None,
    ) -> None:
        check_processor_keeps_size(processor, format)
        self.model = model
        self.processor = processor
        self.format = format
        self.config = config or HFPolicyConfig()
        self._contexts = EpisodeContexts(format, self.config.max_images, self.config.max_history)
        tokenizer = processor.tokenizer
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        eos_ids.add(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
        self._eos_ids = sorted(eos_ids)
        self._pad_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self._eos_ids[0]
        )
        self._suppressed_ids = sorted(vision_token_ids(model.config, tokenizer))
        self._blocked = blocked_id_tensor(self._suppressed_ids)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        format_name: str | None = None,
        config: HFPolicyConfig | None = None,
        *,
        adapter_path: str | None = None,
        **model_kwargs: Any,
    ) -> HFPolicy:
        """Load a checkpoint and build the policy with the format sized like its processor.

        Args:
            name_or_path: a local checkpoint or cached Hub id.
            format_name: "ui-tars" or "qwen2.5-vl"; None picks it from the checkpoint
                (:func:`uirl_agents.loading.pretrained.detect_format`).
            config: prompting and sampling settings.
            adapter_path: a peft LoRA adapter to load on top.
            **model_kwargs: passed to :func:`uirl_agents.loading.pretrained.load_model`.

        Raises:
            ValueError: no format given and none can be told from the checkpoint.
        """
        if format_name is None:
            # Before loading the weights: a checkpoint we cannot place fails fast.
            format_name = detect_format(
                name_or_path, trust_remote_code=model_kwargs.get("trust_remote_code", False)
            )
            logger.info("format for %s: %s (from its config)", name_or_path, format_name)
        model, processor = load_model_and_processor(
            name_or_path, adapter_path=adapter_path, **model_kwargs
        )
        fmt = get_format(format_name, format_config_from_processor(processor))
        return cls(model, processor, fmt, config)

    def begin_episode(self, env_index: int) -> None:
        self._contexts.begin_episode(env_index)

    def final_prompt(
        self, env_index: int, observation: dict[str, Any]
    ) -> tuple[list[Message], list[np.ndarray]]:
        """The prompt of an episode's last observation (see ``FinalPromptPolicy``)."""
        prompt = self._contexts.observe(env_index, observation)
        return prompt.messages, prompt.images

    def generation_config(self) -> GenerationConfig:
        """The explicit sampling settings; every field that shapes the distribution is set,
        so that the checkpoint's generation_config.json (e.g. top_k=1,
        repetition_penalty=1.05 in Qwen2.5-VL) cannot change what is sampled. Vision
        special tokens are suppressed (:func:`vision_token_ids`), and the recorded logprobs
        leave them out too (:func:`sampling_logits`, as the trainer scores); top-k/top-p
        do not change them (the trainer's convention)."""
        c = self.config
        sampling = {"temperature": c.temperature, "top_p": c.top_p, "top_k": c.top_k}
        return GenerationConfig(
            do_sample=c.do_sample,
            **(sampling if c.do_sample else {"temperature": 1.0, "top_p": 1.0, "top_k": 0}),
            max_new_tokens=c.max_new_tokens,
            min_new_tokens=0,
            num_beams=1,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            typical_p=1.0,
            min_p=None,
            epsilon_cutoff=0.0,
            eta_cutoff=0.0,
            eos_token_id=self._eos_ids,
            pad_token_id=self._pad_id,
            suppress_tokens=self._suppressed_ids or None,
            return_dict_in_generate=True,
            output_logits=True,
        )

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]:
        """One step for each sub-env in ``env_indices`` (one ``generate`` for the batch).

        Raises:
            ValueError: observations and env_indices differ in length.
        """
        if len(observations) != len(env_indices):
            raise ValueError(
                f"Expected one observation per env index, got {len(observations)} "
                f"observations and {len(env_indices)} indices"
            )
        if not observations:
            return []
        start = time.perf_counter()
        prompts = [
            self._contexts.observe(env_index, obs)
            for obs, env_index in zip(observations, env_indices, strict=True)
        ]
        completions = self._generate([p.messages for p in prompts], [p.images for p in prompts])
        elapsed = (time.perf_counter() - start) / len(observations)
        steps = []
        for env_index, prompt, (prompt_ids, ids, logprobs) in zip(
            env_indices, prompts, completions, strict=True
        ):
            text = self.processor.tokenizer.decode(ids, skip_special_tokens=True)
            parsed = self.format.parse(text, prompt.geometry)
            self._contexts.record(env_index, text)
            steps.append(
                PolicyStep(
                    action=parsed.action,
                    error=parsed.error,
                    text=text,
                    messages=prompt.messages,
                    images=prompt.images,
                    prompt_ids=prompt_ids,
                    completion_ids=ids,
                    logprobs=logprobs,
                    policy_time_s=elapsed,
                    extra={"thought": parsed.thought, "parse_notes": list(parsed.notes)},
                )
            )
        return steps

    @torch.no_grad()
    def _generate(
        self, messages: list[list[Message]], images: list[list[np.ndarray]]
    ) -> list[tuple[list[int], list[int], list[float]]]:
        device = next(self.model.parameters()).device
        inputs = encode_prompts(self.processor, messages, images).to(device)
        out = self.model.generate(**inputs, generation_config=self.generation_config())
        prompt_len = inputs["input_ids"].shape[1]
        generated = out.sequences[:, prompt_len:]
        logits = torch.stack(out.logits, dim=1)
        logprobs = selective_log_softmax(
            logits, generated, self.config.logprob_temperature, self._blocked
        )
        is_eos = torch.isin(generated, torch.tensor(self._eos_ids, device=generated.device))
        results = []
        for i in range(generated.shape[0]):
            eos_positions = is_eos[i].nonzero()
            length = int(eos_positions[0]) + 1 if len(eos_positions) else generated.shape[1]
            prompt_ids = inputs["input_ids"][i][inputs["attention_mask"][i].bool()].tolist()
            results.append(
                (prompt_ids, generated[i, :length].tolist(), logprobs[i, :length].tolist())
            )
        return results

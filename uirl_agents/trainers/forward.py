"""The training forward pass: the policy's logprobs of given completions, with gradients
for a loss or without for the scoring pass (the trainers' forward;
:class:`~uirl_agents.policies.hf.HFPolicy` only samples).

- :func:`completion_logprobs`: per-token logprobs of given completions with one batched
  forward pass (and, on request, the entropy and the prompt's last hidden state);
- :func:`sample_logprobs`: that pass over a micro-batch of
  :class:`~uirl_agents.trainers.update.TokenSample` (every loss and the scoring pass run it);
- :func:`score_samples`: one pass without gradients before the update: the old (and
  reference) logprobs, the entropy, the rollout/trainer mismatch, and PPO's old values;
- :func:`surrogate_loss`: the pass and the clipped surrogate (+ TIS, KL:
  :func:`~uirl_agents.trainers.losses.clipped_surrogate`) of a micro-batch, GRPO's loss
  and PPO's policy term.

GRPO (:mod:`~uirl_agents.trainers.algorithms.grpo`), PPO
(:mod:`~uirl_agents.trainers.algorithms.ppo`) and expert iteration's SFT loss
(:mod:`~uirl_agents.trainers.algorithms.sft`) import this module; it imports none of
them, and no config: each function takes the settings it reads.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from transformers.processing_utils import ProcessorMixin

from uirl_agents.formats.base import Message
from uirl_agents.policies.hf import (
    VisionLanguageModel,
    blocked_id_tensor,
    encode_prompts,
    logit_row_chunks,
    sampling_logits,
    selective_log_softmax,
    vision_token_ids,
)
from uirl_agents.trainers import sharding
from uirl_agents.trainers.image_features import with_image_features
from uirl_agents.trainers.losses import clipped_surrogate, pad_sequences, token_budget_batches
from uirl_agents.trainers.policy_model import reference_policy
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import BatchLoss, TokenSample, longest_first

logger = logging.getLogger(__name__)


def score_samples(
    run: TrainingRun,
    samples: Sequence[TokenSample],
    *,
    temperature: float,
    kl_beta: float,
    micro_batch_tokens: int,
    value_head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    check_rollout_temperature: bool = False,
    sort_by_length: bool = False,
) -> dict[str, float]:
    """Fill in each sample's old (and reference) logprobs with the trainer's forward pass,
    and with ``value_head`` (PPO's: hidden states -> values) its ``old_value``, from the
    same pass.

    Args:
        run: the model, its processor and the reductions over processes.
        samples: the samples to score.
        temperature: the rollouts' sampling temperature (``rollout.temperature``).
        kl_beta: the reference logprobs are computed when > 0 (``grpo.kl_beta``).
        micro_batch_tokens: the padded tokens of one forward pass (``optim.micro_batch_tokens``).
        value_head: PPO's value head.
        check_rollout_temperature: check on the first micro-batch that the rollout
            logprobs are temperature-scaled (:func:`check_temperature_scaled`; the
            scoring passes ask for it with vLLM rollouts and TIS on).
        sort_by_length: cut the micro-batches from the samples sorted by length, longest
            first (``optim.sort_by_length``: less padding, the same logprobs).

    Returns:
        ``train/entropy`` (mean per token of the policy's sampling distribution) and,
        where the rollout recorded logprobs, ``train/logprob_mismatch_mean`` / ``_max``:
        ``|logp_rollout - logp_trainer|`` per token, over every process.
    """
    entropy_sum, tokens, mismatch_sum, mismatch_max, compared = 0.0, 0, 0.0, 0.0, 0
    ordered = longest_first(samples) if sort_by_length else samples
    batches = token_budget_batches(ordered, lambda s: s.num_tokens, micro_batch_tokens)
    if check_rollout_temperature:
        check_temperature_scaled(run, batches[0] if batches else [], temperature)
    # Each process scores its own samples (as many passes as it has batches): the model
    # is gathered whole so that forward passes need no collective (FSDP).
    with torch.no_grad(), sharding.gathered(run.model), run.autocast():
        for batch in batches:
            entropies: list[torch.Tensor] = []
            states: list[torch.Tensor] | None = [] if value_head is not None else None
            old = sample_logprobs(
                run, batch, temperature=temperature, entropies=entropies, prompt_states=states
            )
            if value_head is not None and states is not None:
                for sample, value in zip(batch, value_head(torch.stack(states)), strict=True):
                    sample.old_value = float(value)
            ref: Sequence[torch.Tensor | None] = [None] * len(batch)
            if kl_beta > 0:
                with reference_policy(run.model):
                    ref = sample_logprobs(run, batch, temperature=temperature)
            for sample, lp, r, h in zip(batch, old, ref, entropies, strict=True):
                sample.old_logprobs, sample.ref_logprobs = lp.float().cpu(), r
                entropy_sum += float(h.sum())
                tokens += len(lp)
                rollout = sample.rollout_logprobs
                if rollout is not None and len(rollout) == len(lp) > 0:
                    diff = (torch.tensor(rollout) - sample.old_logprobs).abs()
                    mismatch_sum += float(diff.sum())
                    mismatch_max = max(mismatch_max, float(diff.max()))
                    compared += len(diff)
    metrics = {"train/entropy": run.sum_all(entropy_sum) / max(run.sum_all(tokens), 1.0)}
    if run.sum_all(compared):
        metrics["train/logprob_mismatch_mean"] = run.sum_all(mismatch_sum) / run.sum_all(compared)
        metrics["train/logprob_mismatch_max"] = run.max_all(mismatch_max)
    return metrics


# The TIS weights' rollout logprobs must be of the distribution sampled from: scaled by
# the temperature. vLLM's default --logprobs-mode (raw_logprobs) returns them before the
# temperature, and every weight is then biased when rollout.temperature is not 1.
def check_temperature_scaled(
    run: TrainingRun, batch: Sequence[TokenSample], temperature: float
) -> None:
    """Stop the run when the rollout engine's logprobs of ``batch`` are closer to the
    trainer's at temperature 1 than at ``temperature`` (a collective: every process
    takes part, with or without samples, and all raise alike).

    Raises:
        ValueError: they are (the message gives both figures and the server flag).
    """
    if temperature == 1.0:
        return  # both conventions agree
    batch = [
        s for s in batch if s.rollout_logprobs and len(s.rollout_logprobs) == len(s.completion_ids)
    ]
    sums = {"scaled": 0.0, "raw": 0.0, "tokens": 0.0}
    if batch:
        with torch.no_grad(), sharding.gathered(run.model), run.autocast():
            for t, key in ((temperature, "scaled"), (1.0, "raw")):
                for sample, lp in zip(
                    batch, sample_logprobs(run, batch, temperature=t), strict=True
                ):
                    rollout = torch.tensor(sample.rollout_logprobs)
                    sums[key] += float((rollout - lp.float().cpu()).abs().sum())
        sums["tokens"] = float(sum(len(s.completion_ids) for s in batch))
    total = run.sum_all_dict(sums)
    tokens = max(total["tokens"], 1.0)
    scaled, raw = total["scaled"] / tokens, total["raw"] / tokens
    if total["tokens"] and raw < scaled:
        raise ValueError(
            f"the rollout engine's logprobs are those before the temperature: per token "
            f"they differ from the trainer's by {raw:.4f} at temperature 1 and by "
            f"{scaled:.4f} at rollout.temperature {temperature}, which biases every "
            "truncated importance sampling weight. Start the vLLM server with "
            "--logprobs-mode processed_logprobs (docs/training.md, Rollouts with vLLM)"
        )
    logger.info(
        "rollout logprobs vs the trainer's, per token: %.4f (temperature %s), %.4f (1)",
        scaled,
        temperature,
        raw,
    )


def sample_logprobs(
    run: TrainingRun,
    batch: Sequence[TokenSample],
    *,
    temperature: float = 1.0,
    entropies: list[torch.Tensor] | None = None,
    prompt_states: list[torch.Tensor] | None = None,
) -> list[torch.Tensor]:
    """The policy's logprobs of each sample's completion ids, one batched forward pass
    (:func:`completion_logprobs`: ``entropies`` and
    ``prompt_states`` receive, per sample, the sampling distribution's entropy per token
    and the hidden state at the last prompt token). The samples' image features, where
    every one holds them (:func:`~uirl_agents.trainers.image_features.cached_image_features`),
    stand in for their pixels."""
    features = [s.image_features for s in batch if s.image_features is not None]
    return completion_logprobs(
        run.model,
        run.processor,
        [s.messages for s in batch],
        [s.images for s in batch],
        [s.completion_ids for s in batch],
        temperature=temperature,
        entropies=entropies,
        prompt_states=prompt_states,
        image_features=features if len(features) == len(batch) else None,
    )


def surrogate_loss(
    run: TrainingRun,
    batch: Sequence[TokenSample],
    *,
    temperature: float,
    clip_epsilon: float,
    tis_cap: float | None = None,
    kl_beta: float = 0.0,
    prompt_states: list[torch.Tensor] | None = None,
) -> BatchLoss:
    """The micro-batch's clipped surrogate (+ TIS, + KL) summed over its completion tokens
    (:func:`~uirl_agents.trainers.losses.clipped_surrogate`), from one forward pass.

    Needs :func:`score_samples` first (the old and reference logprobs). ``prompt_states``
    receives each sample's hidden state at its last prompt token, from the same pass
    (PPO's value head reads it).
    """
    logprobs = sample_logprobs(run, batch, temperature=temperature, prompt_states=prompt_states)
    padded = pad_sequence(logprobs, batch_first=True)
    device = padded.device

    def padded_field(rows: Sequence[Any]) -> torch.Tensor:
        return pad_sequences(rows).to(device)

    loss_sum, stats = clipped_surrogate(
        padded,
        padded_field([s.old_logprobs for s in batch]),
        advantages=torch.tensor([s.advantage for s in batch], device=device).unsqueeze(1),
        mask=padded_field([[1.0] * len(s.completion_ids) for s in batch]),
        weights=torch.tensor([s.token_weight for s in batch], device=device).unsqueeze(1),
        clip_epsilon=clip_epsilon,
        rollout_logprobs=(
            padded_field([s.rollout_logprobs for s in batch]) if tis_cap is not None else None
        ),
        tis_cap=tis_cap,
        ref_logprobs=padded_field([s.ref_logprobs for s in batch]) if kl_beta > 0 else None,
        kl_beta=kl_beta,
    )
    return BatchLoss(loss_sum=loss_sum, stats=stats)


# The token type id of completion tokens, where it is not 0 (text). PaliGemma's prompt
# (type 0) attends bidirectionally, its answer (type 1, as its generate() appends)
# causally: zeros would let each completion token see the ones after it.
_COMPLETION_TOKEN_TYPE = {"paligemma": 1}


def completion_logprobs(
    model: VisionLanguageModel,
    processor: ProcessorMixin,
    messages: Sequence[list[Message]],
    images: Sequence[Sequence[np.ndarray]],
    completion_ids: Sequence[Sequence[int]],
    temperature: float = 1.0,
    entropies: list[torch.Tensor] | None = None,
    prompt_states: list[torch.Tensor] | None = None,
    image_features: Sequence[Sequence[torch.Tensor]] | None = None,
) -> list[torch.Tensor]:
    """Per-token logprobs of given completions, with one batched forward pass.

    The inverse of what :meth:`~uirl_agents.policies.hf.HFPolicy.act` records: feed a step's ``messages``,
    ``images`` and ``completion_ids`` and get back its ``logprobs`` (same convention:
    ``log_softmax`` of :func:`~uirl_agents.policies.hf.sampling_logits`: scaled by the
    temperature, the vision special tokens left out). Gradients flow: call it under
    ``torch.no_grad()`` for reference/old-policy logprobs, without for the loss.

    Args:
        model: the policy model (any ``AutoModelForImageTextToText``, peft or not).
        processor: its processor.
        messages: per sample, the prompt messages (image placeholders).
        images: per sample, the images in placeholder order.
        completion_ids: per sample, the completion token ids (may be empty).
        temperature: the sampling temperature the logprobs are scaled with.
        entropies: when given, receives per sample the entropy of the (temperature
            scaled) next-token distribution at each completion position (no gradient).
        prompt_states: when given, receives per sample the language model's last hidden
            state (after the final norm) at the prompt's last token, shape ``(hidden_size,)``,
            with gradients: the state PPO's value head reads. Samples with an empty
            completion still get theirs (the forward pass runs).
        image_features: when given, per sample its images' vision-tower features, in
            place of their pixels (:func:`~uirl_agents.trainers.image_features.with_image_features`).

    Returns:
        Per sample, a float32 tensor of shape ``(len(completion_ids[i]),)`` on the model's device.

    Raises:
        ValueError: the three sequences differ in length, or temperature <= 0.
    """
    if not len(messages) == len(images) == len(completion_ids):
        raise ValueError(
            f"Expected one messages/images/completion_ids entry per sample, got "
            f"{len(messages)}, {len(images)}, {len(completion_ids)}"
        )
    if temperature <= 0:
        raise ValueError(f"temperature: expected > 0, got {temperature}")
    device = next(model.parameters()).device
    lengths = [len(c) for c in completion_ids]
    width = max(lengths, default=0)
    if width == 0 and prompt_states is None:
        if entropies is not None:
            entropies.extend(torch.zeros(0, device=device) for _ in completion_ids)
        return [torch.zeros(0, device=device) for _ in completion_ids]
    model_inputs, completions, prompt_len = prompt_and_completion_inputs(
        model, processor, messages, images, completion_ids
    )
    # Features in place of pixels before the copy to the device: the pixels stay here.
    model_inputs = with_image_features(model_inputs, image_features)
    model_inputs = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in model_inputs.items()
    }
    # Only the logits that predict completion tokens: positions prompt_len-1 .. end-1.
    with keeping_prompt_states(model, prompt_states, prompt_len):
        # Position t of the last width + 1 predicts completion token t (the last: none).
        logits = model(**model_inputs, use_cache=False, logits_to_keep=width + 1).logits
    # The unused last position is scored too (index 0): slicing it off first would copy
    # every logit, and the point of selective_log_softmax is to copy none.
    targets = torch.cat([completions, completions.new_zeros((len(lengths), 1))], dim=1)
    # The distribution the policy sampled from: without the vision special tokens.
    blocked = blocked_id_tensor(vision_token_ids(model.config, processor.tokenizer))
    token_logprobs = selective_log_softmax(logits, targets.to(device), temperature, blocked)
    token_logprobs = token_logprobs[:, :-1]
    if entropies is not None:
        entropy = softmax_entropy(logits, temperature, blocked)[:, :-1]
        entropies.extend(entropy[i, :n] for i, n in enumerate(lengths))
    return [token_logprobs[i, :n] for i, n in enumerate(lengths)]


@contextlib.contextmanager
def keeping_prompt_states(
    model: VisionLanguageModel, prompt_states: list[torch.Tensor] | None, prompt_len: int
) -> Iterator[None]:
    """Forward passes inside append each sample's last hidden state at the prompt's last
    token (position ``prompt_len - 1``: prompts are left-padded) to ``prompt_states``
    (nothing when None)."""
    if prompt_states is None:
        yield
        return

    # A hook on the language model keeps its last hidden state only: the model's
    # output_hidden_states would hold every layer's for the whole batch.
    def keep(_module: torch.nn.Module, _args: Any, output: Any) -> None:
        prompt_states.extend(output.last_hidden_state[:, prompt_len - 1].unbind(0))

    hook = model.get_decoder().register_forward_hook(keep)
    try:
        yield
    finally:
        hook.remove()


def prompt_and_completion_inputs(
    model: VisionLanguageModel,
    processor: ProcessorMixin,
    messages: Sequence[list[Message]],
    images: Sequence[Sequence[np.ndarray]],
    completion_ids: Sequence[Sequence[int]],
) -> tuple[dict[str, Any], torch.Tensor, int]:
    """The model's inputs for the encoded (left-padded) prompts followed by the
    completions (right-padded), on the CPU.

    Returns:
        The inputs (every per-token tensor extended by the completions' width), the
        padded completion ids ``(batch, width)``, and the prompts' padded length.
    """
    inputs = encode_prompts(processor, messages, images)
    batch, prompt_len = inputs["input_ids"].shape
    width = max((len(c) for c in completion_ids), default=0)
    pad_id = processor.tokenizer.pad_token_id or 0
    completions = torch.full((batch, width), pad_id, dtype=inputs["input_ids"].dtype)
    completion_mask = torch.zeros((batch, width), dtype=inputs["attention_mask"].dtype)
    for i, ids in enumerate(completion_ids):
        completions[i, : len(ids)] = torch.as_tensor(list(ids), dtype=completions.dtype)
        completion_mask[i, : len(ids)] = 1
    model_inputs: dict[str, Any] = dict(inputs)
    # Extend every per-token tensor (input_ids, attention_mask, mm_token_type_ids, ...):
    # completion tokens are text, hence the text type id (see _COMPLETION_TOKEN_TYPE).
    token_type = _COMPLETION_TOKEN_TYPE.get(model.config.model_type, 0)
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.shape[:2] == (batch, prompt_len):
            extra = {"input_ids": completions, "attention_mask": completion_mask}.get(
                key, torch.full((batch, width), token_type, dtype=value.dtype)
            )
            model_inputs[key] = torch.cat([value, extra], dim=1)
    return model_inputs, completions, prompt_len


@torch.no_grad()
def softmax_entropy(
    logits: torch.Tensor, temperature: float = 1.0, blocked_ids: torch.Tensor | None = None
) -> torch.Tensor:
    """The entropy of the sampling distribution (:func:`sampling_logits`) per position
    (float32, no gradient), a chunk of rows at a time."""
    vocab = logits.shape[-1]
    flat = logits.reshape(-1, vocab)
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
    for start, end in logit_row_chunks(flat.shape[0], vocab):
        probs = torch.softmax(sampling_logits(flat[start:end], temperature, blocked_ids), -1)
        out[start:end] = torch.special.entr(probs).sum(-1)  # -p log p, 0 where p = 0
    return out.view(logits.shape[:-1])

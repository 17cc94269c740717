"""Supervised fine-tuning on episode steps (expert iteration's update), on the sampled ids.

Each step of a kept episode becomes a :class:`~uirl_agents.trainers.update.TokenSample`:
its exact prompt (the recorded messages and images) and, as the target, the token ids
the policy *sampled*, end-of-turn token included. Re-tokenising the output text would
train on other ids than the ones generated whenever the tokenizer splits the text
differently (it does: BPE merges across what generation produced token by token).
Scripted-expert demonstrations have no sampled ids; their text is tokenised, followed
by the chat template's end-of-turn token, as the model would have to produce it.

The loss is the completion tokens' negative log-likelihood (temperature 1), token
mean over the iteration's data (every process), through the same micro-batches,
gradient sync and optimizer steps as GRPO (the loop's update:
:func:`~uirl_agents.trainers.update.run_update`).

Why not TRL's ``SFTTrainer`` (used before): its vision-language collator re-tokenises
the completion text, and each new trainer re-seeds every process with the same seed,
which gave every process the same sampling stream in the next iteration.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence

import torch
from transformers import ProcessorMixin

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.policies.hf import encode_prompts
from uirl_agents.trainers.forward import sample_logprobs
from uirl_agents.trainers.run import TrainingRun
from uirl_agents.trainers.update import BatchLoss, TokenSample

logger = logging.getLogger(__name__)

SFT_STREAM = 4
_SENTINEL = "\x00uirl-end-of-text\x00"


@functools.cache
def _end_of_turn_ids(processor: ProcessorMixin) -> tuple[int, ...]:
    """The token(s) the chat template puts right after an assistant turn's text."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "x"}]},
        {"role": "assistant", "content": [{"type": "text", "text": _SENTINEL}]},
    ]
    # transformers annotates string contents; its processors take lists of parts.
    text = processor.apply_chat_template(messages, tokenize=False)  # type: ignore[arg-type]
    suffix = text.split(_SENTINEL, 1)[1]
    ids = processor.tokenizer(suffix, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError("The chat template puts nothing after an assistant turn's text")
    return (ids[0],)


def completion_ids_of_text(processor: ProcessorMixin, text: str) -> list[int]:
    """Token ids of a completion given as text: its tokens and the end-of-turn token."""
    ids = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
    return [*ids, *_end_of_turn_ids(processor)]


def sft_samples(
    run: TrainingRun, episodes: Iterable[Episode], *, drop_unparsed: bool
) -> list[TokenSample]:
    """One sample per model step of ``episodes`` (steps with a recorded prompt).

    Args:
        run: the training run (its processor tokenises demonstrations).
        episodes: the kept episodes.
        drop_unparsed: leave out steps whose output did not parse into an action.
    """
    samples = []
    dropped = 0
    for episode in episodes:
        for step in episode.steps:
            if step.messages is None or step.model_images is None:
                continue
            if drop_unparsed and step.action is None:
                dropped += 1
                continue
            ids = list(step.completion_ids or completion_ids_of_text(run.processor, step.text))
            if step.prompt_ids is not None:
                prompt_tokens = len(step.prompt_ids)
            else:
                encoded = encode_prompts(run.processor, [step.messages], [step.model_images])
                prompt_tokens = int(encoded["input_ids"].shape[1])
            samples.append(
                TokenSample(step.messages, step.model_images, ids, prompt_tokens + len(ids))
            )
    if dropped:
        logger.info("SFT: %d step(s) whose output did not parse left out", dropped)
    return samples


def sft_loss(run: TrainingRun, batch: Sequence[TokenSample]) -> BatchLoss:
    """The micro-batch's completion tokens' summed negative log-likelihood."""
    logprobs = sample_logprobs(run, batch)
    return BatchLoss(loss_sum=-torch.cat(logprobs).sum(), stats={})

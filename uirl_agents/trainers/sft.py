"""Supervised fine-tuning on episode steps with TRL's ``SFTTrainer`` (expert iteration's update).

Each step becomes a TRL *prompt-completion* example: the prompt is the step's
recorded messages and images (exactly what the model saw), the completion the step's
output text. With ``completion_only_loss`` TRL's ``DataCollatorForVisionLanguageModeling``
tokenizes the prompt with the chat template's generation prompt (as the rollout did)
and puts the loss on the completion and its end-of-turn token only.

Why prompt-completion and not ``messages`` + ``assistant_only_loss``: with history in
the prompt, the earlier assistant turns would get loss too (they are trained in their
own step's example already).

Checked against TRL 1.16 and transformers 5.23: the collator runs the processor on
PIL images (no torchvision needed), Qwen2.5-VL's ``mm_token_type_ids`` are extended
over the completion, and the model's (peft) weights and our optimizer are used as
given (``optimizers=(optimizer, None)``, constant learning rate), so the optimizer
state carries over iterations and into checkpoints.

Processes: the trainer shards the dataset over processes, so every process must hold
the same dataset: the examples of every process are gathered first.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from accelerate.utils import gather_object

from uirl_agents.policies.hf import encode_prompts
from uirl_agents.trainers.common import TrainingRun

logger = logging.getLogger(__name__)


def _as_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message's content as a list of parts (Arrow needs one type per column)."""
    return [
        {
            "role": m["role"],
            "content": [{"type": "text", "text": m["content"]}]
            if isinstance(m["content"], str)
            else m["content"],
        }
        for m in messages
    ]


def prompt_completion(example: dict[str, Any]) -> dict[str, Any]:
    """A :func:`~uirl_agents.trajectories.to_sft_examples` example as prompt + completion."""
    *prompt, completion = example["messages"]
    if completion["role"] != "assistant":
        raise ValueError(f"Expected the last message to be the assistant's, got {completion}")
    return {
        "prompt": _as_parts(prompt),
        "completion": _as_parts([completion]),
        "images": example["images"],
    }


def _longest_example_tokens(run: TrainingRun, examples: list[dict[str, Any]]) -> int:
    """Prompt + completion tokens of the example with the most images and text."""

    def size(e: dict[str, Any]) -> tuple[int, int]:
        text = sum(len(p.get("text") or "") for m in e["prompt"] for p in m["content"])
        return len(e["images"]), text

    longest = max(examples, key=size)
    messages = [
        {
            "role": m["role"],
            "content": [{k: v for k, v in p.items() if v is not None} for p in m["content"]],
        }
        for m in longest["prompt"]
    ]
    images = [np.asarray(img) for img in longest["images"]]
    prompt = encode_prompts(run.processor, [messages], [images])["input_ids"].shape[1]
    completion = len(
        run.processor.tokenizer(longest["completion"][0]["content"][0]["text"])["input_ids"]
    )
    return prompt + completion + 2  # the end-of-turn tokens


def sft_update(
    run: TrainingRun, examples: list[dict[str, Any]], iteration: int
) -> dict[str, float]:
    """Fine-tune ``run.model`` on ``examples`` (every process's, gathered) with SFTTrainer.

    Args:
        run: the training run (model, processor, optimizer, config).
        examples: this process's :func:`~uirl_agents.trajectories.to_sft_examples`.
        iteration: seeds the data order.

    Returns:
        ``train/*`` metrics (``train/examples`` 0 when there was nothing to train on).
    """
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    everyone = gather_object([prompt_completion(e) for e in examples])
    if not everyone:
        logger.info("iteration %d: no example passed the reward threshold; no update", iteration)
        return {"train/examples": 0.0}
    cfg = run.config
    o = cfg.optim
    max_tokens = _longest_example_tokens(run, everyone)
    batch_size = max(1, o.micro_batch_tokens // max_tokens)
    args = SFTConfig(
        output_dir=str(run.output_dir / "sft"),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=o.grad_accumulation_steps,
        num_train_epochs=o.epochs,
        learning_rate=o.learning_rate,
        lr_scheduler_type="constant",
        weight_decay=o.weight_decay,
        max_grad_norm=o.max_grad_norm or 1e9,
        max_length=None,  # never cut a prompt: its images and the completion must stay
        completion_only_loss=True,
        activation_checkpointing=cfg.model.gradient_checkpointing,
        activation_checkpointing_kwargs={"use_reentrant": False},
        use_cpu=run.accelerator.device.type == "cpu",
        seed=cfg.seed + iteration,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=not (cfg.logging.progress and run.is_main),
    )
    trainer = SFTTrainer(
        model=run.model,
        args=args,
        train_dataset=Dataset.from_list(everyone),
        processing_class=run.processor,
        optimizers=(run.optimizer, None),
    )
    trainer.remove_callback(PrinterCallback)  # we log ourselves
    trainer.remove_callback(ProgressCallback)
    result = trainer.train()
    run.model.eval()
    logs = [h for h in trainer.state.log_history if "loss" in h]
    return {
        "train/loss": float(np.mean([h["loss"] for h in logs])) if logs else float("nan"),
        "train/loss_last": float(logs[-1]["loss"]) if logs else float("nan"),
        "train/grad_norm": float(np.mean([h["grad_norm"] for h in logs])) if logs else 0.0,
        "train/examples": float(len(everyone)),
        "train/optimizer_steps": float(result.global_step),
        "train/tokens_processed": float(logs[-1].get("num_tokens", 0.0)) if logs else 0.0,
    }

"""PPO's critic: a linear value head on the policy's last hidden state.

``V(s_t) = w . h_t + b``, where ``h_t`` is the policy model's last-layer hidden state (after
the final norm) at the prompt's last token: the state the step's completion is sampled
from, with the screenshot(s), the instruction and the history already read. The head
shares the policy's trunk (its gradient reaches the LoRA adapter, weighted by
``ppo.value_coef``) and adds ``hidden_size + 1`` parameters, trained with the adapter by
the same optimizer and saved in every checkpoint (``value_head.pt``).

It starts at zero (every value 0, and no gradient through the trunk until ``w`` moves),
so the first update's policy gradient is the plain return's and the head's start is
the same on every process without any seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

VALUE_HEAD_CHECKPOINT = "value_head"


class ValueHead(nn.Module):
    """``V(s)`` from a hidden state: one float32 linear layer, zero at the start.

    Attributes:
        linear: ``hidden_size -> 1``.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1, dtype=torch.float32)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    @classmethod
    def for_model(cls, model: PreTrainedModel | PeftModel, device: torch.device) -> ValueHead:
        """A head sized for ``model``'s language model (its text config's hidden size)."""
        return cls(model.config.get_text_config().hidden_size).to(device)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """``(B, hidden_size)`` hidden states (any dtype) -> ``(B,)`` float32 values."""
        # Full fine-tuning runs forward passes under autocast (bf16): the head stays fp32.
        with torch.autocast(hidden.device.type, enabled=False):
            return self.linear(hidden.float()).squeeze(-1)

"""Tool-calling chat templates for VL checkpoints whose own template has none.

TRL's ``GRPOTrainer`` with ``environment_factory`` refuses a chat template that cannot
render a tool-calling conversation, and it must parse the model's tool calls back
(a *response template* on the tokenizer). Qwen2-VL, Qwen2.5-VL and UI-TARS-1.5 ship
one template (byte-identical across the three) that silently drops ``tool_calls`` and
tool messages. :func:`use_tool_chat_template` swaps in ``qwen2_vl_tools.jinja``: the
same rendering for conversations without tools, plus Qwen's own tool layout (the one
Qwen2.5 and Qwen3-VL use, so a Qwen model has seen it), prefix-preserving as TRL's
multi-turn loop requires. Templates that already support tools (Qwen3-VL) are kept.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any

logger = logging.getLogger(__name__)

QWEN2_VL_TOOLS_TEMPLATE = (
    resources.files(__package__).joinpath("chat_templates/qwen2_vl_tools.jinja").read_text("utf-8")
)


def _stock_qwen2_vl_template() -> str:
    # TRL keeps a copy of the stock template to recognise it by; so do we.
    from trl.chat_template_utils import qwen2_5_vl_chat_template

    return qwen2_5_vl_chat_template


def use_tool_chat_template(processor: Any) -> Any:
    """Make ``processor`` (a VL processor or a tokenizer) ready for TRL's tool calling.

    - a template that already renders tool calls (Qwen3-VL, ...) is kept;
    - the stock Qwen2-VL / Qwen2.5-VL / UI-TARS-1.5 template is replaced by
      :data:`QWEN2_VL_TOOLS_TEMPLATE`, and the tokenizer gets the response template that
      parses ``<tool_call>`` JSON (TRL's Qwen3 one, the same layout);
    - any other template without tools is refused.

    Returns:
        ``processor``, changed in place.

    Raises:
        ValueError: a template without tool calling that is not the stock Qwen2-VL one.
    """
    from trl.chat_template_utils import (
        _SUPPORTS_RESPONSE_TEMPLATE,
        qwen3_schema,
        qwen3_template,
        supports_tool_calling,
    )

    if supports_tool_calling(processor):
        return processor
    if processor.chat_template != _stock_qwen2_vl_template():
        raise ValueError(
            "the chat template cannot render tool calls, and it is not the stock Qwen2-VL / "
            "Qwen2.5-VL / UI-TARS-1.5 template that uirl knows how to replace: set "
            "processor.chat_template to a tool-calling template (and tokenizer.response_template "
            "to its parser) before handing it to GRPOTrainer"
        )
    processor.chat_template = QWEN2_VL_TOOLS_TEMPLATE
    tokenizer = getattr(processor, "tokenizer", processor)
    tokenizer.chat_template = QWEN2_VL_TOOLS_TEMPLATE
    if _SUPPORTS_RESPONSE_TEMPLATE:
        tokenizer.response_template = qwen3_template
    else:
        tokenizer.response_schema = qwen3_schema
    logger.info("chat template: the stock Qwen2-VL one, replaced by uirl's tool-calling one")
    return processor

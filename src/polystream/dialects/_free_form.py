"""Free-form (custom) tool calls: a tool call whose input is plain text, not JSON.

OpenAI has them in both of its dialects: a Responses ``custom_tool_call`` item (input
streamed by ``response.custom_tool_call_input.delta``) and a Chat ``custom`` tool call
(``{"type": "custom", "custom": {"name": ..., "input": ...}}``, its input streamed in
``custom.input`` fragments). Both decode to a ``tool_call`` block whose
:class:`~polystream.events.ToolInputDelta` events hold the text; the block's start
says which it is in the decoder's own ``extra``, read here, so that an encoder of
either dialect writes the call as that dialect's custom call (not as a function call
with arguments that are not JSON).
"""

from __future__ import annotations

from typing import Any

from polystream.events import BlockStart

__all__ = ["is_free_form"]


def is_free_form(start: BlockStart) -> bool:
    """Whether ``start`` opens a free-form (custom) tool call."""
    if start.kind != "tool_call" or start.extra is None:
        return False
    extra: Any = start.extra
    item = extra.get("item")  # Responses: the output_item.added payload
    if isinstance(item, dict) and item.get("type") == "custom_tool_call":
        return True
    chat = extra.get("chat")  # Chat: the tool-call fragment's residual
    if isinstance(chat, dict):
        fragment = chat.get("tc")
        return isinstance(fragment, dict) and fragment.get("type") == "custom"
    return False

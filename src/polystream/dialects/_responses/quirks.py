"""The documented differences between the OpenAI and xAI Responses streams.

Both dialects share one implementation (this package); each public dialect folder binds
a :class:`Quirks` value. Every field is a small, named behaviour switch, documented in
``docs/dialects/openai_responses.md`` and ``docs/dialects/xai_responses.md``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["OPENAI", "XAI", "Quirks"]


class Quirks(msgspec.Struct, frozen=True, kw_only=True):
    """Per-provider switches over the shared Responses code.

    Fields:
        dialect: The dialect name.
        custom_tool_kind: Block kind of ``custom_tool_call`` items. OpenAI custom tools
            are client tools (``tool_call``); xAI streams its *server-side* search tools
            as ``custom_tool_call`` items with a JSON-string input (``server_tool_call``).
        reasoning_maybe_excluded: The provider may leave reasoning tokens out of
            ``output_tokens`` (xAI counts them apart: ``total = input + output +
            reasoning``). When the stated total shows it, canonical ``output_tokens``
            adds them back (see :mod:`.usage`).
        id_style: How the encoder synthesises ids for foreign streams: OpenAI-style
            prefixed hex (``msg_…``) or xAI bare UUIDs.
        one_shot_arguments: The encoder sends a function call's arguments in one delta
            holding the whole JSON (xAI), instead of forwarding every fragment.
        created_at_zero: The encoder writes ``created_at: 0`` in the lifecycle
            snapshots before the terminal one (xAI's ``response.created`` snapshot).
    """

    dialect: str
    custom_tool_kind: Literal["tool_call", "server_tool_call"] = "tool_call"
    reasoning_maybe_excluded: bool = False
    id_style: Literal["openai", "uuid"] = "openai"
    one_shot_arguments: bool = False
    created_at_zero: bool = False


OPENAI = Quirks(dialect="openai_responses")
"""OpenAI Responses: the reference behaviour."""

XAI = Quirks(
    dialect="xai_responses",
    custom_tool_kind="server_tool_call",
    reasoning_maybe_excluded=True,
    id_style="uuid",
    one_shot_arguments=True,
    created_at_zero=True,
)
"""xAI Responses (``https://api.x.ai/v1/responses``): OpenAI event names, xAI data."""

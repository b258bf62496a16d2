"""The documented differences between the two Chat Completions dialects.

``openai_chat`` and ``xai_chat`` share one decoder, encoder and rebuilder; each binds a
:class:`Quirks` value. Everything provider-specific is here, so that a reader can see
in one screen how xAI's Chat stream differs from OpenAI's.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["OPENAI", "XAI", "Quirks"]


class Quirks(msgspec.Struct, frozen=True, kw_only=True):
    """How one Chat dialect differs from the common format.

    Fields:
        dialect: The dialect name.
        reasoning_native: ``delta.reasoning_content`` is a documented field of the
            provider (xAI: "Chat streams the full ``reasoning_content``", spec §7).
            When False it is polystream's carrier for reasoning text (also read by
            DeepSeek-style servers); encoding reasoning into it records a carried loss.
        completion_excludes_reasoning: ``usage.completion_tokens`` does not count
            reasoning tokens (xAI). Used when ``total_tokens`` does not settle the
            question (see :mod:`polystream.dialects._chat.usage`).
        created_zero: The provider sends ``created: 0`` in every chunk (xAI, spec §1);
            chunks synthesised from another dialect do the same.
        model: The model name written when the events name none.
        id_prefix: Prefix of synthesised completion ids.
        rebuild_reasoning: Whether the rebuilt non-streaming message carries
            ``reasoning_content`` (xAI's non-streaming message has it).
        choice_fields: The fields besides ``index`` and ``delta`` that the provider
            puts on every choice of a chunk: OpenAI sends ``"logprobs": null,
            "finish_reason": null``; xAI omits both until the finish. Residual diffs
            start from this, and chunks written from another dialect's events use it.
        role_delta: The delta of the chunk that opens a choice before its first
            output, or None when the role goes with the first output instead. OpenAI
            opens each choice with ``{"role": "assistant", "content": "", "refusal":
            null}`` (its documented first chunk); xAI puts ``"role": "assistant"`` on
            the first delta that carries text.
    """

    dialect: str
    reasoning_native: bool
    completion_excludes_reasoning: bool
    created_zero: bool
    model: str
    id_prefix: str = "chatcmpl-"
    rebuild_reasoning: bool = False
    choice_fields: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"logprobs": None, "finish_reason": None}
    )
    role_delta: dict[str, Any] | None = msgspec.field(
        default_factory=lambda: {"role": "assistant", "content": "", "refusal": None}
    )


OPENAI = Quirks(
    dialect="openai_chat",
    reasoning_native=False,
    completion_excludes_reasoning=False,
    created_zero=False,
    model="gpt-unknown",
)
"""OpenAI Chat Completions."""

XAI = Quirks(
    dialect="xai_chat",
    reasoning_native=True,
    completion_excludes_reasoning=True,
    created_zero=True,
    model="grok-unknown",
    rebuild_reasoning=True,
    choice_fields={},
    role_delta=None,
)
"""xAI Chat Completions: reasoning_content, created 0, reasoning outside completion_tokens."""

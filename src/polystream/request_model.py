"""The unified request: what a client asks any provider for, in one shape.

A native request body of any dialect parses into a :class:`Request`, and a
:class:`Request` builds the native body of any dialect (see
each dialect's request codec). The gateway goes inbound dialect -> Request ->
upstream dialect; the client builds the upstream body from a Request.

Opaque state that a client sends back in its history travels in the parts that own
it: Anthropic thinking ``signature`` and ``redacted_thinking`` data, Gemini
``thoughtSignature`` on any part, OpenAI/xAI reasoning ``encrypted_content``. It
reaches the upstream intact wherever the upstream dialect has a place for it.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

__all__ = [
    "ImagePart",
    "Message",
    "NativeRequest",
    "Part",
    "ReasoningConfig",
    "ReasoningPart",
    "Request",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
]


class _PartBase(msgspec.Struct, kw_only=True, omit_defaults=True, tag_field="type"):
    """Fields every part has.

    Fields:
        signature: Opaque provider state attached to the part (Gemini
            ``thoughtSignature``, Anthropic thinking ``signature``).
        extra: Native fields of the part that the model does not name.
    """

    signature: str | None = None
    extra: dict[str, Any] | None = None


class TextPart(_PartBase, tag="text"):
    """Text.

    Fields:
        text: The text.
    """

    text: str


class ImagePart(_PartBase, tag="image"):
    """An image, inline (base64) or by URL.

    Fields:
        data: Base64 data, for inline images.
        url: An image URL (``https:`` or ``data:``).
        mime_type: The media type.
    """

    data: str | None = None
    url: str | None = None
    mime_type: str | None = None


class ReasoningPart(_PartBase, tag="reasoning"):
    """Reasoning the model produced on an earlier turn, sent back in the history.

    Fields:
        text: The reasoning (or summary) text.
        redacted: Anthropic ``redacted_thinking`` data (opaque).
        encrypted_content: OpenAI/xAI reasoning ``encrypted_content`` (opaque).
        id: The provider's reasoning item id (OpenAI ``rs_...``).
    """

    text: str = ""
    redacted: str | None = None
    encrypted_content: str | None = None
    id: str | None = None


class ToolCallPart(_PartBase, tag="tool_call"):
    """A tool call the model made on an earlier turn.

    Fields:
        id: The call id (OpenAI ``call_id``, Anthropic ``tool_use`` id, Gemini id).
        name: The tool name.
        arguments: The parsed arguments.
        item_id: OpenAI Responses ``fc_...`` item id, when known.
    """

    name: str
    arguments: Any = msgspec.field(default_factory=dict)
    id: str | None = None
    item_id: str | None = None


class ToolResultPart(_PartBase, tag="tool_result"):
    """The result of a tool call, sent by the client.

    Fields:
        call_id: The id of the call it answers.
        name: The tool name (Gemini needs it).
        content: The result: text, or parts.
        is_error: True when the tool failed.
    """

    call_id: str | None = None
    name: str | None = None
    content: str | list[TextPart | ImagePart] = ""
    is_error: bool = False


Part: TypeAlias = TextPart | ImagePart | ReasoningPart | ToolCallPart | ToolResultPart


class Message(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One turn of the conversation.

    Fields:
        role: ``user``, ``assistant`` or ``tool`` (system text lives on the Request).
        content: The parts, in order.
    """

    role: Literal["user", "assistant", "tool"]
    content: list[Part] = msgspec.field(default_factory=list)


class Tool(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A client-side function tool.

    Fields:
        name: The function name.
        description: What it does.
        parameters: Its JSON Schema.
    """

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ReasoningConfig(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Reasoning / thinking settings.

    Fields:
        effort: ``minimal``, ``low``, ``medium``, ``high`` (OpenAI/xAI effort, Gemini
            thinking level).
        budget_tokens: A thinking budget (Anthropic ``budget_tokens``, Gemini
            ``thinkingBudget``).
        summary: Ask for reasoning summaries / thoughts in the output.
    """

    effort: str | None = None
    budget_tokens: int | None = None
    summary: bool | None = None


class Request(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A generation request in unified terms.

    Fields:
        model: The model name.
        messages: The conversation.
        system: System instructions.
        tools: Client-side function tools.
        tool_choice: ``auto``, ``none``, ``required``, or a tool name.
        max_tokens: Output token limit.
        temperature: Sampling temperature.
        top_p: Nucleus sampling.
        stop: Stop sequences.
        reasoning: Reasoning settings.
        stream: Stream the reply.
        include_usage: Ask for usage in the stream (Chat ``stream_options``).
        background: Run in the background (OpenAI Responses; resumable).
        extra: Native fields the model does not name: the body's top-level fields
            that its parser does not read (and, for Gemini and Interactions, those of
            the generation config object, under its name). Sent as they are when the
            request is built for the dialect it was parsed from (``origin``), or for
            any dialect when ``origin`` is None; not sent to another dialect, which
            has no place for them.
        origin: The dialect the request was parsed from (None: made in code).
    """

    model: str
    messages: list[Message] = msgspec.field(default_factory=list)
    system: str | None = None
    tools: list[Tool] = msgspec.field(default_factory=list)
    tool_choice: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] = msgspec.field(default_factory=list)
    reasoning: ReasoningConfig | None = None
    stream: bool = True
    include_usage: bool = True
    background: bool = False
    extra: dict[str, Any] | None = None
    origin: str | None = None

    def last_user_text(self) -> str:
        """The text of the last user message (empty when there is none)."""
        for message in reversed(self.messages):
            if message.role == "user":
                return "".join(p.text for p in message.content if isinstance(p, TextPart))
        return ""


class NativeRequest(msgspec.Struct, kw_only=True):
    """A native HTTP request, relative to the provider's base URL.

    Fields:
        path: Path under the base URL (``/responses``, ``/v1/messages``, ...).
        query: Query parameters.
        body: The JSON body.
    """

    path: str
    body: dict[str, Any]
    query: dict[str, str] = msgspec.field(default_factory=dict)

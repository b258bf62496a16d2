"""What a realtime client asks of its session, in terms every conversation family shares:
the **intents** a family's server reads from its client's messages
(:meth:`~polystream.dialects._realtime.server.SocketServer.take_intents`) and a family's
session turns into its own messages
(:meth:`~polystream.dialects._realtime.session.RealtimeSession.perform`).

They carry a client of one family to an upstream of another (the gateway's bridge): a
session that cannot carry an intent raises a
:class:`~polystream.errors.LocalProtocolError` naming what it lacks, which the bridge
answers with an error in the client's family.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from polystream.audio.formats import AudioFormat

__all__ = [
    "AddMessage",
    "AddToolCall",
    "Cancel",
    "ClearAudio",
    "CommitAudio",
    "Configure",
    "DeleteItem",
    "InputAudio",
    "InputVideo",
    "Intent",
    "Respond",
    "ToolOutput",
    "Truncate",
]


class Configure(msgspec.Struct, frozen=True, kw_only=True):
    """The session's whole configuration, as the client stated it last.

    Fields:
        instructions: The system instructions ("" : none).
        tools: The function tools, each ``{"name", "description", "parameters"}``.
        hosted: The provider-run tools (web search, MCP), each the client family's own
            object with its ``type``.
        modalities: What the replies give: ``("text",)``, ``("audio",)`` or both.
        turn_detection: The server detects the user's turns in the input audio (and
            answers them, and cuts a reply the user speaks over).
        input_audio: The format of the client's input audio.
        output_audio: The format of the audio the client expects.
    """

    instructions: str = ""
    tools: tuple[dict[str, Any], ...] = ()
    hosted: tuple[dict[str, Any], ...] = ()
    modalities: tuple[str, ...] = ("audio",)
    turn_detection: bool = True
    input_audio: AudioFormat | None = None
    output_audio: AudioFormat | None = None


class AddMessage(msgspec.Struct, frozen=True, kw_only=True):
    """A message added to the conversation.

    Fields:
        role: ``user``, ``assistant`` or ``system``.
        text: Its text parts, joined.
        images: Its images, as URLs (``data:`` URLs included).
        audio: Its audio, in the client's input format.
        item_id: The client's id of the item, when it gave one.
    """

    role: str
    text: str = ""
    images: tuple[str, ...] = ()
    audio: bytes | None = None
    item_id: str | None = None


class AddToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A function call the client put in the conversation (its history)."""

    call_id: str
    name: str
    arguments: str
    item_id: str | None = None


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """A function call's result (no reply asked for: a :class:`Respond` follows)."""

    call_id: str
    output: str
    name: str | None = None
    item_id: str | None = None


class InputAudio(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Input audio, in the format of the session's input."""

    data: bytes


class InputVideo(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A frame of input video (an image of a stream: Gemini Live's ``video``).

    Fields:
        data: The frame's bytes.
        mime_type: Its type (``image/jpeg``).
    """

    data: bytes
    mime_type: str


class CommitAudio(msgspec.Struct, frozen=True, kw_only=True):
    """The input audio so far is a user turn (without turn detection)."""


class ClearAudio(msgspec.Struct, frozen=True, kw_only=True):
    """The input audio not yet committed is dropped."""


class Respond(msgspec.Struct, frozen=True, kw_only=True):
    """A reply asked for.

    Fields:
        modalities: What it gives (``("text",)``, ``("audio",)``).
        out_of_band: It stays outside the conversation (OpenAI's
            ``conversation: "none"``).
        instructions: Instructions for this reply only.
        say: The text it says verbatim (xAI's ``force_message``).
    """

    modalities: tuple[str, ...] = ("audio",)
    out_of_band: bool = False
    instructions: str | None = None
    say: str | None = None


class Cancel(msgspec.Struct, frozen=True, kw_only=True):
    """Stop a reply (``response_id``: the upstream's id; None: the running one)."""

    response_id: str | None = None


class Truncate(msgspec.Struct, frozen=True, kw_only=True):
    """The user heard an assistant's audio only up to ``audio_end_ms``.

    Fields:
        item_id: The upstream's id of the audio item (None: the one played last).
        audio_end_ms: Where it was cut.
    """

    item_id: str | None
    audio_end_ms: int


class DeleteItem(msgspec.Struct, frozen=True, kw_only=True):
    """An item removed from the conversation (the upstream's id)."""

    item_id: str


Intent: TypeAlias = (
    Configure
    | AddMessage
    | AddToolCall
    | ToolOutput
    | InputAudio
    | InputVideo
    | CommitAudio
    | ClearAudio
    | Respond
    | Cancel
    | Truncate
    | DeleteItem
)
"""Anything a client asks that a bridge carries."""

"""The unified event model: one closed, tagged union for every dialect.

Every dialect decoder turns its provider's wire events into these, and every
encoder turns these back into wire bytes. The union :data:`Event` is the contract
between the two halves; changing it is a breaking change.

The model in brief
------------------
* A stream opens with :class:`StreamStart` and ends with exactly one :class:`Finish`.
* Every output unit is a **block** with a stable integer ``index`` that is unique in
  the stream (never reused, even when the provider reuses its own index): it opens
  with :class:`BlockStart`, receives deltas (:class:`TextDelta`,
  :class:`ReasoningDelta`, :class:`ToolInputDelta`, :class:`DataDelta`,
  :class:`SignatureDelta`, :class:`Citation`) and closes with :class:`BlockEnd`.
  Parallel tool calls are distinct blocks keyed by the provider's own identity.
* Opaque state (Anthropic ``signature`` and ``redacted_thinking`` data, Gemini
  ``thoughtSignature``, OpenAI/xAI ``encrypted_content``) travels in
  :class:`SignatureDelta` or in a block's ``value``; citations in :class:`Citation`;
  Gemini grounding and other response-level annotations in :class:`Metadata`.
* Fields the model does not name travel in each event's ``extra`` mapping, so that
  re-encoding to the same dialect reproduces the stream. ``raw`` optionally holds the
  native event (off by default); same-dialect round trips never depend on it.
* ``cursor`` carries the provider's resume cursor for the native event that produced
  this event (OpenAI ``sequence_number``, Gemini Interactions ``event_id``).

Events are frozen, keyword-only ``msgspec.Struct`` values; serialise them with
:func:`dump_event` / :func:`load_event` (JSON with a ``"type"`` tag). The mappings and
lists they hold are read-only too: a decoder may hand the same ``extra`` mapping to many
events, and an encoder may remember one it has checked by identity.

Events, :class:`Usage`, :class:`FinishReason` and :class:`ErrorInfo` are not tracked by
the garbage collector (``gc=False``): they hold JSON values and other such structs, so
they cannot be part of a reference cycle while what they hold stays unchanged. A stream's
events then add nothing to the collector's count, and a feed that returns hundreds of them
triggers no collection. (A mapping or list an event holds is tracked as usual, and a cycle
of its own is collected once the event is gone.)
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "RETRYABLE_KINDS",
    "STATUS_KINDS",
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "Citation",
    "DataDelta",
    "ErrorEvent",
    "ErrorInfo",
    "ErrorKind",
    "Event",
    "EventBase",
    "Finish",
    "FinishReason",
    "FinishStatus",
    "KeepAlive",
    "Lifetime",
    "MediaInfo",
    "Metadata",
    "RateLimit",
    "RateLimits",
    "Raw",
    "RealtimeEvent",
    "ReasoningDelta",
    "Resumption",
    "RetryAdvice",
    "SessionUpdate",
    "SignatureDelta",
    "Speech",
    "StatusUpdate",
    "Steering",
    "StreamStart",
    "StreamWarning",
    "TextDelta",
    "ToolInputDelta",
    "TranscriptSegment",
    "UnifiedFinishReason",
    "Unknown",
    "Usage",
    "UsageUpdate",
    "Warning",
    "dump_event",
    "dump_realtime_event",
    "event_to_builtins",
    "kind_for_status",
    "load_event",
    "load_realtime_event",
]

BlockKind: TypeAlias = Literal[
    "text",  # visible output text
    "reasoning",  # reasoning / thinking / thought text (summaries included)
    "tool_call",  # a client-side function or custom tool call
    "server_tool_call",  # a provider-executed tool call (web search, code execution, MCP, ...)
    "server_tool_result",  # the result of a provider-executed tool
    "image",  # image output (base64 data deltas; partial images replace each other)
    "audio",  # audio output (base64 data deltas; its format in ``BlockStart.media``)
    "transcript",  # a transcription of audio (text deltas, segments)
    "tool_result",  # the result of a client-side tool, sent by the client (agent sessions)
    "refusal",  # a refusal message
    "compaction",  # a context-compaction block
    "code",  # executable code produced by the model
    "code_result",  # the result of executing code
    "other",  # anything else, described by its ``name`` and ``value``
]
"""The kinds of output block."""

FinishStatus: TypeAlias = Literal["completed", "incomplete", "failed", "truncated"]
"""How a stream ended.

``completed``: the dialect's terminal event arrived and the reply is whole.
``incomplete``: the provider stopped early on purpose (token limit, content filter, pause).
``failed``: the provider reported an error (in-band after HTTP 200, or a failed status).
``truncated``: the input ended without the dialect's terminal event. Never success.
"""

UnifiedFinishReason: TypeAlias = Literal[
    "stop",  # natural end of turn or a stop sequence
    "length",  # a token limit was hit
    "tool_calls",  # the model wants tool results
    "content_filter",  # output was filtered or blocked
    "refusal",  # the model refused
    "pause",  # the provider paused a long turn (Anthropic ``pause_turn``)
    "context_window",  # the context window was exhausted
    "error",  # the stream failed
    "cancelled",  # the request was cancelled
    "other",  # anything else; ``raw`` says what
]
"""Unified finish reasons. Every dialect maps its own values here; ``raw`` keeps the original."""

ErrorKind: TypeAlias = Literal[
    "overloaded",
    "rate_limit",
    "invalid_request",
    "authentication",
    "permission",
    "not_found",
    "request_too_large",
    "server",
    "timeout",
    "content_filter",
    "quota",
    "protocol",  # the stream itself was malformed (tolerant-mode decode errors)
    "truncated",  # the stream ended without its terminal event
    "cancelled",
    "unknown",
]
"""The cause of an error, across providers."""

RETRYABLE_KINDS: Final[frozenset[str]] = frozenset(
    {"overloaded", "rate_limit", "server", "timeout"}
)
"""Error kinds that are safe to retry (before any output was delivered)."""

STATUS_KINDS: Final[dict[int, ErrorKind]] = {
    400: "invalid_request",
    401: "authentication",
    402: "quota",
    403: "permission",
    404: "not_found",
    408: "timeout",
    409: "server",
    413: "request_too_large",
    422: "invalid_request",
    429: "rate_limit",
    499: "cancelled",
    500: "server",
    502: "server",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}
"""The error kind each HTTP status means, for every provider (a numeric ``code`` inside an
error event means the same)."""


def kind_for_status(status: int) -> ErrorKind:
    """The unified error kind of an HTTP status (:data:`STATUS_KINDS`; any other 5xx is
    ``server``, any other status ``unknown``)."""
    kind = STATUS_KINDS.get(status)
    if kind is not None:
        return kind
    return "server" if status >= 500 else "unknown"


class FinishReason(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A finish reason: the unified value and the provider's own.

    Fields:
        unified: The unified reason.
        raw: The provider's value exactly as sent (``None`` when it sent none).
    """

    unified: UnifiedFinishReason
    raw: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Canonical token usage, plus the provider's own object.

    The arithmetic is the same for every dialect (each dialect's ``usage`` module
    documents its conversion):

    * ``input_tokens``: every prompt token the request processed, *including* cache
      reads, cache writes and tool-prompt tokens.
    * ``output_tokens``: every generated token, *including* reasoning/thought tokens.
    * ``total_tokens``: ``input_tokens + output_tokens`` unless the provider states a
      different total (then the provider's total, unchanged).
    * The other counts are *parts* of the two above, never additions to them.

    ``None`` means "not reported", which is different from 0.

    Fields:
        input_tokens: All prompt tokens (see above).
        output_tokens: All generated tokens (see above).
        reasoning_tokens: Part of ``output_tokens`` spent on reasoning/thoughts.
        cache_read_tokens: Part of ``input_tokens`` read from a prompt cache.
        cache_write_tokens: Part of ``input_tokens`` written to a prompt cache.
        tool_prompt_tokens: Part of ``input_tokens`` from tool-use prompts (Gemini).
        audio_input_tokens: Part of ``input_tokens`` that was audio.
        audio_output_tokens: Part of ``output_tokens`` that was audio.
        total_tokens: The total (see above).
        raw: The provider's usage object as sent.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    tool_prompt_tokens: int | None = None
    audio_input_tokens: int | None = None
    audio_output_tokens: int | None = None
    total_tokens: int | None = None
    raw: Any = None

    def is_empty(self) -> bool:
        """True when no count is reported or every reported count is 0.

        An empty usage never overwrites an earlier non-empty one (a later chunk
        without usage, or with zeros, is not authoritative).
        """
        # Short-circuits on the first count reported (the usual case: no tuple built).
        return not (
            self.input_tokens
            or self.output_tokens
            or self.total_tokens
            or self.reasoning_tokens
            or self.cache_read_tokens
            or self.cache_write_tokens
            or self.tool_prompt_tokens
            or self.audio_input_tokens
            or self.audio_output_tokens
        )

    def merged(self, newer: Usage) -> Usage:
        """Return this usage updated by ``newer``: each count ``newer`` reports wins.

        Counts that ``newer`` leaves as ``None`` keep their earlier value; an empty
        ``newer`` (see :meth:`is_empty`) changes nothing.
        """
        if not (
            # not newer.is_empty(), inlined (this runs once per usage update)
            newer.input_tokens
            or newer.output_tokens
            or newer.total_tokens
            or newer.reasoning_tokens
            or newer.cache_read_tokens
            or newer.cache_write_tokens
            or newer.tool_prompt_tokens
            or newer.audio_input_tokens
            or newer.audio_output_tokens
        ):
            return self
        if (
            (self.input_tokens is None or newer.input_tokens is not None)
            and (self.output_tokens is None or newer.output_tokens is not None)
            and (self.reasoning_tokens is None or newer.reasoning_tokens is not None)
            and (self.cache_read_tokens is None or newer.cache_read_tokens is not None)
            and (self.cache_write_tokens is None or newer.cache_write_tokens is not None)
            and (self.tool_prompt_tokens is None or newer.tool_prompt_tokens is not None)
            and (self.audio_input_tokens is None or newer.audio_input_tokens is not None)
            and (self.audio_output_tokens is None or newer.audio_output_tokens is not None)
            and (self.total_tokens is None or newer.total_tokens is not None)
            and (self.raw is None or newer.raw is not None)
        ):
            # ``newer`` reports every count this one does (the usual cumulative update):
            # the merge is ``newer`` itself, field for field.
            return newer
        return Usage(
            input_tokens=_pick(newer.input_tokens, self.input_tokens),
            output_tokens=_pick(newer.output_tokens, self.output_tokens),
            reasoning_tokens=_pick(newer.reasoning_tokens, self.reasoning_tokens),
            cache_read_tokens=_pick(newer.cache_read_tokens, self.cache_read_tokens),
            cache_write_tokens=_pick(newer.cache_write_tokens, self.cache_write_tokens),
            tool_prompt_tokens=_pick(newer.tool_prompt_tokens, self.tool_prompt_tokens),
            audio_input_tokens=_pick(newer.audio_input_tokens, self.audio_input_tokens),
            audio_output_tokens=_pick(newer.audio_output_tokens, self.audio_output_tokens),
            total_tokens=_pick(newer.total_tokens, self.total_tokens),
            raw=newer.raw if newer.raw is not None else self.raw,
        )


def _pick(newer: int | None, older: int | None) -> int | None:
    return older if newer is None else newer


class ErrorInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A typed error: what failed, why, and whether retrying can help.

    Fields:
        kind: The unified cause.
        message: The provider's message, or ours for protocol errors.
        retryable: Whether the same request may succeed if retried. For in-band
            errors this holds only while no output was delivered to the consumer.
        code: The provider's own error type or code (``overloaded_error``,
            ``rate_limit_exceeded``, ``RESOURCE_EXHAUSTED``, ...).
        http_status: The HTTP status the provider associated with the error.
        dialect: The dialect being decoded (protocol errors).
        event_index: 0-based framing event index at fault (protocol errors).
        byte_offset: Input offset of that event (protocol errors).
        raw: The provider's error object as sent.
    """

    kind: ErrorKind
    message: str
    retryable: bool = False
    code: str | None = None
    http_status: int | None = None
    dialect: str | None = None
    event_index: int | None = None
    byte_offset: int | None = None
    raw: Any = None


# --------------------------------------------------------------------------------------
# The events
# --------------------------------------------------------------------------------------


class MediaInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What an ``audio`` or ``image`` block holds, as far as the provider says.

    Fields:
        mime_type: The media type (``audio/pcm``, ``audio/mpeg``, ``image/png``).
        format: The provider's own format name (``pcm``, ``mp3``, ``wav``, ``png``).
        sample_rate: Audio samples per second (Gemini states it in the MIME type:
            ``audio/L16;rate=24000``; OpenAI's PCM is 24 kHz).
        channels: Audio channels.
        size: An image's size as the provider writes it (``1024x1024``).
        quality: An image's quality (``low``, ``medium``, ``high``).
        background: An image's background (``transparent``, ``opaque``).
    """

    mime_type: str | None = None
    format: str | None = None
    sample_rate: int | None = None
    channels: int | None = None
    size: str | None = None
    quality: str | None = None
    background: str | None = None


class EventBase(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag_field="type", gc=False
):
    """Fields every event has.

    Fields:
        extra: Native fields this event does not model, keyed as the dialect chooses,
            so that the dialect's encoder can reproduce the original exactly.
        cursor: The provider's resume cursor for the native event that produced
            this one (OpenAI ``sequence_number``, Interactions ``event_id``).
        raw: The native event, when the decoder was asked to keep it.
    """

    extra: dict[str, Any] | None = None
    cursor: int | str | None = None
    raw: Any = None


class StreamStart(EventBase, frozen=True, kw_only=True, tag="stream-start"):
    """The stream began: the provider's identity for the reply.

    Fields:
        dialect: The dialect name (see :mod:`polystream.dialects`).
        id: The response / message / interaction id, when known.
        model: The model that answers, as the provider names it.
        created: Creation time in Unix seconds, as sent (xAI sends 0).
    """

    dialect: str
    id: str | None = None
    model: str | None = None
    created: int | None = None


class StatusUpdate(EventBase, frozen=True, kw_only=True, tag="status"):
    """A lifecycle status from the provider (``queued``, ``in_progress``, ...).

    Fields:
        status: The provider's status word.
    """

    status: str


class BlockStart(EventBase, frozen=True, kw_only=True, tag="block-start"):
    """An output block opened.

    Fields:
        index: The unified block index: unique in the stream, in order of opening.
        kind: What the block holds.
        id: The provider's identity for the block (OpenAI item id, Anthropic tool
            use id, Gemini function call id), when it has one.
        call_id: The tool call id used to send a result back, when it differs from
            ``id`` (OpenAI ``call_id``).
        name: Tool name for tool blocks; the provider's block type for ``other``.
        candidate: The candidate / choice this block belongs to (Gemini
            ``candidateCount``, Chat ``n``); 0 for single-answer streams.
        value: The block's initial content when the provider sends it whole at the
            start (a server tool result, ``redacted_thinking`` data, complete
            function-call arguments as an object).
        media: For ``audio`` and ``image`` blocks: the format, as far as stated.
    """

    index: int
    kind: BlockKind
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    candidate: int = 0
    value: Any = None
    media: MediaInfo | None = None


class TextDelta(EventBase, frozen=True, kw_only=True, tag="text-delta"):
    """Text appended to a ``text`` or ``refusal`` block.

    Fields:
        index: The block index.
        delta: The text fragment.
        part: The provider's sub-part index within the block, when it has several
            (OpenAI ``content_index``).
    """

    index: int
    delta: str
    part: int | None = None


class ReasoningDelta(EventBase, frozen=True, kw_only=True, tag="reasoning-delta"):
    """Reasoning text appended to a ``reasoning`` block.

    Fields:
        index: The block index.
        delta: The text fragment.
        part: The provider's sub-part index (OpenAI ``summary_index`` or
            ``content_index``).
        summary: True for a reasoning *summary*, False for raw reasoning text.
    """

    index: int
    delta: str
    part: int | None = None
    summary: bool = False


class ToolInputDelta(EventBase, frozen=True, kw_only=True, tag="tool-input-delta"):
    """A fragment of a tool call's input (partial JSON text, or code for code tools).

    Fragments concatenate; the whole is parsed once, when the block ends.

    Fields:
        index: The block index.
        delta: The fragment.
    """

    index: int
    delta: str


class DataDelta(EventBase, frozen=True, kw_only=True, tag="data-delta"):
    """Binary content (base64) appended to an ``image`` or ``audio`` block.

    Fields:
        index: The block index.
        delta: Base64 text.
        mime_type: The media type, when the provider states it.
        replace: True when this chunk *replaces* earlier data (a partial image
            refined by a later one) rather than extending it.
        partial: For a partial image: its 0-based index among the partial images
            (OpenAI ``partial_image_index``); None for final data.
    """

    index: int
    delta: str
    mime_type: str | None = None
    replace: bool = False
    partial: int | None = None


class SignatureDelta(EventBase, frozen=True, kw_only=True, tag="signature-delta"):
    """Opaque provider state for a block, to be sent back verbatim on the next turn.

    Anthropic ``signature``, Gemini ``thoughtSignature``, OpenAI/xAI
    ``encrypted_content``, Interactions ``thought_signature``. Fragments concatenate (a
    provider usually sends one).

    Origin: the state belongs to the dialect that produced it, which is
    ``extra["carrier"]`` when present, else the dialect of the stream (its
    :class:`StreamStart`). Dialects are distinct origins even within a provider family
    (``openai_*`` vs ``xai_*``, ``anthropic_messages`` vs ``xai_messages``,
    ``gemini_generate`` vs ``gemini_interactions``): their state is not interchangeable.

    * An encoder writes state of its *own* origin natively (Responses
      ``encrypted_content`` on the reasoning item, the Messages thinking ``signature``
      without prefix, Gemini ``thoughtSignature`` on the part, the Interactions
      ``thought_signature`` delta).
    * State of another origin goes in the target's documented *carrier*, which records
      the origin: the ``polystream:v1:<origin>:`` prefix (Messages ``signature_delta``,
      Interactions ``thought_signature``), the base64-safe ``polystreamv1<hex origin>x…``
      prefix of Gemini ``thoughtSignature``, the ``origin`` of a Chat
      ``delta.polystream`` signature entry (Chat has no native field, so it always uses
      its carrier). The encoder reports it as a ``Loss`` with ``carried=True``.
    * A decoder that reads state out of a carrier emits the original bytes with
      ``extra["carrier"]`` = the recorded origin. The origin is kept across further hops
      (A -> B -> C -> A writes it natively again in A).
    * State an encoder can neither write natively nor carry is a ``Loss`` with
      ``carried=False`` and a reason: never dropped silently.

    Fields:
        index: The block index the state belongs to.
        delta: The opaque text, byte for byte (without any carrier marking).
    """

    index: int
    delta: str


class Citation(EventBase, frozen=True, kw_only=True, tag="citation"):
    """A citation or annotation on a block (or, with ``index`` None, on the reply).

    Fields:
        index: The block index, or None for reply-level citations.
        citation: The provider's citation object as sent.
        part: The provider's sub-part index, when it has one.
    """

    citation: Any
    index: int | None = None
    part: int | None = None


class TranscriptSegment(EventBase, frozen=True, kw_only=True, tag="transcript-segment"):
    """A timed segment of a ``transcript`` block (diarized transcription), whole.

    Fields:
        index: The block index.
        text: The segment's text.
        start: Its start, in seconds from the audio's beginning.
        end: Its end, in seconds.
        speaker: The speaker's label, when the transcription is diarized.
        id: The provider's id for the segment.
    """

    index: int
    text: str
    start: float | None = None
    end: float | None = None
    speaker: str | None = None
    id: str | None = None


class Metadata(EventBase, frozen=True, kw_only=True, tag="metadata"):
    """Reply-level information: Gemini grounding, URL context, safety ratings,
    prompt feedback, and similar.

    Fields:
        name: What it is (``grounding``, ``url_context``, ``safety_ratings``, ...).
        value: The provider's object as sent.
        candidate: The candidate it belongs to.
        merge: When True and ``value`` is a mapping, lists in it extend the lists
            already accumulated under ``name`` and other keys replace (Gemini sends
            only the *new* grounding chunks); when False it replaces.
    """

    name: str
    value: Any
    candidate: int = 0
    merge: bool = False


class BlockEnd(EventBase, frozen=True, kw_only=True, tag="block-end"):
    """An output block closed.

    Fields:
        index: The block index.
        status: The provider's status for the block, when it states one.
        value: The block's final content when the provider restates it whole at
            the end (the accumulator uses it only when no deltas arrived).
    """

    index: int
    status: str | None = None
    value: Any = None


class UsageUpdate(EventBase, frozen=True, kw_only=True, tag="usage"):
    """Token usage reported mid-stream. Counts a later update reports win; an
    empty update never overwrites (see :meth:`Usage.merged`).

    Fields:
        usage: The usage as reported by this native event.
    """

    usage: Usage


class ErrorEvent(EventBase, frozen=True, kw_only=True, tag="error"):
    """An error inside the stream: a provider error after HTTP 200, or (in tolerant
    mode) a protocol error that the decoder skipped over.

    Fields:
        error: What failed.
    """

    error: ErrorInfo


class Finish(EventBase, frozen=True, kw_only=True, tag="finish"):
    """The stream ended. Exactly one per stream, always last.

    Fields:
        status: ``completed``, ``incomplete``, ``failed`` or ``truncated``.
        reason: The unified and raw finish reason.
        usage: Final usage, when the terminal event carries it.
        error: The error that ended the stream (``failed`` and ``truncated``).
    """

    status: FinishStatus
    reason: FinishReason
    usage: Usage | None = None
    error: ErrorInfo | None = None


class KeepAlive(EventBase, frozen=True, kw_only=True, tag="keep-alive"):
    """A keep-alive: an SSE comment line or a provider ``ping`` event.

    Fields:
        comment: The comment text (without the leading colon), if it was a comment.
        name: The native event name, if it was an event (``ping``, ``keepalive``).
    """

    comment: str | None = None
    name: str | None = None


class StreamWarning(EventBase, frozen=True, kw_only=True, tag="warning"):
    """Something odd that did not stop decoding (a sequence-number gap, a repeated
    event). Strict mode raises instead. (Its wire tag is ``warning``; ``Warning`` is
    kept as an alias, though it shadows the builtin where imported.)

    Fields:
        code: A stable machine-readable code (``sequence_gap``, ...).
        message: What was seen, and where.
        event_index: 0-based framing event index.
        byte_offset: Input offset of that event.
    """

    code: str
    message: str
    event_index: int | None = None
    byte_offset: int | None = None


Warning = StreamWarning
"""The older name of :class:`StreamWarning`."""


class Unknown(EventBase, frozen=True, kw_only=True, tag="unknown"):
    """A native event this version does not know, passed through untouched.

    Fields:
        name: The native event name or type, if any.
        data: The native payload, as text, exactly as received.
    """

    data: str
    name: str | None = None


class Raw(EventBase, frozen=True, kw_only=True, tag="raw"):
    """A native event, emitted before its unified events when raw output is requested.

    Fields:
        dialect: The dialect.
        data: The native event as parsed JSON (or text when it is not JSON).
        name: The native event name, if any.
    """

    dialect: str
    data: Any
    name: str | None = None


Event: TypeAlias = (
    StreamStart
    | StatusUpdate
    | BlockStart
    | TextDelta
    | ReasoningDelta
    | ToolInputDelta
    | DataDelta
    | SignatureDelta
    | Citation
    | Metadata
    | BlockEnd
    | UsageUpdate
    | ErrorEvent
    | Finish
    | KeepAlive
    | StreamWarning
    | TranscriptSegment
    | Unknown
    | Raw
)
"""Every unified event. This union is the contract of the library."""

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final = msgspec.json.Decoder(Event)


def dump_event(event: Event) -> bytes:
    """Serialise an event to compact JSON with its ``"type"`` tag."""
    return _ENCODER.encode(event)


def load_event(data: bytes | str) -> Event:
    """Parse JSON produced by :func:`dump_event` back into an event.

    Raises:
        msgspec.ValidationError: The JSON is not a valid event.
    """
    return _DECODER.decode(data)


def event_to_builtins(event: Event) -> dict[str, Any]:
    """Return an event as plain JSON-compatible Python values (with ``"type"``)."""
    out: dict[str, Any] = msgspec.to_builtins(event)
    return out


# --------------------------------------------------------------------------------------
# Realtime session events
# --------------------------------------------------------------------------------------
#
# A realtime (WebSocket) session carries many replies over one connection, and news of
# the session itself between them. Each reply is an ordinary stream of the events above
# (StreamStart ... Finish); what belongs to the session and to no reply is one of the
# events below. They are not members of :data:`Event` (an encoder of an HTTP dialect
# never meets them): :data:`RealtimeEvent` is the union a session gives, and
# :func:`load_realtime_event` reads what :func:`dump_event` wrote of any of them.


class SessionUpdate(EventBase, frozen=True, kw_only=True, tag="session"):
    """The provider created the session or changed its configuration (OpenAI Realtime
    ``session.created`` / ``session.updated``).

    Fields:
        status: ``created`` or ``updated``.
        id: The session's id.
        model: The model it runs.
        config: The provider's session object, as sent.
        input_audio: The format of the audio it expects, as far as stated.
        output_audio: The format of the audio it sends, as far as stated.
    """

    status: str
    id: str | None = None
    model: str | None = None
    config: Any = None
    input_audio: MediaInfo | None = None
    output_audio: MediaInfo | None = None


class Speech(EventBase, frozen=True, kw_only=True, tag="speech"):
    """Voice activity the provider detected in the input audio (server VAD).

    Fields:
        state: ``started``, ``stopped``, or ``timeout`` (no speech for the session's
            idle timeout).
        start_ms: Where the speech (or the silence, for ``timeout``) began, in
            milliseconds of input audio since the session began.
        end_ms: Where it ended.
        item_id: The conversation item the speech goes into.
    """

    state: Literal["started", "stopped", "timeout"]
    start_ms: int | None = None
    end_ms: int | None = None
    item_id: str | None = None


class RateLimit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One rate limit as the provider reports it.

    Fields:
        name: What it limits (``requests``, ``tokens``).
        limit: The maximum.
        remaining: What is left.
        reset_seconds: Seconds until it is restored.
    """

    name: str | None = None
    limit: int | None = None
    remaining: int | None = None
    reset_seconds: float | None = None


class RateLimits(EventBase, frozen=True, kw_only=True, tag="rate-limits"):
    """The provider's rate limits changed (OpenAI Realtime ``rate_limits.updated``).

    Fields:
        limits: Each limit, in the provider's order.
    """

    limits: list[RateLimit]


class Lifetime(EventBase, frozen=True, kw_only=True, tag="lifetime"):
    """The session or its connection reached, or is about to reach, its maximum
    duration.

    Fields:
        state: ``expired`` (the session is over: OpenAI Realtime ``session_expired``),
            ``limit_reached`` (the connection takes no more requests: Responses
            WebSocket ``websocket_connection_limit_reached``) or ``going_away`` (the
            connection closes in ``time_left``).
        reason: The provider's code.
        max_duration: The documented maximum, in seconds, when there is one.
        time_left: Seconds left, for ``going_away``.
        message: The provider's message.
        error: The error the provider reported it as, typed.
    """

    state: Literal["expired", "limit_reached", "going_away"]
    reason: str | None = None
    max_duration: float | None = None
    time_left: float | None = None
    message: str | None = None
    error: ErrorInfo | None = None


class Steering(EventBase, frozen=True, kw_only=True, tag="steering"):
    """What became of input sent into a running reply (Responses WebSocket
    ``response.steer`` and ``response.inject``).

    Fields:
        action: ``steer`` or ``inject``.
        state: The provider's word: ``accepted`` (the provider holds the input, not yet
            applied), ``pending`` (it waits for required input), ``failed`` (it was not
            committed; ``input`` returns it) for steering; ``created`` (committed) or
            ``failed`` for injection.
        id: The steering submission's id, when one was allocated.
        response_id: The response steered or injected into.
        input: The uncommitted input a failure returns.
        required_input: The input stubs a ``pending`` submission waits for.
        reason: Why it is pending (``waiting_for_required_input``).
        error: Why it failed, typed.
    """

    action: Literal["steer", "inject"]
    state: str
    id: str | None = None
    response_id: str | None = None
    input: Any = None
    required_input: Any = None
    reason: str | None = None
    error: ErrorInfo | None = None


class RetryAdvice(EventBase, frozen=True, kw_only=True, tag="retry-advice"):
    """How a request that failed may be sent again safely.

    Fields:
        code: The provider's error code that calls for it.
        replay: What the retry must send: ``full_history`` (the whole conversation as
            input, not a ``previous_response_id`` the provider no longer holds).
        new_connection: The retry goes on a new connection.
        safe: The error came before any output, so the retry cannot repeat any.
    """

    code: str
    replay: Literal["full_history"]
    new_connection: bool
    safe: bool


class Resumption(EventBase, frozen=True, kw_only=True, tag="resumption"):
    """The provider's news of how the session can be resumed on a new connection
    (Gemini Live ``sessionResumptionUpdate``).

    Fields:
        handle: The handle that resumes the session as it stands (None when it cannot
            be resumed now).
        resumable: Whether resuming now keeps everything (false while the model
            generates or runs tool calls).
        last_consumed: The index of the last client message the handle includes, on
            the connection (counted from 0, the setup), when the provider states it.
    """

    handle: str | None = None
    resumable: bool = False
    last_consumed: int | None = None


RealtimeEvent: TypeAlias = (
    Event | SessionUpdate | Speech | RateLimits | Lifetime | Steering | RetryAdvice | Resumption
)
"""Every event a realtime session gives: the unified events of its replies and the
session's own."""

_REALTIME_DECODER: Final = msgspec.json.Decoder(RealtimeEvent)


def dump_realtime_event(event: RealtimeEvent) -> bytes:
    """Serialise any realtime session event to compact JSON with its ``"type"`` tag (as
    :func:`dump_event` does for the unified events)."""
    return _ENCODER.encode(event)


def load_realtime_event(data: bytes | str) -> RealtimeEvent:
    """Parse JSON produced by :func:`dump_realtime_event` (or :func:`dump_event`) back
    into any realtime session event.

    Raises:
        msgspec.ValidationError: The JSON is not a valid event.
    """
    return _REALTIME_DECODER.decode(data)

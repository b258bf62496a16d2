"""The scenario format: what the emulator answers, to which requests, how fast, and
which faults it injects.

A scenario file is JSON (or YAML when PyYAML is installed). Its top level is one
scenario object, a list of them, or ``{"scenarios": [...]}``. Every object is checked
against the Structs below with unknown keys rejected, so a typo is an error with a path
(``$.scenarios[1].faults.http_eror``), never a silently ignored setting. The reference,
with examples, is ``docs/emulator.md``.

Everything here is in unified terms: a reply states reasoning, text, tool calls, server
tool blocks, citations, usage and finish once, and the emulator renders it in whatever
dialect the client speaks.
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Final, Literal

import msgspec

from polystream.errors import PolystreamError
from polystream.events import ErrorKind, UnifiedFinishReason

__all__ = [
    "AudioSpec",
    "Chunking",
    "Faults",
    "FinishSpec",
    "HttpError",
    "ImageSpec",
    "InBandError",
    "Interrupt",
    "Match",
    "ReasoningSpec",
    "Reply",
    "Scenario",
    "ScenarioError",
    "SegmentSpec",
    "ServerToolSpec",
    "SocketClose",
    "Timing",
    "ToolCallSpec",
    "UsageSpec",
    "load_scenarios",
    "parse_scenarios",
]


class ScenarioError(PolystreamError):
    """A scenario file is malformed (the message names the JSON path at fault)."""


class _Spec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base of every scenario object: keyword-only, unknown keys rejected."""


class Match(_Spec):
    """Which requests a scenario answers. Every stated condition must hold.

    Fields:
        model: The requested model: an exact name or a glob (``gpt-*``).
        contains: A substring of the text of the last user message.
        tools: True: the request declares tools; False: it declares none.
        tool_result: True: the last input item is a tool result (the second step of
            a tool-calling turn); False: it is not.
        dialect: Only these dialects (a name or a list of names).
        provider: Only these providers (``openai``, ``anthropic``, ``xai``, ``gemini``).
    """

    model: str | None = None
    contains: str | None = None
    tools: bool | None = None
    tool_result: bool | None = None
    dialect: str | list[str] | None = None
    provider: str | list[str] | None = None


class ReasoningSpec(_Spec):
    """The reply's reasoning block.

    Fields:
        text: The reasoning text.
        signature: Opaque state sent back on the next turn (Anthropic ``signature``,
            Gemini ``thoughtSignature``, OpenAI/xAI ``encrypted_content``).
        summary: True when the text is a reasoning *summary* (OpenAI Responses
            ``reasoning_summary_text``), False for raw reasoning text.
    """

    text: str = ""
    signature: str | None = None
    summary: bool = False


class ToolCallSpec(_Spec):
    """A client tool call.

    Fields:
        name: The tool name.
        arguments: The arguments: an object, or a JSON text streamed as is.
        id: The call id (default: derived deterministically from the reply).
    """

    name: str
    arguments: dict[str, Any] | str = msgspec.field(default_factory=dict)
    id: str | None = None


class ServerToolSpec(_Spec):
    """A provider-executed tool: its call block, then (optionally) its result block.

    Fields:
        name: The server tool name (``web_search``, ``code_execution``, ...).
        input: The call's input object.
        result: The result content, as the unified ``server_tool_result`` value.
        id: The call id (default: derived deterministically).
    """

    name: str
    input: dict[str, Any] = msgspec.field(default_factory=dict)
    result: Any = None
    id: str | None = None


class UsageSpec(_Spec):
    """Token usage in canonical terms (see :class:`polystream.events.Usage`)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    total_tokens: int | None = None


class AudioSpec(_Spec):
    """The reply's audio: a tone (see :func:`polystream.scenario._media.tone`).

    Fields:
        text: What the tone stands for (default: the text of the request, the words a
            text-to-speech request speaks); it gives the frequency and the length.
        frequency: The tone's frequency in Hz instead (20 to 12,000).
        seconds: Its length in seconds instead (above 0, at most 20).
        chunk: Bytes of audio per delta (a positive multiple of 6: whole samples, and
            base64 without padding).
    """

    text: str | None = None
    frequency: float | None = None
    seconds: float | None = None
    chunk: int = 4800


class ImageSpec(_Spec):
    """The reply's image: a PNG (see :func:`polystream.scenario._media.png`).

    Fields:
        text: What the picture stands for (default: the request's prompt); it gives the
            colours.
        width, height: The size in pixels instead of the requested one (1 to 2048).
        partial_images: How many partial images come first, instead of the request's
            ``partial_images`` (0 to 3).
    """

    text: str | None = None
    width: int | None = None
    height: int | None = None
    partial_images: int | None = None


class SegmentSpec(_Spec):
    """A diarized transcript segment.

    Fields:
        text: What the speaker says.
        speaker: The speaker's label.
        start, end: Its times in seconds (default: one after the other, 0.4 s a word).
    """

    text: str
    speaker: str = "A"
    start: float | None = None
    end: float | None = None


class FinishSpec(_Spec):
    """How the reply ends.

    Fields:
        status: ``completed`` or ``incomplete``.
        reason: The unified finish reason (default: ``tool_calls`` when the reply
            has tool calls, else ``stop``).
        raw: The provider's own finish value, when one dialect is targeted.
    """

    status: Literal["completed", "incomplete"] = "completed"
    reason: UnifiedFinishReason | None = None
    raw: str | None = None


class Reply(_Spec):
    """What the model says, in order: reasoning, server tools, text, tool calls, audio,
    image.

    Fields:
        reasoning: The reasoning (a string is shorthand for ``{"text": ...}``).
        text: The visible text; a list of strings gives the exact deltas. A
            transcription's transcript.
        tool_calls: Client tool calls.
        server_tools: Provider-executed tool calls and their results.
        citations: Citation objects attached to the text block, passed through as
            sent (each dialect's encoder carries what it can).
        audio: An audio block (a tone); ``true`` for the default one. Speech and
            audio-out requests get one without asking.
        image: An image block (a PNG); ``true`` for the default one. Image requests
            get one without asking.
        segments: A transcript's diarized segments (default, for a diarizing request:
            one per sentence of the text, all by speaker ``A``).
        usage: Token usage (default: counted from the words of the request and reply).
        finish: How the reply ends.
        replay: A recorded capture to replay instead (any dialect; a path relative
            to the scenario file). The other reply fields are then ignored.
    """

    reasoning: ReasoningSpec | str | None = None
    text: str | list[str] | None = None
    tool_calls: list[ToolCallSpec] = msgspec.field(default_factory=list)
    server_tools: list[ServerToolSpec] = msgspec.field(default_factory=list)
    citations: list[Any] = msgspec.field(default_factory=list)
    audio: AudioSpec | bool | None = None
    image: ImageSpec | bool | None = None
    segments: list[SegmentSpec] = msgspec.field(default_factory=list)
    usage: UsageSpec | None = None
    finish: FinishSpec | None = None
    replay: str | None = None


class Chunking(_Spec):
    """How text, reasoning and tool arguments are cut into deltas.

    Fields:
        size: Characters per delta; None cuts text at word boundaries and tool
            arguments every 16 characters.
    """

    size: int | None = None


class Timing(_Spec):
    """When each wire event leaves the server.

    Fields:
        first_event: Seconds from the response headers to the first event.
        delay: Seconds between events.
        recorded: Recorded offsets (seconds from the headers) of the events, replayed
            instead of ``first_event``/``delay``; events past the end of the list
            follow the last one at ``delay`` intervals.
        speed: Playback speed for every duration (2.0 = twice as fast).
        audio_delay: WebSocket replies: seconds after each audio delta instead of
            ``delay`` (slow audio).
        audio_burst: WebSocket replies: audio deltas come in bursts of this many, the
            ``audio_delay`` only after the last of each burst (bursty audio).
    """

    first_event: float = 0.0
    delay: float = 0.0
    recorded: list[float] | None = None
    speed: float = 1.0
    audio_delay: float | None = None
    audio_burst: int = 1


class HttpError(_Spec):
    """Answer with an HTTP error instead of the reply.

    Fields:
        status: 400, 401, 403, 404, 413, 429, 500, 503 or 529 (any 4xx/5xx works).
        retry_after: Seconds for the ``Retry-After`` header (None: no header).
        message: The error message (default: a provider-like one per status).
        times: Only the first N matching requests fail (None: all of them).
    """

    status: int
    retry_after: float | None = None
    message: str | None = None
    times: int | None = None


class InBandError(_Spec):
    """An error inside a 200 stream, after ``after`` wire events.

    Fields:
        after: Wire events sent before the error (the error follows the first
            unified event at which at least this many have been produced).
        kind: The unified error kind (``overloaded``, ``rate_limit``, ``server``...).
        message: The error message.
        code: The provider's error type or code (default: the dialect's own for kind).
    """

    after: int = 0
    kind: ErrorKind = "overloaded"
    message: str = "Overloaded"
    code: str | None = None


class SocketClose(_Spec):
    """Close a WebSocket mid-reply.

    Fields:
        after: Messages of the reply sent first (0: before its first).
        code: The close code (1000 to 4999).
        reason: The close reason (at most 123 bytes of UTF-8).
    """

    after: int = 0
    code: int = 1011
    reason: str = ""


class Interrupt(_Spec):
    """The user speaks over a Realtime reply (voice activity detected by the server).

    Fields:
        after: Messages of the reply sent first.
        cancel: The server cuts the reply (server VAD's ``interrupt_response``);
            otherwise it goes on after ``pause``.
        pause: Seconds the reply stops for when it is not cut (the client may cancel it
            meanwhile).
    """

    after: int = 0
    cancel: bool = True
    pause: float = 0.0


class Faults(_Spec):
    """Faults to inject.

    Fields:
        http_error: Answer with an HTTP error status instead of the reply.
        error: An in-band error after N wire events (the stream then fails).
        drop_at_event: Drop the connection after this many wire events.
        drop_at_byte: Drop the connection after this many body bytes.
        no_terminal: End the response cleanly but without the dialect's terminal
            event(s) (``[DONE]``, ``message_stop``, ``response.completed``, ``]``...).
        keepalive: Send an SSE comment (``: keep-alive``) every N seconds of silence.
        split_utf8: Cut each event's bytes inside its first multi-byte UTF-8 character.
        line_endings: ``lf`` (as encoded), ``crlf`` or ``cr`` line ends in SSE framing.
        cr_at_chunk_end: With ``crlf``: cut chunks between every CR and its LF.
        chunk_size: Cut each event into chunks of at most this many bytes.
        close: WebSocket replies: close the socket mid-reply with a code.
        expire_after: WebSockets: seconds after connecting, the family's lifetime error
            (Realtime ``session_expired``, Responses ``websocket_connection_limit_reached``)
            and a close with code 1001 (the scenario that matches the connection).
        interrupt: Realtime replies: the user speaks over the reply.
    """

    http_error: HttpError | None = None
    error: InBandError | None = None
    drop_at_event: int | None = None
    drop_at_byte: int | None = None
    no_terminal: bool = False
    keepalive: float | None = None
    split_utf8: bool = False
    line_endings: Literal["lf", "crlf", "cr"] = "lf"
    cr_at_chunk_end: bool = False
    chunk_size: int | None = None
    close: SocketClose | None = None
    expire_after: float | None = None
    interrupt: Interrupt | None = None


class Scenario(_Spec):
    """One scenario: a match rule, a reply, its cutting and timing, its faults.

    Fields:
        name: A label, shown in logs and errors.
        match: Which requests it answers (default: every request).
        reply: What to answer (default: the deterministic default reply).
        chunking: How deltas are cut.
        timing: When events leave.
        faults: Faults to inject.
    """

    name: str | None = None
    match: Match = msgspec.field(default_factory=Match)
    reply: Reply | None = None
    chunking: Chunking = msgspec.field(default_factory=Chunking)
    timing: Timing = msgspec.field(default_factory=Timing)
    faults: Faults = msgspec.field(default_factory=Faults)

    def __post_init__(self) -> None:
        _check(self)

    def matches(
        self,
        *,
        dialect: str,
        provider: str,
        model: str,
        user_text: str,
        has_tools: bool,
        has_tool_result: bool,
    ) -> bool:
        """Whether this scenario answers a request with these properties."""
        rule = self.match
        if rule.model is not None and not fnmatch.fnmatchcase(model, rule.model):
            return False
        if rule.contains is not None and rule.contains not in user_text:
            return False
        if rule.tools is not None and rule.tools != has_tools:
            return False
        if rule.tool_result is not None and rule.tool_result != has_tool_result:
            return False
        if rule.dialect is not None and dialect not in _names(rule.dialect):
            return False
        return rule.provider is None or provider in _names(rule.provider)


def _names(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


_MAX_WAIT: Final = 86_400.0
"""Longest ``Retry-After`` a scenario may ask for, in seconds (a day)."""


def _check(scenario: Scenario) -> None:
    """Value checks msgspec's types cannot express (ranges)."""
    timing, faults = scenario.timing, scenario.faults
    durations = [timing.first_event, timing.delay, timing.speed, *(timing.recorded or [])]
    for value in (
        faults.keepalive,
        timing.audio_delay,
        faults.expire_after,
        faults.interrupt.pause if faults.interrupt is not None else None,
    ):
        if value is not None:
            durations.append(value)
    if not all(math.isfinite(value) for value in durations):
        raise ValueError("timing values and fault durations must be finite numbers")
    if timing.first_event < 0 or timing.delay < 0 or (timing.audio_delay or 0) < 0:
        raise ValueError("timing durations must be >= 0")
    if timing.audio_burst < 1:
        raise ValueError("timing.audio_burst must be >= 1")
    if timing.speed <= 0:
        raise ValueError("timing.speed must be > 0")
    if timing.recorded is not None and any(
        b < a for a, b in zip(timing.recorded, timing.recorded[1:], strict=False)
    ):
        raise ValueError("timing.recorded offsets must not decrease")
    if scenario.chunking.size is not None and scenario.chunking.size < 1:
        raise ValueError("chunking.size must be >= 1")
    http_error = faults.http_error
    if http_error is not None:
        if not 400 <= http_error.status <= 599:
            raise ValueError("faults.http_error.status must be a 4xx or 5xx status")
        if http_error.retry_after is not None and not 0 <= http_error.retry_after <= _MAX_WAIT:
            raise ValueError(f"faults.http_error.retry_after must be 0 to {_MAX_WAIT:.0f} seconds")
        if http_error.times is not None and http_error.times < 0:
            raise ValueError("faults.http_error.times must be >= 0")
    for name in ("drop_at_event", "drop_at_byte", "chunk_size"):
        value = getattr(faults, name)
        if value is not None and value < (1 if name == "chunk_size" else 0):
            raise ValueError(f"faults.{name} is out of range")
    if faults.keepalive is not None and faults.keepalive <= 0:
        raise ValueError("faults.keepalive must be > 0")
    if faults.error is not None and faults.error.after < 0:
        raise ValueError("faults.error.after must be >= 0")
    _check_socket(faults)
    if scenario.reply is not None:
        _check_media(scenario.reply)


def _check_socket(faults: Faults) -> None:
    close, interrupt = faults.close, faults.interrupt
    if close is not None:
        if close.after < 0:
            raise ValueError("faults.close.after must be >= 0")
        if not 1000 <= close.code <= 4999 or close.code in (1004, 1005, 1006, 1015):
            raise ValueError("faults.close.code must be a code a server may send (1000 to 4999)")
        if len(close.reason.encode("utf-8")) > 123:
            raise ValueError("faults.close.reason must be at most 123 bytes of UTF-8")
    if faults.expire_after is not None and faults.expire_after < 0:
        raise ValueError("faults.expire_after must be >= 0")
    if interrupt is not None and (interrupt.after < 0 or interrupt.pause < 0):
        raise ValueError("faults.interrupt.after and .pause must be >= 0")


def _check_media(reply: Reply) -> None:
    audio, image = reply.audio, reply.image
    if isinstance(audio, AudioSpec):
        if audio.frequency is not None and not 20 <= audio.frequency <= 12_000:
            raise ValueError("reply.audio.frequency must be 20 to 12000 Hz")
        if audio.seconds is not None and not 0 < audio.seconds <= 20:
            raise ValueError("reply.audio.seconds must be above 0 and at most 20")
        if audio.chunk < 6 or audio.chunk % 6:
            raise ValueError("reply.audio.chunk must be a positive multiple of 6")
    if isinstance(image, ImageSpec):
        for name in ("width", "height"):
            value = getattr(image, name)
            if value is not None and not 1 <= value <= 2048:
                raise ValueError(f"reply.image.{name} must be 1 to 2048")
        if image.partial_images is not None and not 0 <= image.partial_images <= 3:
            raise ValueError("reply.image.partial_images must be 0 to 3")


def parse_scenarios(document: Any, *, source: str = "<scenarios>") -> list[Scenario]:
    """Validate already-parsed JSON/YAML values into scenarios.

    Args:
        document: One scenario object, a list of them, or ``{"scenarios": [...]}``.
        source: Where it came from, for error messages.

    Raises:
        ScenarioError: The document is not a valid scenario list.
    """
    items: Any = document
    if isinstance(document, dict) and "scenarios" in document:
        if set(document) - {"scenarios"}:
            raise ScenarioError(f"{source}: only 'scenarios' is allowed beside a scenario list")
        items = document["scenarios"]
    elif isinstance(document, dict):
        items = [document]
    if not isinstance(items, list):
        raise ScenarioError(f"{source}: expected a scenario object or a list of them")
    try:
        return msgspec.convert(items, list[Scenario])
    except msgspec.ValidationError as exc:
        raise ScenarioError(f"{source}: {exc}") from None


def load_scenarios(
    data: bytes | str, *, format: Literal["json", "yaml"] = "json", source: str = "<scenarios>"
) -> list[Scenario]:
    """Parse scenario file content.

    Args:
        data: The file's content.
        format: ``json`` or ``yaml`` (YAML needs PyYAML, an optional dependency).
        source: The file name, for error messages.

    Raises:
        ScenarioError: Not valid JSON/YAML, not a valid scenario list, or YAML asked
            for without PyYAML installed.
    """
    if format == "yaml":
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            raise ScenarioError(
                f"{source}: YAML scenarios need PyYAML (pip install pyyaml); use JSON"
            ) from None
        try:
            document = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise ScenarioError(f"{source}: invalid YAML: {exc}") from None
    else:
        try:
            document = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise ScenarioError(f"{source}: invalid JSON: {exc}") from None
    return parse_scenarios(document, source=source)

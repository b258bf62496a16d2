"""Detect a stream's dialect from its first bytes (``dialect="auto"``).

The rules, in order (documented in docs/cli.md):

0. The input starts with the signature of an audio file (an ID3 tag or an MPEG audio
   frame, ``RIFF....WAVE``, ``fLaC``, ``OggS``, an AAC ADTS frame:
   :func:`polystream.audio.sniff_audio`): the dialect whose
   :attr:`~polystream.dialects._spec.DetectSpec.media_types` claims that media type
   (``openai_speech``), in its ``raw`` framing; :attr:`Detector.media_type` is the
   type. (A response whose ``Content-Type`` is known is claimed from it alone:
   :func:`dialect_for_media_type`.)
1. The first non-blank byte is ``[``: ``gemini_generate`` in the JSON-array framing.
   A ``{`` is a single JSON document, not a stream: an error.
2. Otherwise the input is read as SSE, and the first event whose data is a JSON object
   decides (``ping``, ``[DONE]`` and bare ``error`` events are skipped):

   * an event name or ``type`` starting with ``response.``: ``openai_responses``, or
     ``xai_responses`` when ``response.model`` starts with ``grok``;
   * ``message_start``: ``anthropic_messages``, or ``xai_messages`` for a ``grok`` model;
   * an ``event_type`` key, or an event name starting with ``interaction.``, ``step.``
     or ``content.``: ``gemini_interactions``;
   * ``object: chat.completion.chunk`` or a ``choices`` key: ``openai_chat``, or
     ``xai_chat`` for a ``grok`` model;
   * ``candidates``, ``usageMetadata``, ``promptFeedback`` or ``modelVersion`` keys:
     ``gemini_generate`` in the SSE framing;
   * the media and agent dialects by their event names: ``speech.``
     (``openai_speech``), ``transcript.text.`` (``openai_transcription``),
     ``image_generation.`` / ``image_edit.`` (``openai_images``), ``agent.session.``
     (``openai_agent_session``), ``session.``, ``agent.``, ``span.``, ``user.``
     (``anthropic_agent_session``).

Detection needs at most :data:`MAX_DETECT_BYTES` of input: when nothing decides within
it (blank bytes included), it fails. :class:`Detector` reads a stream that arrives in
pieces, each byte once.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.audio import SNIFF_BYTES, may_be_audio, sniff_audio
from polystream.dialects._spec import DetectSpec
from polystream.errors import RemoteProtocolError
from polystream.wire.framing import BLANK
from polystream.wire.jsondepth import too_deep
from polystream.wire.sse import ServerSentEvent, SSEDecoder

__all__ = ["BLANK", "MAX_DETECT_BYTES", "RAW", "Detector", "detect", "dialect_for_media_type"]

MAX_DETECT_BYTES: Final = 1024 * 1024
"""Input read before giving up on detection (1 MiB)."""

RAW: Final = "raw"
"""The framing of a body that is a media file, not a stream of events."""


def _model_of(obj: dict[str, Any], *path: str) -> str:
    node: Any = obj
    for key in path:
        if not isinstance(node, dict):
            return ""
        node = node.get(key)
    return node if isinstance(node, str) else ""


_RULES: list[tuple[str, DetectSpec]] = []
"""The registered dialects' detection hints, in the order they are tried (read from the
registry on first use: the registry imports this module)."""


def _rules() -> list[tuple[str, DetectSpec]]:
    if not _RULES:
        from polystream.dialects import DIALECTS

        _RULES.extend(
            sorted(
                ((spec.name, spec.detect) for spec in DIALECTS.values()), key=lambda r: r[1].order
            )
        )
    return _RULES


def dialect_for_media_type(media_type: str | None) -> str | None:
    """The dialect whose :attr:`~polystream.dialects._spec.DetectSpec.media_types`
    claims a body of this media type (a ``Content-Type``; its parameters are ignored),
    to decode in its ``raw`` framing; None when no dialect does."""
    if not media_type:
        return None
    base = media_type.split(";", 1)[0].strip().lower()
    if not base:
        return None
    for name, rule in _rules():
        for claimed in rule.media_types:
            if base == claimed or (claimed.endswith("/") and base.startswith(claimed)):
                return name
    return None


def _claims(rule: DetectSpec, tags: tuple[str, str], obj: dict[str, Any]) -> bool:
    for tag in tags:
        if tag and (tag in rule.names or (rule.prefixes and tag.startswith(rule.prefixes))):
            return True
    if any(key in obj for key in rule.keys):
        return True
    return bool(rule.objects) and obj.get("object") in rule.objects


def _classify(event: ServerSentEvent) -> str | None:
    if event.data.strip() == "[DONE]":
        return None
    if too_deep(event.data) is not None:
        return None  # (never parsed: the decoder reports it, see FramedDecoder)
    try:
        obj = msgspec.json.decode(event.data)
    except msgspec.DecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    raw_kind = obj.get("type")
    tags = (event.event or "", raw_kind if isinstance(raw_kind, str) else "")
    for name, rule in _rules():
        if not _claims(rule, tags, obj):
            continue
        if rule.model_prefix is None or _model_of(obj, *rule.model_path).startswith(
            rule.model_prefix
        ):
            return name
    return None


def detect(prefix: bytes) -> tuple[str, str] | None:
    """Detect the dialect and framing of a stream from its beginning.

    Args:
        prefix: The first bytes of the stream (all that has arrived so far).

    Returns:
        ``(dialect, framing)``, or None when more input is needed.

    Raises:
        RemoteProtocolError: The input cannot be a stream of any dialect, or nothing
            was recognised within :data:`MAX_DETECT_BYTES`.
    """
    return Detector().feed(prefix)


class Detector:
    """:func:`detect` over a stream that arrives in pieces: after each :meth:`feed`,
    the answer :func:`detect` gives for everything fed so far, with each byte read
    once (calling :func:`detect` on the growing prefix reads it again on every
    piece: quadratic in the prefix, up to :data:`MAX_DETECT_BYTES`).

    Every byte up to the limit goes to one SSE parser as it comes, blank bytes too:
    they give it no event, and whether the input is SSE at all is decided by its first
    non-blank byte. The first :data:`~polystream.audio.SNIFF_BYTES` bytes are kept
    while they may still be the start of an audio file."""

    __slots__ = ("_blank", "_error", "_found", "_head", "_media_type", "_size", "_sse")

    def __init__(self) -> None:
        self._size = 0  # bytes fed so far
        self._blank = True  # no non-blank byte yet
        self._sse = SSEDecoder(max_line_size=MAX_DETECT_BYTES, max_event_size=MAX_DETECT_BYTES)
        self._found: tuple[str, str] | None = None
        self._error: RemoteProtocolError | None = None
        # The first bytes while they may begin an audio file; None once they cannot.
        self._head: bytes | None = b""
        self._media_type: str | None = None

    @property
    def media_type(self) -> str | None:
        """The media type of the audio file the input is (the ``raw`` framing), once
        found."""
        return self._media_type

    def feed(self, data: bytes) -> tuple[str, str] | None:
        """Consume the next piece of the stream; return :func:`detect`'s answer for
        the whole input so far (the same answer again once found).

        Raises:
            RemoteProtocolError: As :func:`detect` (again on each later call).
        """
        if self._found is not None:
            return self._found
        if self._error is not None:
            raise self._error.again()
        try:
            return self._feed(data)
        except RemoteProtocolError as exc:
            self._error = exc.again()
            raise

    def _feed(self, data: bytes) -> tuple[str, str] | None:
        before = self._size
        self._size += len(data)
        if self._head is not None and data:
            found = self._sniff(data)
            if found is not None:
                return found
        if self._blank:
            stripped = data.lstrip(BLANK)
            if stripped:
                self._blank = False
                first = stripped[:1]
                if first == b"[":
                    self._found = ("gemini_generate", "json_array")
                    return self._found
                if first == b"{":
                    raise RemoteProtocolError(
                        "input is a single JSON document, not a stream (a non-streaming response?)",
                        byte_offset=before + len(data) - len(stripped),
                    )
        # Only the first MAX_DETECT_BYTES are read.
        room = MAX_DETECT_BYTES - before
        if room > 0:
            try:
                frames = self._sse.feed(data[:room] if len(data) > room else data)
            except RemoteProtocolError:
                frames = []
            for frame in frames:
                if isinstance(frame, ServerSentEvent):
                    dialect = _classify(frame)
                    if dialect is not None:
                        self._found = (dialect, "sse")
                        return self._found
        if self._size >= MAX_DETECT_BYTES:
            raise RemoteProtocolError(
                f"could not detect the dialect in the first {MAX_DETECT_BYTES} bytes"
                + (" (all blank)" if self._blank else ""),
                byte_offset=0,
            )
        return None

    def _sniff(self, data: bytes) -> tuple[str, str] | None:
        """Rule 0: the input begins an audio file some dialect claims."""
        assert self._head is not None
        head = self._head + data[: SNIFF_BYTES - len(self._head)]
        media_type = sniff_audio(head)
        if media_type is not None:
            self._head = None
            dialect = dialect_for_media_type(media_type)
            if dialect is not None:
                self._media_type = media_type
                self._found = (dialect, RAW)
                return self._found
        elif may_be_audio(head):
            self._head = head
        else:
            self._head = None
        return None

"""Chat Completions stream -> unified events (``openai_chat`` and ``xai_chat``).

Mapping (the full table is in docs/dialects/openai_chat.md):

* first chunk -> :class:`StreamStart` (``id``, ``model``, ``created``);
* ``delta.reasoning_content`` -> ``reasoning`` block, :class:`ReasoningDelta`;
  ``delta.content`` -> ``text`` block; ``delta.refusal`` -> ``refusal`` block
  (:class:`TextDelta`). Chat has no block boundaries: a text-like block stays open
  until another kind of output starts in the same choice (then :class:`BlockEnd`) or
  the choice's ``finish_reason`` arrives. Empty strings and ``null`` open nothing
  (OpenAI's first chunk has ``"content": ""`` and ``"refusal": null``).
* ``delta.tool_calls[]`` -> one ``tool_call`` block per call, keyed by
  (choice, tool ``index``) *and* ``id``: a fragment with a new id at an index already
  in use opens a new block, never merging two calls (pain-points §3.2, #14). The id
  arrives only on a call's first fragment; later fragments find the block by index.
  A fragment without an index continues the one open call of its choice; with several
  open calls it is ambiguous, which is a protocol error (never a guess by position).
  Argument fragments -> :class:`ToolInputDelta`; a no-argument tool streams ``""``
  and accumulates to ``{}``.
* ``delta.annotations[]`` -> :class:`Citation` on the text block.
* ``finish_reason`` -> :class:`Metadata` ``finish_reason`` (per choice) and
  :class:`BlockEnd` for the choice's open blocks.
* ``usage`` (the ``choices: []`` chunk, or any chunk: xAI sends it on the second-to-last
  chunk or cumulatively on every chunk) -> :class:`UsageUpdate`; the last non-empty
  one is the Finish's usage, an empty one never overwrites it (pain-points #19, #20).
* top-level ``moderation`` -> :class:`Metadata` ``moderation``.
* ``{"error": {...}}`` (a line of its own, or inside a chunk, as OpenRouter sends it with
  ``finish_reason: "error"``) -> :class:`ErrorEvent` typed by cause; the stream ends
  ``failed``.
* ``data: [DONE]`` -> :class:`Finish` with choice 0's finish reason (other choices' are
  in their ``finish_reason`` Metadata) and the final usage. No ``[DONE]`` -> truncated.
* SSE comments (OpenRouter ``: OPENROUTER PROCESSING``) -> :class:`KeepAlive`.
* a JSON object that is not a chunk (``{"type": "keepalive"}``) -> :class:`Unknown`.

The polystream carrier: ``delta.polystream`` is a list of entries that this library
writes when it encodes what Chat cannot express (signatures, another dialect's
citations and metadata); it is read back into :class:`SignatureDelta`,
:class:`Citation` and :class:`Metadata` (see :mod:`polystream.dialects._chat.encode`).
A signature entry's ``origin`` becomes the SignatureDelta's ``extra["carrier"]``.

Residuals (``extra["chat"]``), so that the same dialect's encoder reproduces every chunk
exactly without ``raw`` (each key is present only when needed):

* ``cf``: on :class:`StreamStart`, the choice fields that choice residual diffs start
  from (the dialect's :attr:`~.quirks.Quirks.choice_fields`).
* ``env``: on the *last* event of each chunk (it marks the chunk's end): the diff of the
  chunk's top-level fields against the previous chunk (see :func:`.wire.diff`); modelled
  values are replaced by placeholders (``choices`` -> ``[]``, ``usage``/``moderation``
  -> ``null``), everything else (``system_fingerprint``, ``service_tier``,
  ``obfuscation``, xAI ``citations``...) is kept as sent.
* ``ev``: the SSE ``event:`` name, when the chunk had one.
* ``ci``/``ch``/``d``: on the first wire event of a choice entry, when the encoder could
  not infer them: the choice index, the diff of the choice's fields other than
  ``index``/``delta`` (``logprobs``...; a finish_reason is a placeholder ``null``), and the
  delta's fields that no event carries (``role``, ``"content": ""``, ``"refusal": null``...).
* ``tc``: the tool-call fragment minus the modelled values (``id``, ``function.name``,
  non-empty ``function.arguments``), on :class:`BlockStart` and on a fragment that is
  not the standard continuation ``{"index": n, "function": {"arguments": "..."}}``.
* ``p``: the event came from the ``polystream`` carrier; ``pi``: its entry's ``index``
  when it is not the next one in the choice's count (``"-"``: no index); ``pe``: the
  whole entry, when it is not what the encoder would write for the event.
* ``top``: an error line's fields besides ``error``; ``c``: the error was inside a
  chunk; ``done: false`` on a Finish that had no ``[DONE]`` (a failed stream that just
  closed).

Fast path: most chunks of a stream repeat the previous chunk's envelope (only
``obfuscation`` changes) and carry one text, reasoning or argument fragment for an open
block. Such a chunk is decoded into :class:`.wire.FastChunk` (no dict, no copies, no
diffs) and gives the very events the general path gives; anything else, or any doubt,
takes the general path. When the chunk's text starts with the envelope text of the last
one, only its tail is decoded; the commonest such chunks are taken in the dispatch loop
itself (:meth:`ChatDecoder._dispatch_sse`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, get_args

import msgspec
from msgspec import UNSET, UnsetType

from polystream.dialects._base import FramedDecoder
from polystream.dialects._chat.finish_reason import is_known_finish_reason, map_finish_reason
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import convert_usage
from polystream.dialects._chat.wire import (
    CHUNK_OBJECT,
    DECODER,
    DONE,
    ENCODER,
    EXTRA_KEY,
    FAST_TAIL_DECODER,
    TAIL_SHAPE_DECODER,
    EnvelopeChunk,
    FastChoice,
    FastChunk,
    FastTail,
    decode_envelope,
    decode_fast_chunk,
    decode_fast_tail,
    diff,
)
from polystream.errors import StreamTruncated
from polystream.events import (
    RETRYABLE_KINDS,
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
    ErrorKind,
    Event,
    Finish,
    FinishReason,
    FinishStatus,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    UnifiedFinishReason,
    Unknown,
    Usage,
    UsageUpdate,
    Warning,
)
from polystream.wire.sse import ServerSentEvent, SSEComment

__all__ = ["ChatDecoder", "error_kind"]

_UNIFIED_REASONS: Final = frozenset(get_args(UnifiedFinishReason))
_STATUSES: Final = frozenset(get_args(FinishStatus))
# The "choices" placeholder in an envelope (never mutated; shared to keep diffs cheap).
_NO_CHOICES: Final[list[Any]] = []
# The usual choice residual: what a fast-path choice with null logprobs and
# finish_reason must find (its diff is then empty).
_NULL_RESIDUAL: Final[dict[str, Any]] = {"logprobs": None, "finish_reason": None}
# delta keys that events carry; every other delta key is a residual.
_MODELLED_DELTA: Final = frozenset(
    {"content", "refusal", "reasoning_content", "tool_calls", "annotations", "polystream"}
)
_TEXT_FIELDS: Final[tuple[tuple[str, BlockKind], ...]] = (
    ("reasoning_content", "reasoning"),
    ("content", "text"),
    ("refusal", "refusal"),
)

# OpenAI error `type`/`code` values (API reference "Error codes") and the words other
# Chat servers use -> unified kind. Anything else is "unknown".
_ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "server_error": "server",
    "internal_error": "server",
    "api_error": "server",
    "service_unavailable": "overloaded",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "tokens": "rate_limit",
    "requests": "rate_limit",
    "insufficient_quota": "quota",
    "invalid_request_error": "invalid_request",
    "context_length_exceeded": "invalid_request",
    "authentication_error": "authentication",
    "invalid_api_key": "authentication",
    "permission_error": "permission",
    "not_found_error": "not_found",
    "model_not_found": "not_found",
    "content_filter": "content_filter",
    "content_policy_violation": "content_filter",
    "timeout": "timeout",
    "request_timeout": "timeout",
}


# Numeric codes (OpenRouter sends HTTP-like ones in mid-stream errors) -> unified kind.
_STATUS_KINDS: Final[dict[int, ErrorKind]] = {
    400: "invalid_request",
    401: "authentication",
    402: "quota",
    403: "permission",
    404: "not_found",
    408: "timeout",
    413: "request_too_large",
    429: "rate_limit",
    500: "server",
    502: "server",
    503: "overloaded",
    504: "timeout",
    529: "overloaded",
}


def error_kind(error: Any) -> ErrorKind:
    """The unified kind of a Chat error object (its ``code``, then its ``type``)."""
    if isinstance(error, dict):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str) and value in _ERROR_KINDS:
                return _ERROR_KINDS[value]
            if type(value) is int and value in _STATUS_KINDS:
                return _STATUS_KINDS[value]
    return "unknown"


class _Tool:
    """One open tool-call block."""

    __slots__ = ("block", "id", "tool_index")

    def __init__(self, block: int, id: str | None, tool_index: Any) -> None:
        self.block = block
        self.id = id
        self.tool_index = tool_index


class _Choice:
    """Decoding state of one choice (candidate)."""

    __slots__ = (
        "carry_next",
        "finish_override",
        "finish_raw",
        "last_of_kind",
        "open_tools",
        "residual",
        "text",
        "tools",
    )

    def __init__(self, residual: dict[str, Any]) -> None:
        self.residual = residual
        self.text: tuple[int, BlockKind] | None = None  # the open text-like block
        self.tools: dict[int, _Tool] = {}  # provider tool index -> open block
        self.open_tools: list[_Tool] = []
        self.last_of_kind: dict[str, int] = {}  # for carrier signatures and citations
        self.finish_raw: str | None = None
        self.carry_next = 0  # the polystream carrier index the encoder would write next
        # a carried finish reason (another dialect's, see the encoder)
        self.finish_override: tuple[FinishReason, FinishStatus] | None = None


class ChatDecoder(FramedDecoder):
    """Decoder for a Chat Completions stream; bound to a dialect by :class:`Quirks`.

    Args:
        quirks: The dialect's quirks (set by the dialect's subclass).
        strict: Raise typed protocol errors (also for unknown chunks and data after
            ``[DONE]``) instead of emitting error events.
        keep_raw: Emit a :class:`~polystream.events.Raw` event before each chunk's events.
    """

    quirks: ClassVar[Quirks]

    def __init__(self, *, strict: bool = False, keep_raw: bool = False, **options: Any) -> None:
        super().__init__(strict=strict, keep_raw=keep_raw, **options)
        self._started = False
        self._env: dict[str, Any] = {}
        self._choices: dict[int, _Choice] = {}
        self._next_block = 0
        self._tool_index_of: dict[int, Any] = {}  # tool block -> provider tool index
        self._usage: Usage | None = None
        self._error: ErrorInfo | None = None
        # per chunk:
        self._events: list[Event] = []
        self._explicit: dict[str, Any] = {}  # ci/ch/d of the current choice entry
        self._need = False  # the encoder cannot infer the entry: say it explicitly
        self._wired = False  # a wire event was emitted for the current choice entry
        self._entry_candidate: int | None = None  # candidate of the chunk's last entry
        self._last_frag: tuple[int, bool] | None = None  # (block, has arguments)
        # The typed fast path (see _fast): the previous chunk's envelope as typed values
        # (None: it was not of the fast shape), its obfuscation, and the text of the last
        # chunk taken by the fast path, whose envelope and choice residual are rebuilt
        # (key order included) only when a general chunk needs them (_restore).
        self._fast_env: tuple[Any, ...] | None = None
        self._fast_obf: Any = msgspec.UNSET
        self._fast_data: str | None = None
        # The text of that envelope's chunk before its ``"choices":`` key, when every
        # envelope key is in it (see _envelope_text): a chunk that starts with the same
        # text has the same envelope, and only its tail needs decoding.
        self._fast_prefix: str | None = None
        self._fast_ok = self._fast_paths and not self.keep_raw

    # -- framing hooks ----------------------------------------------------------------

    def _dispatch_sse(self, frames: list[ServerSentEvent | SSEComment], out: list[Event]) -> None:
        """The frames of one ``feed``: the commonest chunks taken in this loop, the rest
        through the base class's dispatch.

        Taken here: a chunk that starts with the known envelope text and whose tail
        decodes to one choice with null ``logprobs`` and ``finish_reason`` continuing an
        open block, exactly as :meth:`_on_event` takes it through :meth:`_fast_choice`
        (nothing else happened since the last chunk :meth:`_on_event` handled, so the
        state it reads is the same). The state :meth:`_fast_choice` would write
        (``_fast_obf``, ``_fast_data``, ``_last_frag``) and the frame location are
        recorded when the loop hands a frame over and at the end. Anything else goes to
        :meth:`_on_event`.
        """
        if not self._fast_ok or type(self)._handle_sse is not FramedDecoder._handle_sse:
            super()._dispatch_sse(frames, out)
            return
        tail_decode = FAST_TAIL_DECODER.decode
        append = out.append
        prefix = self._fast_prefix if self._started and not self.finished else None
        size = len(prefix) if prefix is not None else 0
        usage = self._fast_env[-1] if self._fast_env is not None else None
        obf_last = self._fast_obf
        current: int | None = None  # the choice index whose state (null residual) is known
        state: _Choice | None = None
        taken: ServerSentEvent | None = None  # the last frame taken here
        frag: int | None = None  # the tool block of the last fragment taken here
        for frame in frames:
            if prefix is not None and type(frame) is ServerSentEvent:
                data = frame.data
                if data.startswith(prefix):
                    try:
                        tail: FastTail | None = tail_decode("{" + data[size:])
                    except (msgspec.DecodeError, RecursionError):
                        tail = None  # _on_event decides (and raises as usual)
                    if tail is not None and tail.usage is usage and len(tail.choices) == 1:
                        choice = tail.choices[0]
                        if choice.logprobs is None and choice.finish_reason is None:
                            if choice.index != current:
                                state = self._choices.get(choice.index)
                                current = choice.index
                                if state is not None and state.residual != _NULL_RESIDUAL:
                                    state = None
                            obf = tail.obfuscation
                            change: dict[str, Any] | None = None
                            if obf == obf_last:
                                change = {}
                            elif obf is not UNSET:
                                change = {"obfuscation": obf}
                            hot: Event | None = None
                            if state is not None and change is not None:
                                delta = choice.delta
                                content = delta.content
                                calls = delta.tool_calls
                                reasoning = delta.reasoning_content
                                text = state.text
                                name = frame.event
                                extra = {
                                    EXTRA_KEY: {"env": change}
                                    if name is None
                                    else {"env": change, "ev": name}
                                }
                                if calls is UNSET:
                                    if text is not None:
                                        if reasoning is UNSET:
                                            if (
                                                content is not UNSET
                                                and content
                                                and text[1] == "text"
                                            ):
                                                hot = TextDelta(
                                                    index=text[0], delta=content, extra=extra
                                                )
                                        elif (
                                            reasoning
                                            and content is UNSET
                                            and text[1] == "reasoning"
                                        ):
                                            hot = ReasoningDelta(
                                                index=text[0], delta=reasoning, extra=extra
                                            )
                                elif (
                                    content is UNSET
                                    and reasoning is UNSET
                                    and len(calls) == 1
                                    and text is None
                                ):
                                    call = calls[0]
                                    args = call.function.arguments
                                    tool = state.tools.get(call.index)
                                    if args and tool is not None:
                                        hot = ToolInputDelta(
                                            index=tool.block, delta=args, extra=extra
                                        )
                                        frag = tool.block
                            if hot is not None:
                                append(hot)
                                obf_last = obf
                                taken = frame
                                continue
            # Anything else: as the base class dispatches it.
            if taken is not None:
                self._fast_obf = obf_last
                self._fast_data = taken.data
                taken = None
                if frag is not None:
                    self._last_frag = (frag, True)
                    frag = None
            self._handle_sse(frame, out)
            prefix = self._fast_prefix if self._started and not self.finished else None
            size = len(prefix) if prefix is not None else 0
            usage = self._fast_env[-1] if self._fast_env is not None else None
            obf_last = self._fast_obf
            current = None
        if taken is not None:
            self._fast_obf = obf_last
            self._fast_data = taken.data
            if frag is not None:
                self._last_frag = (frag, True)
            self.frame_index = taken.index
            self.frame_offset = taken.offset

    def _on_event(self, event: ServerSentEvent, out: list[Event]) -> None:
        data = event.data
        if data == DONE:
            self._done(out)
            return
        fast: FastChunk | None = None
        if self._started and self._fast_ok:
            prefix = self._fast_prefix
            if prefix is not None and data.startswith(prefix):
                # The envelope is the text of the last one: decode the tail alone.
                tail = decode_fast_tail("{" + data[len(prefix) :])
                if tail is not None:
                    env = self._fast_env
                    assert env is not None
                    if tail.usage is env[-1] and self._fast_choice(
                        tail.choices, tail.obfuscation, data, event.event, out
                    ):
                        return
            fast = decode_fast_chunk(data)
            if fast is not None and self._fast(fast, data, event.event, out):
                return
        self._fast_env = None
        self._fast_prefix = None
        try:
            obj = DECODER.decode(data)
        except msgspec.DecodeError as exc:
            # The line is kept whole in ErrorInfo.raw: nothing received is lost.
            self._bad(out, f"malformed JSON in a data line: {exc}", data)
            return
        if self.keep_raw:
            self.raw_event(out, event.event, obj)
        if type(obj) is not dict:
            self._bad(out, f"chunk payload is a JSON {type(obj).__name__}, not an object", data)
            return
        if obj.get("error") is not None and "choices" not in obj:
            # OpenAI's in-band error line (openai-python Stream checks data["error"]).
            self._error_line(obj, out)
            return
        if "choices" not in obj and obj.get("object") != CHUNK_OBJECT and "usage" not in obj:
            if self.strict:
                raise self.protocol_error(f"not a chat.completion.chunk: {data[:200]}")
            name = obj.get("type") if isinstance(obj.get("type"), str) else event.event
            x: dict[str, Any] = {"ev": event.event} if event.event is not None else {}
            out.append(Unknown(name=name, data=data, extra={EXTRA_KEY: x}))
            return
        self._chunk(obj, event, out)
        envelope: FastChunk | EnvelopeChunk | None = fast
        if envelope is None and self._fast_ok:
            # A chunk of the fast envelope whose delta is of another shape (OpenAI's
            # first chunk: the role, an empty content, a null refusal): the next chunk,
            # the first text, may still take the fast path.
            envelope = decode_envelope(data)
        if envelope is not None:
            self._fast_env = _envelope(envelope)
            self._fast_obf = envelope.obfuscation
            self._fast_prefix = _envelope_text(data)

    def _fast(self, chunk: FastChunk, data: str, name: str | None, out: list[Event]) -> bool:
        """The hot chunk shapes without a dict per chunk; False: take the general path.

        Taken when the chunk's envelope equals the previous chunk's (only
        ``obfuscation`` may change), its one choice has the same (null) residual
        fields as before, and its delta is non-empty ``content`` (or
        ``reasoning_content``) continuing the open block of that kind, or one standard
        argument continuation of an open tool call. The events, and their ``extra``,
        are exactly those of :meth:`_chunk` (checked by the fixtures' snapshots and by
        ``tests/dialects/test_fast_paths.py``, which compares both paths).
        """
        env = self._fast_env
        # The envelope less ``obfuscation`` (typed values, UNSET for an absent key),
        # as _envelope builds it, inlined.
        if env is None or env != (
            chunk.id,
            chunk.object,
            chunk.created,
            chunk.model,
            chunk.service_tier,
            chunk.system_fingerprint,
            chunk.usage,
        ):
            return False
        return self._fast_choice(chunk.choices, chunk.obfuscation, data, name, out)

    def _fast_choice(
        self,
        choices: list[FastChoice],
        obf: str | UnsetType,
        data: str,
        name: str | None,
        out: list[Event],
    ) -> bool:
        """:meth:`_fast` once the envelope is known to be the last one's."""
        if len(choices) != 1:
            return False
        choice = choices[0]
        state = self._choices.get(choice.index)
        if state is None:
            return False
        # The choice residual diff must be empty: the same keys as before, all null.
        logprobs = choice.logprobs
        finish = choice.finish_reason
        residual = state.residual
        if logprobs is None and finish is None:
            if residual != _NULL_RESIDUAL:
                return False
        else:
            count = 0
            if logprobs is not UNSET:
                if residual.get("logprobs", UNSET) is not None:
                    return False
                count += 1
            if finish is not UNSET:
                if residual.get("finish_reason", UNSET) is not None:
                    return False
                count += 1
            if len(residual) != count:
                return False
        if obf == self._fast_obf:  # both absent, or the same string
            change: dict[str, Any] = {}
        elif obf is UNSET:
            return False  # a key vanished: the general diff says so
        else:
            change = {"obfuscation": obf}
        delta = choice.delta
        content = delta.content
        calls = delta.tool_calls
        if calls is UNSET:
            reasoning = delta.reasoning_content
            current = state.text
            if current is None:
                # The first text (or reasoning) of the choice opens its block, as
                # _choice and _open_text do: a BlockStart that writes nothing, then the
                # delta that carries the chunk's envelope diff.
                if state.open_tools:
                    return False
                if reasoning is UNSET:
                    if content is UNSET or not content:
                        return False
                    kind: BlockKind = "text"
                elif reasoning and content is UNSET:
                    kind = "reasoning"
                else:
                    return False
                index = self._block()
                out.append(
                    BlockStart(
                        index=index, kind=kind, candidate=choice.index, extra={EXTRA_KEY: {}}
                    )
                )
                state.text = (index, kind)
                state.last_of_kind[kind] = index
                current = state.text
                self._last_frag = None
            if reasoning is UNSET:
                if content is UNSET or not content or current[1] != "text":
                    return False
                x: dict[str, Any] = {"env": change} if name is None else {"env": change, "ev": name}
                out.append(TextDelta(index=current[0], delta=content, extra={EXTRA_KEY: x}))
            else:
                if not reasoning or content is not UNSET or current[1] != "reasoning":
                    return False
                x = {"env": change} if name is None else {"env": change, "ev": name}
                out.append(ReasoningDelta(index=current[0], delta=reasoning, extra={EXTRA_KEY: x}))
        else:
            if (
                content is not UNSET
                or delta.reasoning_content is not UNSET
                or len(calls) != 1
                or state.text is not None
            ):
                return False
            call = calls[0]
            args = call.function.arguments
            tool = state.tools.get(call.index)
            if not args or tool is None:
                return False
            x = {"env": change} if name is None else {"env": change, "ev": name}
            out.append(ToolInputDelta(index=tool.block, delta=args, extra={EXTRA_KEY: x}))
            self._last_frag = (tool.block, True)
        self._fast_obf = obf
        self._fast_data = data
        return True

    def _restore(self) -> None:
        """Rebuild the envelope and choice residual of the last fast-path chunk exactly
        as :meth:`_chunk` would have kept them (key order included)."""
        data = self._fast_data
        assert data is not None
        self._fast_data = None
        obj = DECODER.decode(data)
        env = dict(obj)
        env["choices"] = _NO_CHOICES
        self._env = env
        choice = obj["choices"][0]
        residual = dict(choice)
        del residual["index"]
        del residual["delta"]
        self._choices[choice["index"]].residual = residual

    def _after_finish(self, event: ServerSentEvent, out: list[Event]) -> None:
        # Data after [DONE]: a protocol error in strict mode; tolerant mode reports it
        # and keeps the data (nothing received is lost).
        if self.strict:
            raise self.protocol_error("data after the [DONE] terminal")
        out.append(
            Warning(
                code="after_terminal",
                message="data after the [DONE] terminal",
                event_index=self.frame_index,
                byte_offset=self.frame_offset,
                extra={"data": event.data},
            )
        )

    def _on_close(self, out: list[Event], truncation: StreamTruncated | None) -> None:
        if self.finished:
            return
        if self._error is not None and truncation is None:
            # The error line was the stream's last word: failed, not truncated.
            reason = FinishReason(unified="error", raw=self._finish_raw())
            finish = Finish(
                status="failed",
                reason=reason,
                usage=self._usage,
                error=self._error,
                extra={EXTRA_KEY: {"done": False}},
            )
            self.emit_finish(out, finish)
            return
        # Truncated: keep the usage seen so far (billing for cut streams, pain-points #24).
        message = (
            truncation.message
            if truncation is not None
            else "stream ended without data: [DONE] (truncated)"
        )
        self.emit_finish(
            out,
            Finish(
                status="truncated",
                reason=FinishReason(unified="error", raw=None),
                usage=self._usage,
                error=ErrorInfo(
                    kind="truncated",
                    message=message,
                    retryable=True,
                    dialect=self.dialect,
                    event_index=truncation.event_index
                    if truncation is not None
                    else self.frame_index + 1,
                    byte_offset=truncation.byte_offset if truncation is not None else None,
                ),
            ),
        )

    # -- helpers ----------------------------------------------------------------------

    def _bad(self, out: list[Event], message: str, raw: Any) -> None:
        """A protocol error that keeps what was received: raises when strict, else an
        ErrorEvent whose ``raw`` holds the offending data, and decoding goes on."""
        if self.strict:
            raise self.protocol_error(message)
        out.append(
            ErrorEvent(
                error=ErrorInfo(
                    kind="protocol",
                    message=message,
                    dialect=self.dialect,
                    event_index=self.frame_index,
                    byte_offset=self.frame_offset,
                    raw=raw,
                )
            )
        )

    def _emit(self, event: Event) -> None:
        self._events.append(event)

    def _x(self, wire: bool, identifies: bool = True) -> dict[str, Any]:
        """The ``extra`` for the next event of the chunk (see the module docstring).

        Args:
            wire: The event writes something into the chunk (a non-wire event, such as
                a text BlockStart or a BlockEnd, writes nothing).
            identifies: The encoder can tell the event's choice from the event itself.
        """
        if wire:
            first = not self._wired
            self._wired = True
            if first and (self._need or not identifies):
                return {EXTRA_KEY: dict(self._explicit)}
        return {EXTRA_KEY: {}}

    def _block(self) -> int:
        index = self._next_block
        self._next_block += 1
        return index

    def _finish_raw(self) -> str | None:
        if not self._choices:
            return None
        state = self._choices.get(0) or self._choices[min(self._choices)]
        return state.finish_raw

    # -- chunks -----------------------------------------------------------------------

    def _chunk(self, obj: dict[str, Any], event: ServerSentEvent, out: list[Event]) -> None:
        if self._fast_data is not None:
            self._restore()
        events: list[Event] = []
        self._events = events
        self._entry_candidate = None
        self._last_frag = None
        # The envelope: the chunk minus what events carry (placeholders keep the keys).
        env = dict(obj)
        if "choices" in env:
            env["choices"] = _NO_CHOICES
        if env.get("usage") is not None:
            env["usage"] = None
        if env.get("moderation") is not None:
            env["moderation"] = None
        if not self._started:
            self._started = True
            created = obj.get("created")
            start = StreamStart(
                dialect=self.dialect,
                id=obj.get("id") if isinstance(obj.get("id"), str) else None,
                model=obj.get("model") if isinstance(obj.get("model"), str) else None,
                created=created if type(created) is int else None,
                # "cf": the choice fields residual diffs start from (the dialect's
                # default), so that either Chat encoder reads the diffs the same way.
                extra={EXTRA_KEY: {"cf": dict(self.quirks.choice_fields)}},
            )
            self._env = base_envelope(start)
            events.append(start)
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict) and type(choice.get("index")) is int:
                    self._choice(choice)
                else:
                    events.extend(self._flush_bad(f"malformed choice: {choice!r:.200}", choice))
        elif choices is not None:
            events.extend(self._flush_bad("'choices' is not a list", choices))
        usage = obj.get("usage")
        if usage is not None:
            converted = convert_usage(usage, self.quirks)
            if converted is None:
                # Not an object: keep it as sent, unmodelled.
                env["usage"] = usage
            else:
                if not converted.is_empty():
                    self._usage = converted
                events.append(UsageUpdate(usage=converted, extra={EXTRA_KEY: {}}))
        error = obj.get("error")
        if error is not None:
            # An error inside a chunk (OpenRouter mid-stream errors come with choices and
            # finish_reason "error"): the stream fails like after an error line.
            env["error"] = None
            info = _error_info(error)
            if self._error is None:
                self._error = info
            events.append(ErrorEvent(error=info, extra={EXTRA_KEY: {"c": 1}}))
        moderation = obj.get("moderation")
        if moderation is not None:
            events.append(Metadata(name="moderation", value=moderation, extra={EXTRA_KEY: {}}))
        change = diff(self._env, env)
        self._env = env
        last: Event | None = None
        for candidate in reversed(events):
            if candidate.extra is not None and EXTRA_KEY in candidate.extra:
                last = candidate
                break
        if last is None:
            last = StatusUpdate(status="in_progress", extra={EXTRA_KEY: {}})
            events.append(last)
        assert last.extra is not None
        x = last.extra[EXTRA_KEY]
        x["env"] = change
        if event.event is not None:
            x["ev"] = event.event
        out.extend(events)

    def _flush_bad(self, message: str, raw: Any) -> list[Event]:
        bad: list[Event] = []
        self._bad(bad, message, raw)
        return bad

    def _choice(self, choice: dict[str, Any]) -> None:
        candidate: int = choice["index"]
        state = self._choices.get(candidate)
        if state is None:
            state = self._choices[candidate] = _Choice(self.quirks.choice_fields)
        # The choice's own fields besides index/delta; a finish_reason is a placeholder.
        residual = dict(choice)
        del residual["index"]
        delta = residual.pop("delta", None)
        finish_raw = residual.get("finish_reason")
        if finish_raw is not None:
            residual["finish_reason"] = None
        change = diff(state.residual, residual)
        state.residual = residual
        if type(delta) is not dict:
            delta = {}
        rest = {}
        for key, value in delta.items():
            # Modelled fields that carry nothing ("content": "", "refusal": null) are
            # residuals, kept as sent.
            if key not in _MODELLED_DELTA or not value or type(value) not in (str, list):
                rest[key] = value
        explicit: dict[str, Any] = {"ci": candidate, "ch": change}
        if rest:
            explicit["d"] = rest
        self._explicit = explicit
        # An entry for the same choice as the previous entry of this chunk cannot be
        # told apart by the encoder (it would append to that entry).
        self._need = bool(change or rest or self._entry_candidate == candidate)
        self._wired = False
        self._entry_candidate = candidate
        self._last_frag = None

        for field, kind in _TEXT_FIELDS:
            text = delta.get(field)
            if text and type(text) is str:
                # Hot path (one per text delta): the open block of the same kind goes on.
                current = state.text
                if current is not None and current[1] == kind:
                    index = current[0]
                else:
                    index = self._open_text(state, candidate, kind)
                if kind == "reasoning":
                    self._events.append(
                        ReasoningDelta(index=index, delta=text, extra=self._x(True))
                    )
                else:
                    self._events.append(TextDelta(index=index, delta=text, extra=self._x(True)))
        calls = delta.get("tool_calls")
        if isinstance(calls, list) and calls:
            for fragment in calls:
                self._fragment(state, candidate, fragment)
        annotations = delta.get("annotations")
        if isinstance(annotations, list) and annotations:
            target = state.text[0] if state.text is not None else state.last_of_kind.get("text")
            for annotation in annotations:
                x = self._x(True, identifies=target is not None)
                self._emit(Citation(citation=annotation, index=target, extra=x))
        carried = delta.get("polystream")
        if isinstance(carried, list) and carried:
            self._carried(state, candidate, carried)
        if finish_raw is not None:
            if self.strict and not is_known_finish_reason(finish_raw):
                # Unknown enum values pass through (raw kept); strict mode reports them.
                raise self.protocol_error(f"unknown finish_reason {finish_raw!r}")
            state.finish_raw = finish_raw if isinstance(finish_raw, str) else str(finish_raw)
            self._emit(
                Metadata(
                    name="finish_reason",
                    value=finish_raw,
                    candidate=candidate,
                    extra=self._x(True),
                )
            )
            self._close_all(state)
        if not self._wired:
            # Nothing in this entry maps to an event (a role-only delta, an empty one):
            # a carrier keeps the entry (and its residuals) in the stream.
            self._emit(StatusUpdate(status="in_progress", extra={EXTRA_KEY: explicit}))
            self._wired = True

    def _open_text(self, state: _Choice, candidate: int, kind: BlockKind) -> int:
        current = state.text
        if current is not None and current[1] == kind:
            return current[0]
        if current is not None:
            self._emit(BlockEnd(index=current[0], extra=self._x(False)))
        index = self._block()
        self._emit(BlockStart(index=index, kind=kind, candidate=candidate, extra=self._x(False)))
        state.text = (index, kind)
        state.last_of_kind[kind] = index
        return index

    def _close_text(self, state: _Choice) -> None:
        if state.text is not None:
            self._emit(BlockEnd(index=state.text[0], extra=self._x(False)))
            state.text = None

    def _close_all(self, state: _Choice) -> None:
        self._close_text(state)
        for tool in state.open_tools:
            self._emit(BlockEnd(index=tool.block, extra=self._x(False)))
        state.open_tools = []
        state.tools = {}

    def _close_tool(self, state: _Choice, tool: _Tool) -> None:
        self._emit(BlockEnd(index=tool.block, extra=self._x(False)))
        state.open_tools.remove(tool)
        if type(tool.tool_index) is int and state.tools.get(tool.tool_index) is tool:
            del state.tools[tool.tool_index]

    def _fragment(self, state: _Choice, candidate: int, fragment: Any) -> None:
        if not isinstance(fragment, dict):
            self._events.extend(
                self._flush_bad(f"malformed tool call: {fragment!r:.200}", fragment)
            )
            return
        raw_index = fragment.get("index")
        valid_index = type(raw_index) is int
        tool_index: int = raw_index if isinstance(raw_index, int) and valid_index else -1
        raw_id = fragment.get("id")
        call_id = raw_id if isinstance(raw_id, str) and raw_id else None
        # A function call's name and arguments, or a custom (free-form) call's name and
        # input, in the same places of the fragment's copy.
        key, input_key = ("custom", "input") if "custom" in fragment else ("function", "arguments")
        function = fragment.get(key)
        if not isinstance(function, dict):
            function = None
        name = function.get("name") if function is not None else None
        name = name if isinstance(name, str) and name else None
        args = function.get(input_key) if function is not None else None
        args = args if isinstance(args, str) and args else None

        tool: _Tool | None = None
        if valid_index:
            current = state.tools.get(tool_index)
            # Same index, different id: a new call (never merge two ids, pain-points #14).
            if current is not None and (
                call_id is None or current.id is None or current.id == call_id
            ):
                tool = current
            elif current is not None:
                self._close_tool(state, current)
        elif call_id is not None:
            tool = next((t for t in state.open_tools if t.id == call_id), None)
        elif len(state.open_tools) == 1:
            tool = state.open_tools[0]
        elif len(state.open_tools) > 1:
            self._events.extend(
                self._flush_bad(
                    "tool-call fragment without an index while several calls are open "
                    "(ambiguous; not merged by position)",
                    fragment,
                )
            )
            return

        if tool is None:
            self._close_text(state)
            residual = dict(fragment)
            if call_id is not None:
                del residual["id"]
            if function is not None:
                fn = dict(function)
                if name is not None:
                    del fn["name"]
                if args is not None:
                    del fn[input_key]
                residual[key] = fn
            index = self._block()
            tool = _Tool(index, call_id, raw_index if valid_index else None)
            self._tool_index_of[index] = tool.tool_index
            state.open_tools.append(tool)
            if valid_index:
                state.tools[tool_index] = tool
            state.last_of_kind["tool_call"] = index
            x = self._x(True)
            x[EXTRA_KEY]["tc"] = residual
            self._emit(
                BlockStart(
                    index=index,
                    kind="tool_call",
                    id=call_id,
                    name=name,
                    candidate=candidate,
                    extra=x,
                )
            )
            fn_residual = residual.get(key)
            self._last_frag = (index, isinstance(fn_residual, dict) and input_key in fn_residual)
            if args is not None:
                self._emit(ToolInputDelta(index=index, delta=args, extra=self._x(True)))
                self._last_frag = (index, True)
            return

        # A continuation fragment.
        self._close_text(state)
        residual = dict(fragment)
        if function is not None:
            fn = dict(function)
            if args is not None:
                del fn[input_key]
            residual[key] = fn
        standard = (
            args is not None
            and type(tool.tool_index) is int
            and residual == {"index": tool.tool_index, "function": {}}
            and not (self._last_frag is not None and self._last_frag == (tool.block, False))
        )
        x = self._x(True)
        if not standard:
            x[EXTRA_KEY]["tc"] = residual
        self._emit(ToolInputDelta(index=tool.block, delta=args or "", extra=x))
        self._last_frag = (tool.block, True)

    def _carried(self, state: _Choice, candidate: int, entries: list[Any]) -> None:
        """Read the polystream carrier back into events (see the encoder's docstring).

        An entry that differs from what the encoder would write for its event (extra
        keys, another target) is kept whole in ``extra["chat"]["pe"]``.
        """
        for entry in entries:
            kind = entry.get("type") if isinstance(entry, dict) else None
            # The entry's index: implicit when it is the next one the encoder counts.
            got = entry.get("index", "-") if isinstance(entry, dict) else "-"
            pi: dict[str, Any] = {} if got == state.carry_next else {"pi": got}
            state.carry_next = got + 1 if type(got) is int else state.carry_next + 1
            expected: dict[str, Any] = {} if got == "-" else {"index": got}
            event: Event | None = None
            carrier: str | None = None
            identifies = True
            if kind == "signature" and isinstance(entry.get("data"), str):
                target = entry.get("target")
                index: int | None = None
                tool_index = entry.get("tool_index")
                if target == "tool_call" and type(tool_index) is int and tool_index in state.tools:
                    index = state.tools[tool_index].block
                elif isinstance(target, str):
                    index = state.last_of_kind.get(target)
                if index is None and target in ("reasoning", "text", "refusal"):
                    index = self._open_text(state, candidate, target)
                if index is not None:
                    expected.update(type="signature", target=target)
                    block_tool = self._tool_index_of.get(index)
                    if target == "tool_call" and block_tool is not None:
                        expected["tool_index"] = block_tool
                    expected["data"] = entry["data"]
                    source = entry.get("origin")
                    if isinstance(source, str) and source:
                        # The signature's origin (see SignatureDelta): kept as its carrier.
                        expected["origin"] = source
                        carrier = source
                    event = SignatureDelta(index=index, delta=entry["data"])
            elif kind == "citation":
                target_index = None
                if entry.get("target") is not None:
                    target_index = (
                        state.text[0] if state.text is not None else state.last_of_kind.get("text")
                    )
                identifies = target_index is not None
                expected.update(
                    type="citation",
                    target="text" if target_index is not None else None,
                    citation=entry.get("citation"),
                )
                event = Citation(citation=entry.get("citation"), index=target_index)
            elif kind == "start" and entry.get("kind") in ("reasoning", "text", "refusal"):
                # A block boundary Chat cannot show (two reasoning blocks in a row, a
                # named block such as Anthropic redacted_thinking): a new block.
                block_kind: BlockKind = entry["kind"]
                name = entry.get("name") if isinstance(entry.get("name"), str) else None
                block_id = entry.get("id") if isinstance(entry.get("id"), str) else None
                expected.update(type="start", kind=block_kind)
                if name is not None:
                    expected["name"] = name
                if block_id is not None:
                    expected["id"] = block_id
                self._close_text(state)
                index = self._block()
                state.text = (index, block_kind)
                state.last_of_kind[block_kind] = index
                event = BlockStart(
                    index=index, kind=block_kind, id=block_id, name=name, candidate=candidate
                )
            elif (
                kind == "finish"
                and type(entry.get("unified")) is str
                and entry["unified"] in _UNIFIED_REASONS
                and type(entry.get("status")) is str
                and entry["status"] in _STATUSES
                and (entry.get("raw") is None or isinstance(entry.get("raw"), str))
            ):
                # The source's finish reason, which Chat could not say: it replaces the
                # choice's own at [DONE].
                state.finish_override = (
                    FinishReason(unified=entry["unified"], raw=entry.get("raw")),
                    entry["status"],
                )
                x = self._x(True, identifies=False)
                x[EXTRA_KEY].update(p=1, pe=entry)
                self._emit(StatusUpdate(status="in_progress", extra=x))
                continue
            elif kind == "metadata" and isinstance(entry.get("name"), str):
                merge = entry.get("merge") is True
                expected.update(type="metadata", name=entry["name"], value=entry.get("value"))
                if merge:
                    expected["merge"] = True
                event = Metadata(
                    name=entry["name"], value=entry.get("value"), candidate=candidate, merge=merge
                )
            if event is None:
                if self.strict:
                    raise self.protocol_error(f"unknown polystream carrier entry: {entry!r:.200}")
                # An entry this version cannot place: passed through, never dropped.
                x = self._x(True, identifies=False)
                x[EXTRA_KEY]["p"] = 1
                self._emit(Unknown(name="polystream", data=_dumps(entry), extra=x))
                continue
            x = self._x(True, identifies=identifies)
            x[EXTRA_KEY].update(p=1, **pi)
            if expected != entry:
                x[EXTRA_KEY]["pe"] = entry
            if carrier is not None:
                x["carrier"] = carrier
            self._emit(msgspec.structs.replace(event, extra=x))

    # -- terminal and errors ----------------------------------------------------------

    def _error_line(self, obj: dict[str, Any], out: list[Event]) -> None:
        info = _error_info(obj["error"])
        if self._error is None:
            self._error = info
        top = {k: v for k, v in obj.items() if k != "error"}
        x: dict[str, Any] = {"top": top} if top else {}
        out.append(ErrorEvent(error=info, extra={EXTRA_KEY: x}))

    def _done(self, out: list[Event]) -> None:
        self._events = out  # the BlockEnds below belong to no chunk
        for state in self._choices.values():
            self._close_all(state)
        reason, status = map_finish_reason(self._finish_raw())
        if self._choices:
            first = self._choices.get(0) or self._choices[min(self._choices)]
            if first.finish_override is not None:
                reason, status = first.finish_override
        error = self._error
        if error is not None:
            reason = FinishReason(unified="error", raw=reason.raw)
            status = "failed"
        self.emit_finish(
            out,
            Finish(
                status=status,
                reason=reason,
                usage=self._usage,
                error=error,
                extra={EXTRA_KEY: {}},
            ),
        )


def _error_info(error: Any) -> ErrorInfo:
    """A typed error from a Chat error object (``{"message", "type", "param", "code"}``)."""
    message = error.get("message") if isinstance(error, dict) else None
    code = None
    if isinstance(error, dict):
        for key in ("code", "type"):
            value = error.get(key)
            if isinstance(value, str):
                code = value
                break
            if type(value) is int:
                code = str(value)  # OpenRouter sends numeric HTTP-like codes
                break
    kind = error_kind(error)
    status = error.get("code") if isinstance(error, dict) else None
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) else "error in the stream",
        retryable=kind in RETRYABLE_KINDS,
        code=code,
        http_status=status if type(status) is int else None,
        raw=error,
    )


def _envelope(chunk: FastChunk | EnvelopeChunk) -> tuple[Any, ...]:
    """A fast-path chunk's envelope (typed values; ``UNSET`` for an absent key) less
    its ``obfuscation``, which changes on every chunk."""
    return (
        chunk.id,
        chunk.object,
        chunk.created,
        chunk.model,
        chunk.service_tier,
        chunk.system_fingerprint,
        chunk.usage,
    )


def _envelope_text(data: str) -> str | None:
    """The text of a chunk of the fast envelope before its ``"choices":`` key, if that
    text holds every envelope key: nothing but ``choices`` (whatever they hold),
    ``usage`` and ``obfuscation`` after it (checked by decoding the tail), and neither
    of the last two before it.

    JSON strings cannot hold an unescaped quote, so ``"choices":`` (or ``"usage":``)
    found in the text is a key; the fast envelope has no unknown keys and no nested
    object, so it is the chunk's own. A later chunk whose text starts with the returned
    prefix therefore has exactly this envelope, less ``usage`` and ``obfuscation``,
    which its tail holds.
    """
    cut = data.find('"choices":')
    if cut == -1:
        return None
    prefix = data[:cut]
    if '"usage":' in prefix or '"obfuscation":' in prefix:
        return None
    try:
        TAIL_SHAPE_DECODER.decode("{" + data[cut:])
    except (msgspec.DecodeError, RecursionError):
        return None
    return prefix


def base_envelope(start: StreamStart) -> dict[str, Any]:
    """The envelope a chunk is diffed against before the first chunk: what
    :class:`StreamStart` models (the encoder starts from the same)."""
    env: dict[str, Any] = {}
    if start.id is not None:
        env["id"] = start.id
    env["object"] = CHUNK_OBJECT
    if start.created is not None:
        env["created"] = start.created
    if start.model is not None:
        env["model"] = start.model
    env["choices"] = []
    return env


def _dumps(value: Any) -> str:
    return ENCODER.encode(value).decode()

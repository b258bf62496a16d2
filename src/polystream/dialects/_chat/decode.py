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

from typing import Any, ClassVar, Final

import msgspec
from msgspec import UNSET, UnsetType

from polystream.dialects._chat.chunks import NO_CHOICES, ChoiceState, ChunkAssembly
from polystream.dialects._chat.errors import error_info, error_kind
from polystream.dialects._chat.finish_reason import map_finish_reason
from polystream.dialects._chat.wire import (
    CHUNK_OBJECT,
    DECODER,
    DONE,
    EXTRA_KEY,
    FAST_TAIL_DECODER,
    EnvelopeChunk,
    FastChoice,
    FastChunk,
    FastTail,
    base_envelope,
    decode_envelope,
    decode_fast_chunk,
    decode_fast_tail,
    envelope,
    envelope_text,
)
from polystream.errors import StreamTruncated
from polystream.events import (
    BlockKind,
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    Unknown,
    Warning,
)
from polystream.wire.sse import ServerSentEvent, SSEComment

# ``base_envelope`` and ``error_kind`` live in .wire and .errors; importable from here too.
__all__ = ["ChatDecoder", "base_envelope", "error_kind"]

# The usual choice residual: what a fast-path choice with null logprobs and
# finish_reason must find (its diff is then empty).
_NULL_RESIDUAL: Final[dict[str, Any]] = {"logprobs": None, "finish_reason": None}


class ChatDecoder(ChunkAssembly):
    """Decoder for a Chat Completions stream; bound to a dialect by :class:`Quirks`.

    Args:
        quirks: The dialect's quirks (set by the dialect's subclass).
        strict: Raise typed protocol errors (also for unknown chunks and data after
            ``[DONE]``) instead of emitting error events.
        keep_raw: Emit a :class:`~polystream.events.Raw` event before each chunk's events.
    """

    private_extra: ClassVar[frozenset[str]] = frozenset({EXTRA_KEY})
    """The residuals (``extra["chat"]``, see the module docstring)."""

    def __init__(self, *, strict: bool = False, keep_raw: bool = False, **options: Any) -> None:
        super().__init__(strict=strict, keep_raw=keep_raw, **options)
        # The typed fast path (see _fast): the previous chunk's envelope as typed values
        # (None: it was not of the fast shape), its obfuscation, and the text of the last
        # chunk taken by the fast path, whose envelope and choice residual are rebuilt
        # (key order included) only when a general chunk needs them (_restore).
        self._fast_env: tuple[Any, ...] | None = None
        self._fast_obf: Any = msgspec.UNSET
        self._fast_data: str | None = None
        # The text of that envelope's chunk before its ``"choices":`` key, when every
        # envelope key is in it (see .wire.envelope_text): a chunk that starts with the same
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
        if not self._fast_ok:
            super()._dispatch_sse(frames, out)
            return
        tail_decode = FAST_TAIL_DECODER.decode
        append = out.append
        prefix = self._fast_prefix if self._started and not self.finished else None
        size = len(prefix) if prefix is not None else 0
        usage = self._fast_env[-1] if self._fast_env is not None else None
        obf_last = self._fast_obf
        current: int | None = None  # the choice index whose state (null residual) is known
        state: ChoiceState | None = None
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
        if self._fast_data is not None:
            self._restore()  # the last fast chunk's envelope and residual, as _chunk keeps them
        self._chunk(obj, event, out)
        fast_shape: FastChunk | EnvelopeChunk | None = fast
        if fast_shape is None and self._fast_ok:
            # A chunk of the fast envelope whose delta is of another shape (OpenAI's
            # first chunk: the role, an empty content, a null refusal): the next chunk,
            # the first text, may still take the fast path.
            fast_shape = decode_envelope(data)
        if fast_shape is not None:
            self._fast_env = envelope(fast_shape)
            self._fast_obf = fast_shape.obfuscation
            self._fast_prefix = envelope_text(data)

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
        env["choices"] = NO_CHOICES
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

    # -- terminal and errors ----------------------------------------------------------

    def _error_line(self, obj: dict[str, Any], out: list[Event]) -> None:
        info = error_info(obj["error"])
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

"""Unified events -> a Chat Completions stream (``data:`` chunks, usage chunk, ``[DONE]``).

Two paths:

* **Events decoded from a Chat stream** (their ``extra["chat"]`` residuals, see
  :mod:`polystream.dialects._chat.decode`) are written back chunk for chunk: the events
  of one native chunk are gathered and the chunk is written when its last event (the
  one holding ``env``) arrives, so nothing waits for a later event.
* **Events from another dialect** become one chunk per content event, the way OpenAI
  streams: the first chunk of each choice has ``"role": "assistant"``; a tool call's
  first fragment has ``index``, ``id``, ``type`` and ``function.name``; at the
  :class:`Finish` a chunk with each choice's ``finish_reason``, then (when usage is
  known) the usage chunk with ``"choices": []``, then ``data: [DONE]``. A failed stream
  ends with an error line and no ``[DONE]``; a truncated one ends with nothing.

What Chat cannot express is reported in :attr:`losses`. Where polystream has a
carrier, the loss is recorded with ``carried=True`` and a later decode of this stream
restores the events:

* reasoning text -> ``delta.reasoning_content`` (native on ``xai_chat``; a carrier on
  ``openai_chat``, the field DeepSeek-style servers also use);
* signatures (Anthropic ``signature``, Gemini ``thoughtSignature``, encrypted
  reasoning) -> ``delta.polystream: [{"index": n, "type": "signature", "target": <block kind>,
  "tool_index": <n, tool calls only>, "data": "...", "origin": <dialect>}]``, attached to
  the latest block of that kind in the choice. ``origin`` is the dialect the signature
  belongs to (its ``extra["carrier"]``, else the source stream's dialect; see
  :class:`~polystream.events.SignatureDelta`): decoding gives it back as
  ``extra["carrier"]``, so the dialect it came from writes it natively again, even
  after further hops. Chat has no native signature field, so even a Chat stream's own
  signatures use this carrier;
* citations of another dialect -> ``delta.polystream: [{"index": n, "type": "citation",
  "target": "text" | null, "citation": {...}}]`` (Chat's own ``annotations`` are
  ``url_citation`` objects only, so foreign shapes are not written there);
* reply metadata (Gemini grounding, safety ratings...) -> ``delta.polystream:
  [{"index": n, "type": "metadata", "name": ..., "value": ..., "merge": bool}]``;
* a finish reason or status Chat has no word for (Anthropic ``pause_turn``, ``refusal``,
  a provider's own value) -> ``delta.polystream: [{"index": n, "type": "finish",
  "unified": ..., "raw": ..., "status": ...}]`` on the finish chunk;
* the start of a text, reasoning or refusal block that a Chat reader could not see (the
  same kind as the block before it, which a reader would continue; a block with a
  ``name`` or ``id`` such as Anthropic ``redacted_thinking``; a block whose first output
  is a signature or citation) -> ``delta.polystream: [{"index": n, "type": "start",
  "kind": ..., "name"?: ..., "id"?: ...}]``.

``index`` counts the carrier entries of each choice from 0: the openai SDK merges list
entries in a delta by ``index`` (and fails on entries without one), so unique indices
make it keep every entry.

Not carried (``carried=False``): server tool calls and results, image and audio
blocks, compaction, code and code-result blocks, unknown events, tolerated protocol
errors of the source, the ``summary`` flag of reasoning deltas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

from polystream.dialects._chat._fast import FastPaths
from polystream.dialects._chat._foreign import (
    MAX_CHOICES,
    NO_INDEX,
    SSE,
    Block,
    comment_line,
    error_object,
)
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import usage_to_wire
from polystream.dialects._chat.wire import (
    DECODER,
    ENCODER,
    EXTRA_KEY,
    apply,
    base_envelope,
)
from polystream.events import (
    BlockStart,
    Citation,
    ErrorEvent,
    Event,
    Finish,
    KeepAlive,
    Metadata,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Unknown,
    UsageUpdate,
)

__all__ = ["MAX_CHOICES", "ChatEncoder"]

_CHAT_FAMILY: Final = frozenset({"openai_chat", "xai_chat"})
"""The dialects whose events carry their chunks' residuals for this encoder."""


class ChatEncoder(FastPaths):
    """Encoder for a Chat Completions stream; bound to a dialect by :class:`Quirks`.

    Args:
        id_factory: Makes the completion id for streams from another dialect that
            carry none (default: ``chatcmpl-`` + a random hex string).
        clock: Returns the Unix time for ``created`` when the events carry none
            (default: 0, as xAI sends; injected so output is deterministic).
        record: Keep every chunk written, as a dict, in :attr:`chunks` (used by
            ``rebuild``).
    """

    quirks: ClassVar[Quirks]

    def __init__(
        self,
        *,
        id_factory: Callable[[], str] | None = None,
        clock: Callable[[], float] | None = None,
        record: bool = False,
    ) -> None:
        super().__init__(id_factory=id_factory, clock=clock, record=record)

    def _close(self) -> bytes:
        """End of the events. Without a Finish the stream ends without ``[DONE]``
        (what a truncated stream looks like)."""
        return self._flush({}) if self._entries is not None else b""

    def folds_usage(self, source: str) -> bool:
        """Another dialect's usage updates only go into the usage chunk at the end (see
        :meth:`DialectEncoder.folds_usage`); a Chat dialect's are written where they
        come."""
        return source not in _CHAT_FAMILY

    # -- fast paths ---------------------------------------------------------------------

    def encode(self, event: Event) -> bytes:
        """Encode one unified event; returns the bytes to send now (maybe none).

        Text, reasoning and tool-input deltas that make a chunk of their own, the bulk
        of a stream, are written from byte templates when their output is certain to
        equal the general path's (same keys, order and escaping); anything else takes
        the general path.
        """
        kind = type(event)
        if (
            (kind is TextDelta or kind is ToolInputDelta or kind is ReasoningDelta)
            and self._entries is None
            and self.chunks is None
            and self._fast
        ):
            if TYPE_CHECKING:  # (``kind is`` tests cost less than isinstance)
                assert isinstance(event, TextDelta | ToolInputDelta | ReasoningDelta)
            extra = event.extra
            data: bytes | None = None
            if extra is None or EXTRA_KEY not in extra:
                # Another dialect's delta as its own chunk (the delta branches of
                # _foreign, for a choice whose first chunk went out).
                index = event.index
                block = self._blocks.get(index)
                if block is not None:
                    fast = block.fast
                    if fast is None or fast[0] is not self._foreign_env or fast[1] is not kind:
                        fast = block.fast = self._fast_entry(block, kind, index)
                    if fast is not None:
                        try:
                            value = ENCODER.encode(event.delta)
                        except Exception:  # not encodable: the general path says how it fails
                            pass
                        else:
                            open_kind = fast[4]
                            if open_kind is None:
                                self._open_kind[block.candidate] = None
                                block.has_args = True
                            elif event.delta:
                                block.written = True
                                self._open_kind[block.candidate] = open_kind
                            data = fast[2] + value + fast[3]
            else:
                data = self._fast_own(event, extra[EXTRA_KEY])
            if data is not None:
                self.event_index += 1
                return data
        elif (
            kind is UsageUpdate
            and self._entries is None
            and self._fast
            and (event.extra is None or not isinstance(event.extra.get(EXTRA_KEY), dict))
        ):
            # Another dialect's usage: kept for the usage chunk at the end.
            if TYPE_CHECKING:
                assert isinstance(event, UsageUpdate)
            return self._keep_usage(event.usage)
        return self._encode_pending(event)

    # -- dispatch -----------------------------------------------------------------------

    def _encode(self, event: Event) -> bytes:
        extra = event.extra
        x = extra.get(EXTRA_KEY) if extra is not None else None
        if isinstance(x, dict):
            return self._own(event, x)
        return self._foreign(event)

    # -- events decoded from a Chat stream ----------------------------------------------

    def _entry_for(self, x: dict[str, Any], candidate: int) -> dict[str, Any]:
        if self._entries is None:
            self._entries = []
        if "ci" in x:
            candidate = x["ci"]
            residual = apply(self._residual.get(candidate, self._choice_fields), x.get("ch"))
            delta = dict(x.get("d") or {})
        elif self._entry is not None and self._entry_candidate == candidate:
            return self._entry
        else:
            residual = self._residual.get(candidate, self._choice_fields)
            delta = {}
        self._residual[candidate] = residual
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        entry.update(residual)
        self._entries.append(entry)
        self._entry = entry
        self._entry_candidate = candidate
        self._frag = None
        self._frag_block = None
        if candidate not in self._candidates:
            self._candidates.append(candidate)
        return entry

    def _candidate_of(self, block: Block | None) -> int:
        """The choice of an own event: its block's, else the entry being built (an event
        that names no block, such as a reply-level citation, belongs to it)."""
        if block is not None:
            return block.candidate
        return self._entry_candidate if self._entry_candidate is not None else 0

    def _flush(self, change: dict[str, Any] | None, event_name: str | None = None) -> bytes:
        if self._start is None and not self._env:
            # A suffix of a stream (a resumed replay) without its StreamStart: the
            # envelope diffs have no base, so start from a synthesised one; what the
            # missed chunks set and later chunks do not restate cannot be recovered.
            self._env = self._synthesise(None)
        env = apply(self._env, change)
        self._env = env
        chunk = dict(env)
        entries = self._entries or []
        if "choices" in chunk or entries:
            chunk["choices"] = entries
        chunk.update(self._specials)
        self._entries = None
        self._entry = None
        self._entry_candidate = None
        self._frag = None
        self._frag_block = None
        self._specials = {}
        return self._write(chunk, event_name)

    def _own(self, event: Event, x: dict[str, Any]) -> bytes:
        kind = type(event)
        prefix = b""
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._start = event
            self._env = base_envelope(event)
            fields = x.get("cf")
            if isinstance(fields, dict):
                self._choice_fields = fields
        elif kind is TextDelta:
            assert isinstance(event, TextDelta)
            block = self._blocks.get(event.index)
            delta = self._entry_for(x, self._candidate_of(block))["delta"]
            field = "refusal" if block is not None and block.kind == "refusal" else "content"
            delta[field] = delta.get(field, "") + event.delta
        elif kind is ReasoningDelta:
            assert isinstance(event, ReasoningDelta)
            block = self._blocks.get(event.index)
            delta = self._entry_for(x, self._candidate_of(block))["delta"]
            delta["reasoning_content"] = delta.get("reasoning_content", "") + event.delta
        elif kind is BlockStart:
            assert isinstance(event, BlockStart)
            residual = x.get("tc")
            tool_index = residual.get("index") if isinstance(residual, dict) else None
            if type(tool_index) is not int:
                tool_index = None  # as the decoder reads it (an index must be an int)
            self._blocks[event.index] = Block(event, tool_index)
            if x.get("p"):
                entry = self._entry_for(x, event.candidate)
                entry["delta"].setdefault("polystream", []).append(self._carry(event, x))
            elif event.kind == "tool_call":
                entry = self._entry_for(x, event.candidate)
                fragment = _copy_fragment(residual if isinstance(residual, dict) else {})
                if event.id is not None:
                    fragment["id"] = event.id
                if event.name is not None:
                    function = fragment.setdefault(_call_key(fragment), {})
                    function["name"] = event.name
                entry["delta"].setdefault("tool_calls", []).append(fragment)
                self._frag = fragment
                self._frag_block = event.index
        elif kind is ToolInputDelta:
            assert isinstance(event, ToolInputDelta)
            block = self._blocks.get(event.index)
            entry = self._entry_for(x, self._candidate_of(block))
            residual = x.get("tc")
            if residual is None and self._frag is not None and self._frag_block == event.index:
                key = _call_key(self._frag)
                input_key = _INPUT_KEYS[key]
                function = self._frag.get(key)
                if not isinstance(function, dict) or input_key not in function:
                    if event.delta:
                        self._frag.setdefault(key, {})[input_key] = event.delta
                    return self._end(x)
            if isinstance(residual, dict):
                fragment = _copy_fragment(residual)
            else:
                fragment = {"index": block.tool_index if block else 0, "function": {}}
            if event.delta:
                key = _call_key(fragment)
                fragment.setdefault(key, {})[_INPUT_KEYS[key]] = event.delta
            entry["delta"].setdefault("tool_calls", []).append(fragment)
            self._frag = fragment
            self._frag_block = event.index
        elif kind is Citation:
            assert isinstance(event, Citation)
            block = self._blocks.get(event.index) if event.index is not None else None
            delta = self._entry_for(x, self._candidate_of(block))["delta"]
            if x.get("p"):
                delta.setdefault("polystream", []).append(self._carry(event, x))
            else:
                delta.setdefault("annotations", []).append(event.citation)
        elif kind is SignatureDelta:
            assert isinstance(event, SignatureDelta)
            block = self._blocks.get(event.index)
            delta = self._entry_for(x, self._candidate_of(block))["delta"]
            delta.setdefault("polystream", []).append(self._carry(event, x))
        elif kind is Metadata:
            assert isinstance(event, Metadata)
            if x.get("p"):
                delta = self._entry_for(x, event.candidate)["delta"]
                delta.setdefault("polystream", []).append(self._carry(event, x))
            elif event.name == "finish_reason":
                self._entry_for(x, event.candidate)["finish_reason"] = event.value
                self._finished.add(event.candidate)
            else:
                if self._entries is None:
                    self._entries = []
                self._specials[event.name] = event.value
        elif kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            if self._entries is None:
                self._entries = []
            usage = event.usage
            raw = usage.raw
            if not isinstance(raw, dict):
                raw = usage_to_wire(usage, self.quirks)
            elif self._start is not None and self._start.dialect != self.dialect:
                # The other Chat dialect counts completion_tokens differently (xAI leaves
                # reasoning out): rewrite that count in this dialect's convention.
                completion = usage_to_wire(usage, self.quirks)["completion_tokens"]
                if usage.output_tokens is not None and raw.get("completion_tokens") != completion:
                    raw = dict(raw, completion_tokens=completion)
            self._specials["usage"] = raw
            self._usage_written = True
        elif kind is StatusUpdate:
            if "ci" in x or x.get("p"):
                entry = self._entry_for(x, x.get("ci", self._entry_candidate or 0))
                item = x.get("pe")
                if x.get("p") and isinstance(item, dict):
                    # A carrier entry that only informs the Finish (type "finish").
                    self._next_carry_index(entry["index"], item.get("index", NO_INDEX))
                    entry["delta"].setdefault("polystream", []).append(item)
            elif self._entries is None:
                self._entries = []
        elif kind is Unknown:
            assert isinstance(event, Unknown)
            if x.get("p"):
                entry = self._entry_for(x, self._entry_candidate or 0)
                item = DECODER.decode(event.data)
                got = item.get("index", NO_INDEX) if isinstance(item, dict) else NO_INDEX
                self._next_carry_index(entry["index"], got)
                entry["delta"].setdefault("polystream", []).append(item)
            else:
                return SSE.event(event.data, event=x.get("ev"))
        elif kind is ErrorEvent and x.get("c"):
            assert isinstance(event, ErrorEvent)
            if self._entries is None:
                self._entries = []
            self._specials["error"] = event.error.raw
        elif kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            prefix = self._close()
            line = dict(x.get("top") or {})
            line["error"] = (
                event.error.raw if event.error.raw is not None else error_object(event.error)
            )
            return prefix + self._write(line)
        elif kind is Finish:
            assert isinstance(event, Finish)
            prefix = self._close()
            self._done = True
            if event.status == "truncated" or x.get("done") is False:
                return prefix
            return prefix + b"data: [DONE]\n\n"
        elif kind is KeepAlive:
            assert isinstance(event, KeepAlive)
            return self._close() + comment_line(event)
        return prefix + self._end(x)

    def _end(self, x: dict[str, Any]) -> bytes:
        if "env" in x:
            return self._flush(x["env"], x.get("ev"))
        return b""


def _copy_fragment(residual: dict[str, Any]) -> dict[str, Any]:
    fragment = dict(residual)
    for key in _INPUT_KEYS:
        function = fragment.get(key)
        if isinstance(function, dict):
            fragment[key] = dict(function)
    return fragment


_INPUT_KEYS: Final = {"function": "arguments", "custom": "input"}
"""Where a tool-call fragment holds the call's input: a function call's arguments, a
custom (free-form) call's input."""


def _call_key(fragment: dict[str, Any]) -> str:
    """``custom`` for a custom call's fragment (it holds that key), else ``function``."""
    return "custom" if "custom" in fragment else "function"

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

import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Final, TypeAlias

import msgspec

from polystream.dialects._base import DialectEncoder
from polystream.dialects._chat.finish_reason import map_finish_reason, to_wire_finish_reason
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import usage_to_wire
from polystream.dialects._chat.wire import (
    CHUNK_OBJECT,
    DECODER,
    ENCODER,
    EXTRA_KEY,
    apply,
    base_envelope,
)
from polystream.dialects._free_form import is_free_form
from polystream.dialects._usage_fold import FoldsUsage
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
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
    Usage,
    UsageUpdate,
)
from polystream.wire.sse import SSEEncoder

__all__ = ["ChatEncoder"]

_CHAT_KINDS: Final = frozenset({"text", "reasoning", "refusal", "tool_call"})
# The choices an encoder opens (indexes 0 to MAX_CHOICES - 1). Choices appear in index
# order (see _chunk), so a block of candidate N makes N + 1 of them; no provider sends
# more than a few, and a malformed source's huge index is refused, not filled in.
MAX_CHOICES: Final = 1024
_SSE: Final = SSEEncoder()
_NO_INDEX: Final = "-"
_CHAT_FAMILY: Final = frozenset({"openai_chat", "xai_chat"})
"""The dialects whose events carry their chunks' residuals for this encoder."""

# Events of another dialect that may write bytes (the rest write nothing).
_WRITING: Final = frozenset(
    {
        StreamStart,
        BlockStart,
        TextDelta,
        ReasoningDelta,
        ToolInputDelta,
        BlockEnd,
        SignatureDelta,
        Citation,
        Metadata,
        UsageUpdate,
        ErrorEvent,
        Finish,
        KeepAlive,
    }
)


_OwnHead: TypeAlias = "tuple[_Block | None, type, Any, int, bytes, bytes]"


class _Block:
    __slots__ = (
        "candidate",
        "custom",
        "fast",
        "has_args",
        "kind",
        "lost",
        "start",
        "tool_index",
        "written",
    )

    def __init__(self, start: BlockStart, tool_index: Any) -> None:
        self.start = start
        self.kind: BlockKind = start.kind
        self.candidate = start.candidate
        self.tool_index = tool_index
        self.lost = start.kind not in _CHAT_KINDS
        # A free-form (custom) tool call: its input goes in ``custom.input``, not in
        # ``function.arguments`` (see polystream.dialects._free_form).
        self.custom = is_free_form(start)
        self.has_args = False
        self.written = False  # a decoder of the output has opened this block
        # For another dialect's deltas of one type: the envelope and delta type it was
        # made for, the chunk's bytes around the value, and the choice's open kind after
        # it (None: tool input). See ChatEncoder._fast_entry.
        self.fast: tuple[Any, type, bytes, bytes, str | None] | None = None


class ChatEncoder(FoldsUsage, DialectEncoder):
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
        super().__init__()
        self._id_factory = id_factory
        self._clock = clock
        self.chunks: list[dict[str, Any]] | None = [] if record else None
        # own-chunk state
        self._env: dict[str, Any] = {}
        self._entries: list[dict[str, Any]] | None = None
        self._entry: dict[str, Any] | None = None
        self._entry_candidate: int | None = None
        self._frag: dict[str, Any] | None = None
        self._frag_block: int | None = None
        self._specials: dict[str, Any] = {}
        self._residual: dict[int, dict[str, Any]] = {}
        self._choice_fields: dict[str, Any] = self.quirks.choice_fields
        # every path
        self._blocks: dict[int, _Block] = {}
        self._tool_count: dict[int, int] = {}
        self._foreign_env: dict[str, Any] | None = None
        self._start: StreamStart | None = None
        self._role_sent: set[int] = set()
        self._candidates: list[int] = []
        self._finished: set[int] = set()
        self._usage: Usage | None = None
        self._reasoning_noted: set[int] = set()
        self._carry_next: dict[int, int] = {}  # next polystream carrier index per choice
        # per choice: the kind of text-like block a decoder of this output has open
        self._open_kind: dict[int, str | None] = {}
        self._done = False
        self._error_written = False
        self._usage_written = False  # a usage object went out with a Chat stream's chunk
        self._fast = True  # the byte-template delta paths (False: always the general path)
        # Another dialect's deltas: (candidate, field or tool index) -> the chunk's bytes
        # around the delta value, for the envelope in ``_templates_env``.
        self._templates: dict[tuple[int, Any], tuple[bytes, bytes] | None] = {}
        self._templates_env: dict[str, Any] | None = None
        # A Chat stream's own deltas: unified index -> (its block, the event type, the
        # residual choice fields and the candidate it was made for, the "choices"
        # bytes before and after the delta value).
        self._own_heads: dict[int, _OwnHead] = {}
        # The envelope whose empty "choices" list was checked, and that list.
        self._own_env: dict[str, Any] | None = None
        self._own_choices: Any = None

    # -- output -------------------------------------------------------------------------

    def _write(self, chunk: dict[str, Any], event_name: str | None = None) -> bytes:
        if self.chunks is not None:
            self.chunks.append(chunk)
        body = ENCODER.encode(chunk)
        if event_name is None:
            return b"data: " + body + b"\n\n"
        return _SSE.event(body.decode(), event=event_name)

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
            extra = event.extra
            data: bytes | None = None
            if extra is None or EXTRA_KEY not in extra:
                # Another dialect's delta as its own chunk (the delta branches of
                # _foreign, for a choice whose first chunk went out).
                index: int = event.index  # type: ignore[union-attr,assignment]
                block = self._blocks.get(index)
                if block is not None:
                    fast = block.fast
                    if fast is None or fast[0] is not self._foreign_env or fast[1] is not kind:
                        fast = block.fast = self._fast_entry(block, kind, index)
                    if fast is not None:
                        try:
                            value = ENCODER.encode(event.delta)  # type: ignore[union-attr]
                        except Exception:  # not encodable: the general path says how it fails
                            pass
                        else:
                            open_kind = fast[4]
                            if open_kind is None:
                                self._open_kind[block.candidate] = None
                                block.has_args = True
                            elif event.delta:  # type: ignore[union-attr]
                                block.written = True
                                self._open_kind[block.candidate] = open_kind
                            data = fast[2] + value + fast[3]
            else:
                data = self._fast_own(event, extra[EXTRA_KEY])  # type: ignore[arg-type]
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
            return self._keep_usage(event.usage)  # type: ignore[union-attr,arg-type]
        return self._encode_pending(event)

    def _fast_entry(
        self, block: _Block, kind: type, index: int
    ) -> tuple[Any, type, bytes, bytes, str | None] | None:
        """:attr:`_Block.fast` for deltas of type ``kind``, or None when they take the
        general path. What it checks stays true once true (a block's kind and loss, a
        choice whose role went out, a reasoning carrier recorded), except the envelope,
        which the entry names."""
        env = self._foreign_env
        if block.lost or block.custom or env is None or block.candidate not in self._role_sent:
            return None
        candidate = block.candidate
        key: Any
        open_kind: str | None
        if kind is ToolInputDelta or block.kind == "tool_call":
            key = block.tool_index
            if type(key) is not int:
                return None
            open_kind = None
        elif kind is ReasoningDelta or block.kind == "reasoning":
            if not self.quirks.reasoning_native and index not in self._reasoning_noted:
                return None  # the first one records the carrier
            key = "reasoning_content"
            open_kind = "reasoning"
        else:
            key = "refusal" if block.kind == "refusal" else "content"
            open_kind = block.kind
        if self._templates_env is not env:
            self._templates.clear()
            self._templates_env = env
        tkey = (candidate, key)
        try:
            template = self._templates[tkey]
        except KeyError:
            template = self._templates[tkey] = self._foreign_template(env, candidate, key)
        if template is None:
            return None
        return env, kind, template[0], template[1], open_kind

    def _foreign_template(
        self, env: dict[str, Any], candidate: int, key: Any
    ) -> tuple[bytes, bytes] | None:
        """The bytes of :meth:`_chunk` around the delta value."""
        delta: dict[str, Any] = (
            {"tool_calls": [{"index": key, "function": {"arguments": _MARK}}]}
            if type(key) is int
            else {key: _MARK}
        )
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        entry.update(self.quirks.choice_fields)
        chunk = dict(env)
        chunk["choices"] = [entry]
        return _split(b"data: " + ENCODER.encode(chunk) + b"\n\n")

    def _fast_own(self, event: TextDelta | ToolInputDelta | ReasoningDelta, x: Any) -> bytes | None:
        """A delta decoded from a Chat chunk holding only it (``extra["chat"]`` is just
        the envelope change): what :meth:`_own` then :meth:`_flush` write."""
        if type(x) is not dict or len(x) != 1:
            return None
        change = x.get("env")
        if type(change) is not dict or _GONE in change or "choices" in change:
            return None
        env = self._env
        if env is not self._own_env:
            # A new envelope: its "choices" must be the empty placeholder.
            choices = env.get("choices")
            if type(choices) is not list or choices:
                return None
            self._own_env = env
            self._own_choices = choices
        index = event.index
        kind = type(event)
        cached = self._own_heads.get(index)
        if (
            cached is None
            or cached[0] is not self._blocks.get(index)
            or cached[1] is not kind
            or cached[2] is not self._residual.get(cached[3], self._choice_fields)
        ):
            block = self._blocks.get(index)
            if block is None:
                return None
            cached = self._own_head(block, kind)
            if cached is None:
                return None
            self._own_heads[index] = cached
            # What the general path records for the delta's choice (its residual and
            # candidate), whichever path writes this event: once per template.
            candidate = cached[3]
            self._residual[candidate] = cached[2]
            if candidate not in self._candidates:
                self._candidates.append(candidate)
        if kind is ToolInputDelta and not event.delta:
            return None
        try:
            value = ENCODER.encode(event.delta)
        except Exception:  # not encodable: the general path says how it fails
            return None
        # The envelope is changed in place (apply() would copy it: the same keys in the
        # same order), and written with the choice in place of its empty "choices".
        env.update(change)
        env["choices"] = msgspec.Raw(cached[4] + value + cached[5])
        try:
            body = ENCODER.encode(env)
        except Exception:  # the general path says how it fails
            return None
        finally:
            env["choices"] = self._own_choices
        # The chunk the general path would gather is written and forgotten.
        return b"data: %b\n\n" % body

    def _own_head(self, block: _Block, kind: type) -> _OwnHead | None:
        """The template of an own delta of ``block`` (see :attr:`_own_heads`)."""
        if block.custom:
            return None  # (the general path writes custom.input)
        key: Any
        if kind is TextDelta:
            key = "refusal" if block.kind == "refusal" else "content"
        elif kind is ReasoningDelta:
            key = "reasoning_content"
        else:
            key = block.tool_index
        candidate = block.candidate
        residual = self._residual.get(candidate, self._choice_fields)
        template = self._own_template(candidate, key, residual)
        if template is None:
            return None
        return block, kind, residual, candidate, b"[" + template[0], template[1] + b"]"

    @staticmethod
    def _own_template(candidate: int, key: Any, residual: Any) -> tuple[bytes, bytes] | None:
        """The bytes of a choice entry built by :meth:`_entry_for` around the delta value."""
        if key is None or type(key) is int:
            fragment = {"index": key, "function": {"arguments": _MARK}}
            delta: dict[str, Any] = {"tool_calls": [fragment]}
        else:
            delta = {key: _MARK}
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        if not isinstance(residual, dict):
            return None
        entry.update(residual)
        try:
            return _split(ENCODER.encode(entry))
        except Exception:
            return None

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

    def _candidate_of(self, block: _Block | None) -> int:
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
            self._blocks[event.index] = _Block(event, tool_index)
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
                    self._next_carry_index(entry["index"], item.get("index", _NO_INDEX))
                    entry["delta"].setdefault("polystream", []).append(item)
            elif self._entries is None:
                self._entries = []
        elif kind is Unknown:
            assert isinstance(event, Unknown)
            if x.get("p"):
                entry = self._entry_for(x, self._entry_candidate or 0)
                item = DECODER.decode(event.data)
                got = item.get("index", _NO_INDEX) if isinstance(item, dict) else _NO_INDEX
                self._next_carry_index(entry["index"], got)
                entry["delta"].setdefault("polystream", []).append(item)
            else:
                return _SSE.event(event.data, event=x.get("ev"))
        elif kind is ErrorEvent and x.get("c"):
            assert isinstance(event, ErrorEvent)
            if self._entries is None:
                self._entries = []
            self._specials["error"] = event.error.raw
        elif kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            prefix = self._close()
            line = dict(x.get("top") or {})
            line["error"] = event.error.raw if event.error.raw is not None else _error(event.error)
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
            return self._close() + _comment(event)
        return prefix + self._end(x)

    def _end(self, x: dict[str, Any]) -> bytes:
        if "env" in x:
            return self._flush(x["env"], x.get("ev"))
        return b""

    def _next_carry_index(self, candidate: int, index: Any) -> None:
        self._carry_next[candidate] = (
            index + 1 if type(index) is int else self._carry_next.get(candidate, 0) + 1
        )

    def _carry(self, event: Event, x: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``delta.polystream`` entry for an event Chat has no field for.

        Each entry has an ``index``, counting per choice: the openai SDK merges list
        entries of a delta by their ``index`` and rejects entries without one.
        """
        if isinstance(event, SignatureDelta | Citation):
            block = self._blocks.get(event.index) if event.index is not None else None
            candidate = block.candidate if block is not None else 0
        elif isinstance(event, BlockStart):
            candidate = event.candidate
        else:
            assert isinstance(event, Metadata)
            candidate = event.candidate
        if x is not None and "ci" in x:
            candidate = x["ci"]
        elif x is not None and self._entry_candidate is not None:
            candidate = self._entry_candidate
        index: Any = self._carry_next.get(candidate, 0)
        if x is not None and "pi" in x:
            index = x["pi"]
        if x is not None and isinstance(x.get("pe"), dict):
            # The entry as received (it was not in the shape written here).
            entry: dict[str, Any] = x["pe"]
            self._next_carry_index(candidate, entry.get("index", _NO_INDEX))
            return entry
        self._next_carry_index(candidate, index)
        item: dict[str, Any] = {} if index is _NO_INDEX or index == "-" else {"index": index}
        if isinstance(event, SignatureDelta):
            block = self._blocks.get(event.index)
            kind = block.kind if block is not None else "reasoning"
            item["type"] = "signature"
            item["target"] = kind
            if block is not None and kind == "tool_call" and block.tool_index is not None:
                item["tool_index"] = block.tool_index
            item["data"] = event.delta
            # The origin (see SignatureDelta): a Chat stream's own events name it only
            # when their entry did, so that such a stream is rewritten exactly.
            carrier = event.extra.get("carrier") if event.extra is not None else None
            if isinstance(carrier, str):
                item["origin"] = carrier
            elif x is None and self._start is not None:
                item["origin"] = self._start.dialect
            return item
        if isinstance(event, BlockStart):
            item["type"] = "start"
            item["kind"] = event.kind
            if event.name is not None:
                item["name"] = event.name
            if event.id is not None:
                item["id"] = event.id
            return item
        if isinstance(event, Citation):
            item["type"] = "citation"
            item["target"] = "text" if event.index is not None else None
            item["citation"] = event.citation
            return item
        item["type"] = "metadata"
        item["name"] = event.name
        item["value"] = event.value
        if event.merge:
            item["merge"] = True
        return item

    # -- events from another dialect ----------------------------------------------------

    def _envelope(self) -> dict[str, Any]:
        if self._foreign_env is None:
            if self._start is not None and self._env:
                self._foreign_env = {k: v for k, v in self._env.items() if k != "obfuscation"}
            else:
                self._foreign_env = self._synthesise(self._start)
        return self._foreign_env

    def _synthesise(self, start: StreamStart | None) -> dict[str, Any]:
        quirks = self.quirks
        source_id = start.id if start is not None else None
        if self._id_factory is not None:
            chunk_id = self._id_factory()
        elif source_id is not None:
            chunk_id = (
                source_id
                if source_id.startswith(quirks.id_prefix)
                else (quirks.id_prefix + source_id)
            )
        else:
            chunk_id = quirks.id_prefix + uuid.uuid4().hex
        created = start.created if start is not None else None
        if created is None:
            created = 0 if quirks.created_zero or self._clock is None else int(self._clock())
        model = start.model if start is not None and start.model else quirks.model
        return {
            "id": chunk_id,
            "object": CHUNK_OBJECT,
            "created": created,
            "model": model,
            "choices": [],
        }

    def _chunk(
        self, candidate: int, delta: dict[str, Any], finish_reason: str | None = None
    ) -> bytes:
        earlier = b""
        if candidate not in self._role_sent:
            if not 0 <= candidate < MAX_CHOICES:
                raise LocalProtocolError(
                    f"choice index {candidate} out of range (0 to {MAX_CHOICES - 1}): a Chat"
                    " stream opens every choice below the one it writes",
                    dialect=self.dialect,
                )
            # Choices first appear in index order, as in OpenAI's streams: the openai SDK's
            # accumulator fails on a choice whose lower indexes it has not seen (another
            # dialect's candidate 1 may have output before candidate 0). A dialect with a
            # role delta opens this choice with it too; else the role goes with ``delta``.
            opens = self.quirks.role_delta is not None
            earlier = b"".join(
                [self._open_choice(c) for c in range(candidate + opens) if c not in self._role_sent]
            )
            if not opens:
                self._role_sent.add(candidate)
                delta = {"role": "assistant", **delta}
        return earlier + self._one_entry(candidate, delta, finish_reason)

    def _open_choice(self, candidate: int) -> bytes:
        """The chunk that opens a choice before its first output: the dialect's role
        delta (see :class:`~polystream.dialects._chat.quirks.Quirks`), else the role
        alone."""
        self._role_sent.add(candidate)
        role = self.quirks.role_delta
        return self._one_entry(candidate, {"role": "assistant"} if role is None else dict(role))

    def _one_entry(
        self, candidate: int, delta: dict[str, Any], finish_reason: str | None = None
    ) -> bytes:
        """A chunk of one choice entry."""
        if candidate not in self._candidates:
            self._candidates.append(candidate)
        chunk = dict(self._envelope())
        entry: dict[str, Any] = {"index": candidate, "delta": delta}
        entry.update(self.quirks.choice_fields)
        if finish_reason is not None:
            entry["finish_reason"] = finish_reason
        chunk["choices"] = [entry]
        return self._write(chunk)

    def _foreign(self, event: Event) -> bytes:
        kind = type(event)
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            if event.error.kind == "protocol":
                # A decode error of the source stream: nothing to write (and no reason
                # to cut a chunk that is being gathered).
                self.lose("error:protocol", event, "a decode error of the source stream")
                return b""
        elif kind not in _WRITING:
            if kind is Unknown:
                self.lose("event:unknown", event, "an unknown event of another dialect")
            return b""
        prefix = self._close()
        if kind is StreamStart:
            assert isinstance(event, StreamStart)
            self._start = event
            self._foreign_env = self._synthesise(event)
            if self.quirks.role_delta is not None and 0 not in self._role_sent:
                # OpenAI's first chunk: the first choice opens before any output.
                return prefix + self._open_choice(0)
            return prefix
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            tool_index = None
            if event.kind == "tool_call":
                tool_index = self._tool_count.get(event.candidate, 0)
                self._tool_count[event.candidate] = tool_index + 1
            started = self._blocks[event.index] = _Block(event, tool_index)
            if started.lost:
                self.lose(
                    f"block:{event.kind}",
                    event,
                    f"Chat Completions has no {event.kind} output",
                )
                return prefix
            if event.kind != "tool_call":
                # A decoder would continue the open block of the same kind (Chat shows
                # no boundary) and cannot know a block's name or id: carry the start.
                if (
                    event.name is not None
                    or event.id is not None
                    or self._open_kind.get(event.candidate) == event.kind
                ):
                    items: list[dict[str, Any]] = []
                    self._start_block(started, items)
                    return prefix + self._chunk(event.candidate, {"polystream": items})
                return prefix
            # A tool call: its first fragment, with the id to send the result back with
            # (``call_id`` where the source distinguishes it from the item id).
            call_id = event.call_id or event.id or f"call_{event.index}"
            self._open_kind[event.candidate] = None
            if started.custom:
                # A free-form call: Chat's custom tool call, its input as text.
                fragment = {
                    "index": tool_index,
                    "id": call_id,
                    "type": "custom",
                    "custom": {"name": event.name or "", "input": ""},
                }
            else:
                fragment = {
                    "index": tool_index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": event.name or "", "arguments": ""},
                }
            return prefix + self._chunk(event.candidate, {"tool_calls": [fragment]})
        if kind in (TextDelta, ReasoningDelta, ToolInputDelta):
            assert isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta)
            block = self._blocks.get(event.index)
            if block is None or block.lost:
                return prefix
            if kind is ToolInputDelta or block.kind == "tool_call":
                self._open_kind[block.candidate] = None
                block.has_args = True
                fragment = _input_fragment(block, event.delta)
                return prefix + self._chunk(block.candidate, {"tool_calls": [fragment]})
            if kind is ReasoningDelta or block.kind == "reasoning":
                if not self.quirks.reasoning_native and event.index not in self._reasoning_noted:
                    self._reasoning_noted.add(event.index)
                    self.lose(
                        "reasoning",
                        event,
                        "OpenAI Chat streams no reasoning text; carried in delta.reasoning_content",
                        carried=True,
                    )
                if event.delta:
                    block.written = True
                    self._open_kind[block.candidate] = "reasoning"
                return prefix + self._chunk(block.candidate, {"reasoning_content": event.delta})
            if event.delta:
                block.written = True
                self._open_kind[block.candidate] = block.kind
            field = "refusal" if block.kind == "refusal" else "content"
            return prefix + self._chunk(block.candidate, {field: event.delta})
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            block = self._blocks.get(event.index)
            if block is None or block.lost or block.kind != "tool_call" or block.has_args:
                return prefix
            # Arguments sent whole (Gemini functionCall, Responses item.done): one fragment.
            value = event.value if event.value is not None else block.start.value
            if value is None:
                return prefix
            arguments = value if isinstance(value, str) else ENCODER.encode(value).decode()
            block.has_args = True
            fragment = _input_fragment(block, arguments)
            return prefix + self._chunk(block.candidate, {"tool_calls": [fragment]})
        if kind is SignatureDelta:
            assert isinstance(event, SignatureDelta)
            block = self._blocks.get(event.index)
            if block is not None and block.lost:
                self.lose("signature", event, f"signature of a {block.kind} block, not carried")
                return prefix
            self.lose("signature", event, "Chat has no signature field", carried=True)
            candidate = block.candidate if block is not None else 0
            items = []
            if block is not None:
                self._start_block(block, items)
            items.append(self._carry(event))
            return prefix + self._chunk(candidate, {"polystream": items})
        if kind is Citation:
            assert isinstance(event, Citation)
            block = self._blocks.get(event.index) if event.index is not None else None
            if block is not None and block.lost:
                self.lose("citation", event, f"citation of a {block.kind} block, not carried")
                return prefix
            self.lose("citation", event, "Chat annotations are url_citation only", carried=True)
            candidate = block.candidate if block is not None else 0
            items = []
            if block is not None:
                self._start_block(block, items)
            items.append(self._carry(event))
            return prefix + self._chunk(candidate, {"polystream": items})
        if kind is Metadata:
            assert isinstance(event, Metadata)
            self.lose(f"metadata:{event.name}", event, "Chat has no such field", carried=True)
            return prefix + self._chunk(event.candidate, {"polystream": [self._carry(event)]})
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            self._usage = event.usage if self._usage is None else self._usage.merged(event.usage)
            return prefix
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            self._error_written = True
            return prefix + self._write({"error": _error(event.error)})
        if kind is Finish:
            assert isinstance(event, Finish)
            return prefix + self._finish(event)
        assert isinstance(event, KeepAlive)
        return prefix + _comment(event)

    def _start_block(self, block: _Block, items: list[dict[str, Any]]) -> None:
        """Carry a text-like block's start when a decoder of the output could not see
        it: it would continue the open block of the same kind, attach a signature to
        an older block, or lose the block's name or id."""
        if block.written or block.kind == "tool_call":
            return
        block.written = True
        self._open_kind[block.candidate] = block.kind
        self.lose("block-start", block.start, "Chat has no block boundaries", carried=True)
        items.append(self._carry(block.start))

    def _finish(self, event: Finish) -> bytes:
        self._done = True
        if event.status == "truncated":
            return b""
        parts: list[bytes] = []
        if event.status == "failed" and event.error is not None and not self._error_written:
            # A failure reported only on the terminal event (Responses response.failed):
            # Chat's only way to say it is an error line.
            self._error_written = True
            parts.append(self._write({"error": _error(event.error)}))
        if event.status != "failed":
            reason = to_wire_finish_reason(event.reason)
            delta: dict[str, Any] = {}
            mapped, status = map_finish_reason(reason)
            if (
                mapped.unified != event.reason.unified
                or status != event.status
                or (event.reason.raw is not None and event.reason.raw != reason)
            ):
                # Chat has no word for this reason (pause_turn, refusal, a provider's
                # own value): carried, so that a decode restores the Finish exactly.
                self.lose(
                    f"finish_reason:{event.reason.unified}",
                    event,
                    f"Chat finish_reason has no {event.reason.raw or event.reason.unified!r}",
                    carried=True,
                )
                first = (self._candidates or [0])[0]
                item = {
                    "index": self._carry_next.get(first, 0),
                    "type": "finish",
                    "unified": event.reason.unified,
                    "raw": event.reason.raw,
                    "status": event.status,
                }
                self._next_carry_index(first, item["index"])
                delta = {"polystream": [item]}
            for candidate in self._candidates or [0]:
                if candidate not in self._finished:
                    self._finished.add(candidate)
                    parts.append(self._chunk(candidate, delta, reason))
                    delta = {}
        usage = self._usage
        if event.usage is not None:
            usage = event.usage if usage is None else usage.merged(event.usage)
        if usage is not None and not usage.is_empty() and not self._usage_written:
            chunk = dict(self._envelope())
            chunk["choices"] = []
            chunk["usage"] = usage_to_wire(usage, self.quirks)
            parts.append(self._write(chunk))
        if event.status != "failed":
            parts.append(b"data: [DONE]\n\n")
        return b"".join(parts)


_GONE: Final = "-"
"""The key of an envelope change that lists vanished keys (see :func:`.wire.diff`)."""
_MARK: Final = "\x00polystream-delta\x00"
"""A placeholder for the delta value when a byte template is made (see :func:`_split`)."""
_MARK_JSON: Final = ENCODER.encode(_MARK)


def _split(data: bytes) -> tuple[bytes, bytes] | None:
    """``data`` around the one encoded :data:`_MARK` (None unless it occurs once)."""
    parts = data.split(_MARK_JSON)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _input_fragment(block: _Block, text: str) -> dict[str, Any]:
    """A continuation fragment of another dialect's tool call: ``text`` appended to a
    function call's arguments, or to a custom call's input."""
    if block.custom:
        return {"index": block.tool_index, "custom": {"input": text}}
    return {"index": block.tool_index, "function": {"arguments": text}}


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


def _error(error: ErrorInfo) -> dict[str, Any]:
    """An OpenAI-shaped error object for an error of another dialect."""
    return {
        "message": error.message,
        "type": error.code or error.kind,
        "param": None,
        "code": error.code,
    }


def _comment(event: KeepAlive) -> bytes:
    text = event.comment if event.comment is not None else (event.name or "")
    return _SSE.comment(text) + b"\n"

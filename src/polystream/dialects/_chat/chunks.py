"""The general path of the Chat decoder: one chunk, decoded into a dict, into events.

:class:`ChunkAssembly` keeps the state of each choice (its open text-like block, its
open tool calls by provider index and id, the carrier entries counted so far) and
writes the residuals each event's ``extra["chat"]`` carries (the layout is in
:mod:`polystream.dialects._chat.decode`). :class:`~.decode.ChatDecoder` adds the
framing hooks, the fast paths and the terminal handling on top.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, get_args

import msgspec

from polystream.dialects._base import FramedDecoder
from polystream.dialects._chat.errors import error_info
from polystream.dialects._chat.finish_reason import is_known_finish_reason
from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import convert_usage
from polystream.dialects._chat.wire import ENCODER, EXTRA_KEY, base_envelope, diff
from polystream.events import (
    BlockEnd,
    BlockKind,
    BlockStart,
    Citation,
    ErrorEvent,
    ErrorInfo,
    Event,
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
)
from polystream.wire.sse import ServerSentEvent

__all__ = ["NO_CHOICES", "ChoiceState", "ChunkAssembly", "OpenTool"]

_UNIFIED_REASONS: Final = frozenset(get_args(UnifiedFinishReason))
_STATUSES: Final = frozenset(get_args(FinishStatus))
# The "choices" placeholder in an envelope (never mutated; shared to keep diffs cheap).
NO_CHOICES: Final[list[Any]] = []
# delta keys that events carry; every other delta key is a residual.
_MODELLED_DELTA: Final = frozenset(
    {"content", "refusal", "reasoning_content", "tool_calls", "annotations", "polystream"}
)
_TEXT_FIELDS: Final[tuple[tuple[str, BlockKind], ...]] = (
    ("reasoning_content", "reasoning"),
    ("content", "text"),
    ("refusal", "refusal"),
)


class OpenTool:
    """One open tool-call block."""

    __slots__ = ("block", "id", "tool_index")

    def __init__(self, block: int, id: str | None, tool_index: Any) -> None:
        self.block = block
        self.id = id
        self.tool_index = tool_index


class ChoiceState:
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
        self.tools: dict[int, OpenTool] = {}  # provider tool index -> open block
        self.open_tools: list[OpenTool] = []
        self.last_of_kind: dict[str, int] = {}  # for carrier signatures and citations
        self.finish_raw: str | None = None
        self.carry_next = 0  # the polystream carrier index the encoder would write next
        # a carried finish reason (another dialect's, see the encoder)
        self.finish_override: tuple[FinishReason, FinishStatus] | None = None


class ChunkAssembly(FramedDecoder):
    """The chunk-by-chunk state of a Chat decoder and the general path that reads a
    chunk's dict into events (see the module docstring)."""

    quirks: ClassVar[Quirks]

    def __init__(self, *, strict: bool = False, keep_raw: bool = False, **options: Any) -> None:
        super().__init__(strict=strict, keep_raw=keep_raw, **options)
        self._started = False
        self._env: dict[str, Any] = {}
        self._choices: dict[int, ChoiceState] = {}
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
        events: list[Event] = []
        self._events = events
        self._entry_candidate = None
        self._last_frag = None
        # The envelope: the chunk minus what events carry (placeholders keep the keys).
        env = dict(obj)
        if "choices" in env:
            env["choices"] = NO_CHOICES
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
            info = error_info(error)
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
            state = self._choices[candidate] = ChoiceState(self.quirks.choice_fields)
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

    def _open_text(self, state: ChoiceState, candidate: int, kind: BlockKind) -> int:
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

    def _close_text(self, state: ChoiceState) -> None:
        if state.text is not None:
            self._emit(BlockEnd(index=state.text[0], extra=self._x(False)))
            state.text = None

    def _close_all(self, state: ChoiceState) -> None:
        self._close_text(state)
        for tool in state.open_tools:
            self._emit(BlockEnd(index=tool.block, extra=self._x(False)))
        state.open_tools = []
        state.tools = {}

    def _close_tool(self, state: ChoiceState, tool: OpenTool) -> None:
        self._emit(BlockEnd(index=tool.block, extra=self._x(False)))
        state.open_tools.remove(tool)
        if type(tool.tool_index) is int and state.tools.get(tool.tool_index) is tool:
            del state.tools[tool.tool_index]

    def _fragment(self, state: ChoiceState, candidate: int, fragment: Any) -> None:
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

        tool: OpenTool | None = None
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
            tool = OpenTool(index, call_id, raw_index if valid_index else None)
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

    def _carried(self, state: ChoiceState, candidate: int, entries: list[Any]) -> None:
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


def _dumps(value: Any) -> str:
    return ENCODER.encode(value).decode()

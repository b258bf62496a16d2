"""Rebuild the ``Response`` object, as ``POST /v1/responses`` (non-streaming) returns it.

:class:`Assembler` folds unified events into Responses output items. It serves two
callers: :func:`rebuild` (the final object of a decoded stream) and the encoder (which
needs the items it announces in ``output_item.added`` / ``output_item.done`` and the
whole ``Response`` of the terminal event when it writes a stream that came from another
dialect).

For a stream decoded from the same dialect the carriers' ``extra`` hold the native items, so
the rebuilt items are the provider's own; items whose ``output_item.done`` never came
(a truncated stream) are assembled from the added item and the deltas. When the stream
ends with ``response.completed|failed|incomplete`` :func:`rebuild` returns the object that
event carried; without it (truncated, or a resumed stream cut short) the object is built
from the latest lifecycle snapshot, the items, the Finish and the usage.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import Any

import msgspec

from polystream.dialects._carrier import origin
from polystream.dialects._free_form import is_free_form
from polystream.dialects._responses.finish_reason import to_incomplete_reason
from polystream.dialects._responses.quirks import Quirks
from polystream.dialects._responses.usage import from_usage
from polystream.dialects._responses.wire import DECODER, ENCODER, LIFECYCLE, TERMINAL
from polystream.events import (
    BlockEnd,
    BlockStart,
    Citation,
    DataDelta,
    Event,
    Finish,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)
from polystream.wire.jsondepth import decode_bounded

__all__ = [
    "ANNOTATION_TYPES",
    "FAMILY",
    "WEB_SEARCH_NAMES",
    "Assembler",
    "IdFactory",
    "Out",
    "rebuild",
]

FAMILY = frozenset({"openai_responses", "xai_responses"})
"""Dialects whose unified events carry native Responses payloads in ``extra``.

Only a stream decoded from the *same* dialect is re-encoded from those payloads: between
OpenAI and xAI the payloads mean different things (xAI's ``custom_tool_call`` items are
server-side searches, its ``output_tokens`` may leave reasoning out, encrypted reasoning
is only valid for the provider that made it), so the other one is written like any
foreign stream."""

ANNOTATION_TYPES = frozenset(
    {"url_citation", "file_citation", "container_file_citation", "file_path"}
)
"""``output_text`` annotation types."""

WEB_SEARCH_NAMES = frozenset({"web_search", "google_search", "web_search_preview"})
"""Foreign ``server_tool_call`` names written as ``web_search_call`` items."""

_ID_PREFIX = {
    "web_search": "ws",
    "text": "msg",
    "refusal": "msg",
    "reasoning": "rs",
    "tool_call": "fc",
    "custom_tool_call": "ctc",
    "image": "ig",
    "response": "resp",
    "call": "call",
}


class IdFactory:
    """Deterministic ids for items of a stream written from another dialect.

    OpenAI style: ``<prefix>_<48 hex>``; xAI style: a bare UUID. The ids derive from the
    response id and a counter, so the same input always gives the same bytes.
    """

    def __init__(self, style: str, seed: str) -> None:
        self.style = style
        self.seed = seed
        self.count = 0

    def make(self, what: str) -> str:
        """A new id for ``what`` (a block kind, ``response`` or ``call``)."""
        self.count += 1
        digest = hashlib.sha256(f"{self.seed}/{what}/{self.count}".encode()).digest()
        if self.style == "uuid":
            return str(uuid.UUID(bytes=digest[:16], version=4))
        return f"{_ID_PREFIX.get(what, 'item')}_{digest[:24].hex()}"


class _Part:
    __slots__ = ("annotations", "done", "part", "text")

    def __init__(self, part: dict[str, Any]) -> None:
        self.part = part
        self.text: list[str] = []
        self.annotations: list[Any] = []
        self.done: dict[str, Any] | None = None


class Out:
    """One output item being assembled.

    Attributes:
        output_index: Its position in ``output``.
        item: The item as announced by ``output_item.added``.
        kind: The unified block kind (None for ``message`` items seen natively).
        done: The provider's own finished item, when ``output_item.done`` came.
    """

    __slots__ = (
        "args",
        "closed",
        "data",
        "done",
        "foreign",
        "item",
        "kind",
        "output_index",
        "parts",
        "rcontent",
        "signature",
        "start_args",
        "summary",
    )

    def __init__(self, output_index: int, item: dict[str, Any], kind: str | None) -> None:
        self.output_index = output_index
        self.item = item
        self.kind = kind
        self.done: dict[str, Any] | None = None
        self.parts: dict[int, _Part] = {}
        self.args: list[str] = []
        self.summary: dict[int, list[str]] = {}
        self.rcontent: dict[int, list[str]] = {}
        # The image's base64 in pieces (joined when built: joined at each delta, a
        # result sent in many deltas would cost time quadratic in their number).
        self.data: list[str] | None = None
        self.signature: list[str] = []
        self.closed = False
        self.foreign = False
        self.start_args: str | None = None

    @property
    def id(self) -> str | None:
        """The item id."""
        value = self.item.get("id")
        return value if isinstance(value, str) else None

    def build(self, *, finished: bool) -> dict[str, Any]:
        """The item: the provider's finished one, or assembled from what streamed."""
        if self.done is not None:
            return self.done
        item = dict(self.item)
        itype = item.get("type")
        if finished and ("status" in item or itype in ("message", "function_call")):
            item["status"] = "completed"
        if itype == "message":
            content = []
            for ci in sorted(self.parts):
                state = self.parts[ci]
                if state.done is not None:
                    content.append(state.done)
                    continue
                part = dict(state.part)
                text = "".join(state.text)
                if part.get("type") == "refusal":
                    if state.text:
                        part["refusal"] = text
                else:
                    if state.text:
                        part["text"] = text
                    if state.annotations or "annotations" in part:
                        earlier = part.get("annotations")
                        part["annotations"] = [
                            *(earlier if isinstance(earlier, list) else ()),
                            *state.annotations,
                        ]
                content.append(part)
            item["content"] = content
        elif itype in {"function_call", "mcp_call"}:
            if self.args:
                item["arguments"] = "".join(self.args)
            elif self.start_args is not None:
                item["arguments"] = self.start_args
        elif itype == "custom_tool_call":
            if self.args:
                item["input"] = "".join(self.args)
            elif self.start_args is not None:
                item["input"] = self.start_args
        elif itype == "code_interpreter_call":
            if self.args:
                item["code"] = "".join(self.args)
        elif itype == "reasoning":
            if self.summary:
                item["summary"] = [
                    {"type": "summary_text", "text": "".join(self.summary[si])}
                    for si in sorted(self.summary)
                ]
            if self.rcontent:
                item["content"] = [
                    {"type": "reasoning_text", "text": "".join(self.rcontent[ci])}
                    for ci in sorted(self.rcontent)
                ]
            if self.signature:
                # Only this dialect's own state is collected (see Assembler.owns).
                item["encrypted_content"] = "".join(self.signature)
        elif itype == "image_generation_call" and self.data is not None:
            if len(self.data) > 1:
                self.data = ["".join(self.data)]
            item["result"] = self.data[0]
        elif itype == "web_search_call" and self.foreign:
            query = _query("".join(self.args) if self.args else self.start_args)
            if finished:
                item["status"] = "completed"
            if query is not None:
                item["action"] = {"type": "search", "query": query}
        return item


def _query(arguments: str | None) -> str | None:
    """The ``query`` of a foreign web search's input JSON, if it has one."""
    if not arguments:
        return None
    try:
        value = decode_bounded(arguments, DECODER, what="tool arguments")
    except msgspec.DecodeError:
        return None
    query = value.get("query") if isinstance(value, dict) else None
    return query if isinstance(query, str) else None


class Assembler:
    """Folds unified events into Responses items and the final ``Response``.

    Args:
        quirks: The dialect's quirks.
        ids: Id factory for items synthesised from foreign blocks (None: such blocks
            get no item; :func:`rebuild` of a foreign stream still works, ids are made).
    """

    def __init__(self, quirks: Quirks, ids: IdFactory | None = None) -> None:
        self.quirks = quirks
        self.ids = ids
        self.native = False
        self.source: str | None = None
        self.base: dict[str, Any] | None = None
        self.terminal: dict[str, Any] | None = None
        self.finish: Finish | None = None
        self.usage = Usage()
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self.items: dict[int, Out] = {}
        self.blocks: dict[int, tuple[Out, int | None]] = {}
        self._next_output = 0
        self.last_citation: Any = None
        self.last_citation_converted = False

    # -- feeding -----------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        """Fold one event."""
        extra = event.extra
        native = self.native and extra is not None and "type" in extra
        if isinstance(event, TextDelta):
            self._text(event)
        elif isinstance(event, ReasoningDelta):
            self._reasoning(event)
        elif isinstance(event, ToolInputDelta):
            found = self.blocks.get(event.index)
            if found is not None:
                found[0].args.append(event.delta)
        elif isinstance(event, StreamStart):
            self.native = event.dialect == self.quirks.dialect
            self.source = event.dialect
            self.id = event.id
            self.model = event.model
            self.created = event.created
            if self.native and extra is not None and isinstance(extra.get("response"), dict):
                self.base = extra["response"]
        elif isinstance(event, StatusUpdate):
            if native:
                assert extra is not None
                self._native_status(extra)
        elif isinstance(event, BlockStart):
            if native:
                assert extra is not None
                self._native_start(event, extra)
            elif not (self.native and extra is not None):
                self._foreign_start(event)
        elif isinstance(event, BlockEnd):
            self._block_end(event, extra if native else None)
        elif isinstance(event, Citation):
            self._citation(event, native)
        elif isinstance(event, DataDelta):
            found = self.blocks.get(event.index)
            if found is not None:
                out = found[0]
                if event.replace or out.data is None:
                    out.data = [event.delta]
                else:
                    out.data.append(event.delta)
        elif isinstance(event, SignatureDelta):
            found = self.blocks.get(event.index)
            if found is not None and self.owns(event):
                found[0].signature.append(event.delta)
        elif isinstance(event, UsageUpdate):
            self.usage = self.usage.merged(event.usage)
        elif isinstance(event, Finish):
            self.finish = event
            if event.usage is not None:
                self.usage = self.usage.merged(event.usage)
            if native and extra is not None and extra["type"] in TERMINAL:
                self.terminal = extra.get("response")

    def owns(self, event: SignatureDelta) -> bool:
        """Whether the signature is this dialect's own state (its origin, see
        :class:`~polystream.events.SignatureDelta`): only that is ``encrypted_content``.
        OpenAI and xAI state are not interchangeable."""
        return origin(event.extra, self.source) == self.quirks.dialect

    def _block_end(self, event: BlockEnd, extra: dict[str, Any] | None) -> None:
        found = self.blocks.get(event.index)
        if found is None:
            return
        out, ci = found
        if extra is not None:
            if extra["type"] == "response.output_item.done":
                out.done = extra["item"]
                out.closed = True
            elif ci is not None and extra["type"] == "response.content_part.done":
                out.parts[ci].done = extra.get("part")
        elif ci is None:
            out.closed = True
            if out.kind in ("tool_call", "server_tool_call") and not out.args:
                value = event.value
                if isinstance(value, str):
                    out.args.append(value)
                elif value is not None:
                    out.args.append(ENCODER.encode(value).decode())
                elif out.start_args is not None:
                    out.args.append(out.start_args)

    def _citation(self, event: Citation, native: bool) -> None:
        """Attach a citation to its text part; a foreign one becomes a ``url_citation``.

        ``last_citation`` says what was attached (None: nothing could be) and
        ``last_citation_converted`` whether a foreign citation had to be converted.
        """
        found = self.blocks.get(event.index) if event.index is not None else None
        self.last_citation = None
        self.last_citation_converted = False
        if found is None or found[1] is None:
            return
        part = found[0].parts[found[1]]
        citation = event.citation
        if not native and not (
            isinstance(citation, dict)
            and type(citation.get("type")) is str
            and citation["type"] in ANNOTATION_TYPES
        ):
            url = citation.get("url") or citation.get("uri") if isinstance(citation, dict) else None
            if not isinstance(url, str):
                return
            here = sum(len(t) for t in part.text)
            start = citation.get("start_index")
            end = citation.get("end_index")
            citation = {
                "type": "url_citation",
                "start_index": start if type(start) is int else here,
                "end_index": end if type(end) is int else here,
                "title": str(citation.get("title") or ""),
                "url": url,
            }
            self.last_citation_converted = True
        part.annotations.append(citation)
        self.last_citation = citation

    def _text(self, event: TextDelta) -> None:
        found = self.blocks.get(event.index)
        if found is not None and found[1] is not None:
            found[0].parts[found[1]].text.append(event.delta)

    def _reasoning(self, event: ReasoningDelta) -> None:
        found = self.blocks.get(event.index)
        if found is None:
            return
        key = event.part if event.part is not None else 0
        target = found[0].summary if event.summary else found[0].rcontent
        bucket = target.get(key)
        if bucket is None:
            target[key] = [event.delta]
        else:
            bucket.append(event.delta)

    def _native_status(self, extra: dict[str, Any]) -> None:
        kind = extra["type"]
        if kind in LIFECYCLE:
            if isinstance(extra.get("response"), dict):
                self.base = extra["response"]
        elif kind == "response.output_item.added":
            index = extra["output_index"]
            self.items[index] = Out(index, dict(extra["item"]), None)
        elif kind == "response.output_item.done":
            out = self.items.get(extra["output_index"])
            if out is not None:
                out.done = extra["item"]
                out.closed = True
        elif kind == "response.reasoning_summary_part.added":
            out = self._by_output(extra)
            if out is not None:
                index = extra.get("summary_index", 0)
                if type(index) is int:
                    out.summary.setdefault(index, [])
        elif kind == "response.content_part.added":
            out = self._by_output(extra)
            if out is not None:
                index = extra.get("content_index", 0)
                if type(index) is int:
                    out.rcontent.setdefault(index, [])

    def _by_output(self, extra: dict[str, Any]) -> Out | None:
        index = extra.get("output_index")
        return self.items.get(index) if type(index) is int else None

    def _native_start(self, event: BlockStart, extra: dict[str, Any]) -> None:
        kind = extra["type"]
        if kind == "response.output_item.added":
            index = extra["output_index"]
            out = Out(index, dict(extra["item"]), event.kind)
            self.items[index] = out
            self.blocks[event.index] = (out, None)
        elif kind == "response.content_part.added":
            parent = self._by_output(extra)
            if parent is not None:
                ci = extra["content_index"]
                parent.parts[ci] = _Part(dict(extra["part"]))
                self.blocks[event.index] = (parent, ci)

    def _foreign_start(self, event: BlockStart) -> None:
        kind = event.kind
        if event.candidate != 0:
            return  # a Response has one answer: other candidates have no item
        ids = self.ids or IdFactory(self.quirks.id_style, self.id or "polystream")
        self.ids = ids
        item: dict[str, Any]
        part: dict[str, Any] | None = None
        if kind in {"text", "refusal"}:
            item = {
                "id": ids.make(kind),
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            }
            part = (
                {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
                if kind == "text"
                else {"type": "refusal", "refusal": ""}
            )
        elif kind == "reasoning":
            item = {"id": ids.make(kind), "type": "reasoning", "summary": []}
        elif kind == "tool_call" and is_free_form(event):
            # A free-form (custom) tool call: its input is text, not JSON arguments.
            item = {
                "id": ids.make("custom_tool_call"),
                "type": "custom_tool_call",
                "status": "in_progress",
                "call_id": event.call_id or event.id or ids.make("call"),
                "input": "",
                "name": event.name or "",
            }
        elif kind == "tool_call":
            item = {
                "id": ids.make(kind),
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": event.call_id or event.id or ids.make("call"),
                "name": event.name or "",
            }
        elif kind == "server_tool_call" and event.name in WEB_SEARCH_NAMES:
            item = {
                "id": ids.make("web_search"),
                "type": "web_search_call",
                "status": "in_progress",
                "action": {"type": "search"},
            }
        elif kind == "image":
            item = {
                "id": ids.make(kind),
                "type": "image_generation_call",
                "status": "in_progress",
                "result": None,
            }
        else:
            return
        out = Out(self._next_output, item, kind)
        out.foreign = True
        self._next_output += 1
        if kind in ("tool_call", "server_tool_call") and event.value is not None:
            # The whole arguments at the start (a Gemini functionCall, say): used when
            # no fragment follows (fragments win, as in the Accumulator).
            value = event.value
            out.start_args = value if isinstance(value, str) else ENCODER.encode(value).decode()
        self.items[out.output_index] = out
        if part is not None:
            out.parts[0] = _Part(part)
            self.blocks[event.index] = (out, 0)
        else:
            self.blocks[event.index] = (out, None)

    # -- results -----------------------------------------------------------------------

    def output(self) -> list[dict[str, Any]]:
        """Every output item so far, in ``output_index`` order."""
        return [self.items[i].build(finished=self.items[i].closed) for i in sorted(self.items)]

    def skeleton(self, status: str, *, created_at: int | None = None) -> dict[str, Any]:
        """A ``Response`` object with no output, for streams from other dialects."""
        base = self.base
        if base is not None:
            resp = dict(base)
            resp["status"] = status
            return resp
        return {
            "id": self.id,  # None: a resumed stream never named it
            "object": "response",
            "created_at": self.created or 0 if created_at is None else created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": None,
            "model": self.model or "unknown",
            "output": [],
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": None,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": None,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
        }

    def response(self, *, prefer_terminal: bool = True) -> dict[str, Any]:
        """The final ``Response`` (see the module docstring)."""
        if prefer_terminal and self.terminal is not None:
            return self.terminal
        finish = self.finish
        status = "in_progress"
        if finish is not None and finish.status != "truncated":
            status = finish.status
            if finish.reason.unified == "cancelled":
                status = "cancelled"
        resp = self.skeleton(status)
        resp["output"] = self.output()
        if finish is not None and finish.status == "incomplete":
            resp["incomplete_details"] = {"reason": to_incomplete_reason(finish.reason)}
        if finish is not None and finish.status == "failed" and finish.error is not None:
            raw = finish.error.raw
            if self.native and isinstance(raw, dict) and "message" in raw:
                resp["error"] = {"code": raw.get("code"), "message": raw["message"]}
            else:
                resp["error"] = {
                    "code": finish.error.code or "server_error",
                    "message": finish.error.message,
                }
        if not self.usage.is_empty() or self.usage.raw is not None:
            resp["usage"] = from_usage(self.usage, native=self.native)
        return resp


def rebuild(
    events: Iterable[Event], quirks: Quirks, *, prefer_terminal: bool = True
) -> dict[str, Any]:
    """The ``Response`` object of a stream, from its unified events.

    Args:
        events: The stream's unified events.
        quirks: The dialect's quirks.
        prefer_terminal: Return the object the terminal event carried, when there is
            one (``False`` assembles it from the stream regardless: used to check that
            the two agree).
    """
    assembler = Assembler(quirks)
    for event in events:
        assembler.feed(event)
    return assembler.response(prefer_terminal=prefer_terminal)

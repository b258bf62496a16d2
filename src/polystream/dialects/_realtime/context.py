"""What a socket client keeps to carry a connection's context over to a new connection,
sans-I/O: the :attr:`~polystream.dialects._socket_spec.SocketSpec.context` of a family.

A client tells its record every message it sent (:meth:`Context.sent`) and every server
message it read (:meth:`Context.received`, the parsed object); the record answers with
the messages that rebuild the context on a new connection (:meth:`Context.replay`) and,
for a request the service says may be sent again with its full history, that request
(:meth:`Context.retry`).

Two records:

* :class:`ConversationContext` (the Realtime API: the service keeps nothing of a
  connection, so the conversation is sent again). It keeps the ``session.update``
  messages as sent, and the conversation as the server reports it
  (``conversation.item.added`` / ``created`` / ``done`` in conversation order, less
  ``deleted`` items, the transcripts of input audio filled in from
  ``input_audio_transcription.completed``, a ``truncated`` audio item's transcript
  dropped, as the service drops it), plus the items the client created that the server
  has not yet reported (the oldest that matches the server's report, see
  :func:`_matches`).
  :meth:`~ConversationContext.replay` gives the session updates,
  in order and as sent, then one ``conversation.item.create`` per item (see
  :func:`creatable`).
* :class:`ResponsesContext` (the Responses WebSocket: nothing is replayed on a new
  connection; the lanes' ``previous_response_id`` chains go on). It keeps each
  request sent and each reply that completed (its request and output items), so that a
  request that failed with a full-history retry advice can be sent again with the whole
  chain as its input (:meth:`~ResponsesContext.retry`).
"""

from __future__ import annotations

import abc
from collections import OrderedDict, deque
from typing import Any, Final, Literal

import msgspec

from polystream.dialects._realtime.session import RealtimeSession
from polystream.errors import LocalProtocolError
from polystream.wire.ws import dump_message

__all__ = ["Context", "ConversationContext", "ResponsesContext", "creatable", "open_context"]

_DECODER: Final = msgspec.json.Decoder()

_AUDIO_APPEND: Final = '{"type":"input_audio_buffer.append"'
"""How an audio append written by the session's commands begins (skipped unparsed)."""

_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_AUDIO_PARTS: Final = frozenset({"input_audio", "output_audio", "audio"})


class Context(abc.ABC):
    """A record of what a connection's context is made of."""

    @abc.abstractmethod
    def sent(self, message: str | bytes) -> None:
        """A message the client sent."""

    @abc.abstractmethod
    def received(self, payload: dict[str, Any]) -> None:
        """A message the server sent, parsed (read, never changed)."""

    def replay(self) -> list[str]:
        """The messages that rebuild the context on a new connection, in order."""
        return []

    @property
    def reconnectable(self) -> bool:
        """Whether a new connection can carry the context on (a family that resumes
        by handle needs one first)."""
        return True

    @property
    def resumable(self) -> bool:
        """Whether the service keeps the session for a new connection to resume: a
        client then replaces its socket when the server says it is going away."""
        return False

    def can_retry(self, lane: str | None) -> bool:
        """Whether :meth:`retry` has a request to send again for ``lane``."""
        return False

    def retry(self, session: RealtimeSession, lane: str | None) -> list[str]:
        """The request that failed before its reply began on ``lane``, again, with its
        full history as input (built by ``session``'s commands); empty when there is
        none or its history is not known whole."""
        return []


def _parse(message: str | bytes) -> dict[str, Any] | None:
    try:
        value = _DECODER.decode(message)
    except msgspec.DecodeError:
        return None
    return value if isinstance(value, dict) else None


# -- the Realtime API conversation ------------------------------------------------------


def creatable(item: dict[str, Any]) -> dict[str, Any] | None:
    """The ``conversation.item.create`` item that puts ``item`` (as the server reported
    it) into a new conversation, or None when nothing of it can be.

    * a ``message`` keeps its id, role and content parts: text parts as text
      (``input_text`` for user and system, ``output_text`` for the assistant), audio
      parts as the text of their transcript (the audio itself is not kept; a part
      without a transcript is left out), image parts as they are; a message left
      without parts is None;
    * a ``function_call`` keeps its id, ``call_id``, ``name`` and ``arguments``; a
      ``function_call_output`` its id, ``call_id`` and ``output``;
    * anything else (MCP items) is None.
    """
    kind = item.get("type")
    out: dict[str, Any] = {}
    if isinstance(item.get("id"), str):
        out["id"] = item["id"]
    out["type"] = kind
    if kind == "function_call":
        for name in ("call_id", "name", "arguments"):
            out[name] = item.get(name)
        return out
    if kind == "function_call_output":
        for name in ("call_id", "output"):
            out[name] = item.get(name)
        return out
    if kind != "message":
        return None
    role = item.get("role")
    text_type = "output_text" if role == "assistant" else "input_text"
    parts = []
    for part in item.get("content") or ():
        if not isinstance(part, dict):
            continue
        ptype = part.get("type")
        text = None
        if ptype in _TEXT_PARTS:
            text = part.get("text")
        elif ptype in _AUDIO_PARTS:
            text = part.get("transcript")
        else:
            parts.append(part)
            continue
        if isinstance(text, str) and text:
            parts.append({"type": text_type, "text": text})
    if not parts:
        return None
    out["role"] = role
    out["content"] = parts
    return out


def _matches(created: dict[str, Any], reported: dict[str, Any]) -> bool:
    """Whether the server's ``reported`` item is the client's ``created`` one: the same
    id when the client gave one; else the same type, role, call id and output, and
    content parts of the same types and texts (the server adds its own fields, and
    leaves out audio)."""
    if "id" in created:
        return bool(created["id"] == reported.get("id"))
    for name in ("type", "role", "call_id", "output"):
        if created.get(name) != reported.get(name):
            return False
    mine, theirs = created.get("content"), reported.get("content")
    if not isinstance(mine, list) or not isinstance(theirs, list):
        return mine == theirs
    if len(mine) != len(theirs):
        return False
    for part, echo in zip(mine, theirs, strict=True):
        if not isinstance(part, dict) or not isinstance(echo, dict):
            return False
        if part.get("type") != echo.get("type") or part.get("text") != echo.get("text"):
            return False
    return True


class ConversationContext(Context):
    """The Realtime API conversation and session updates (see the module docstring).

    Args:
        max_items: Most conversation items kept; past it, the oldest are forgotten (and
            not replayed).
        max_updates: Most ``session.update`` messages kept; past it, the oldest are
            forgotten.
    """

    def __init__(self, *, max_items: int = 1024, max_updates: int = 256) -> None:
        self.max_items = max_items
        self.max_updates = max_updates
        self._updates: deque[str] = deque()
        self._items: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._unacked: deque[dict[str, Any]] = deque()

    @property
    def items(self) -> list[dict[str, Any]]:
        """The conversation as recorded: the server's items in order, then those the
        client created that the server has not reported yet."""
        return [*self._items.values(), *self._unacked]

    def sent(self, message: str | bytes) -> None:
        if isinstance(message, str) and message.startswith(_AUDIO_APPEND):
            return
        value = _parse(message)
        if value is None:
            return
        kind = value.get("type")
        if kind == "session.update":
            text = message if isinstance(message, str) else message.decode()
            self._updates.append(text)
            while len(self._updates) > self.max_updates:
                self._updates.popleft()
        elif kind == "conversation.item.create":
            item = value.get("item")
            if isinstance(item, dict):
                self._unacked.append(item)
                while len(self._unacked) > self.max_items:
                    self._unacked.popleft()

    def received(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind in ("conversation.item.added", "conversation.item.created"):
            self._added(payload)
        elif kind == "conversation.item.done":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("id") in self._items:
                self._items[item["id"]] = item
            elif isinstance(item, dict):
                self._added(payload)
        elif kind == "conversation.item.deleted":
            self._items.pop(payload.get("item_id"), None)  # type: ignore[arg-type]
        elif kind == "conversation.item.truncated":
            self._set_part(payload, "transcript", None)
        elif kind == "conversation.item.input_audio_transcription.completed":
            self._set_part(payload, "transcript", payload.get("transcript"))

    def _added(self, payload: dict[str, Any]) -> None:
        item = payload.get("item")
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            return
        key = item["id"]
        if key in self._items:
            self._items[key] = item
            return
        for created in self._unacked:
            if _matches(created, item):
                self._unacked.remove(created)
                break
        previous = payload.get("previous_item_id")
        last = next(reversed(self._items), None)
        self._items[key] = item
        if previous is None and last is not None:
            self._items.move_to_end(key, last=False)
        elif isinstance(previous, str) and previous != last and previous in self._items:
            # After ``previous``: move every item that followed it behind the new one.
            after = False
            for other in list(self._items):
                if after and other != key:
                    self._items.move_to_end(other)
                elif other == previous:
                    after = True
        while len(self._items) > self.max_items:
            self._items.popitem(last=False)

    def _set_part(self, payload: dict[str, Any], field: str, value: Any) -> None:
        item = self._items.get(payload.get("item_id"))  # type: ignore[arg-type]
        index = payload.get("content_index", 0)
        if item is None or type(index) is not int:
            return
        content = item.get("content")
        if not isinstance(content, list) or not 0 <= index < len(content):
            return
        part = content[index]
        if not isinstance(part, dict):
            return
        # The server's objects are shared (events hold them as extras): copy.
        content = list(content)
        content[index] = {**part, field: value}
        self._items[item["id"]] = {**item, "content": content}

    def replay(self) -> list[str]:
        out = list(self._updates)
        for item in self._items.values():
            created = creatable(item)
            if created is not None:
                out.append(dump_message({"type": "conversation.item.create", "item": created}))
        out.extend(
            dump_message({"type": "conversation.item.create", "item": item})
            for item in self._unacked
        )
        return out


# -- the Responses WebSocket chains -----------------------------------------------------

_TERMINAL: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _input_items(value: Any) -> list[Any]:
    """A request's ``input`` as a list of items (a text is a user message)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return list(value) if isinstance(value, list) else [value]


class ResponsesContext(Context):
    """The requests and replies of a Responses WebSocket (see the module docstring).

    A request joins its lane's queue when sent; the lane's next ``response.created``
    takes it (its reply runs), and an ``error`` while nothing runs on the lane fails it
    (as the session reads them). A reply that completes (or ends incomplete) is kept,
    with its request and its output items, by response id.

    Args:
        max_responses: Most replies kept; past it, the oldest are forgotten (a chain
            through one of them can no longer be sent whole).
    """

    def __init__(self, *, max_responses: int = 256) -> None:
        self.max_responses = max_responses
        self._pending: dict[str | None, deque[dict[str, Any]]] = {}
        self._running: dict[str | None, dict[str, Any] | None] = {}
        self._failed: dict[str | None, dict[str, Any]] = {}
        self._done: OrderedDict[str, tuple[dict[str, Any] | None, list[Any]]] = OrderedDict()

    def sent(self, message: str | bytes) -> None:
        value = _parse(message)
        if value is None or value.get("type") != "response.create":
            return
        lane = value.get("stream_id")
        self._pending.setdefault(lane if isinstance(lane, str) else None, deque()).append(value)

    def received(self, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        lane = payload.get("stream_id")
        lane = lane if isinstance(lane, str) else None
        queue = self._pending.get(lane)
        if kind == "response.created":
            self._running[lane] = queue.popleft() if queue else None
        elif kind in _TERMINAL:
            request = self._running.pop(lane, None)
            response = payload.get("response")
            if kind != "response.failed" and isinstance(response, dict):
                rid = response.get("id")
                output = response.get("output")
                if isinstance(rid, str):
                    self._done[rid] = (request, list(output) if isinstance(output, list) else [])
                    while len(self._done) > self.max_responses:
                        self._done.popitem(last=False)
        elif kind == "error" and lane not in self._running and queue:
            self._failed[lane] = queue.popleft()

    def history(self, response_id: str) -> list[Any] | None:
        """The input that stands for ``response_id`` and the chain before it: each
        reply's request input then its output items, oldest first; None when a reply
        of the chain is not known."""
        chain: list[tuple[dict[str, Any] | None, list[Any]]] = []
        seen: set[str] = set()
        rid: Any = response_id
        while isinstance(rid, str):
            entry = self._done.get(rid)
            if entry is None or rid in seen:
                return None
            seen.add(rid)
            chain.append(entry)
            request = entry[0]
            rid = request.get("previous_response_id") if request is not None else None
        items: list[Any] = []
        for request, output in reversed(chain):
            items += _input_items(request.get("input") if request is not None else None)
            items += output
        return items

    def _full_input(self, request: dict[str, Any]) -> list[Any] | None:
        previous = request.get("previous_response_id")
        items = self.history(previous) if isinstance(previous, str) else []
        return None if items is None else items + _input_items(request.get("input"))

    def can_retry(self, lane: str | None) -> bool:
        request = self._failed.get(lane)
        return request is not None and self._full_input(request) is not None

    def retry(self, session: RealtimeSession, lane: str | None) -> list[str]:
        request = self._failed.pop(lane, None)
        items = self._full_input(request) if request is not None else None
        if request is None or items is None:
            return []
        body = {
            key: value
            for key, value in request.items()
            if key not in ("type", "stream_id", "previous_response_id")
        }
        body["input"] = items
        return session.create_response(body, lane=lane)


def open_context(kind: Literal["conversation", "responses", "resumption"]) -> Context:
    """A new record of the kind a family's descriptor names."""
    if kind == "conversation":
        return ConversationContext()
    if kind == "responses":
        return ResponsesContext()
    raise LocalProtocolError(f"a {kind} record is the family's own (see open_context)")

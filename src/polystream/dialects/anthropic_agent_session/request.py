"""The session request codec: the body that sends client events to a session
(``POST /v1/sessions/{session_id}/events``: ``{"events": [...]}``) or creates one with
its first events (``POST /v1/sessions``: ``{"agent", "environment_id",
"initial_events": [...], ...}``) <-> the unified
:class:`~polystream.request_model.Request`.

A ``user.message`` whose content is text only becomes a user message; a
``system.message`` of text becomes the system text. Every other event (an interrupt, a
tool confirmation, a tool result, an outcome, a message with images or documents) has no
unified form: the events list stays in :attr:`Request.extra` as it came, and the build
writes it back with the messages' texts in their places.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import FamilyCodec, _list, _obj
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import Message, NativeRequest, Request, TextPart

__all__ = ["SESSION", "SessionCodec"]

_EVENT_LISTS: Final = ("events", "initial_events")


def _texts(event: dict[str, Any]) -> list[str] | None:
    """The texts of a text-only ``user.message`` / ``system.message`` (keys ``type``
    then ``content``; each block ``{"type": "text", "text"}``), else None."""
    if list(event) != ["type", "content"] or not isinstance(event["content"], list):
        return None
    texts: list[str] = []
    for block in event["content"]:
        if not (
            isinstance(block, dict)
            and list(block) == ["type", "text"]
            and block["type"] == "text"
            and isinstance(block["text"], str)
        ):
            return None
        texts.append(block["text"])
    return texts


def _system_at(events: list[Any]) -> int | None:
    """The position of the one text-only ``system.message`` among ``events`` (None when
    there is none, or more than one: those stay events as they are)."""
    found = [
        i
        for i, e in enumerate(events)
        if isinstance(e, dict) and e.get("type") == "system.message" and _texts(e) is not None
    ]
    return found[0] if len(found) == 1 else None


def _events_key(body: dict[str, Any]) -> str:
    return "initial_events" if "initial_events" in body or "agent" in body else "events"


def _model_of(agent: Any) -> str | None:
    if isinstance(agent, dict):
        model = agent.get("model")
        if isinstance(model, str):
            return model
        if isinstance(model, dict) and isinstance(model.get("id"), str):
            return str(model["id"])
    return None


class SessionCodec(FamilyCodec):
    """Session event bodies (see :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "agent_session"
    read_fields = frozenset()
    config_read = None
    decided = ()
    settings: dict[str, str] = {}

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        key = _events_key(body)
        messages: list[Message] = []
        system: list[str] = []
        listed = _list(body.get(key, []), key)
        at = _system_at(listed)
        for i, event in enumerate(listed):
            event = _obj(event, f"{key}[{i}]")
            kind = event.get("type")
            if not isinstance(kind, str):
                raise RequestError("expected an event type", param=f"{key}[{i}].type")
            texts = _texts(event)
            if texts is None:
                continue
            if kind == "user.message":
                messages.append(Message(role="user", content=[TextPart(text=t) for t in texts]))
            elif kind == "system.message" and i == at:
                system.extend(texts)
        return Request(
            model=model or _model_of(body.get("agent")) or "",
            messages=messages,
            system="\n".join(system) if system else None,
        )

    def read_whole(self, request: Request, extra: dict[str, Any]) -> None:
        for key in _EVENT_LISTS:
            events = extra.get(key)
            if isinstance(events, list) and all(
                isinstance(e, dict) and e.get("type") == "user.message" and _texts(e) is not None
                for e in events
            ):
                del extra[key]  # the messages say it all

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        extra = request.extra or {}
        create = "agent" in extra or "initial_events" in extra
        key = "initial_events" if create else "events"
        given = extra.get(key)
        users = [
            {
                "type": "user.message",
                "content": [
                    {"type": "text", "text": p.text} for p in m.content if isinstance(p, TextPart)
                ],
            }
            for m in request.messages
            if m.role == "user"
        ]
        if len(users) != len(request.messages):
            raise RequestError(
                "a session takes only user messages (the agent's turns are its own events)",
                param="messages",
            )
        events: list[Any] = []
        if isinstance(given, list):
            pending = iter(users)
            at = _system_at(given)
            for i, event in enumerate(given):
                kind = event.get("type") if isinstance(event, dict) else None
                if isinstance(event, dict) and _texts(event) is not None and kind == "user.message":
                    user = next(pending, None)
                    if user is not None:
                        events.append(user)
                    continue
                if i == at:
                    if request.system:
                        events.append(_system(request.system))
                    continue
                events.append(event)
            events.extend(pending)
            if at is None and request.system:
                events.insert(0, _system(request.system))
        else:
            if request.system:
                events.append(_system(request.system))
            events.extend(users)
        body: dict[str, Any] = {key: events}
        return NativeRequest(
            path="/v1/sessions" if create else "/v1/sessions/{session_id}/events", body=body
        )


def _system(text: str) -> dict[str, Any]:
    return {"type": "system.message", "content": [{"type": "text", "text": text}]}


SESSION: Final[RequestCodec] = SessionCodec()
"""The ``anthropic_agent_session`` request codec."""

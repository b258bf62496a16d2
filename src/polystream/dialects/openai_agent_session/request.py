"""The Agents API session-create request codec (``POST /v1/agents/sessions``): a native
body <-> the unified :class:`~polystream.request_model.Request`.

``input`` (a string, or user messages of ``input_text`` / ``input_image`` parts) becomes
the user messages; the model is the inline agent's ``agent.model`` (an ``agent_id``
names a stored agent, whose model the body does not state). Everything else
(``environment``, ``agent``, ``agent_id``, ``metadata``, ``spend_control``,
``stream_options``, ``vault_ids``, ...) is kept in :attr:`Request.extra` and written back
as it came.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import FamilyCodec
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import ImagePart, Message, NativeRequest, Part, Request, TextPart

__all__ = ["AGENT_SESSION", "AgentSessionCodec"]

_SHAPE: Final = "agent_session_input"
"""A part's ``extra`` key recording how its message was written: ``"text"`` (``input``
was a string) or ``"untyped"`` (a message object without ``type``)."""


def _part(content: Any, param: str) -> Part:
    if not isinstance(content, dict):
        raise RequestError("expected an object", param=param)
    kind = content.get("type")
    if kind == "input_text" and isinstance(content.get("text"), str) and len(content) == 2:
        return TextPart(text=content["text"])
    if kind == "input_image" and isinstance(content.get("image_url"), str) and len(content) == 2:
        return ImagePart(url=content["image_url"])
    raise RequestError(f"unsupported input content {kind!r}", param=param)


def _parse_input(raw: Any) -> list[Message]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [Message(role="user", content=[TextPart(text=raw, extra={_SHAPE: "text"})])]
    if not isinstance(raw, list):
        raise RequestError("expected a string or a list of messages", param="input")
    messages: list[Message] = []
    for i, message in enumerate(raw):
        param = f"input[{i}]"
        if not isinstance(message, dict) or message.get("role") != "user":
            raise RequestError("expected a user message", param=param)
        if (
            set(message) - {"content", "role", "type"}
            or message.get("type", "message") != "message"
        ):
            raise RequestError("unsupported message fields", param=param)
        content = message.get("content")
        if not isinstance(content, list) or not content:
            raise RequestError("expected a non-empty list of parts", param=f"{param}.content")
        parts = [_part(c, f"{param}.content[{j}]") for j, c in enumerate(content)]
        if "type" not in message:
            parts[0].extra = {_SHAPE: "untyped"}
        messages.append(Message(role="user", content=parts))
    return messages


def _write_part(part: Part, param: str) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url
        if url is None and part.data is not None:
            url = f"data:{part.mime_type or 'image/png'};base64,{part.data}"
        if url is not None:
            return {"type": "input_image", "image_url": url}
    raise RequestError(
        f"a session's input holds only text and images, not {type(part).__name__}", param=param
    )


def _write_input(messages: list[Message]) -> str | list[dict[str, Any]] | None:
    if not messages:
        return None
    first = messages[0].content
    if (
        len(messages) == 1
        and len(first) == 1
        and isinstance(first[0], TextPart)
        and (first[0].extra or {}).get(_SHAPE) == "text"
    ):
        return first[0].text
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if message.role != "user":
            raise RequestError(
                f"a session's input holds only user messages, not {message.role}",
                param=f"messages[{i}].role",
            )
        content = [
            _write_part(p, f"messages[{i}].content[{j}]") for j, p in enumerate(message.content)
        ]
        entry: dict[str, Any] = {"content": content, "role": "user"}
        if not (message.content and (message.content[0].extra or {}).get(_SHAPE) == "untyped"):
            entry["type"] = "message"
        out.append(entry)
    return out


class AgentSessionCodec(FamilyCodec):
    """The ``agent_session`` family's codec (see the module docstring)."""

    family = "agent_session"
    read_fields = frozenset({"input", "stream"})
    decided = ("stream",)

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        if not isinstance(body, dict):
            raise RequestError("expected a JSON object")
        agent = body.get("agent")
        found = agent.get("model") if isinstance(agent, dict) else None
        if found is not None and not isinstance(found, str):
            raise RequestError("expected a string", param="agent.model")
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise RequestError("expected a boolean", param="stream")
        extra = {k: v for k, v in body.items() if k not in self.read_fields}
        return Request(
            model=found or model or "",
            messages=_parse_input(body.get("input")),
            stream=stream,
            extra=extra or None,
        )

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        body: dict[str, Any] = {}
        extra = dict(request.extra or {})
        if "environment" not in extra:
            body["environment"] = {"type": "none"}
        agent = extra.get("agent")
        if isinstance(agent, dict):
            if request.model and agent.get("model") != request.model:
                extra["agent"] = {**agent, "model": request.model}
        elif "agent_id" not in extra:
            body["agent"] = {"model": request.model}
            if request.system:
                body["agent"]["instructions"] = request.system
        body.update(extra)
        written = _write_input(request.messages)
        if written is not None:
            body["input"] = written
        body["stream"] = request.stream
        return NativeRequest(path="/agents/sessions", body=body)


AGENT_SESSION: Final[RequestCodec] = AgentSessionCodec()
"""The session-create codec."""

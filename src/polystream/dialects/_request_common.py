"""What the request codecs of every family share: the readers that check a native
body's fields as they take them (each failure a :class:`RequestError` naming the
parameter), the writers of shapes several families have in common, and
:class:`FamilyCodec`, the base of each family's codec.

Each family's codec (``_responses/request.py``, ``_chat/request.py``,
``_messages/request.py``, ``gemini_generate/request.py``,
``gemini_interactions/request.py``) reads a native body into the unified
:class:`~polystream.request_model.Request` and writes one back; a dialect's binding
names its family's codec as ``request``, and :mod:`polystream.request.codecs` reaches it
through the registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from polystream.errors import RequestError
from polystream.request_model import (
    ImagePart,
    Message,
    NativeRequest,
    Part,
    Request,
    TextPart,
    Tool,
    ToolResultPart,
)
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, too_deep

__all__ = ["FamilyCodec"]


class FamilyCodec:
    """The base of a request family's codec (see
    :class:`polystream.dialects._spec.RequestCodec`).

    Attributes:
        family: The family's name (:attr:`DialectSpec.family`).
        read_fields: The top-level fields of a body that :meth:`parse` reads; the rest
            go to :attr:`Request.extra`.
        config_read: The family's generation config object and the fields of it that
            :meth:`parse` reads (None: the family has none).
        decided: The top-level fields of a built body that the caller of the builder
            decides (the model, streaming): the ones a pass-through body takes from
            the built one.
        settings: The family's names of the unified generation settings
            (``max_tokens``, ``temperature``, ``top_p``, ``stop``).
    """

    family: str = ""
    read_fields: frozenset[str] = frozenset()
    config_read: tuple[str, frozenset[str]] | None = None
    decided: tuple[str, ...] = ()
    settings: Mapping[str, str] = {}

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        """The unified request of a native ``body`` (``model``: the one the URL names,
        for a family whose body has none)."""
        raise NotImplementedError

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        """The native request of ``request`` (``framing``: the stream's framing, for a
        family whose URL chooses it)."""
        raise NotImplementedError

    def read_whole(self, request: Request, extra: dict[str, Any]) -> None:
        """Remove from ``extra`` (the fields of a body :meth:`parse` did not read field
        by field) what ``request`` states whole all the same."""


# -- small readers ------------------------------------------------------------------------


def _obj(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError("expected an object", param=param)
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError("expected an array", param=param)
    return value


def _str(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise RequestError("expected a string", param=param)
    return value


def _opt_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RequestError("expected a non-negative integer", param=key)
    return value


def _opt_float(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RequestError("expected a number", param=key)
    return float(value)


def _args(text: Any, param: str) -> Any:
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise RequestError("expected JSON text", param=param)
    if not text.strip():
        return {}
    deep = too_deep(text)
    if deep is not None:
        raise RequestError(
            f"arguments nest deeper than {DEFAULT_MAX_DEPTH} levels (at character {deep})",
            param=param,
        )
    try:
        return json.loads(text)
    except ValueError:
        raise RequestError("arguments are not valid JSON", param=param) from None


def _dump_args(arguments: Any) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("model is required", param="model")
    return model


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [_str(v, "stop") for v in _list(value, "stop")]


def _text_of(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    parts = _list(content, param)
    out = []
    for i, part in enumerate(parts):
        part = _obj(part, f"{param}[{i}]")
        text = part.get("text")
        if isinstance(text, str):
            out.append(text)
    return "".join(out)


def _image_from_url(url: str) -> ImagePart:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return ImagePart(data=data, mime_type=head or None)
    return ImagePart(url=url)


def _image_url(part: ImagePart) -> str:
    if part.url:
        return part.url
    return f"data:{part.mime_type or 'image/png'};base64,{part.data or ''}"


def _append(messages: list[Message], role: str, part: Part) -> None:
    """Append a part to the last message when it has the same role, else a new one."""
    if messages and messages[-1].role == role:
        messages[-1].content.append(part)
    else:
        messages.append(Message(role=role, content=[part]))  # type: ignore[arg-type]


# -- shapes several families share ---------------------------------------------------------


_EMPTY_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}


def _parse_function_tools(body: dict[str, Any]) -> list[Tool]:
    """Read flat function tools (Responses, Interactions); other tool types cannot be
    translated to another provider."""
    tools = []
    for i, tool in enumerate(_list(body.get("tools") or [], "tools")):
        tool = _obj(tool, f"tools[{i}]")
        if tool.get("type") != "function":
            raise RequestError("only function tools can be translated", param=f"tools[{i}].type")
        tools.append(
            Tool(
                name=_str(tool.get("name"), f"tools[{i}].name"),
                description=tool.get("description"),
                parameters=tool.get("parameters"),
            )
        )
    return tools


def _function_tools(request: Request) -> list[dict[str, Any]]:
    """Function tools in the flat shape Responses and Interactions share."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters or _EMPTY_SCHEMA,
        }
        for tool in request.tools
    ]


def _put_settings(target: dict[str, Any], request: Request, names: Mapping[str, str]) -> None:
    """Copy the generation settings the request states (max tokens, temperature, top-p,
    stop sequences) into ``target`` under the dialect's own names."""
    for field, name in names.items():
        value = getattr(request, field)
        if value is not None and value != []:
            target[name] = value


def _result_text(part: ToolResultPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "".join(p.text for p in part.content if isinstance(p, TextPart))

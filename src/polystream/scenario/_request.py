"""Request summaries: what the emulator needs to know about a native request.

:func:`summarize` reads a request body as the provider's endpoint receives it (already
parsed JSON) and returns a :class:`RequestSummary`: the model, whether it streams, the
text of the last user message, whether tools are declared, whether the last input is a
tool result, and the options that change the answer's shape (OpenAI ``background``,
Chat ``stream_options.include_usage``). A body that the provider would reject raises
:class:`RequestError` with the status and the wording the provider uses, so the shell
can answer in the provider's own error shape (see :mod:`polystream.scenario._errors`).

Only the fields that matter are checked: this is an emulator, not a validator of every
parameter. Unknown fields are accepted, as the providers accept new parameters.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects import DIALECTS, PROVIDERS
from polystream.errors import RequestError
from polystream.scenario._errors import ANTHROPIC_SHAPE, GOOGLE_SHAPE
from polystream.scenario._media_request import MEDIA_FAMILIES, MediaAsk, audio_ask, media_ask

__all__ = ["MODEL_PATTERNS", "RequestError", "RequestSummary", "summarize"]

MODEL_PATTERNS: Final[dict[str, tuple[str, ...]]] = {
    name: provider.model_prefixes for name, provider in PROVIDERS.items()
}
"""The model names each provider serves, as prefixes (its ``model_prefixes``); a model
outside them is "unknown" (404 in the provider's shape) unless a scenario names it."""


class RequestSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What a request asks for, in dialect-neutral terms.

    Fields:
        dialect: The dialect of the endpoint called.
        provider: Its provider.
        model: The requested model.
        stream: True for a streamed answer.
        user_text: The text of the last user message ("" when it has none).
        has_tools: The request declares tools.
        tool_names: The declared tools' names (function tools), in order.
        has_tool_result: The last input item is a tool result.
        background: OpenAI/xAI Responses ``background: true``.
        include_usage: Chat ``stream_options.include_usage: true``.
        media: What a media request asks for (audio format, image size, ...), and a
            Gemini request for audio out; None for a text request.
    """

    dialect: str
    provider: str
    model: str
    stream: bool = False
    user_text: str = ""
    has_tools: bool = False
    tool_names: tuple[str, ...] = ()
    has_tool_result: bool = False
    background: bool = False
    include_usage: bool = False
    media: MediaAsk | None = None


def summarize(
    dialect: str,
    body: Any,
    *,
    model: str | None = None,
    stream: bool | None = None,
    operation: str | None = None,
) -> RequestSummary:
    """Summarise a native request body.

    Args:
        dialect: The dialect of the endpoint that received it.
        body: The parsed JSON body, or the form dict of a multipart body.
        model: The model named in the URL (Gemini ``models/{model}:...``).
        stream: Whether the endpoint streams (Gemini decides by URL, not body).
        operation: The route's operation (images: ``generation`` or ``edit``).

    Returns:
        The summary.

    Raises:
        RequestError: The body is not a valid request for the dialect.
    """
    spec = DIALECTS[dialect]
    if not isinstance(body, dict):
        raise RequestError(_not_object(dialect))
    provider = spec.provider
    if spec.family == "responses":
        return _responses(dialect, provider, body)
    if spec.family == "chat":
        return _chat(dialect, provider, body)
    if spec.family == "messages":
        return _messages(dialect, provider, body)
    if spec.family == "generate":
        return _generate(dialect, provider, body, model or "", bool(stream))
    if spec.family == "interactions":
        return _interactions(dialect, provider, body)
    return _by_codec(dialect, provider, body, model, operation)


def _by_codec(
    dialect: str, provider: str, body: dict[str, Any], model: str | None, operation: str | None
) -> RequestSummary:
    """A media or agent-session request, read by its family's request codec (the model,
    the stream flag, the text), and its media options."""
    spec = DIALECTS[dialect]
    request = spec.request_codec().parse(body, model=model)
    media: MediaAsk | None = None
    stream = request.stream
    if spec.family in MEDIA_FAMILIES:
        media = media_ask(spec.family, body, operation=operation)
        if media.framing is not None:
            stream = True  # (speech: the body streams, as events or as the audio file)
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=request.model,
        stream=bool(stream),
        user_text=request.last_user_text(),
        media=media,
    )


def _not_object(dialect: str) -> str:
    shape = DIALECTS[dialect].errors.shape
    if shape == GOOGLE_SHAPE:
        return "Invalid JSON payload received. Request body must be a JSON object."
    if shape == ANTHROPIC_SHAPE:
        return "Request body must be a JSON object."
    return (
        "We could not parse the JSON body of your request. The OpenAI API expects a JSON "
        "payload, but what was sent was not a valid JSON object."
    )


def _missing(param: str, dialect: str) -> RequestError:
    if DIALECTS[dialect].errors.shape == ANTHROPIC_SHAPE:
        return RequestError(f"{param}: Field required", param=param)
    return RequestError(
        f"Missing required parameter: '{param}'.",
        param=param,
        code="missing_required_parameter",
    )


def _invalid(param: str, message: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_type")


def _model(body: dict[str, Any], dialect: str) -> str:
    model = body.get("model")
    if model is None:
        raise _missing("model", dialect)
    if not isinstance(model, str) or not model:
        raise _invalid("model", "Invalid type for 'model': expected a non-empty string.")
    return model


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise _invalid(name, f"Invalid type for '{name}': expected a boolean.")
    return value


def _text_of(content: Any, text_types: frozenset[str]) -> str:
    """The text of a message content: a string, or the text parts of a part list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and isinstance(part.get("text"), str)
            and part.get("type", "text") in text_types
        ]
        return "\n".join(texts)
    return ""


def _tool_names(tools: Any) -> tuple[str, ...]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        name = tool.get("name")
        function = tool.get("function")
        if isinstance(function, dict):
            name = function.get("name")
        if isinstance(name, str):
            names.append(name)
        declarations = tool.get("functionDeclarations") or tool.get("function_declarations")
        for declaration in declarations if isinstance(declarations, list) else ():
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                names.append(declaration["name"])
    return tuple(names)


# -- OpenAI / xAI Responses -----------------------------------------------------------

_RESPONSES_TEXT: Final = frozenset({"input_text", "text", "output_text"})
_RESPONSES_RESULTS: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "mcp_approval_response",
    }
)


def _responses(dialect: str, provider: str, body: dict[str, Any]) -> RequestSummary:
    model = _model(body, dialect)
    items = body.get("input")
    user_text = ""
    tool_result = False
    if isinstance(items, str):
        user_text = items
    elif isinstance(items, list):
        for item in items:
            if not isinstance(item, dict):
                raise _invalid("input", "Invalid type for 'input': expected items to be objects.")
        for item in reversed(items):
            if item.get("role") == "user":
                user_text = _text_of(item.get("content"), _RESPONSES_TEXT)
                break
        tool_result = bool(items) and items[-1].get("type") in _RESPONSES_RESULTS
    elif items is not None:
        raise _invalid("input", "Invalid type for 'input': expected a string or an array.")
    tools = body.get("tools")
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=model,
        stream=_flag(body, "stream"),
        user_text=user_text,
        has_tools=bool(tools),
        tool_names=_tool_names(tools),
        has_tool_result=tool_result,
        background=_flag(body, "background"),
    )


# -- OpenAI / xAI Chat Completions ----------------------------------------------------

_CHAT_TEXT: Final = frozenset({"text"})


def _chat(dialect: str, provider: str, body: dict[str, Any]) -> RequestSummary:
    model = _model(body, dialect)
    messages = body.get("messages")
    if messages is None:
        raise _missing("messages", dialect)
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _invalid("messages", "Invalid type for 'messages': expected an array of objects.")
    if not messages:
        raise RequestError(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    user_text = next(
        (
            _text_of(m.get("content"), _CHAT_TEXT)
            for m in reversed(messages)
            if m.get("role") == "user"
        ),
        "",
    )
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    tools = body.get("tools") or body.get("functions")
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=model,
        stream=_flag(body, "stream"),
        user_text=user_text,
        has_tools=bool(tools),
        tool_names=_tool_names(tools),
        has_tool_result=messages[-1].get("role") in ("tool", "function"),
        include_usage=include_usage,
    )


# -- Anthropic / xAI Messages ---------------------------------------------------------

_MESSAGES_TEXT: Final = frozenset({"text"})


def _messages(dialect: str, provider: str, body: dict[str, Any]) -> RequestSummary:
    model = _model(body, dialect)
    if "max_tokens" not in body:
        raise _missing("max_tokens", dialect)
    max_tokens = body["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError(
            "max_tokens: Input should be a valid integer greater than 0", param="max_tokens"
        )
    messages = body.get("messages")
    if messages is None:
        raise _missing("messages", dialect)
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestError("messages: Input should be a valid list of objects", param="messages")
    if not messages:
        raise RequestError("messages: at least one message is required", param="messages")
    user_text = ""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        has_text = isinstance(content, str) or (
            isinstance(content, list)
            and any(isinstance(p, dict) and p.get("type") == "text" for p in content)
        )
        if has_text:
            user_text = _text_of(content, _MESSAGES_TEXT)
            break
    last = messages[-1].get("content")
    tool_result = (
        messages[-1].get("role") == "user"
        and isinstance(last, list)
        and any(isinstance(p, dict) and p.get("type") == "tool_result" for p in last)
    )
    tools = body.get("tools")
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=model,
        stream=_flag(body, "stream"),
        user_text=user_text,
        has_tools=bool(tools),
        tool_names=_tool_names(tools),
        has_tool_result=tool_result,
    )


# -- Gemini generateContent / streamGenerateContent ------------------------------------


def _parts_text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    )


def _generate(
    dialect: str, provider: str, body: dict[str, Any], model: str, stream: bool
) -> RequestSummary:
    contents = body.get("contents")
    if contents is None or contents == []:
        raise RequestError("* GenerateContentRequest.contents: contents is not specified")
    if not isinstance(contents, list) or not all(isinstance(c, dict) for c in contents):
        raise RequestError(
            'Invalid JSON payload received. Unknown name "contents": expected a list '
            "of Content objects.",
        )
    user_text = ""
    for content in reversed(contents):
        if content.get("role", "user") == "user":
            text = _parts_text(content.get("parts"))
            if text:
                user_text = text
                break
    last_parts = contents[-1].get("parts")
    tool_result = isinstance(last_parts, list) and any(
        isinstance(p, dict) and ("functionResponse" in p or "function_response" in p)
        for p in last_parts
    )
    tools = body.get("tools")
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=model.removeprefix("models/"),
        stream=stream,
        user_text=user_text,
        has_tools=bool(tools),
        tool_names=_tool_names(tools),
        has_tool_result=tool_result,
        media=audio_ask(body.get("generationConfig"), user_text),
    )


# -- Gemini Interactions ----------------------------------------------------------------

_INTERACTION_TEXT: Final = frozenset({"text"})


def _interactions(dialect: str, provider: str, body: dict[str, Any]) -> RequestSummary:
    model = body.get("model")
    if model is None and body.get("agent") is None:
        raise RequestError("Either 'model' or 'agent' must be specified.")
    if model is not None and (not isinstance(model, str) or not model):
        raise RequestError("Invalid value at 'model': expected a non-empty string.")
    items = body.get("input")
    user_text = ""
    tool_result = False
    if isinstance(items, dict):
        items = [items]
    if isinstance(items, str):
        user_text = items
    elif isinstance(items, list):
        if not all(isinstance(i, dict) for i in items):
            raise RequestError("Invalid value at 'input': expected a list of objects.")
        # Input is a list of steps (``user_input``, ``function_result``, ...), of turns
        # (``{role, content}``), or of content objects (``text``, ``function_result``).
        # A user turn that carries only a function result has no text: the text is the
        # last user turn's that has some.
        turns = [i for i in items if i.get("type") == "user_input" or i.get("role") == "user"]
        for item in reversed(turns):
            user_text = _text_of(item.get("content"), _INTERACTION_TEXT)
            if user_text:
                break
        if not turns:
            user_text = _text_of(items, _INTERACTION_TEXT)
        if items:
            last = items[-1]
            content = last.get("content")
            tool_result = last.get("type") == "function_result" or (
                isinstance(content, list)
                and any(isinstance(c, dict) and c.get("type") == "function_result" for c in content)
            )
    elif items is not None:
        raise RequestError("Invalid value at 'input': expected a string or a list.")
    tools = body.get("tools")
    return RequestSummary(
        dialect=dialect,
        provider=provider,
        model=model if isinstance(model, str) else str(body.get("agent")),
        stream=_flag(body, "stream"),
        user_text=user_text,
        has_tools=bool(tools),
        tool_names=_tool_names(tools),
        has_tool_result=tool_result,
        background=_flag(body, "background"),
    )

"""The emulator's sans-I/O core (layer 4): scenarios, request summaries, fault plans.

* :mod:`~polystream.scenario._format` — the scenario format (JSON, or YAML with PyYAML):
  match rules, the reply in unified terms, chunking, timing and faults.
* :mod:`~polystream.scenario._request` — request summaries per dialect, from the
  native request JSON; malformed requests raise :class:`RequestError`.
* :mod:`~polystream.scenario._reply` — reply -> unified events; recorded captures
  retargeted to another dialect.
* :mod:`~polystream.scenario._media`, :mod:`~polystream.scenario._media_request`,
  :mod:`~polystream.scenario._media_blocks`, :mod:`~polystream.scenario._media_reply` —
  the media families: the tone and the PNG, their requests' options, their replies.
* :mod:`~polystream.scenario._sessions` — agent sessions and their queued turns.
* :mod:`~polystream.scenario._sockets`, :mod:`~polystream.scenario._socket_reply` — one
  emulated WebSocket connection (:class:`SocketEmulation`): the family's sans-I/O server
  answered from the scenarios, timed and faulted; what a spoken reply says.
* :mod:`~polystream.scenario._plan` — unified events -> wire frames (through the
  dialect encoders) -> a timed delivery plan with the transport faults applied.
* :mod:`~polystream.scenario._errors` — error bodies in each provider's shape.
* :mod:`~polystream.scenario._emulator` — :class:`Emulator`: request bytes in, an
  :class:`Answer` (status, headers, timed chunks) out.

Nothing here does I/O: the ASGI shell in :mod:`polystream.server` reads bodies, sleeps
and writes. See ``docs/emulator.md``.
"""

from __future__ import annotations

from polystream.scenario._emulator import (
    LOSS_HEADER,
    MAX_BODY_SIZE,
    MAX_STORED,
    Answer,
    Emulator,
    StoredReply,
    error_to_answer,
    json_answer,
    loss_header,
    text_answer,
)
from polystream.scenario._errors import ErrorAnswer, error_answer, provider_of_path
from polystream.scenario._format import (
    AudioSpec,
    Chunking,
    Faults,
    FinishSpec,
    HttpError,
    ImageSpec,
    InBandError,
    Interrupt,
    Match,
    ReasoningSpec,
    Reply,
    Scenario,
    ScenarioError,
    SegmentSpec,
    ServerToolSpec,
    SocketClose,
    Timing,
    ToolCallSpec,
    UsageSpec,
    load_scenarios,
    parse_scenarios,
)
from polystream.scenario._plan import (
    KEEPALIVE,
    RESUMABLE,
    Chunk,
    DeliveryPlan,
    Frame,
    frames_after,
    plan_delivery,
    render_frames,
    schedule,
)
from polystream.scenario._reply import default_reply, reply_events, reply_id, retarget, split_text
from polystream.scenario._request import MODEL_PATTERNS, RequestError, RequestSummary, summarize
from polystream.scenario._sockets import Send, SocketEmulation

__all__ = [
    "KEEPALIVE",
    "LOSS_HEADER",
    "MAX_BODY_SIZE",
    "MAX_STORED",
    "MODEL_PATTERNS",
    "RESUMABLE",
    "Answer",
    "AudioSpec",
    "Chunk",
    "Chunking",
    "DeliveryPlan",
    "Emulator",
    "ErrorAnswer",
    "Faults",
    "FinishSpec",
    "Frame",
    "HttpError",
    "ImageSpec",
    "InBandError",
    "Interrupt",
    "Match",
    "ReasoningSpec",
    "Reply",
    "RequestError",
    "RequestSummary",
    "Scenario",
    "ScenarioError",
    "SegmentSpec",
    "Send",
    "ServerToolSpec",
    "SocketClose",
    "SocketEmulation",
    "StoredReply",
    "Timing",
    "ToolCallSpec",
    "UsageSpec",
    "default_reply",
    "error_answer",
    "error_to_answer",
    "frames_after",
    "json_answer",
    "load_scenarios",
    "loss_header",
    "parse_scenarios",
    "plan_delivery",
    "provider_of_path",
    "render_frames",
    "reply_events",
    "reply_id",
    "retarget",
    "schedule",
    "split_text",
    "summarize",
    "text_answer",
]

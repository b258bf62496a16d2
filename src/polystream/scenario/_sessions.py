"""Agent sessions the emulator keeps: each one's turns not yet streamed.

A session lives across requests. Input sent to it (Anthropic
``POST /v1/sessions/{id}/events``) or a session created without streaming (OpenAI
``POST /v1/agents/sessions``) queues a *turn*: the answer its stream endpoint
(``GET .../events/stream``, ``GET .../events``) delivers next, whole (from the session's
first event of the turn to its terminal one). A subscriber that finds no turn queued
waits for one (the shell does the waiting); nothing is delivered twice.

A dialect with a route that creates sessions (OpenAI's) knows its sessions: a
subscription to an unknown one is a 404. One without (Anthropic's are created on
another endpoint) takes any session id.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from polystream.scenario._emulator import Answer

__all__ = ["MAX_SESSIONS", "Sessions"]

MAX_SESSIONS: Final = 256
"""Sessions kept (the least recently used dropped first), bounding memory."""
MAX_QUEUED: Final = 16
"""Turns queued for one session (the oldest dropped first)."""


class Sessions:
    """The sessions known, each with its queued turns (see the module docstring)."""

    def __init__(self) -> None:
        self._queues: OrderedDict[tuple[str, str], deque[Answer]] = OrderedDict()

    def open(self, dialect: str, session_id: str) -> None:
        """Know a session (created, or sent input), with no turn queued yet."""
        key = (dialect, session_id)
        if key not in self._queues:
            self._queues[key] = deque(maxlen=MAX_QUEUED)
        self._queues.move_to_end(key)
        while len(self._queues) > MAX_SESSIONS:
            self._queues.popitem(last=False)

    def queue(self, dialect: str, session_id: str, turn: Answer) -> None:
        """Queue a turn for the session's stream."""
        self.open(dialect, session_id)
        self._queues[(dialect, session_id)].append(turn)

    def known(self, dialect: str, session_id: str) -> bool:
        """Whether the session was created or sent input (and is still kept)."""
        return (dialect, session_id) in self._queues

    def next_turn(self, dialect: str, session_id: str) -> Answer | None:
        """The session's next queued turn (removed from the queue), or None."""
        queue = self._queues.get((dialect, session_id))
        if not queue:
            return None
        return queue.popleft()

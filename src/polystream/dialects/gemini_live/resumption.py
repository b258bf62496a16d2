"""What a Gemini Live client keeps to resume its session on a new connection, sans-I/O
(the family's :class:`~polystream.dialects._realtime.context.Context`, kind
``resumption``).

The service keeps the session; a new connection resumes it with a ``setup`` naming the
latest handle (``sessionResumption.handle``). The record keeps:

* the setup as sent (the connection's message 0);
* the latest handle of a ``sessionResumptionUpdate`` with ``resumable: true`` (an
  update that is not resumable leaves the handle as it was);
* the client messages the handle does not include: with ``transparent`` resumption,
  those after the update's ``lastConsumedClientMessageIndex`` (counted on the
  connection from 0, the setup; an update without one stands for 0, as proto3 JSON
  leaves out a zero); without, those sent after the latest resumable update.

:meth:`ResumptionContext.replay` gives the setup with the handle, then those messages,
in order; they are counted again on the new connection from 1. A connection is
resumed only once a handle is known (:attr:`ResumptionContext.reconnectable`), and a
``goAway`` is acted on then (the client closes the socket, and only then opens the
new one: the service refuses to resume a session whose socket is still open).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

import msgspec

from polystream.dialects._realtime.context import Context
from polystream.wire.ws import dump_message

__all__ = ["ResumptionContext"]

_DECODER: Final = msgspec.json.Decoder()


class ResumptionContext(Context):
    """The handle, the setup and the unacknowledged messages (see the module docstring).

    Args:
        max_messages: Most unacknowledged messages kept; past it, the oldest are
            forgotten (and not sent again).
    """

    def __init__(self, *, max_messages: int = 4096) -> None:
        self.max_messages = max_messages
        self.setup: dict[str, Any] | None = None
        self.handle: str | None = None
        self._index = -1  # the index of the last message sent on the connection
        self._pending: deque[tuple[int, str]] = deque()

    @property
    def pending(self) -> list[str]:
        """The messages the latest handle does not include, in order."""
        return [message for _, message in self._pending]

    @property
    def transparent(self) -> bool:
        """Whether the setup asked for transparent resumption (the updates then say
        which client messages the handle includes)."""
        config = (self.setup or {}).get("sessionResumption")
        return isinstance(config, dict) and config.get("transparent") is True

    @property
    def reconnectable(self) -> bool:
        return self.handle is not None and self.setup is not None

    @property
    def resumable(self) -> bool:
        return self.reconnectable

    def sent(self, message: str | bytes) -> None:
        try:
            value = _DECODER.decode(message)
        except msgspec.DecodeError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("setup"), dict):
            self.setup = value["setup"]
            self._index = 0
            self._pending.clear()
            return
        self._index += 1
        text = message if isinstance(message, str) else message.decode("utf-8", "replace")
        self._pending.append((self._index, text))
        while len(self._pending) > self.max_messages:
            self._pending.popleft()

    def received(self, payload: dict[str, Any]) -> None:
        update = payload.get("sessionResumptionUpdate")
        if not isinstance(update, dict) or update.get("resumable") is not True:
            return
        handle = update.get("newHandle")
        if not isinstance(handle, str) or not handle:
            return
        self.handle = handle
        last = update.get("lastConsumedClientMessageIndex")
        if isinstance(last, int | str) and str(last).isdigit():
            consumed = int(last)
        elif self.transparent:
            consumed = 0  # (a zero is left out of proto3 JSON: only the setup is in)
        else:
            self._pending.clear()
            return
        while self._pending and self._pending[0][0] <= consumed:
            self._pending.popleft()

    def replay(self) -> list[str]:
        if self.setup is None or self.handle is None:
            return []
        resumption = dict(self.setup.get("sessionResumption") or {})
        resumption["handle"] = self.handle
        setup = {**self.setup, "sessionResumption": resumption}
        messages = [message for _, message in self._pending]
        self._pending = deque(enumerate(messages, start=1))
        self._index = len(messages)
        return [dump_message({"setup": setup}), *messages]

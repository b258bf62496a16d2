"""When to retry a call, and how long to wait: exponential backoff with jitter that
honours ``Retry-After``. Sans-I/O: the caller supplies the clock and the randomness.

Retried: HTTP 408, 409, 429, 5xx and 529; connection failures; in-band ``overloaded``
and ``rate_limit`` errors *only while no output has been delivered* (a retry after
output would duplicate it).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Final

import msgspec

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "RetryState", "parse_retry_after"]

RETRYABLE_STATUSES: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth retrying (and any other 5xx)."""


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Retry settings.

    Fields:
        max_retries: Retries after the first attempt (0 disables retrying).
        initial_delay: The first backoff, in seconds.
        multiplier: Each backoff is this many times the previous one.
        max_delay: The longest backoff.
        jitter: The backoff is scaled by a random factor in ``[1 - jitter, 1]``.
        max_retry_after: A ``Retry-After`` longer than this is not waited for (the
            error is raised instead).
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 8.0
    jitter: float = 0.25
    max_retry_after: float = 60.0


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After``.

    Args:
        headers: Response headers (case-insensitive mapping, or lower-case keys).
        now: The current Unix time, needed only for the HTTP-date form.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    millis = lower.get("retry-after-ms")
    if millis is not None:
        number = _header_number(millis)
        if number is not None:
            return number / 1000.0
    value = lower.get("retry-after")
    if value is None:
        return None
    number = _header_number(value)
    if number is not None:
        return number
    if now is None:
        return None
    try:
        # RFC 9110 IMF-fixdate, the form servers send: "Sun, 06 Nov 1994 08:49:37 GMT".
        # (email.utils would parse it too, but it imports socket into the core.)
        when = datetime.strptime(value.strip(), "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=UTC)
    except ValueError:
        return None
    return max(0.0, when.timestamp() - now)


def _header_number(value: str) -> float | None:
    """A header's number (negative reads 0; too large, infinity); None when it is no
    number, ``nan`` included (which would read as no wait at all)."""
    try:
        number = float(value)
    except ValueError:
        return None
    if math.isnan(number):
        return None
    return max(0.0, number)


class RetryState:
    """The retry decisions of one call.

    Args:
        policy: The settings.
        rng: A source of uniform floats in [0, 1) (injectable for tests).
    """

    def __init__(
        self, policy: RetryPolicy | None = None, *, rng: Callable[[], float] = random.random
    ) -> None:
        self.policy = policy or RetryPolicy()
        self.rng = rng
        self.retries = 0

    def _backoff(self) -> float:
        policy = self.policy
        base = min(policy.max_delay, policy.initial_delay * policy.multiplier**self.retries)
        return base * (1.0 - policy.jitter * self.rng())

    def _next(self, delay: float | None) -> float | None:
        if self.retries >= self.policy.max_retries:
            return None
        if delay is None:
            delay = self._backoff()
        elif delay > self.policy.max_retry_after:
            return None
        self.retries += 1
        return delay

    def after_status(
        self, status: int, headers: Mapping[str, str], *, now: float | None = None
    ) -> float | None:
        """An HTTP error status arrived: seconds to wait before retrying, or None."""
        if status not in RETRYABLE_STATUSES and status < 500:
            return None
        return self._next(parse_retry_after(headers, now=now))

    def after_connection_error(self) -> float | None:
        """The connection failed before any output: seconds to wait, or None."""
        return self._next(None)

    def after_stream_error(self, kind: str, *, output_delivered: bool) -> float | None:
        """An in-band error arrived after HTTP 200: seconds to wait, or None.

        Only ``overloaded`` and ``rate_limit`` errors are retried, and only while
        nothing has been delivered to the consumer.
        """
        if output_delivered or kind not in ("overloaded", "rate_limit"):
            return None
        return self._next(None)

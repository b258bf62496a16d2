"""The retry policy: which failures are retried, how long to wait, Retry-After."""

from __future__ import annotations

import pytest

from polystream.retry import RetryPolicy, RetryState, parse_retry_after


def state(**kw: float) -> RetryState:
    return RetryState(RetryPolicy(**kw), rng=lambda: 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529, 599])
def test_retryable_statuses(status: int) -> None:
    assert state().after_status(status, {}) == 0.5


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_final_statuses(status: int) -> None:
    assert state().after_status(status, {}) is None


def test_exponential_backoff_capped_and_limited() -> None:
    s = state(max_retries=5, initial_delay=1.0, multiplier=3.0, max_delay=5.0)
    assert [s.after_connection_error() for _ in range(6)] == [1.0, 3.0, 5.0, 5.0, 5.0, None]
    assert s.retries == 5


def test_jitter_scales_down_within_bounds() -> None:
    s = RetryState(RetryPolicy(initial_delay=2.0, jitter=0.25), rng=lambda: 1.0)
    assert s.after_connection_error() == 1.5


def test_retry_after_wins_over_backoff() -> None:
    assert state().after_status(429, {"Retry-After": "7"}) == 7.0
    assert state().after_status(529, {"retry-after-ms": "250"}) == 0.25


def test_retry_after_too_long_is_not_waited_for() -> None:
    assert state(max_retry_after=10).after_status(429, {"retry-after": "11"}) is None


def test_retry_after_http_date() -> None:
    headers = {"Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"}
    now = 784111777.0 - 3.0  # three seconds before that date
    assert parse_retry_after(headers, now=now) == pytest.approx(3.0)
    assert parse_retry_after(headers) is None  # no clock, no date arithmetic
    assert parse_retry_after({"retry-after": "soon"}, now=now) is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "nan"}, None),  # not "retry now"
        ({"retry-after-ms": "nan", "retry-after": "2"}, 2.0),
        ({"retry-after": "-5"}, 0.0),
        ({"retry-after": "1e999"}, float("inf")),  # longer than any wait: not retried
        ({"retry-after-ms": "1500"}, 1.5),
    ],
)
def test_retry_after_odd_values(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers) == seconds


def test_a_retry_after_that_is_no_number_leaves_the_backoff() -> None:
    assert state().after_status(429, {"retry-after": "nan"}) == state().after_status(429, {})
    assert state().after_status(429, {}) > 0


def test_in_band_errors_only_before_output() -> None:
    s = state()
    assert s.after_stream_error("overloaded", output_delivered=False) == 0.5
    assert s.after_stream_error("rate_limit", output_delivered=True) is None
    assert s.after_stream_error("invalid_request", output_delivered=False) is None


def test_zero_retries_disables() -> None:
    assert state(max_retries=0).after_status(503, {}) is None

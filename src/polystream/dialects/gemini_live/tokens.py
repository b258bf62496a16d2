"""Ephemeral tokens, sans-I/O: what the emulator's ``POST /v1alpha/auth_tokens`` mints
and what its constrained endpoint accepts (the shapes of google-genai ``tokens.py``:
``CreateAuthTokenConfig`` on the wire, ``AuthToken`` back).

A request may state ``uses`` (default 1; 0: unlimited), ``expireTime`` (default 30
minutes from now), ``newSessionExpireTime`` (default 60 s from now) and
``bidiGenerateContentSetup`` (the setup a session opened with the token is held to:
its fields override the client's). The answer is ``{"name": "auth_tokens/...",
"expireTime", "newSessionExpireTime", "uses"}``. A session opened with the token
counts one use (a resumed one none); a token past its ``newSessionExpireTime`` opens
no new session, one past its ``expireTime`` nothing.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = ["constrained_setup", "mint_token"]

_NEW_SESSION: Final = timedelta(seconds=60)
_EXPIRE: Final = timedelta(minutes=30)


def _time(value: Any, default: datetime) -> datetime | None:
    if value is None:
        return default
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def mint_token(shared: dict[str, Any], body: Any, now: float) -> tuple[int, dict[str, Any]]:
    """A new token for the request ``body`` (the parsed JSON), kept in ``shared``: the
    status and the answer (an ``AuthToken``, or a Google error body)."""
    if not isinstance(body, dict):
        return 400, _error(400, "Invalid JSON payload: expected an object.")
    start = datetime.fromtimestamp(now, UTC)
    expire = _time(body.get("expireTime"), start + _EXPIRE)
    fresh = _time(body.get("newSessionExpireTime"), start + _NEW_SESSION)
    uses = body.get("uses", 1)
    if expire is None or fresh is None:
        return 400, _error(400, "Invalid value at 'expire_time': expected an RFC 3339 timestamp.")
    if type(uses) is not int or uses < 0:
        return 400, _error(400, "Invalid value at 'uses': expected a non-negative integer.")
    tokens: dict[str, Any] = shared.setdefault("tokens", {})
    digest = hashlib.sha256(f"{now}/{len(tokens)}".encode()).hexdigest()[:32]
    name = f"auth_tokens/{digest}"
    setup = body.get("bidiGenerateContentSetup")
    tokens[name] = {
        "expire": expire,
        "fresh": fresh,
        "left": uses or None,  # None: unlimited
        "setup": setup if isinstance(setup, dict) else None,
    }
    answer = {
        "name": name,
        "expireTime": _stamp(expire),
        "newSessionExpireTime": _stamp(fresh),
        "uses": uses,
    }
    return 200, answer


def constrained_setup(
    shared: dict[str, Any], token: str, setup: dict[str, Any], now: float
) -> dict[str, Any] | str:
    """The setup a session opened with ``token`` runs (the token's fields over the
    client's), one use counted; or why the token is refused."""
    entry = shared.get("tokens", {}).get(token)
    moment = datetime.fromtimestamp(now, UTC)
    if entry is None:
        return "The ephemeral token is not valid."
    if moment >= entry["expire"]:
        return "The ephemeral token has expired."
    resumption = setup.get("sessionResumption")
    resuming = isinstance(resumption, dict) and bool(resumption.get("handle"))
    if not resuming:
        if moment >= entry["fresh"]:
            return "The ephemeral token can no longer open a new session."
        if entry["left"] == 0:
            return "The ephemeral token has no uses left."
        if entry["left"] is not None:
            entry["left"] -= 1
    locked = entry["setup"]
    return {**setup, **locked} if locked else setup


def _error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}

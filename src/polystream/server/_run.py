"""Run the emulator with uvicorn: in the foreground (``polystream serve``) or in a
background thread on a free loopback port (``polystream demo`` and tests)."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import uvicorn

from polystream.scenario import Emulator, Scenario, ScenarioError, load_scenarios
from polystream.server._app import create_app, quiet_dropped_connections

if TYPE_CHECKING:
    from polystream.server._tls import TLSFiles

__all__ = ["ServerThread", "load_emulator", "uvicorn_limit_concurrency"]


def uvicorn_limit_concurrency(max_connections: int) -> int:
    """uvicorn's ``limit_concurrency`` for at most ``max_connections`` open connections.

    uvicorn answers a request 503 when the connections open, the one the request came
    on among them, reach its limit: ``max_connections`` others may be open, as with
    polystream's own server, when the limit is one more.
    """
    return max_connections + 1


def load_emulator(
    scenario_paths: list[str] | None = None,
    replay_paths: list[str] | None = None,
    *,
    any_model: bool = False,
) -> Emulator:
    """Read scenario files (``.json``; ``.yaml``/``.yml`` with PyYAML) and captures,
    and build the emulator. Captures named by ``reply.replay`` are read relative to
    their scenario file.

    Raises:
        ScenarioError: A file is not a valid scenario list or capture.
        OSError: A file cannot be read.
    """
    scenarios: list[Scenario] = []
    captures: dict[str, bytes] = {}
    for name in scenario_paths or ():
        path = Path(name)
        yaml = path.suffix.lower() in (".yaml", ".yml")
        loaded = load_scenarios(
            path.read_bytes(), format="yaml" if yaml else "json", source=str(path)
        )
        for scenario in loaded:
            replay = scenario.reply.replay if scenario.reply is not None else None
            if replay is not None and replay not in captures:
                capture = path.parent / replay
                if not capture.is_file():
                    raise ScenarioError(f"{path}: capture {replay!r} not found at {capture}")
                captures[replay] = capture.read_bytes()
        scenarios.extend(loaded)
    replays = [Path(name).read_bytes() for name in replay_paths or ()]
    return Emulator(scenarios, captures=captures, replays=replays, any_model=any_model)


class ServerThread:
    """The emulator served by uvicorn in a background thread.

    Args:
        emulator: The emulator (default: default replies only).
        host: The interface to bind.
        port: The port; 0 picks a free one (see :attr:`port` once started).
        log_level: uvicorn's log level.
        tls: A directory for TLS (see ``docs/emulator.md``): the emulator serves HTTPS
            and WSS with a certificate for ``localhost``, ``127.0.0.1`` and ``::1``,
            signed by the authority in ``DIR/ca.pem`` (made there when missing);
            clients trust it with ``SSL_CERT_FILE=DIR/ca.pem``, or the context
            ``server.tls.client_context()``.

    Raises:
        polystream.server.TLSError: The authority in ``tls`` cannot be used.

    Usage::

        with ServerThread() as server:
            client = openai.OpenAI(base_url=server.base_url + "/openai/v1", api_key="x")
    """

    def __init__(
        self,
        emulator: Emulator | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        tls: str | os.PathLike[str] | None = None,
    ) -> None:
        self.tls: TLSFiles | None = None
        """The TLS files when serving over TLS."""
        if tls is not None:
            from polystream.server._tls import prepare_tls

            self.tls = prepare_tls(tls)
        self.app = create_app(emulator)
        self.host = host
        # (Made with IPPROTO_TCP: asyncio then sets TCP_NODELAY on each accepted
        # connection; with protocol 0 it does not, and every burst of small writes waits
        # on Nagle's algorithm and the peer's delayed ACK, ~40 ms each.)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.port: int = self._socket.getsockname()[1]
        quiet_dropped_connections()
        config = uvicorn.Config(
            self.app,
            log_level=log_level,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=1,
            ssl_certfile=self.tls.cert_file if self.tls is not None else None,
            ssl_keyfile=self.tls.key_file if self.tls is not None else None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            daemon=True,
            name=f"polystream-emulator-{self.port}",
        )

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``, or ``https://`` over TLS (append a provider prefix:
        ``/openai/v1``...)."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def stats(self) -> Any:
        """The app's :class:`~polystream.server.ServerStats`."""
        return self.app.state.stats

    def start(self, timeout: float = 10.0) -> ServerThread:
        """Start serving; returns once the server accepts connections.

        Raises:
            RuntimeError: The server did not start within ``timeout`` seconds.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the emulator did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and wait for the thread to end."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._socket.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

"""TLS: the local authority and server certificate that ``prepare_tls`` makes (made
once, then reused byte for byte; private keys 0600; the certificate's names exactly;
an authority that cannot be used is a typed error naming its file, never replaced), and
the emulator served over HTTPS and WSS under both servers, reached by the official
openai SDK (``SSL_CERT_FILE``), its Realtime client, and polystream's own clients."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import socket
import ssl
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import websockets.sync.client
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google import genai
from google.genai import types as genai_types

from polystream.cli import main
from polystream.client import AsyncClient, Client
from polystream.scenario import MAX_BODY_SIZE, Emulator
from polystream.server import ServerThread, TLSError, TLSFiles, create_app, prepare_tls
from polystream.server._app import emulator_refusal
from tests.server.support import OwnServer, track

MODEL = "gpt-5.4-nano"
ANSWER = f"Emulated reply from {MODEL}. You said: Hello there"
DELTAS = ["Emulated", " reply", " from", f" {MODEL}.", " You", " said:", " Hello", " there"]
REALTIME_ANSWER = "Emulated reply from gpt-realtime. You said: Hello there"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- the files ------------------------------------------------------------------------


def test_the_authority_is_made_once_then_reused(tmp_path: Path) -> None:
    directory = tmp_path / "certs"
    first = prepare_tls(directory)
    assert first == TLSFiles(
        directory=directory,
        ca_file=directory / "ca.pem",
        ca_key_file=directory / "ca-key.pem",
        cert_file=directory / "localhost.pem",
        key_file=directory / "localhost-key.pem",
    )
    made = {path: path.read_bytes() for path in directory.glob("*.pem")}
    assert sorted(path.name for path in made) == [
        "ca-key.pem",
        "ca.pem",
        "localhost-key.pem",
        "localhost.pem",
    ]
    assert mode(directory) == 0o700
    assert mode(first.ca_key_file) == 0o600
    assert mode(first.key_file) == 0o600
    assert mode(first.ca_file) == 0o644
    assert mode(first.cert_file) == 0o644
    second = prepare_tls(directory)
    assert second == first
    assert {path: path.read_bytes() for path in directory.glob("*.pem")} == made


def test_the_certificates_names_and_uses(tmp_path: Path) -> None:
    files = prepare_tls(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_file.read_bytes())
    cert = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert list(names) == [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    cert.verify_directly_issued_by(ca)
    assert cert.issuer == ca.subject
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "localhost"
    leaf = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert (leaf.critical, leaf.value.ca) == (True, False)
    uses = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(uses) == [ExtendedKeyUsageOID.SERVER_AUTH]
    authority = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert (authority.critical, authority.value.ca, authority.value.path_length) == (True, True, 0)
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    key = serialization.load_pem_private_key(files.key_file.read_bytes(), password=None)
    assert key.public_key() == cert.public_key()
    # Python's own verification, strict (as Python 3.13's default context is).
    context = files.client_context()
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    assert context.get_ca_certs()[0]["subject"] == (
        (("organizationName", "polystream"),),
        (("commonName", ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value),),
    )


def authority(directory: Path, *, days: tuple[int, int] = (-1, 365), ca: bool = True) -> None:
    """An authority (or, ``ca=False``, a plain certificate) written as ca.pem and its
    key, valid from ``days[0]`` to ``days[1]`` days from now."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + dt.timedelta(days=days[0]))
        .not_valid_after(now + dt.timedelta(days=days[1]))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(exist_ok=True)
    (directory / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca-key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def test_an_authority_of_its_own_is_used(tmp_path: Path) -> None:
    authority(tmp_path)
    ca_bytes = (tmp_path / "ca.pem").read_bytes()
    files = prepare_tls(tmp_path)
    assert files.ca_file.read_bytes() == ca_bytes
    ca = x509.load_pem_x509_certificate(ca_bytes)
    x509.load_pem_x509_certificate(files.cert_file.read_bytes()).verify_directly_issued_by(ca)


def test_a_server_certificate_of_another_authority_is_remade(tmp_path: Path) -> None:
    other = prepare_tls(tmp_path / "other")
    ours = prepare_tls(tmp_path / "ours")
    kept = ours.ca_file.read_bytes(), ours.ca_key_file.read_bytes()
    ours.cert_file.write_bytes(other.cert_file.read_bytes())
    ours.key_file.write_bytes(other.key_file.read_bytes())
    prepare_tls(ours.directory)
    assert (ours.ca_file.read_bytes(), ours.ca_key_file.read_bytes()) == kept
    assert ours.cert_file.read_bytes() != other.cert_file.read_bytes()
    ca = x509.load_pem_x509_certificate(kept[0])
    x509.load_pem_x509_certificate(ours.cert_file.read_bytes()).verify_directly_issued_by(ca)
    assert mode(ours.key_file) == 0o600


def test_a_damaged_server_certificate_is_remade(tmp_path: Path) -> None:
    files = prepare_tls(tmp_path)
    files.cert_file.write_bytes(b"not a certificate")
    prepare_tls(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca_file.read_bytes())
    x509.load_pem_x509_certificate(files.cert_file.read_bytes()).verify_directly_issued_by(ca)


def _garbage(directory: Path) -> None:
    prepare_tls(directory)
    (directory / "ca.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nnope\n")


def _expired(directory: Path) -> None:
    authority(directory, days=(-30, -1))


def _not_yet(directory: Path) -> None:
    authority(directory, days=(2, 30))


def _not_an_authority(directory: Path) -> None:
    authority(directory, ca=False)


def _key_of_another(directory: Path) -> None:
    prepare_tls(directory)
    other = prepare_tls(directory.parent / "other")
    (directory / "ca-key.pem").write_bytes(other.ca_key_file.read_bytes())


def _encrypted_key(directory: Path) -> None:
    prepare_tls(directory)
    key = serialization.load_pem_private_key((directory / "ca-key.pem").read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (directory / "ca-key.pem").write_bytes(encrypted)


def _no_key(directory: Path) -> None:
    prepare_tls(directory)
    (directory / "ca-key.pem").unlink()


def _no_certificate(directory: Path) -> None:
    prepare_tls(directory)
    (directory / "ca.pem").unlink()


@pytest.mark.parametrize(
    ("damage", "name", "problem"),
    [
        (_garbage, "ca.pem", "not a PEM certificate"),
        (_expired, "ca.pem", "the authority expired on "),
        (_not_yet, "ca.pem", "the authority is not valid before "),
        (_not_an_authority, "ca.pem", "not a certificate authority (no basicConstraints CA:TRUE)"),
        (_key_of_another, "ca-key.pem", "not the key of the authority's certificate ca.pem"),
        (_encrypted_key, "ca-key.pem", "the key is encrypted: give an unencrypted one"),
        (_no_key, "ca-key.pem", "missing, but the authority's certificate ca.pem is there: "),
        (_no_certificate, "ca.pem", "missing, but its key ca-key.pem is there: "),
    ],
)
def test_an_authority_that_cannot_be_used_is_a_typed_error(
    tmp_path: Path, damage: Any, name: str, problem: str
) -> None:
    directory = tmp_path / "certs"
    damage(directory)
    before = {path.name: path.read_bytes() for path in directory.glob("*.pem")}
    with pytest.raises(TLSError) as caught:
        prepare_tls(directory)
    assert caught.value.path == directory / name
    assert caught.value.problem.startswith(problem)
    assert str(caught.value).startswith(f"{directory / name}: {problem}")
    # Nothing was replaced.
    assert {path.name: path.read_bytes() for path in directory.glob("*.pem")} == before


def test_a_file_where_the_directory_should_be(tmp_path: Path) -> None:
    (tmp_path / "certs").write_text("x")
    with pytest.raises(TLSError) as caught:
        prepare_tls(tmp_path / "certs")
    assert caught.value.path == tmp_path / "certs"


# -- the emulator over TLS, under both servers ------------------------------------------


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tls")


@pytest.fixture(scope="module", params=["uvicorn", "polystream"])
def emulator(request: pytest.FixtureRequest, tls_dir: Path) -> Iterator[str]:
    """The emulator's root URL over HTTPS: ``ServerThread(tls=...)`` (uvicorn) and
    polystream's own server with the same certificate."""
    if request.param == "uvicorn":
        with ServerThread(Emulator(), tls=tls_dir) as server:
            assert server.tls == prepare_tls(tls_dir)
            yield server.base_url
        return
    files = prepare_tls(tls_dir)
    own = OwnServer(
        create_app(Emulator()),
        refusal=emulator_refusal,
        ssl=files.server_context(),
        max_body_bytes=MAX_BODY_SIZE,
    )
    try:
        yield f"https://127.0.0.1:{own.port}"
    finally:
        own.stop()


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch, tls_dir: Path) -> Path:
    """``SSL_CERT_FILE`` names the authority (what clients trust)."""
    ca = tls_dir / "ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    return ca


def sdk(root: str) -> openai.OpenAI:
    return track(openai.OpenAI(base_url=root + "/openai/v1", api_key="x", max_retries=0))


def test_the_openai_sdk_streams_over_https(emulator: str, trusted: Path) -> None:
    assert emulator.startswith("https://127.0.0.1:")
    chunks = list(
        sdk(emulator).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hello there"}], stream=True
        )
    )
    assert [c.choices[0].delta.content for c in chunks if c.choices] == ["", *DELTAS, None]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_the_gemini_sdk_streams_over_https(emulator: str, trusted: Path) -> None:
    # (google-genai reads SSL_CERT_FILE when its client is made.)
    gemini = genai.Client(
        api_key="x", http_options=genai_types.HttpOptions(base_url=emulator + "/gemini")
    )
    chunks = list(
        gemini.models.generate_content_stream(model="gemini-3.5-flash-lite", contents="Hello there")
    )
    gemini.close()
    text = "".join(chunk.text or "" for chunk in chunks)
    assert text == "Emulated reply from gemini-3.5-flash-lite. You said: Hello there"


def test_without_the_authority_the_sdk_does_not_trust_it(
    emulator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(openai.APIConnectionError) as caught:
        sdk(emulator).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hello there"}]
        )
    assert "CERTIFICATE_VERIFY_FAILED" in repr(caught.value.__cause__)


def test_the_openai_realtime_client_over_wss(emulator: str, trusted: Path) -> None:
    with sdk(emulator).realtime.connect(model="gpt-realtime") as conn:
        assert conn.recv().type == "session.created"
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello there"}],
            }
        )
        conn.response.create()
        messages = []
        while not messages or messages[-1]["type"] != "response.done":
            messages.append(json.loads(conn.recv_bytes()))
    deltas = [m["delta"] for m in messages if m["type"] == "response.output_text.delta"]
    assert "".join(deltas) == REALTIME_ANSWER
    assert messages[-1]["response"]["status"] == "completed"


def test_wss_without_the_authority_is_refused(
    emulator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    url = emulator.replace("https://", "wss://") + "/openai/v1/realtime?model=gpt-realtime"
    with (
        pytest.raises(ssl.SSLCertVerificationError),
        websockets.sync.client.connect(url, additional_headers={"Authorization": "Bearer x"}),
    ):
        pass


def test_polystream_clients_over_https(emulator: str, trusted: Path) -> None:
    base = {"openai": emulator + "/openai/v1"}
    with Client(api_key="k", base_url=base) as client:
        stream = client.stream("openai_chat", model=MODEL, prompt="Hello there")
        list(stream)
        assert (stream.result().status, stream.result().text) == ("completed", ANSWER)

    async def run() -> str:
        async with AsyncClient(api_key="k", base_url=base) as client:
            stream = client.stream("openai_responses", model=MODEL, prompt="Hello there")
            async for _ in stream:
                pass
            return (await stream.result()).text

    assert asyncio.run(run()) == ANSWER


def test_polystream_call_over_https_and_wss(
    emulator: str, trusted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--model", MODEL, "--api-key", "k", "--base-url", emulator + "/openai/v1"]
    assert main(["call", "openai_chat", "Hello there", *argv]) == 0
    assert capsys.readouterr().out == ANSWER + "\n"
    argv[1] = "gpt-realtime"
    assert main(["call", "openai_realtime", "Hello there", *argv]) == 0
    assert capsys.readouterr().out == REALTIME_ANSWER + "\n"


# -- the scheme the app sees ------------------------------------------------------------


async def scheme_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the scope's scheme (HTTP) or sends it and closes (WebSocket)."""
    if scope["type"] == "http":
        await receive()
        body = scope["scheme"].encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
    else:
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": scope["scheme"]})
        await send({"type": "websocket.close", "code": 1000})


@pytest.mark.parametrize("secure", [True, False])
def test_own_server_scopes_say_https_and_wss(tmp_path: Path, secure: bool) -> None:
    files = prepare_tls(tmp_path)
    own = OwnServer(scheme_app, ssl=files.server_context() if secure else None)
    try:
        scheme, ws = ("https", "wss") if secure else ("http", "ws")
        context = files.client_context()
        reply = httpx.get(f"{scheme}://localhost:{own.port}/", verify=context)
        assert reply.text == scheme
        with websockets.sync.client.connect(
            f"{ws}://localhost:{own.port}/", ssl=context if secure else None
        ) as conn:
            assert conn.recv() == ws
    finally:
        own.stop()


def test_a_handshake_that_never_comes_is_closed_after_head_timeout(tmp_path: Path) -> None:
    own = OwnServer(scheme_app, ssl=prepare_tls(tmp_path).server_context(), head_timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", own.port)) as sock:
            sock.settimeout(5)
            started = time.monotonic()
            try:
                got = sock.recv(100)
            except ConnectionResetError:
                got = b""
            waited = time.monotonic() - started
        assert got == b""
        assert 0.25 < waited < 2
    finally:
        own.stop()

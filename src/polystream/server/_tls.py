"""TLS for the emulator and the gateway: a local certificate authority, kept in a
directory, and the server certificate it signs for this machine's loopback names.

:func:`prepare_tls` makes (or reuses) these files in ``DIR``:

* ``ca.pem``, the authority's certificate: what clients trust, with
  ``SSL_CERT_FILE=DIR/ca.pem``;
* ``ca-key.pem``, its private key (mode 0600);
* ``localhost.pem`` and ``localhost-key.pem`` (mode 0600), the server's certificate for
  ``localhost``, ``127.0.0.1`` and ``::1`` and its key.

The authority is made once and then reused as it is. One that cannot be used (not a
certificate, not an authority, expired, its key missing, encrypted or not its own) is a
:class:`TLSError` naming the file: it is never replaced, since clients may trust it. The
server certificate is remade when it is missing, unreadable, not signed by the
authority, not for exactly those names, or close to its end. Certificates are made with
the ``cryptography`` package (the server extra).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from polystream.errors import PolystreamError

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes

__all__ = ["SERVER_NAMES", "TLSError", "TLSFiles", "prepare_tls"]

SERVER_NAMES: Final = ("localhost", "127.0.0.1", "::1")
"""The names the server certificate is for: one DNS name and two IP addresses."""

CA_DAYS: Final = 3650
"""How long a new authority is valid."""
SERVER_DAYS: Final = 365
"""How long a new server certificate is valid (at most as long as its authority)."""
RENEW_DAYS: Final = 30
"""A server certificate with fewer days than this left is remade."""


class TLSError(PolystreamError):
    """The TLS directory or a file in it cannot be used.

    Attributes:
        path: The file or directory at fault.
        problem: What is wrong with it (the message, without the path).
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class TLSFiles:
    """The files of a TLS directory, once :func:`prepare_tls` made or checked them.

    Attributes:
        directory: The directory.
        ca_file: ``ca.pem``, the authority's certificate (for ``SSL_CERT_FILE``).
        ca_key_file: ``ca-key.pem``, the authority's key.
        cert_file: ``localhost.pem``, the server's certificate.
        key_file: ``localhost-key.pem``, the server's key.
    """

    directory: Path
    ca_file: Path
    ca_key_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side context with the server certificate (HTTP/1.1 by ALPN)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def client_context(self) -> ssl.SSLContext:
        """A client-side context that trusts the authority (and nothing else)."""
        return ssl.create_default_context(cafile=self.ca_file)


def prepare_tls(directory: str | os.PathLike[str]) -> TLSFiles:
    """Make or reuse the authority and the server certificate in ``directory``
    (created, mode 0700, when missing).

    Raises:
        TLSError: The directory cannot be made or written, or the authority in it
            cannot be used (the error names the file and what is wrong with it).
    """
    root = Path(directory).expanduser().absolute()
    files = TLSFiles(
        directory=root,
        ca_file=root / "ca.pem",
        ca_key_file=root / "ca-key.pem",
        cert_file=root / "localhost.pem",
        key_file=root / "localhost-key.pem",
    )
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise TLSError(root, f"cannot make the directory: {exc.strerror or exc}") from exc
    if not root.is_dir():
        raise TLSError(root, "not a directory")
    with _locked(root):
        ca, ca_key = _authority(files)
        if not _server_current(files, ca):
            _issue_server(files, ca, ca_key)
    return files


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """Hold ``DIR/.lock`` (where the platform has ``fcntl``): two servers starting on
    one directory make its files once."""
    try:
        import fcntl
    except ImportError:  # (no advisory locks: Windows)
        yield
        return
    path = root / ".lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise TLSError(path, f"cannot open the lock file: {exc.strerror or exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _authority(files: TLSFiles) -> tuple[x509.Certificate, CertificateIssuerPrivateKeyTypes]:
    """The authority in the directory, checked, or a new one when there is none."""
    have_cert = files.ca_file.exists()
    have_key = files.ca_key_file.exists()
    if not have_cert and not have_key:
        return _new_authority(files)
    if not have_cert:
        raise TLSError(
            files.ca_file,
            f"missing, but its key {files.ca_key_file.name} is there: restore the "
            "certificate, or remove the key to make a new authority",
        )
    if not have_key:
        raise TLSError(
            files.ca_key_file,
            f"missing, but the authority's certificate {files.ca_file.name} is there: "
            "restore the key, or remove the certificate to make a new authority",
        )
    return _load_authority(files)


def _load_authority(files: TLSFiles) -> tuple[x509.Certificate, CertificateIssuerPrivateKeyTypes]:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    cert = _read_certificate(files.ca_file)
    if cert is None:
        raise TLSError(files.ca_file, "not a PEM certificate")
    try:
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        constraints = None
    if constraints is None or not constraints.ca:
        raise TLSError(files.ca_file, "not a certificate authority (no basicConstraints CA:TRUE)")
    now = _now()
    if cert.not_valid_after_utc <= now:
        raise TLSError(
            files.ca_file,
            f"the authority expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC: remove "
            f"{files.ca_file.name} and {files.ca_key_file.name} to make a new one (and trust "
            "the new one)",
        )
    if cert.not_valid_before_utc > now:
        raise TLSError(
            files.ca_file,
            f"the authority is not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC",
        )
    try:
        key = load_pem_private_key(_read(files.ca_key_file), password=None)
    except TypeError as exc:  # (encrypted)
        raise TLSError(files.ca_key_file, "the key is encrypted: give an unencrypted one") from exc
    except ValueError as exc:
        raise TLSError(files.ca_key_file, "not a PEM private key") from exc
    if not isinstance(
        key,
        rsa.RSAPrivateKey
        | ec.EllipticCurvePrivateKey
        | ed25519.Ed25519PrivateKey
        | ed448.Ed448PrivateKey,
    ):
        raise TLSError(files.ca_key_file, "a key of a kind that cannot sign certificates")
    if key.public_key() != cert.public_key():
        raise TLSError(
            files.ca_key_file, f"not the key of the authority's certificate {files.ca_file.name}"
        )
    return cert, key


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TLSError(path, f"cannot be read: {exc.strerror or exc}") from exc


def _read_certificate(path: Path) -> x509.Certificate | None:
    from cryptography import x509

    try:
        return x509.load_pem_x509_certificate(_read(path))
    except ValueError:
        return None


def _new_authority(files: TLSFiles) -> tuple[x509.Certificate, CertificateIssuerPrivateKeyTypes]:
    import socket

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "polystream"),
            x509.NameAttribute(
                NameOID.COMMON_NAME, f"polystream local CA ({socket.gethostname()})"[:64]
            ),
        ]
    )
    now = _now()
    identifier = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(identifier, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(identifier),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    # The key first: a directory left with a key and no certificate is an error that
    # says so, never a silently different authority.
    _write(files.ca_key_file, _key_pem(key), private=True, replace=False)
    _write(files.ca_file, _cert_pem(cert), private=False, replace=False)
    return cert, key


def _server_current(files: TLSFiles, ca: x509.Certificate) -> bool:
    """Whether the server certificate and key in the directory can be served as they
    are."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if not files.cert_file.exists() or not files.key_file.exists():
        return False
    cert = _read_certificate(files.cert_file)
    if cert is None:
        return False
    try:
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        key = load_pem_private_key(_read(files.key_file), password=None)
    except (InvalidSignature, ValueError, TypeError, x509.ExtensionNotFound):
        return False
    if _san_names(names) != set(SERVER_NAMES) or key.public_key() != cert.public_key():
        return False
    now = _now()
    return cert.not_valid_before_utc <= now and (
        cert.not_valid_after_utc - now >= dt.timedelta(days=RENEW_DAYS)
        or cert.not_valid_after_utc >= ca.not_valid_after_utc
    )


def _san_names(names: x509.SubjectAlternativeName) -> set[str]:
    from cryptography import x509

    dns = [str(name) for name in names.get_values_for_type(x509.DNSName)]
    addresses = [str(address) for address in names.get_values_for_type(x509.IPAddress)]
    if len(dns) + len(addresses) != len(names):
        return set()  # (names of other kinds: not the certificate this makes)
    return {*dns, *addresses}


def _issue_server(
    files: TLSFiles, ca: x509.Certificate, ca_key: CertificateIssuerPrivateKeyTypes
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    ends = min(now + dt.timedelta(days=SERVER_DAYS), ca.not_valid_after_utc)
    names: list[x509.GeneralName] = [x509.DNSName(SERVER_NAMES[0])]
    names += [x509.IPAddress(ipaddress.ip_address(address)) for address in SERVER_NAMES[1:]]
    ca_identifier = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    # (An Ed25519 or Ed448 authority signs without a separate hash.)
    digest = (
        None
        if isinstance(ca_key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey)
        else (hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAMES[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(ends)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_identifier),
            critical=False,
        )
        .sign(ca_key, digest)
    )
    _write(files.key_file, _key_pem(key), private=True, replace=True)
    _write(files.cert_file, _cert_pem(cert), private=False, replace=True)


def _key_pem(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, *, private: bool, replace: bool) -> None:
    """Write ``path``, mode 0600 when ``private``, else 0644. With ``replace``, whole or
    not at all (a file beside it, then renamed over it); without, an existing file is
    an error, never overwritten."""
    target = path.with_name(f".{path.name}.{os.getpid()}.tmp") if replace else path
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        if replace:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
        try:
            fd = os.open(target, flags, 0o600)
        except FileExistsError as exc:
            raise TLSError(path, "appeared while it was being made: not replaced") from exc
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600 if private else 0o644)
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(target, path)
    except OSError as exc:
        if replace:
            with contextlib.suppress(OSError):
                target.unlink()
        raise TLSError(path, f"cannot be written: {exc.strerror or exc}") from exc

"""The API's TLS: versions and client certificates as the web config says, over real TLS
connections; certificates replaced on disk or by a reload serve the next connection."""

import asyncio
import logging
import os
import ssl
from pathlib import Path

import pytest
from sglang_tuner.web.tls import ServerTLS, TLSServerConfig, server_context

from tests.certs import CA

# A refused handshake: an alert, or the server hanging up.
REFUSED = (ssl.SSLError, ConnectionError)


def _tls(folder: Path, **keys: object) -> TLSServerConfig:
    files = {"cert_file": str(folder / "server.crt"), "key_file": str(folder / "server.key")}
    return TLSServerConfig.model_validate({**files, **keys})


def _client(ca: CA, *, cert: str | None = None, tls12_only: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert_file)
    if cert is not None:
        context.load_cert_chain(ca.folder / f"{cert}.crt", ca.folder / f"{cert}.key")
    if tls12_only:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


async def _exchange(server: ssl.SSLContext, client: ssl.SSLContext) -> tuple[str, bytes]:
    """(the server certificate's common name, what the server said) over one connection;
    b"" when the server closed it after the handshake (a refused TLS 1.3 client certificate)."""

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server)
    port = listener.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        subject = dict(item[0] for item in writer.get_extra_info("peercert")["subject"])
        try:
            said = await reader.read()
        except REFUSED:
            said = b""
        writer.close()
        return subject["commonName"], said
    finally:
        listener.close()


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    authority = CA(tmp_path)
    authority.issue("server")
    authority.issue("client", server=False)
    return authority


async def test_server_context_serves_its_certificate(ca):
    assert await _exchange(server_context(_tls(ca.folder)), _client(ca)) == ("server", b"ok")


async def test_server_context_min_version_tls13_refuses_a_tls12_client(ca):
    server = server_context(_tls(ca.folder, min_version="TLS13"))
    with pytest.raises(REFUSED):
        await _exchange(server, _client(ca, tls12_only=True))
    assert await _exchange(server, _client(ca)) == ("server", b"ok")


async def test_server_context_require_and_verify_refuses_clients_without_a_good_cert(ca):
    (ca.folder / "other").mkdir()
    other = CA(ca.folder / "other", "other-ca")
    other.issue("stranger", server=False)
    server = server_context(
        _tls(
            ca.folder,
            client_auth_type="RequireAndVerifyClientCert",
            client_ca_file=str(ca.cert_file),
        )
    )
    assert await _exchange(server, _client(ca, cert="client")) == ("server", b"ok")
    assert await _exchange(server, _client(ca)) == ("server", b"")
    stranger = _client(ca)
    stranger.load_cert_chain(other.folder / "stranger.crt", other.folder / "stranger.key")
    assert await _exchange(server, stranger) == ("server", b"")


async def test_server_tls_serves_certificate_files_replaced_on_disk(ca):
    tls = ServerTLS(_tls(ca.folder), server_context(_tls(ca.folder)))
    ca.issue("renewed")
    _replace(ca.folder / "renewed.crt", ca.folder / "server.crt")
    _replace(ca.folder / "renewed.key", ca.folder / "server.key")
    assert await _exchange(tls.listening, _client(ca)) == ("renewed", b"ok")


async def test_server_tls_keeps_serving_the_old_certificate_when_new_files_are_bad(ca, caplog):
    tls = ServerTLS(_tls(ca.folder), server_context(_tls(ca.folder)))
    ca.issue("renewed")
    _replace(ca.folder / "renewed.crt", ca.folder / "server.crt")  # its key not yet there
    with caplog.at_level(logging.ERROR, "sglang_tuner.web.tls"):
        assert await _exchange(tls.listening, _client(ca)) == ("server", b"ok")
    assert "the key does not match the certificate" in caplog.text
    _replace(ca.folder / "renewed.key", ca.folder / "server.key")
    assert await _exchange(tls.listening, _client(ca)) == ("renewed", b"ok")


async def test_server_tls_install_applies_a_reloaded_policy_to_new_connections(ca):
    tls = ServerTLS(_tls(ca.folder), server_context(_tls(ca.folder)))
    assert await _exchange(tls.listening, _client(ca, tls12_only=True)) == ("server", b"ok")
    ca.issue("second")
    strict = TLSServerConfig(
        cert_file=str(ca.folder / "second.crt"),
        key_file=str(ca.folder / "second.key"),
        min_version="TLS13",
        client_auth_type="RequireAndVerifyClientCert",
        client_ca_file=str(ca.cert_file),
    )
    tls.install(strict, server_context(strict))
    with pytest.raises(REFUSED):
        await _exchange(tls.listening, _client(ca, cert="client", tls12_only=True))
    assert await _exchange(tls.listening, _client(ca)) == ("second", b"")
    assert await _exchange(tls.listening, _client(ca, cert="client")) == ("second", b"ok")


def _replace(source: Path, target: Path) -> None:
    """Swap a file in atomically (as cert-manager and Kubernetes secret volumes do)."""
    os.replace(source, target)

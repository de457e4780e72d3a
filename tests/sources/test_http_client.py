"""HttpClient against real sockets on 127.0.0.1: framing, decoding, the cap, keep-alive, TLS."""

import asyncio
import gzip
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sglang_tuner.sources.http import (
    USER_AGENT,
    BodyTooLargeError,
    ConnectFailedError,
    HttpClient,
    ProtocolFailedError,
)
from sglang_tuner.sources.timeout import timeout

BODY = b"sglang:num_running_reqs 1\n" * 1000


def _chunked(data: bytes, size: int = 1000) -> bytes:
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    parts = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces]
    return b"".join(parts) + b"0\r\n\r\n"


def _head(status: str, *headers: str) -> bytes:
    return ("\r\n".join([f"HTTP/1.1 {status}", *headers]) + "\r\n\r\n").encode()


GZ = gzip.compress(BODY)
ANSWERS = {  # path -> (response bytes, close the connection after it)
    "/length": (_head("200 OK", f"Content-Length: {len(BODY)}") + BODY, False),
    "/chunked": (_head("200 OK", "Transfer-Encoding: chunked") + _chunked(BODY), False),
    "/eof": (_head("200 OK") + BODY, True),
    "/gzip": (_head("200 OK", "Content-Encoding: gzip", f"Content-Length: {len(GZ)}") + GZ, False),
    "/gzip-chunked": (
        _head("200 OK", "Content-Encoding: gzip", "Transfer-Encoding: chunked") + _chunked(GZ, 7),
        False,
    ),
    "/deflate": (_head("200 OK", "Content-Encoding: deflate") + zlib.compress(BODY), True),
    "/bomb": (_head("200 OK", "Content-Encoding: gzip") + gzip.compress(b"0" * (8 << 20)), True),
    "/declared": (_head("200 OK", "Content-Length: 999999999"), True),
    "/continue": (_head("100 Continue") + _head("200 OK", "Content-Length: 2") + b"ok", False),
    "/redirect": (_head("302 Found", "Location: /length", "Content-Length: 0"), False),
    "/close": (_head("200 OK", "Connection: close", "Content-Length: 2") + b"ok", True),
    "/garbage": (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", True),
    "/truncated": (_head("200 OK", "Content-Length: 100") + b"short", True),
    "/once": (_head("200 OK", "Content-Length: 2") + b"ok", True),  # closes, unannounced
}


class RawServer:
    """A TCP server answering from ANSWERS; `/drop` closes without a word, `/hang` stalls."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # the client refused our certificate
                conn.close()
                return
        with conn:
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                self.requests.append(head)
                path = head.split(b" ")[1].decode()
                if path == "/drop":
                    return
                if path == "/hang":
                    conn.sendall(_head("200 OK", "Content-Length: 10"))
                    time.sleep(2.0)
                    return
                answer, close = ANSWERS[path]
                conn.sendall(answer)
                if close:
                    return

    def url(self, path: str) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}{path}"


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    running = RawServer()
    yield running
    running.sock.close()


@pytest.mark.parametrize(
    "path", ["/length", "/chunked", "/eof", "/gzip", "/gzip-chunked", "/deflate"]
)
async def test_http_client_reads_every_framing_and_encoding(server: RawServer, path: str) -> None:
    async with HttpClient() as client:
        response = await client.get(server.url(path))
    assert response.status == 200 and response.body == BODY


async def test_http_client_sends_headers_and_user_agent(server: RawServer) -> None:
    async with HttpClient() as client:
        await client.get(server.url("/length"), {"Authorization": "Bearer tok"})
    head = server.requests[-1].decode()
    assert head.startswith("GET /length HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}" in head and f"User-Agent: {USER_AGENT}" in head
    assert "Authorization: Bearer tok" in head


async def test_http_client_refuses_line_breaks_in_headers_and_spaces_in_urls(
    server: RawServer,
) -> None:
    async with HttpClient() as client:
        with pytest.raises(ProtocolFailedError) as caught:
            await client.get(server.url("/length"), {"Authorization": "Bearer a\r\nX-Evil: 1"})
        assert "Evil" not in str(caught.value)
        with pytest.raises(ConnectFailedError):
            await client.get(server.url("/a b"))


async def test_http_client_reuses_a_kept_alive_connection(server: RawServer) -> None:
    before = server.connections
    async with HttpClient() as client:
        for path in ("/length", "/chunked", "/gzip", "/continue", "/length"):
            assert (await client.get(server.url(path))).status == 200
    assert server.connections == before + 1


async def test_http_client_opens_a_new_connection_after_close(server: RawServer) -> None:
    before = server.connections
    async with HttpClient() as client:
        assert (await client.get(server.url("/close"))).body == b"ok"
        assert (await client.get(server.url("/close"))).body == b"ok"
    assert server.connections == before + 2


async def test_http_client_does_not_follow_redirects(server: RawServer) -> None:
    async with HttpClient() as client:
        response = await client.get(server.url("/redirect"))
    assert response.status == 302 and response.headers["location"] == "/length"


async def test_http_client_caps_the_decoded_size_of_a_gzip_bomb(server: RawServer) -> None:
    async with HttpClient() as client:
        with pytest.raises(BodyTooLargeError):
            await client.get(server.url("/bomb"), max_body_bytes=1 << 20)


async def test_http_client_refuses_a_declared_length_over_the_cap(server: RawServer) -> None:
    async with HttpClient() as client:
        with pytest.raises(BodyTooLargeError) as caught:
            await client.get(server.url("/declared"), max_body_bytes=1 << 20)
    assert caught.value.status == 200


@pytest.mark.parametrize("path", ["/garbage", "/truncated", "/drop"])
async def test_http_client_broken_answers_are_protocol_failures(
    server: RawServer, path: str
) -> None:
    async with HttpClient() as client:
        with pytest.raises(ProtocolFailedError):
            await client.get(server.url(path))


@pytest.mark.parametrize("pause", [0.0, 0.1])
async def test_http_client_retries_once_when_a_kept_alive_connection_was_closed(
    server: RawServer, pause: float
) -> None:
    before = server.connections
    async with HttpClient() as client:
        assert (await client.get(server.url("/once"))).body == b"ok"
        await asyncio.sleep(pause)  # 0: the server's close is still in flight when we reuse it
        assert (await client.get(server.url("/length"))).body == BODY
    assert server.connections == before + 2


async def test_http_client_refused_port_says_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with HttpClient() as client:
        with pytest.raises(ConnectFailedError) as caught:
            await client.get(f"http://127.0.0.1:{port}/metrics")
    assert caught.value.refused


async def test_http_client_timeout_closes_the_connection(server: RawServer) -> None:
    async with HttpClient() as client:
        with pytest.raises(TimeoutError):
            async with timeout(0.2):
                await client.get(server.url("/hang"))
        await asyncio.sleep(0.05)  # the transport reports its close on the next loop turns
        assert not client._open


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_http_client_speaks_tls_and_checks_the_certificate(
    tls_files: tuple[Path, Path],
) -> None:
    cert, key = tls_files
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    server = RawServer(server_context)
    try:
        async with HttpClient(ssl.create_default_context(cafile=str(cert))) as client:
            assert (await client.get(server.url("/gzip"))).body == BODY
        async with HttpClient(ssl.create_default_context()) as client:
            with pytest.raises(ConnectFailedError):
                await client.get(server.url("/length"))
    finally:
        server.sock.close()

"""Per-target TLS (Prometheus' `tls_config`): a real HTTPS server on 127.0.0.1 with a private CA,
applied to the target's /metrics scrape and its /server_info read."""

import datetime
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from sglang_tuner.config.discovery import static_targets
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.model.target_spec import TargetSpec, TargetTLS
from sglang_tuner.sources.target import TargetSource

from tests.certs import CA, Pair
from tests.conftest import FIXTURES

PAGES = {
    "/metrics": FIXTURES / "sglang" / "v0.5.17_a.prom",
    "/server_info": FIXTURES / "sglang" / "server_info" / "v0.5.17.json",
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        del args

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = PAGES.get(self.path)
        body = path.read_bytes() if path else b"not found"
        self.send_response(200 if path else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _named_cert(ca: CA, dns_name: str) -> Pair:
    """A server certificate for `dns_name` only (not 127.0.0.1): needs `server_name`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    pair = Pair(ca.folder / f"{dns_name}.crt", ca.folder / f"{dns_name}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pair.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return pair


def _serve(pair: Pair, client_ca: Path | None = None) -> Iterator[str]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pair.cert, pair.key)
    if client_ca is not None:  # mutual TLS: a client certificate from this CA is required
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path)


@pytest.fixture
def https_node(ca: CA) -> Iterator[str]:
    yield from _serve(ca.issue("sglang-node"))


@pytest.fixture
def named_node(ca: CA) -> Iterator[str]:
    yield from _serve(_named_cert(ca, "sglang.internal"))


@pytest.fixture
def mtls_node(ca: CA) -> Iterator[str]:
    yield from _serve(ca.issue("sglang-mtls"), client_ca=ca.cert_file)


async def _read(spec: TargetSpec) -> tuple[str | None, str | None]:
    """(scrape error, /server_info error) of one read of each, as the loop does them."""
    source = TargetSource(spec, ssl.create_default_context())  # the loop's shared default
    try:
        result = await source.scrape(1.0, timeout_seconds=3.0, max_body_bytes=1 << 22)
        config, error = await source.server_info(timeout_seconds=3.0)
    finally:
        await source.aclose()
    assert (config is None) == (error is not None)
    return result.error, error


async def test_target_tls_ca_file_verifies_private_ca_for_metrics_and_server_info(ca, https_node):
    assert await _read(TargetSpec("n", https_node, tls=TargetTLS(ca_file=ca.cert_file))) == (
        None,
        None,
    )


async def test_target_tls_without_ca_file_fails_verification_on_both_requests(https_node):
    scrape_error, info_error = await _read(TargetSpec("n", https_node))
    assert scrape_error is not None and "CERTIFICATE_VERIFY_FAILED" in scrape_error
    assert info_error is not None and "ConnectFailedError" in info_error


async def test_target_tls_server_name_checks_the_certificate_against_it(ca, named_node):
    named = TargetTLS(ca_file=ca.cert_file, server_name="sglang.internal")
    assert await _read(TargetSpec("n", named_node, tls=named)) == (None, None)
    scrape_error, _ = await _read(TargetSpec("n", named_node, tls=TargetTLS(ca_file=ca.cert_file)))
    assert scrape_error is not None and "127.0.0.1" in scrape_error  # the URL's host: mismatch


async def test_target_tls_client_certificate_for_mutual_tls(ca, mtls_node):
    client = ca.issue("tuner-client", server=False)
    tls = TargetTLS(ca_file=ca.cert_file, cert_file=client.cert, key_file=client.key)
    assert await _read(TargetSpec("n", mtls_node, tls=tls)) == (None, None)
    scrape_error, info_error = await _read(
        TargetSpec("n", mtls_node, tls=TargetTLS(ca_file=ca.cert_file))
    )
    assert scrape_error is not None and info_error is not None


async def test_target_tls_insecure_skip_verify_accepts_any_certificate(named_node):
    tls = TargetTLS(insecure_skip_verify=True)
    assert await _read(TargetSpec("n", named_node, tls=tls)) == (None, None)


async def test_target_tls_file_that_does_not_load_fails_the_scrape_not_the_daemon(
    tmp_path, https_node
):
    missing = TargetTLS(ca_file=tmp_path / "absent.crt")
    scrape_error, _ = await _read(TargetSpec("n", https_node, tls=missing))
    assert scrape_error is not None and "tls_config does not load" in scrape_error


def test_target_tls_settings_reach_the_target_spec():
    tls = {"ca_file": "/etc/ca.crt", "server_name": "sglang.internal"}
    settings = load_settings(None, {"targets": [{"url": "https://10.0.0.1:30000", "tls": tls}]})
    (spec,) = static_targets(settings)
    assert spec.tls == TargetTLS(ca_file=Path("/etc/ca.crt"), server_name="sglang.internal")
    with pytest.raises(ConfigError, match="cert_file and key_file go together"):
        load_settings(None, {"targets": [{"url": "https://h:1", "tls": {"cert_file": "/c"}}]})

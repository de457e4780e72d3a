"""Credentials for the services we call: Authorization headers from secret files, and TLS
contexts shown to verify (or not) in real handshakes against a test CA."""

import base64
import ssl
from pathlib import Path

import pytest
from sglang_tuner.config.credentials import api_key, auth_headers, ssl_context
from sglang_tuner.config.settings import BasicAuthSettings, TLSSettings

from tests.certs import CA, Pair


def _secret(tmp_path: Path, text: str, name: str = "secret") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _server(pair: Pair, client_ca: Path | None = None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pair.cert, pair.key)
    if client_ca is not None:
        context.load_verify_locations(client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _handshake(client: ssl.SSLContext, server: ssl.SSLContext, host: str = "localhost") -> None:
    """A TLS handshake in memory; raises what either side raises."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(to_client, to_server, server_hostname=host)
    s = server.wrap_bio(to_server, to_client, server_side=True)
    done: set[str] = set()
    for _ in range(20):
        for name, side in (("client", c), ("server", s)):
            if name in done:
                continue
            try:
                side.do_handshake()
                done.add(name)
            except ssl.SSLWantReadError:
                pass
        if len(done) == 2:
            s.write(b"x")  # the server takes the client's certificate by now (TLS 1.3 too)
            return
    raise AssertionError("the handshake did not finish")


@pytest.fixture
def ca(tmp_path: Path) -> CA:
    return CA(tmp_path)


def test_auth_headers_basic_auth_reads_the_password_file_now(tmp_path):
    password = _secret(tmp_path, "hunter2\n")
    headers = auth_headers(BasicAuthSettings(username="ops", password_file=password), None, "am")
    assert headers == {"Authorization": "Basic " + base64.b64encode(b"ops:hunter2").decode()}
    password.write_text("rotated\n")  # read each time it is asked: a rotated secret is taken
    headers = auth_headers(BasicAuthSettings(username="ops", password_file=password), None, "am")
    assert base64.b64decode(headers["Authorization"].split()[1]) == b"ops:rotated"


def test_auth_headers_bearer_token_from_its_file(tmp_path):
    token = _secret(tmp_path, "  t0ken  \r\n")
    assert auth_headers(None, token, "prometheus") == {"Authorization": "Bearer t0ken"}


def test_auth_headers_none_without_credentials():
    assert auth_headers(None, None, "alertmanager") == {}


def test_auth_headers_basic_auth_and_a_token_are_exclusive(tmp_path):
    basic = BasicAuthSettings(username="ops", password_file=_secret(tmp_path, "p\n"))
    with pytest.raises(ValueError, match="^prometheus: basic_auth and bearer_token_file are excl"):
        auth_headers(basic, _secret(tmp_path, "t\n", "token"), "prometheus")


def test_auth_headers_an_unreadable_secret_says_which_file_never_its_content(tmp_path):
    two_lines = _secret(tmp_path, "hunter2\nsecond\n")
    with pytest.raises(ValueError) as info:
        auth_headers(BasicAuthSettings(username="ops", password_file=two_lines), None, "am")
    assert str(two_lines) in str(info.value) and "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="cannot read"):
        auth_headers(None, tmp_path / "missing", "am")


def test_ssl_context_trusts_the_given_ca(ca):
    server = _server(ca.issue("server"))
    _handshake(ssl_context(TLSSettings(ca_file=ca.cert_file)), server)
    _handshake(ssl_context(TLSSettings(ca_file=ca.cert_file)), server, host="127.0.0.1")


def test_ssl_context_without_a_ca_file_uses_the_system_store_and_rejects_a_private_ca(ca):
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(ssl_context(TLSSettings()), _server(ca.issue("server")))


def test_ssl_context_checks_the_host_name(ca):
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(
            ssl_context(TLSSettings(ca_file=ca.cert_file)),
            _server(ca.issue("server")),
            host="am.example",
        )


def test_ssl_context_insecure_skip_verify_accepts_any_server(ca):
    client = ssl_context(TLSSettings(insecure_skip_verify=True))
    assert client.verify_mode == ssl.CERT_NONE and not client.check_hostname
    _handshake(client, _server(ca.issue("server")), host="am.example")


def test_ssl_context_presents_the_client_certificate(ca):
    server = _server(ca.issue("server"), client_ca=ca.cert_file)
    client = ca.issue("client", server=False)
    with_cert = TLSSettings(ca_file=ca.cert_file, cert_file=client.cert, key_file=client.key)
    _handshake(ssl_context(with_cert), server)
    with pytest.raises(ssl.SSLError):
        _handshake(ssl_context(TLSSettings(ca_file=ca.cert_file)), server)


def test_ssl_context_a_missing_ca_file_fails_at_once(tmp_path):
    with pytest.raises(FileNotFoundError):
        ssl_context(TLSSettings(ca_file=tmp_path / "missing.crt"))


def test_an_api_key_comes_from_its_file_first_then_from_the_variable_named(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_KEY", "from-env")
    monkeypatch.setenv("EMPTY_KEY", "")
    assert api_key(_secret(tmp_path, "s3cret\n"), "SGLANG_KEY") == "s3cret"
    assert api_key(None, "SGLANG_KEY") == "from-env"
    assert api_key(None, "EMPTY_KEY") is None  # set but empty: no key, as unset
    assert api_key(None, None) is None
    with pytest.raises(ValueError, match="cannot read"):
        api_key(tmp_path / "missing", "SGLANG_KEY")

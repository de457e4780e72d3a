"""The web config file: exporter-toolkit's format, read strictly, with problems that name the
file and never quote a secret."""

from pathlib import Path

import bcrypt
import pytest
from sglang_tuner.web.config import WebConfigError, load_web_config

from tests.certs import CA

HASH = bcrypt.hashpw(b"secret", bcrypt.gensalt(4)).decode()


@pytest.fixture
def tls_dir(tmp_path: Path) -> Path:
    """A folder with a CA (test-ca.crt), server.crt/.key and client.crt/.key."""
    ca = CA(tmp_path)
    ca.issue("server")
    ca.issue("client", server=False)
    return tmp_path


def _load(folder: Path, text: str):  # type: ignore[no-untyped-def]
    path = folder / "web.yml"
    path.write_text(text)
    return load_web_config(path)


def _error(folder: Path, text: str) -> str:
    with pytest.raises(WebConfigError) as caught:
        _load(folder, text)
    message = str(caught.value)
    assert message.startswith(f"web config file {folder / 'web.yml'}: ")
    assert "\n" not in message
    return message


def test_web_config_reads_exporter_toolkits_example_with_paths_from_its_folder(tls_dir):
    web = _load(
        tls_dir,
        "tls_server_config:\n"
        "  cert_file: server.crt\n"
        "  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n"
        "  client_ca_file: test-ca.crt\n"
        "  min_version: TLS13\n"
        "  max_version: TLS13\n"
        "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n"
        "  curve_preferences: [X25519]\n"
        "  prefer_server_cipher_suites: true\n"
        "http_server_config:\n"
        "  http2: true\n"
        "  headers: {X-Frame-Options: deny, Strict-Transport-Security: max-age=31536000}\n"
        "rate_limit: {burst: 10, interval: 1m30s}\n"
        f"basic_auth_users:\n  alice: '{HASH}'\n",
    )
    assert web.tls is not None and web.context is not None
    assert web.tls.cert_file == str(tls_dir / "server.crt")
    assert web.tls.client_ca_file == str(tls_dir / "test-ca.crt")
    assert web.users == {"alice": HASH.encode()}
    assert web.headers["X-Frame-Options"] == "deny"
    assert web.rate_limit == (90.0, 10)
    assert HASH not in repr(web)


def test_web_config_without_tls_keys_serves_plain_http(tmp_path):
    web = _load(tmp_path, f"basic_auth_users: {{alice: '{HASH}'}}\n")
    assert web.tls is None and web.users
    assert _load(tmp_path, "").users == {}  # empty: no TLS, no auth, as in exporter-toolkit


def test_web_config_takes_inline_certificate_and_key(tls_dir):
    cert, key = (tls_dir / "server.crt").read_text(), (tls_dir / "server.key").read_text()
    indent = lambda pem: "\n".join("    " + line for line in pem.splitlines())  # noqa: E731
    web = _load(
        tls_dir, f"tls_server_config:\n  cert: |\n{indent(cert)}\n  key: |\n{indent(key)}\n"
    )
    assert web.context is not None
    assert "PRIVATE KEY" not in repr(web)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tls_server_config: {certfile: server.crt}\n", "tls_server_config.certfile: unknown key"),
        ("basic_auth: {}\n", "basic_auth: unknown key"),
        ("- a list\n", "must be a mapping"),
        ("tls_server_config: {cert_file: server.crt}\n", "needs cert_file (or cert) and key_file"),
        ("tls_server_config: {cert_file: nope.crt, key_file: server.key}\n", "cannot read"),
        (
            "tls_server_config: {cert_file: server.crt, key_file: client.key}\n",
            "the key does not match the certificate",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "min_version: TLS14}\n",
            "min_version: unknown TLS version 'TLS14'",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "min_version: TLS13, max_version: TLS12}\n",
            "min_version is above max_version",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "client_ca_file: test-ca.crt}\n",
            "client CAs are given but client_auth_type verifies none",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "client_auth_type: RequireAndVerifyClientCert}\n",
            "RequireAndVerifyClientCert needs client_ca_file",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "client_auth_type: RequireAnyClientCert}\n",
            "RequireAnyClientCert is not supported",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "client_auth_type: Sometimes, client_ca_file: test-ca.crt}\n",
            "client_auth_type: unknown 'Sometimes'",
        ),
        (
            "tls_server_config: {cert_file: server.crt, key_file: server.key, "
            "cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]}\n",
            "cipher_suites: unknown 'TLS_RSA_WITH_RC4_128_SHA'",
        ),
        ("http_server_config: {headers: {Server: x}}\n", "HTTP header 'Server' can not be"),
        (
            "http_server_config: {headers: {X-Frame-Options: allow}}\n",
            "X-Frame-Options must be one of deny, sameorigin",
        ),
        ("rate_limit: {interval: 1s}\n", "rate_limit.burst: must be at least 1"),
        ("rate_limit: {burst: 1, interval: soon}\n", "rate_limit.interval: must be a duration"),
        ("auth_excluded_paths: [metrics]\n", "paths must start with '/': 'metrics'"),
    ],
)
def test_web_config_refuses_a_bad_file_in_one_line(tls_dir, text, problem):
    assert problem in _error(tls_dir, text)


def test_web_config_names_a_missing_file(tmp_path):
    with pytest.raises(WebConfigError, match=r"nope\.yml: cannot read: No such file"):
        load_web_config(tmp_path / "nope.yml")


def test_web_config_bad_hash_names_the_user_not_the_hash(tmp_path):
    truncated = HASH[:-5]
    message = _error(tmp_path, f"basic_auth_users: {{alice: '{HASH}', bob: '{truncated}'}}\n")
    assert "not a bcrypt hash for user(s) 'bob'" in message
    assert truncated not in message and "alice" not in message


def test_web_config_yaml_error_gives_the_place_not_the_line(tmp_path):
    message = _error(tmp_path, f"basic_auth_users:\n  alice: {HASH}\n bob: [\n")
    assert "not valid YAML at line 3" in message
    assert HASH not in message and "bob" not in message


def test_web_config_example_in_the_operations_guide_is_valid(tmp_path):
    guide = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    section = guide.split("## Securing the API", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    ca = CA(tmp_path)
    ca.issue("tuner")
    web = _load(tmp_path, example.replace("<bcrypt hash>", HASH))
    assert web.tls is not None and set(web.users) == {"prometheus", "ops"}


def test_web_config_auth_excluded_paths_open_those_paths_only(tmp_path):
    """exporter-toolkit's newer key: listed paths skip basic auth, the rest still ask."""
    web = _load(tmp_path, "auth_excluded_paths: [/metrics, /-/healthy]\n")
    assert web.auth_excluded_paths == {"/metrics", "/-/healthy"}

"""A real daemon behind a web config (`--web.config.file`): every endpoint asks for credentials,
over TLS only, with the versions and client certificates the file allows; a bad file stops the
start with exit code 2, a bad reload keeps the old one, and no secret reaches the log."""

import os
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import httpx
import pytest
import yaml
from sglang_tuner.__main__ import main

from tests.certs import CA
from tests.conftest import DAEMON, DaemonProcess

PASSWORD = "correct horse battery staple"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
BOB_PASSWORD = "bob's own password"
BOB_HASH = bcrypt.hashpw(BOB_PASSWORD.encode(), bcrypt.gensalt(4)).decode()
DEAD_TARGET = {"name": "dead", "url": "http://127.0.0.1:1"}
SECRETS = (PASSWORD, HASH, BOB_PASSWORD, BOB_HASH)

pytestmark = pytest.mark.integration


def _web_config(folder: Path, **extra: object) -> Path:
    """web.yml in `folder`: TLS with server.crt/.key (relative paths) and user alice."""
    config: dict[str, object] = {
        "tls_server_config": {"cert_file": "server.crt", "key_file": "server.key"},
        "basic_auth_users": {"alice": HASH},
        **extra,
    }
    path = folder / "web.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _copy(source: Path, target: Path, *names: str) -> Path:
    """Copies of `names` from `source` in `target` (made if missing)."""
    target.mkdir(exist_ok=True)
    for name in names:
        (target / name).write_bytes((source / name).read_bytes())
    return target


def _client_context(ca: CA, cert: str | None = "client") -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca.cert_file)
    if cert is not None:
        context.load_cert_chain(ca.folder / f"{cert}.crt", ca.folder / f"{cert}.key")
    return context


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CA:
    authority = CA(tmp_path_factory.mktemp("tls"))
    authority.issue("server")
    authority.issue("client", server=False)
    return authority


@pytest.fixture(scope="module")
def secured(ca: CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    """A daemon requiring TLS 1.3, a client certificate and basic auth; /healthz open."""
    tls = {
        "cert_file": "server.crt",
        "key_file": "server.key",
        "client_auth_type": "RequireAndVerifyClientCert",
        "client_ca_file": "test-ca.crt",
        "min_version": "TLS13",
    }
    headers = {"headers": {"X-Content-Type-Options": "nosniff"}}
    web = _web_config(ca.folder, tls_server_config=tls, http_server_config=headers)
    config = {
        "targets": [DEAD_TARGET],
        "web_config_file": str(web),
        "web_auth_exempt_paths": ["/healthz"],
        "log_level": "debug",
        "web_enable_lifecycle": True,
    }
    client = {"verify": _client_context(ca), "auth": ("alice", PASSWORD)}
    daemon = DaemonProcess(tmp_path_factory.mktemp("secured"), config, client)
    daemon.start().wait_for(lambda d: d.get("/readyz").status_code == 200)
    yield daemon
    daemon.stop()


def _endpoints(daemon: DaemonProcess) -> list[str]:
    """Every API path from /openapi.json (parameters filled in), plus the pages outside it."""
    paths = daemon.get("/openapi.json").json()["paths"]
    posts = {path for path, methods in paths.items() if "post" in methods}
    assert posts == {"/-/reload"}  # tested on its own: it changes the daemon
    paths = {path: methods for path, methods in paths.items() if path not in posts}
    assert all(set(methods) == {"get"} for methods in paths.values())
    filled = [p.replace("{target}", "dead").replace("{rule}", "queue_empty") for p in paths]
    filled = [p.replace("{name}", "queue_empty") for p in filled]
    return [*filled, "/", "/docs", "/redoc", "/openapi.json", "/metrics", "/readyz"]


def test_secured_daemon_every_endpoint_needs_credentials(secured):
    endpoints = _endpoints(secured)
    assert {"/advice", "/targets", "/rules", "/changes", "/metrics", "/healthz"} <= set(endpoints)
    for path in endpoints:
        refused = secured.get(path, auth=None)
        if path == "/healthz":
            assert refused.status_code == 200, path  # web_auth_exempt_paths
            continue
        assert refused.status_code == 401, path
        assert refused.headers["WWW-Authenticate"] == "Basic"
        assert refused.headers["X-Content-Type-Options"] == "nosniff"
        answered = secured.get(path)
        assert answered.status_code in ((200, 503) if path == "/readyz" else (200,)), path


def test_secured_daemon_reload_by_http_needs_credentials(secured):
    assert secured.post("/-/reload", auth=None).status_code == 401
    assert secured.post("/-/reload").status_code == 200


def test_secured_daemon_refuses_a_wrong_password_and_an_unknown_user(secured):
    assert secured.get("/advice", auth=("alice", PASSWORD + "!")).status_code == 401
    assert secured.get("/advice", auth=("mallory", PASSWORD)).status_code == 401
    assert secured.get("/advice").status_code == 200


def test_secured_daemon_refuses_plain_http(secured):
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{secured.port}/healthz", timeout=5)


def test_secured_daemon_refuses_a_tls12_only_client(secured, ca):
    old = _client_context(ca)
    old.maximum_version = ssl.TLSVersion.TLSv1_2
    with pytest.raises(httpx.TransportError):
        secured.get("/healthz", verify=old)


def test_secured_daemon_refuses_a_client_without_a_certificate(secured, ca):
    with pytest.raises(httpx.TransportError):
        secured.get("/healthz", verify=_client_context(ca, cert=None))


def test_changes_command_reaches_a_secured_daemon_with_its_credentials(secured, ca, capsys):
    password_file = ca.folder / "password"
    password_file.write_text(PASSWORD + "\n")
    tls = ["--ca-file", str(ca.cert_file)]
    tls += [
        "--cert-file",
        str(ca.folder / "client.crt"),
        "--key-file",
        str(ca.folder / "client.key"),
    ]
    auth = ["--username", "alice", "--password-file", str(password_file)]
    assert main(["changes", "--url", secured.url, *tls, *auth]) == 0
    assert main(["changes", "--url", secured.url, *tls]) == 1
    assert "answered 401" in capsys.readouterr().err
    assert main(["changes", "--url", secured.url, *tls, "--username", "alice"]) == 2


def test_secured_daemon_logs_no_password_and_no_hash(secured):
    secured.get("/advice", auth=("alice", PASSWORD))
    secured.get("/advice", auth=("alice", BOB_PASSWORD))
    logs = secured.logs()
    assert "listening on https://" in logs
    assert not [secret for secret in SECRETS if secret in logs]


def test_sighup_keeps_the_old_users_on_a_bad_web_config_and_switches_on_a_good_one(
    ca, tmp_path, daemon_factory
):
    web = _web_config(_copy(ca.folder, tmp_path / "tls", "server.crt", "server.key"))
    config = {"targets": [DEAD_TARGET], "web_config_file": str(web), "log_level": "debug"}
    alice = ("alice", PASSWORD)
    daemon = daemon_factory(config, {"verify": _client_context(ca, None), "auth": alice})
    first, sighups = yaml.safe_load(web.read_text()), 0

    def reload(users: object, **extra: object) -> None:
        nonlocal sighups
        web.write_text(yaml.safe_dump({**first, **extra, "basic_auth_users": users}))
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGHUP)
        sighups += 1
        done = lambda d: d.logs().count("reload failed") + d.logs().count("applied")  # noqa: E731
        daemon.wait_for(lambda d: done(d) >= sighups)

    reload({"alice": HASH, "bob": BOB_HASH[:-3]})  # a broken hash
    assert "reload failed, keeping the running configuration" in daemon.logs()
    assert "not a bcrypt hash for user(s) 'bob'" in daemon.logs()
    assert daemon.get("/advice").status_code == 200

    reload({"bob": BOB_HASH}, tls_server_config={})  # TLS off: needs a restart
    assert "turning TLS on or off needs a restart" in daemon.logs()
    assert daemon.get("/advice").status_code == 200

    reload({"bob": BOB_HASH})
    daemon.wait_for(lambda d: d.get("/advice", auth=("bob", BOB_PASSWORD)).status_code == 200)
    assert daemon.get("/advice").status_code == 401  # alice is gone
    assert not [secret for secret in SECRETS if secret in daemon.logs()]


def _served_name(port: int, ca: CA) -> str:
    """The common name of the certificate a new connection is served."""
    context = _client_context(ca, None)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            subject = dict(item[0] for item in tls.getpeercert()["subject"])  # type: ignore[index]
    return str(subject["commonName"])


def test_certificate_renewed_on_disk_is_served_without_a_restart(ca, tmp_path, daemon_factory):
    folder = _copy(ca.folder, tmp_path / "tls", "server.crt", "server.key")
    web = _web_config(folder)
    config = {"targets": [DEAD_TARGET], "web_config_file": str(web)}
    daemon = daemon_factory(
        config, {"verify": _client_context(ca, None), "auth": ("alice", PASSWORD)}
    )
    assert _served_name(daemon.port, ca) == "server"
    renewed = ca.issue("renewed")
    os.replace(renewed.cert, folder / "server.crt")
    os.replace(renewed.key, folder / "server.key")
    assert _served_name(daemon.port, ca) == "renewed"
    assert daemon.get("/advice").status_code == 200


def _run(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(DAEMON)}
    command = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(config), *flags]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("web", "problem"),
    [
        (None, "cannot read: No such file or directory"),
        (
            {"basic_auth_users": {"alice": HASH}, "tls_server_config": {"cert": "x", "kee": "y"}},
            "tls_server_config.kee: unknown key",
        ),
        ({"basic_auth_users": {"alice": HASH[:-1]}}, "not a bcrypt hash for user(s) 'alice'"),
        (
            {"tls_server_config": {"cert_file": "server.crt", "key_file": "client.key"}},
            "the key does not match the certificate",
        ),
    ],
)
def test_run_with_a_bad_web_config_exits_2_naming_the_file_and_the_problem(
    ca, tmp_path, web, problem
):
    path = tmp_path / "web.yml"
    if web is not None:
        _copy(ca.folder, tmp_path, "server.crt", "server.key", "client.key")
        path.write_text(yaml.safe_dump(web))
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"targets": [DEAD_TARGET], "web_config_file": str(path)}))
    done = _run(config)
    assert done.returncode == 2
    assert done.stderr.strip() == done.stderr.strip().splitlines()[-1]  # one line
    assert done.stderr.startswith(f"error: web config file {path}: ")
    assert problem in done.stderr
    assert HASH[7:] not in done.stderr


def test_run_flag_wins_over_the_config_files_web_config(ca, tmp_path):
    config = tmp_path / "config.yml"
    good = _web_config(ca.folder)
    config.write_text(yaml.safe_dump({"targets": [DEAD_TARGET], "web_config_file": str(good)}))
    missing = tmp_path / "missing.yml"
    done = _run(config, "--web.config.file", str(missing))
    assert done.returncode == 2 and f"web config file {missing}: cannot read" in done.stderr


def test_check_config_checks_the_web_config_it_names(ca, tmp_path, capsys):
    config = tmp_path / "config.yml"
    good = _web_config(ca.folder)
    config.write_text(yaml.safe_dump({"targets": [DEAD_TARGET], "web_config_file": str(good)}))
    assert main(["check-config", str(config)]) == 0
    assert f"{good}: OK (TLS, 1 user(s))" in capsys.readouterr().out
    bad = tmp_path / "bad-web.yml"
    bad.write_text("tls_server_config: {cert_file: server.crt, key_file: server.key}\n")
    config.write_text(yaml.safe_dump({"targets": [DEAD_TARGET], "web_config_file": str(bad)}))
    assert main(["check-config", str(config)]) == 2
    assert (
        f"error: web config file {bad}: tls_server_config.cert_file: cannot read"
        in capsys.readouterr().err
    )

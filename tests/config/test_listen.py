"""Listen addresses as --web.listen-address takes them: parsed, refused with the form to use, and
served on every one of them by a real daemon."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sglang_tuner.cli.parser import build_parser, flag_overrides
from sglang_tuner.config.listen import format_listen_address, parse_listen_address
from sglang_tuner.config.settings import Settings, external_url, listen_endpoints

from tests.conftest import DAEMON
from tests.ports import free_port


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":9877", ("", 9877)),
        ("127.0.0.1:9100", ("127.0.0.1", 9100)),
        ("[::1]:9877", ("::1", 9877)),
        ("localhost:0", ("localhost", 0)),
    ],
)
def test_listen_address_forms_of_exporter_toolkit(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen_address(text) == expected
    host, port = expected
    assert parse_listen_address(format_listen_address(host, port)) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("9877", "is not host:port"),
        ("host:http", "is not host:port"),
        ("0.0.0.0:70000", "port 70000 is not 0-65535"),
        ("::1:9877", "put an IPv6 address in brackets"),
        ("[::1:9877", "goes in brackets"),
    ],
)
def test_bad_listen_addresses_say_the_form_to_use(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_listen_address(text)


def test_listen_addresses_replace_host_and_port_and_give_the_external_url() -> None:
    settings = Settings(listen_addresses=["[::1]:9100", "127.0.0.1:9101"])
    assert listen_endpoints(settings) == [("::1", 9100), ("127.0.0.1", 9101)]
    assert external_url(settings) == "http://[::1]:9100"
    assert listen_endpoints(Settings(listen_port=9200)) == [("0.0.0.0", 9200)]


def test_the_old_flags_win_over_the_files_addresses() -> None:
    args = build_parser().parse_args(["run", "--listen-port", "9300"])
    assert flag_overrides(args) == {"listen_port": 9300, "listen_addresses": []}
    args = build_parser().parse_args(
        ["run", "--web.listen-address", ":9301", "--web.listen-address", "127.0.0.1:9302"]
    )
    assert flag_overrides(args)["listen_addresses"] == [":9301", "127.0.0.1:9302"]


def test_a_daemon_serves_on_every_listen_address_given(tmp_path: Path) -> None:
    one, two = free_port(), free_port()
    config = tmp_path / "c.yml"
    config.write_text(f"targets: [{{url: 'http://127.0.0.1:1'}}]\ndatabase: {tmp_path / 't.db'}\n")
    addresses = [
        "--web.listen-address",
        f"127.0.0.1:{one}",
        "--web.listen-address",
        f"127.0.0.2:{two}",
    ]
    cmd = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(config), *addresses]
    env = {**os.environ, "PYTHONPATH": str(DAEMON)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        urls = [f"http://127.0.0.1:{one}/healthz", f"http://127.0.0.2:{two}/healthz"]
        deadline = time.monotonic() + 20
        answered: set[str] = set()
        while answered != set(urls) and time.monotonic() < deadline:
            for url in urls:
                try:
                    if httpx.get(url, timeout=1).status_code == 200:
                        answered.add(url)
                except httpx.HTTPError:
                    time.sleep(0.1)
        assert answered == set(urls)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=20)[0].decode()
    assert f"listening on http://127.0.0.1:{one}, 127.0.0.2:{two}" in out

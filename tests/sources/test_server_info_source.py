"""`/server_info`: redaction, knob resolution per version, fetching with and without a token."""

import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sglang_tuner.sources.http import HttpClient
from sglang_tuner.sources.server_info import REDACTED, fetch_server_info, parse_server_info, redact

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sglang" / "server_info"
TOKEN = "sk-test-token"


def body(version: str) -> dict[str, Any]:
    """A fixture body."""
    return json.loads((FIXTURES / f"v{version}.json").read_text())


def test_redact_hides_top_level_and_internal_state_secrets() -> None:
    clean = redact(body("0.5.9"))
    assert clean["api_key"] == clean["admin_api_key"] == clean["ssl_keyfile_password"] == REDACTED
    for state in clean["internal_states"]:
        assert state["api_key"] == state["admin_api_key"] == REDACTED
    assert "sk-live" not in json.dumps(clean) and "pem-pass" not in json.dumps(clean)


def test_redact_hides_nested_secret_like_keys_case_insensitively() -> None:
    clean = redact({"a": [{"Storage_SECRET": "x", "DB_Password": "y", "credentials": {"k": 1}}]})
    assert clean == {
        "a": [{"Storage_SECRET": REDACTED, "DB_Password": REDACTED, "credentials": REDACTED}]
    }


def test_redact_keeps_token_fields_and_unset_secrets() -> None:
    clean = redact({"max_total_num_tokens": 5, "api_key": None, "token_usage": 0.5})
    assert clean == {"max_total_num_tokens": 5, "api_key": None, "token_usage": 0.5}


def test_redact_does_not_modify_its_input() -> None:
    original = body("0.5.17")
    redact(original)
    assert original["api_key"] == "sk-live-0517"


def test_parse_server_info_v0_5_17_reads_cuda_graph_config_and_startup_memory() -> None:
    config = parse_server_info(body("0.5.17"))
    assert config.version == "0.5.17"
    assert config.cuda_graph_max_bs == 256
    assert config.disable_cuda_graph is False
    assert config.max_running_requests == 2048 and config.max_running_requests_per_dp == 2048
    assert config.startup_available_gpu_mem_gb == 7.25
    assert config.max_total_num_tokens == 412000
    assert config.raw["api_key"] == REDACTED
    assert config.raw["hicache_storage_backend_extra_config"]["s3_secret_access_key"] == REDACTED


def test_parse_server_info_v0_5_9_sums_effective_max_running_over_dp() -> None:
    config = parse_server_info(body("0.5.9"))
    assert (config.max_running_requests, config.max_running_requests_per_dp) == (2048, 1024)
    assert config.dp_size == 2 and config.enable_dp_attention is True
    # reported 0.3 under DP attention: SGLang scheduled with 0.3 x the flag, which was 1.0
    assert config.schedule_conservativeness == 1.0 and config.schedule_policy == "lpm"
    assert config.kv_cache_dtype == "fp8_e4m3" and config.quantization == "fp8"
    assert config.startup_available_gpu_mem_gb is None


def test_parse_server_info_v0_4_10_prefers_resolved_attention_backend() -> None:
    config = parse_server_info(body("0.4.10"))
    assert config.attention_backend == "fa3"  # top level is null before v0.5.6
    assert config.max_running_requests == 256  # CLI value: no effective value before v0.5.9
    assert config.cuda_graph_max_bs == 256 and config.tp_size == 2


def test_parse_server_info_v0_4_6_reads_flat_internal_state() -> None:
    config = parse_server_info(body("0.4.6"))
    assert config.attention_backend == "flashinfer" and config.cuda_graph_max_bs == 160
    assert config.max_running_requests is None and config.raw["api_key"] == REDACTED


def test_parse_server_info_tolerates_wrong_types_and_missing_fields() -> None:
    config = parse_server_info({"tp_size": "two", "disable_cuda_graph": 1, "internal_states": "x"})
    assert config.tp_size is None and config.disable_cuda_graph is None and config.version is None


class InfoHandler(BaseHTTPRequestHandler):
    """`/open/server_info`, `/old/get_server_info` only, `/locked/server_info` needing TOKEN."""

    def log_message(self, *args: object) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        """Serve the v0.5.17 body as the path says."""
        kind, _, endpoint = self.path.strip("/").partition("/")
        authorised = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        if kind == "old" and endpoint == "server_info":
            self._send(404, b'{"detail":"Not Found"}')
        elif kind == "locked" and not authorised:
            self._send(401, b'{"error": "Unauthorized"}')
        elif kind == "broken":
            self._send(200, b"<html>")
        elif kind == "deep":  # a crash of json.loads: RecursionError
            self._send(200, b"[" * 100_000 + b"]" * 100_000)
        elif kind == "deepish":  # json.loads reads it; code walking it recursively might not
            self._send(200, b'{"a":' * 900 + b"1" + b"}" * 900)
        elif kind == "huge":
            self._stream(b'{"pad": "' + b"x" * (1024 * 1024), 200)
        else:
            self._send(200, json.dumps(body("0.5.17")).encode())

    def _send(self, code: int, payload: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, chunk: bytes, count: int) -> None:
        """`count` chunks without a Content-Length, counting what left before the client hung up."""
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(count):
                self.wfile.write(chunk)
                SENT["huge"] += len(chunk)
        except OSError:
            pass


SENT: Counter[str] = Counter()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Base URL of the fake server."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), InfoHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


async def fetch(url: str, token: str | None = None) -> tuple[Any, str | None]:
    """fetch_server_info with a fresh client."""
    async with HttpClient() as client:
        return await fetch_server_info(client, url, token=token, timeout_seconds=2.0)


async def test_fetch_server_info_reads_open_server(server: str) -> None:
    config, error = await fetch(server + "/open")
    assert error is None and config.version == "0.5.17"


async def test_fetch_server_info_falls_back_to_get_server_info_on_404(server: str) -> None:
    config, error = await fetch(server + "/old")
    assert error is None and config.cuda_graph_max_bs == 256


async def test_fetch_server_info_without_token_says_api_key_needed(server: str) -> None:
    config, error = await fetch(server + "/locked")
    assert config is None and error is not None and "needs an API key" in error


async def test_fetch_server_info_sends_bearer_token_and_never_returns_it(server: str) -> None:
    config, error = await fetch(server + "/locked", token=TOKEN)
    assert error is None and config is not None
    assert TOKEN not in repr(config) and "sk-live-0517" not in repr(config)


async def test_fetch_server_info_wrong_token_is_reported_without_the_token(server: str) -> None:
    config, error = await fetch(server + "/locked", token="wrong-secret")
    assert config is None and error is not None and "wrong-secret" not in error


async def test_fetch_server_info_non_json_is_an_error(server: str) -> None:
    config, error = await fetch(server + "/broken")
    assert config is None and error is not None and "JSON" in error


@pytest.mark.parametrize("kind", ["deep", "deepish"])
async def test_fetch_server_info_too_deeply_nested_json_is_an_error(server: str, kind: str) -> None:
    config, error = await fetch(server + f"/{kind}")
    assert config is None and error is not None and "nested deeper than" in error


async def test_fetch_server_info_stops_reading_at_its_size_cap(server: str) -> None:
    config, error = await fetch(server + "/huge")  # 200 MiB, no Content-Length
    assert config is None and error is not None and "more than 4 MiB" in error
    assert SENT["huge"] < 32 * 1024 * 1024  # what left the server before the client hung up


def test_redact_removes_secrets_from_the_launch_command():
    from sglang_tuner.sources.server_info import redact

    body = {
        "launch_command": "python -m sglang.launch_server --model-path m --api-key s3cr3t "
        "--admin-api-key=adm1n --ssl-keyfile-password pw --port 30000 --enable-metrics",
        "nested": [{"cmd": "--hf-token hf_abc --tp-size 2"}],
    }
    out = redact(body)
    text = str(out)
    assert "s3cr3t" not in text and "adm1n" not in text and "pw " not in text
    assert "hf_abc" not in text
    assert "--port 30000 --enable-metrics" in out["launch_command"]
    assert "--tp-size 2" in out["nested"][0]["cmd"]


@pytest.mark.parametrize(
    ("version", "fields", "flag"),
    [
        ("0.5.9", {"enable_dp_attention": True, "dp_size": 2}, 1.3),  # the classic flags
        ("0.5.21", {"enable_dp_attention": True, "dp_size": 8}, 1.3),
        ("0.5.23", {"attn_dp_size": 8, "dp_size": 1, "enable_dp_attention": None}, 1.3),
        ("0.5.23", {"attn_dp_size": 1, "dp_size": 1, "enable_dp_attention": None}, 0.39),
        ("0.5.9", {"enable_dp_attention": False, "dp_size": 2}, 0.39),  # plain DP replicas
    ],
)
def test_parse_server_info_conservativeness_in_flag_units_under_dp_attention(version, fields, flag):
    reported = {**body("0.5.9"), "version": version, **fields, "schedule_conservativeness": 0.39}
    assert parse_server_info(reported).schedule_conservativeness == flag

"""`check-config` and `run` take a file by one path: whatever `check-config` accepts, `run`
starts with and serves; whatever `run` refuses, `check-config` refuses with the same message.

Property-based (hypothesis): configurations put together from what real ones hold and what
went wrong in the field (a missing password file, two credentials at once, a two-line token
file, a bad port, names with emoji, slashes or a lone surrogate, file_sd entries with a bad
port), each tried on `check-config` in-process and on a real `sglang-tuner run` process.
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_tuner.cli.main import main

from tests.ports import free_port

TARGET_URLS = ("http://127.0.0.1:{port}", "http://127.0.0.1:99999")
NAMES = (None, "gpu-a", "rack/1 gpu", "rocket \U0001f680", '"\\ud83d lone"')
KEYS = (None, "good", "missing", "two-lines")
ALERTMANAGER = (None, "basic-good", "basic-missing", "basic-and-bearer", "bearer-two-lines")
FILE_SD = (None, "bad-port-entry")


def _write(tmp: Path, port: int, url: str, name: str | None, key: str | None,
           am: str | None, file_sd: str | None) -> Path:  # fmt: skip
    (tmp / "good").write_text("s3cret\n")
    (tmp / "two-lines").write_text("one\ntwo\n")
    target = [f"  - url: {url.format(port=port)}"]
    if name is not None:
        target.append(f"    name: {name if name.startswith(chr(34)) else repr(name)}")
    if key is not None:
        target.append(f"    api_key_file: {tmp / key}")
    lines = ["targets:", *target, f"listen_port: {free_port()}", f"database: {tmp / 'db'}"]
    if am is not None:
        lines += ["alertmanager:", f"  urls: [http://127.0.0.1:{port}]"]
        if am.startswith("basic"):
            secret = "good" if am != "basic-missing" else "missing"
            lines += ["  basic_auth:", "    username: ops", f"    password_file: {tmp / secret}"]
        if "bearer" in am:
            secret = "two-lines" if am == "bearer-two-lines" else "good"
            lines += [f"  bearer_token_file: {tmp / secret}"]
    if file_sd is not None:
        sd = tmp / "sd.json"
        sd.write_text('[{"targets": ["127.0.0.1:1", "127.0.0.1:99999"]}]')
        lines += ["file_sd:", f"  - files: [{sd}]"]
    path = tmp / "config.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(config: Path) -> tuple[int | None, str]:
    """`run`'s exit code (None: still serving after it answered /healthz) and its stderr."""
    command = [sys.executable, "-m", "sglang_tuner", "run", "--config", str(config)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    port = next(
        int(line.split(":")[1]) for line in config.read_text().splitlines()
        if line.startswith("listen_port")
    )  # fmt: skip
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return process.returncode, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return None, ""
            except httpx.HTTPError:
                time.sleep(0.1)
        return -1, "neither served nor exited"
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    url=st.sampled_from(TARGET_URLS), name=st.sampled_from(NAMES), key=st.sampled_from(KEYS),
    am=st.sampled_from(ALERTMANAGER), file_sd=st.sampled_from(FILE_SD),
)  # fmt: skip
def test_check_config_accepts_exactly_what_run_starts_with(url, name, key, am, file_sd, capsys):
    with tempfile.TemporaryDirectory() as tmp:
        config = _write(Path(tmp), free_port(), url, name, key, am, file_sd)
        capsys.readouterr()
        checked = main(["check-config", str(config)])
        said = capsys.readouterr().err
        code, err = _run(config)
    if checked == 0:
        assert code is None, f"check-config said OK, run: {code} {err}"
    else:
        assert checked == 2 and code == 2, (checked, code, err)
        first = said.strip().splitlines()[0]
        assert first in err, (said, err)  # the same message, from the same path

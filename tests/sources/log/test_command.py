"""A log that arrives on a pipe: a real command's output followed, restarted with back-off."""

import sys
import time
from pathlib import Path

from sglang_tuner.model import signals as s
from sglang_tuner.sources.log.command import LogCommand

DECODE = (
    "[2026-01-01 00:00:0{i}] Decode batch, #running-req: 40, #token: 9000, token usage: 0.30, "
    "cuda graph: True, gen throughput (token/s): 800.00, #queue-req: 7"
)


def _writer(tmp_path: Path, lines: int, then: str = "exit") -> list[str]:
    """A stand-in for `journalctl -f`: prints SGLang lines, then exits or stays."""
    script = tmp_path / "writer.py"
    script.write_text(
        "import sys, time\n"
        f"for i in range({lines}):\n"
        f"    print({DECODE!r}.format(i=i), flush=True)\n"
        + ("time.sleep(60)\n" if then == "stay" else "")
    )
    return [sys.executable, str(script)]


def _poll_until(command: LogCommand, now: float, want: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        values = command.poll(now)
        if want in values:
            return values
        time.sleep(0.05)
    raise AssertionError(f"{want} never arrived")


def test_log_command_reads_a_running_commands_lines(tmp_path):
    command = LogCommand(_writer(tmp_path, 3, then="stay"))
    try:
        values = _poll_until(command, 0.0, s.NUM_QUEUE_REQS)
        assert values[s.NUM_QUEUE_REQS] == 7 and values[s.TOKEN_USAGE] == 0.30
        assert command.process is not None and command.process.poll() is None
    finally:
        command.close()
    assert command.process is None


def test_log_command_restarts_an_exited_command_with_back_off(tmp_path):
    command = LogCommand(_writer(tmp_path, 1))
    try:
        _poll_until(command, 0.0, s.NUM_QUEUE_REQS)
        deadline = time.monotonic() + 10
        while command.restarts == 0 and time.monotonic() < deadline:
            command.poll(0.5)
            time.sleep(0.05)
        assert command.restarts == 1 and command.process is None
        command.poll(0.9)  # the first back-off is 1 s of the loop's time
        assert command.process is None
        _poll_until(command, 1.6, s.NUM_QUEUE_REQS)  # started again, read again
    finally:
        command.close()


def test_log_command_that_cannot_start_is_retried_later(tmp_path):
    command = LogCommand([str(tmp_path / "no-such-program")])
    first, second = command.poll(0.0), command.poll(0.5)  # nothing read, no exception
    assert s.NUM_QUEUE_REQS not in first and s.NUM_QUEUE_REQS not in second
    assert command.process is None
    command.close()

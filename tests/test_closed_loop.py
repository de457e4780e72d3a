"""The closed loop (bench/closed_loop.py): the daemon advises, the advice is applied, it helps."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import closed_loop  # noqa: E402


def test_an_oom_crash_loop_is_fixed_in_one_applied_change_the_daemon_judges_helped():
    run = asyncio.run(closed_loop.run_one("p", "prefill_oom", "0.5.23", {}, 3600.0))
    assert [c.rule for c in run.changes] == ["prefill_oom"]
    (change,) = run.changes
    assert change.flags == {"--chunked-prefill-size": "4096"}
    assert change.before.restarts > 0 and change.after.restarts == 0  # the crashes stop
    assert change.after.gen_throughput > change.before.gen_throughput
    assert change.verdict == "helped" and change.attributed == "prefill_oom"
    assert run.still_advised == []  # no warning or critical advice left


def test_a_healthy_server_gets_no_flag_advice_in_the_loop():
    run = asyncio.run(closed_loop.run_one("h", "healthy", "0.5.23", {}, 1800.0))
    assert run.changes == [] and run.still_advised == [] and run.info_advice == []

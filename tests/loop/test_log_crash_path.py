"""The daemon's live log path: a crash the log follower reads reaches the rules in words, and
the server's advice names it (the loop hands the follower's reports to the target state)."""

from pathlib import Path


async def test_a_crash_in_the_followed_log_is_named_in_the_servers_advice(tmp_path: Path):
    from sglang_tuner.config.settings import Settings
    from sglang_tuner.config.target_settings import TargetSettings
    from sglang_tuner.loop.tuner import Tuner

    log = tmp_path / "sglang.log"
    log.write_text("")
    target = TargetSettings(url="http://127.0.0.1:9", name="gpu-a", log_file=log)  # down
    settings = Settings(
        targets=[target],
        database=tmp_path / "tuner.db",
        scrape_interval_seconds=5,
        evaluation_interval_seconds=5,
    )
    clock = [1000.0]
    tuner = Tuner(settings, clock=lambda: clock[0])
    await tuner.start(scheduled=False)
    try:
        await tuner.tick()
        with log.open("a") as handle:
            handle.write(
                "[2026-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent "
                'call last):\n  File "/sgl/srt/managers/scheduler.py", line 1, in '
                "event_loop_normal\nRuntimeError: NCCL error: unhandled system error\n"
            )
        for _ in range(6):
            clock[0] += 5.0
            await tuner.tick()
    finally:
        await tuner.stop()
    server = tuner.watch.servers["gpu-a"]
    assert [r.kind for r in server.state.crash_reports] == ["driver"]
    assert server.plan is not None and server.plan.next is not None
    step = server.plan.next
    assert step.rule == "crash_diagnosed" and step.action.flag is None
    assert step.action.text.startswith("not a tuning problem, NCCL/driver")

"""One scrape loop per target: on the beat, a late scrape caught up at once, a very late one
coalesced."""

import asyncio

from sglang_tuner.loop.schedule import ScrapeLoops, offset

INTERVAL = 0.4


async def _scrape_times(slow: dict[int, float], scrapes: int) -> list[float]:
    """Run one loop until it has scraped `scrapes` times; scrape number k takes `slow[k]` s."""
    loop = asyncio.get_running_loop()
    times: list[float] = []
    done = asyncio.Event()

    async def scrape(_name: str) -> None:
        times.append(loop.time())
        await asyncio.sleep(slow.get(len(times), 0.0))
        if len(times) >= scrapes:
            done.set()

    started = asyncio.Event()
    started.set()
    loops = ScrapeLoops(scrape, started)
    loops.add("t", INTERVAL)
    await asyncio.wait_for(done.wait(), 10)
    await loops.stop()
    return times


async def test_scrapes_keep_the_interval() -> None:
    times = await _scrape_times({}, 4)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert all(abs(g - INTERVAL) < 0.1 for g in gaps), gaps


async def test_a_scrape_a_little_late_is_made_at_once_and_the_beat_kept() -> None:
    # the second scrape answers 1.2 intervals after it began: its successor runs right after,
    # not an interval later (that would be a missed scrape), and the third is back on the beat
    times = await _scrape_times({2: INTERVAL * 1.2}, 4)
    assert times[2] - times[1] < INTERVAL * 1.4, times
    assert abs((times[3] - times[0]) - 3 * INTERVAL) < 0.1, times


async def test_a_very_late_scrape_is_coalesced_not_caught_up_in_a_burst() -> None:
    # 2.6 intervals late: one scrape on the next beat, not three back to back
    times = await _scrape_times({2: INTERVAL * 2.6}, 4)
    assert times[2] - times[1] > INTERVAL * 2.9, times
    assert times[3] - times[2] > INTERVAL * 0.8, times


def test_offsets_spread_targets_over_the_interval() -> None:
    spread = {int(offset(f"t{i}", 10.0)) for i in range(200)}
    assert len(spread) == 10  # every second of the interval has a target starting in it
    assert all(0 <= offset(f"t{i}", 10.0) < 10.0 for i in range(200))


async def test_jobs_shutdown_lets_a_running_job_finish_without_an_error_logged(caplog):
    import logging
    import time

    from sglang_tuner.loop.schedule import Jobs

    finished: list[float] = []

    async def work() -> None:
        await asyncio.sleep(0.05)  # always in progress at a job every millisecond
        finished.append(time.monotonic())

    jobs = Jobs(time.time)
    jobs.every("work", 0.001, work, 0.0)
    jobs.start()
    await asyncio.sleep(0.3)
    with caplog.at_level(logging.ERROR):
        await jobs.shutdown()
    assert finished  # runs completed
    assert not [r for r in caplog.records if "Error running job" in r.getMessage()]


async def test_a_target_whose_scrape_raises_is_logged_counted_and_tried_again(caplog):
    # "bad" raises on every scrape (a bug in its poll, log or config); "good" is never held up,
    # and "bad" is tried again with back-off rather than dropped for good
    import logging

    loop = asyncio.get_running_loop()
    calls: dict[str, list[float]] = {"bad": [], "good": []}

    async def scrape(name: str) -> None:
        calls[name].append(loop.time())
        if name == "bad":
            raise ValueError(f"line of {20_000} bytes http://u:pw-77@h/")

    started = asyncio.Event()
    started.set()
    loops = ScrapeLoops(scrape, started)
    with caplog.at_level(logging.INFO, logger="sglang_tuner.loop"):
        loops.add("bad", 0.1)
        loops.add("good", 0.1)
        await asyncio.sleep(1.0)
        await loops.stop()
    assert len(calls["good"]) >= 8
    assert 3 <= len(calls["bad"]) < len(calls["good"])  # backing off: 0.1, 0.2, 0.4 s ...
    failures = loops.failures()["bad"]
    assert failures.total == len(calls["bad"]) and failures.in_a_row == failures.total
    assert failures.last_error.startswith("ValueError: line of 20000 bytes")
    assert "pw-77" not in failures.last_error
    assert loops.failing() == ["bad"] and "good" not in loops.failures()
    logged = [r.getMessage() for r in caplog.records if "bad" in r.getMessage()]
    assert logged and all("pw-77" not in m for m in logged)
    assert sum("Traceback" in m for m in logged) == 1  # one traceback a streak


async def test_a_failing_target_that_recovers_is_scraped_on_its_beat_again():
    loop = asyncio.get_running_loop()
    times: list[float] = []

    async def scrape(_name: str) -> None:
        times.append(loop.time())
        if len(times) <= 2:
            raise OSError("a FIFO with nobody writing")

    started = asyncio.Event()
    started.set()
    loops = ScrapeLoops(scrape, started)
    loops.add("t", 0.1)
    await asyncio.sleep(1.2)
    await loops.stop()
    assert loops.failures()["t"].total == 2 and loops.failing() == []
    gaps = [b - a for a, b in zip(times[3:], times[4:], strict=False)]
    assert gaps and all(g < 0.2 for g in gaps), gaps


async def test_jobs_keep_their_cadence_across_wall_clock_steps_logged_once_each(caplog):
    # the wall clock jumps an hour ahead, then an hour and a minute back: the job runs every
    # 0.05 s throughout (it is timed on the monotonic clock), and each step is said once
    import logging
    import time

    from sglang_tuner.loop.schedule import Jobs

    step = [0.0]
    runs: list[float] = []

    async def work() -> None:
        runs.append(time.monotonic())
        if len(runs) == 5:
            step[0] = 3600.0
        if len(runs) == 10:
            step[0] = -60.0

    jobs = Jobs(lambda: time.time() + step[0])
    jobs.every("evaluate", 0.05, work, 0.0)
    with caplog.at_level(logging.WARNING, logger="sglang_tuner.loop"):
        jobs.start()
        await asyncio.sleep(0.8)
        await jobs.shutdown()
    assert len(runs) >= 12
    gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
    assert max(gaps) < 0.15, gaps
    said = [r.getMessage() for r in caplog.records if "wall clock stepped" in r.getMessage()]
    assert len(said) == 2 and "+3600 s" in said[0] and "-3660 s" in said[1], said
    assert jobs.clock_watch.steps == 2


async def test_a_job_that_raises_is_logged_and_runs_again(caplog):
    import logging
    import time

    from sglang_tuner.loop.schedule import Jobs

    runs: list[int] = []

    async def work() -> None:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("disk full")

    jobs = Jobs(time.time)
    jobs.every("persist", 0.05, work, 0.0)
    with caplog.at_level(logging.ERROR, logger="sglang_tuner.loop"):
        jobs.start()
        await asyncio.sleep(0.5)
        await jobs.shutdown()
    assert len(runs) >= 3
    assert any("job persist failed" in r.getMessage() for r in caplog.records)

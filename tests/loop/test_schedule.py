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

"""The reload limiter: a burst, then one a second; never two reloads at once."""

import asyncio

from sglang_tuner.api.lifecycle import RELOAD_BURST, ReloadLimiter


def test_a_burst_of_reloads_then_a_wait():
    limiter = ReloadLimiter()
    assert [limiter.take() for _ in range(RELOAD_BURST)] == [0.0] * RELOAD_BURST
    assert limiter.take() >= 1.0  # the next one waits, and says how long


async def test_no_reload_starts_while_one_runs():
    limiter = ReloadLimiter()
    async with limiter.busy:
        assert limiter.take() >= 1.0
    assert limiter.take() == 0.0
    await asyncio.sleep(0)

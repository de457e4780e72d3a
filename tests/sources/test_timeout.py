"""`timeout` (sources/timeout.py): the built-in TimeoutError after the delay, on every Python."""

import asyncio

import pytest
from sglang_tuner.sources.timeout import timeout


def test_a_block_past_its_delay_raises_the_builtin_timeout_error():
    async def slow() -> None:
        async with timeout(0.05):
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        asyncio.run(slow())


def test_a_block_within_its_delay_or_without_one_finishes():
    async def quick() -> str:
        async with timeout(1.0):
            await asyncio.sleep(0)
        async with timeout(None):
            await asyncio.sleep(0)
        return "done"

    assert asyncio.run(quick()) == "done"

"""`timeout(seconds)`: `asyncio.timeout` from Python 3.11; on 3.10 the `async-timeout` package,
raising the built-in `TimeoutError` as 3.11 does (3.10's `asyncio.TimeoutError` is another class).
"""

import sys

if sys.version_info >= (3, 11):
    from asyncio import timeout
else:
    import asyncio
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    import async_timeout

    @asynccontextmanager
    async def timeout(delay: float | None) -> AsyncIterator[None]:
        """Cancel the block after `delay` seconds (None: never) and raise TimeoutError."""
        try:
            async with async_timeout.timeout(delay):
                yield
        except asyncio.TimeoutError as exc:
            raise TimeoutError from exc


__all__ = ["timeout"]

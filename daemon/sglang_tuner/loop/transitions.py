"""Log lines for targets going up and down: one per change, and a sum past a burst.

A rack going dark, or a file_sd list of hosts long gone, changes thousands of targets at once;
one line each would bury everything else in the log. Past `burst` lines in a period the changes
are counted instead, and the period ends with one line summing them up.
"""

import logging
from collections import Counter

from sglang_tuner.model.scrape import ScrapeResult
from sglang_tuner.model.secrets import redact_url_secrets
from sglang_tuner.target_state import TargetState

logger = logging.getLogger(__name__)
LOG_BURST = 20  # target lines per period before the rest are summed up
PERIOD_SECONDS = 60.0


class TransitionLog:
    """Logs each target going up or down (or failing for a new reason), at most `burst` lines a
    period; past that it counts them and logs their sum once the period is over."""

    def __init__(self, burst: int = LOG_BURST, period_seconds: float = PERIOD_SECONDS) -> None:
        self._burst, self._period = burst, period_seconds
        self._started: float | None = None
        self._lines = 0
        self._held: Counter[str] = Counter()  # "up", or the reason a target went down

    def record(self, target: TargetState, result: ScrapeResult, now: float) -> None:
        """Log the change `result` makes to `target` (call before the target ingests it)."""
        before = target.last
        went_up = result.is_up and (before is None or not before.is_up)
        went_down = not result.is_up and (
            before is None or before.error_reason != result.error_reason
        )
        if not (went_up or went_down):
            return  # never a line per scrape
        self.flush(now)
        if self._lines >= self._burst:
            self._held["up" if went_up else result.error_reason or "unknown"] += 1
            return
        self._lines += 1
        if went_up:
            url = redact_url_secrets(target.spec.url)
            logger.info("target %s is up (%s)", target.name, url, extra={"target": target.name})
        else:
            fields = {"target": target.name, "reason": result.error_reason}
            logger.warning("target %s is down: %s", target.name, result.error, extra=fields)

    def flush(self, now: float) -> None:
        """Once the period is over: log the sum of the changes held back, start a new one."""
        if self._started is None:
            self._started = now
        if now - self._started < self._period:
            return
        if self._held:
            up = self._held.pop("up", 0)
            down = ", ".join(f"{n} {reason}" for reason, n in self._held.most_common())
            logger.warning(
                "%d more target(s) changed in the last %.0f s, not logged one by one: %d up, "
                "%d down (%s); GET /targets lists every target with its state",
                up + self._held.total(), now - self._started, up, self._held.total(), down or "-",
            )  # fmt: skip
        self._started, self._lines = now, 0
        self._held.clear()

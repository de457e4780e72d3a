"""The tuning-rule catalogue. Rules are listed here explicitly, never discovered."""

from .base import Rule
from .queue import QUEUE_EMPTY, QUEUE_TOO_LONG
from .scheduling import RETRACTIONS_FREQUENT, SCHEDULER_TOO_CONSERVATIVE

ALL_RULES: tuple[Rule, ...] = (
    QUEUE_EMPTY,
    QUEUE_TOO_LONG,
    SCHEDULER_TOO_CONSERVATIVE,
    RETRACTIONS_FREQUENT,
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in ALL_RULES}

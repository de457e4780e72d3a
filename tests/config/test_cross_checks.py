"""`CrossChecked` (config/cross_checks.py): cross-field checks listed beside field problems."""

import pytest
from pydantic import Field, ValidationError, model_validator
from sglang_tuner.config.cross_checks import CrossChecked


class Scrape(CrossChecked):
    interval: float = Field(5.0, gt=0)
    timeout: float = Field(3.0, gt=0)
    name: str = "x"

    @model_validator(mode="after")
    def timeout_within_interval(self) -> "Scrape":
        if self.timeout > self.interval:
            raise ValueError("timeout above interval")
        return self


def _problems(**data: object) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        Scrape.model_validate(data)
    return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in caught.value.errors()]


def test_a_failing_cross_check_is_listed_beside_an_invalid_field():
    problems = _problems(interval=5, timeout=9, name=3)
    assert problems == [
        "name: Input should be a valid string",
        ": Value error, timeout above interval",
    ]


def test_a_cross_check_reading_an_invalid_field_waits_until_it_is_fixed():
    assert _problems(interval=-1, timeout=9) == ["interval: Input should be greater than 0"]


def test_a_valid_model_passes_and_a_lone_cross_problem_is_reported():
    assert Scrape.model_validate({"interval": 5, "timeout": 2}).timeout == 2
    assert _problems(interval=1, timeout=2) == [": Value error, timeout above interval"]

"""`StrEnum` (model/strenum.py): members read as their values on every supported Python."""

from sglang_tuner.model.strenum import StrEnum


class Color(StrEnum):
    RED = "red"


def test_a_member_prints_formats_and_compares_as_its_value():
    assert str(Color.RED) == "red" and f"{Color.RED}" == "red" and f"{Color.RED:>5}" == "  red"
    assert Color.RED == "red" and Color("red") is Color.RED

"""The API's shared helpers: answers serialized in pieces say exactly what one call would."""

import json

from pydantic import BaseModel, Field
from sglang_tuner.api_context import json_in_pieces


class Item(BaseModel):
    name: str
    tags: dict[str, str] = Field(default_factory=dict)
    ratio: float | None = None


class Answer(BaseModel):
    count: int
    data: list[Item]
    more: list[Item] = Field(default_factory=list)
    words: list[str] = Field(default_factory=list)


class OnlyLists(BaseModel):
    data: list[Item]


def test_json_in_pieces_is_the_same_json_as_one_call():
    items = [Item(name=f'gpu-"{i}"', tags={"a\\b": "é\n"}, ratio=i / 3) for i in range(50)]
    for model in (
        Answer(count=50, data=items, more=items[:3], words=["x", "y"]),
        Answer(count=0, data=[]),
        OnlyLists(data=items[:2]),
        OnlyLists(data=[]),
    ):
        pieces, whole = json.loads(json_in_pieces(model)), json.loads(model.model_dump_json())
        assert pieces == whole and list(pieces) == list(whole)  # same fields, same order

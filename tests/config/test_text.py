"""Text from the operator's files: surrogate pairs (as json.dumps escapes them) joined."""

import json

import pytest
import yaml
from sglang_tuner.config.text import joined_surrogates


def test_joined_surrogates_gives_the_character_json_dumps_escaped():
    doc = yaml.safe_load(json.dumps({"name": "gpu 🚀", "labels": ["é", "ok"]}))
    assert joined_surrogates(doc) == {"name": "gpu 🚀", "labels": ["é", "ok"]}
    "".join(joined_surrogates(doc)["name"]).encode("utf-8")  # storable, sendable


def test_joined_surrogates_refuses_a_lone_half_and_says_where():
    doc = yaml.safe_load('{"targets": [{"name": "gpu \\ud83d"}]}')
    with pytest.raises(ValueError, match=r"targets\[0\]\.name: .* lone UTF-16 surrogate"):
        joined_surrogates(doc)

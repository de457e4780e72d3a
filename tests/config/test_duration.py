"""Durations: Prometheus's spelling (`15s`, `5m`, `1h30m`) or seconds, in every duration setting."""

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError
from sglang_tuner.config.duration import Duration, parse_duration
from sglang_tuner.config.loading import load_settings
from sglang_tuner.config.problems import ConfigError
from sglang_tuner.config.settings import Settings

# Values for the required fields met on the way to a nested duration setting.
REQUIRED = {"url": "http://127.0.0.1:30000", "files": ["sd.json"]}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("1y", 365 * 86400.0),
        ("1d2h3m4s5ms", 93784.005),
        ("0s", 0.0),
        (" 10s ", 10.0),
        ("90", 90.0),
        ("1.5", 1.5),
        (2.5, 2.5),
        (30, 30.0),
    ],
)
def test_duration_prometheus_spellings_and_plain_seconds_are_seconds(text, seconds):
    assert TypeAdapter(Duration).validate_python(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5 minutes", "", "1m1h", "1.5h", "5M", "s", "-5m", "10 s"])
def test_duration_anything_else_says_how_to_write_one(text):
    with pytest.raises(ValidationError) as info:
        TypeAdapter(Duration).validate_python(text)
    (error,) = info.value.errors()
    assert error["msg"] == f'"{text}" is not a duration (use e.g. 15s, 5m, 1h or seconds)'


def test_load_settings_bad_duration_names_the_setting_and_the_spelling(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text('scrape_interval_seconds: "5 minutes"\n')
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == [
        'scrape_interval_seconds: "5 minutes" is not a duration (use e.g. 15s, 5m, 1h or seconds)'
    ]


def test_load_settings_a_duration_keeps_the_fields_bounds(tmp_path):
    path = tmp_path / "config.yml"
    path.write_text("window_seconds: 0s\nhold_for_seconds: 0s\n")
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == ["window_seconds: Input should be greater than 0"]


def test_load_settings_durations_from_the_environment(monkeypatch):
    monkeypatch.setenv("SGLANG_TUNER_SCRAPE_INTERVAL_SECONDS", "1m")
    monkeypatch.setenv("SGLANG_TUNER_ALERTMANAGER__RESEND_DELAY_SECONDS", "2m30s")
    settings = load_settings(None)
    assert settings.scrape_interval_seconds == 60.0
    assert settings.alertmanager.resend_delay_seconds == 150.0


def _is_duration(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        if any(getattr(m, "func", None) is parse_duration for m in metadata):
            return True
        return _is_duration(inner)
    is_union = get_origin(annotation) in (Union, UnionType)
    return is_union and any(map(_is_duration, get_args(annotation)))


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def _seconds_fields(model: type[BaseModel], where: tuple = ()) -> list[tuple]:
    """(path, default, annotation) of every `*_seconds` setting, nested ones included."""
    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if name.endswith("_seconds"):
            found.append(((*where, name), field.default, field.rebuild_annotation()))
        step = {list: (0,), dict: ("queue_empty",)}.get(get_origin(annotation), ())
        for nested in _models(annotation):
            found += _seconds_fields(nested, (*where, name, *step))
    return found


SECONDS_FIELDS = _seconds_fields(Settings)


def _spelled(seconds: float) -> str:
    """`1h30m` for 5400: the Prometheus spelling of whole seconds."""
    left, out = int(seconds), ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        out += f"{count}{unit}" if count else ""
    return out or "0s"


def _setting(path: tuple, value: Any, model: type[BaseModel] = Settings) -> dict:
    """Settings giving `value` at `path`, with the fields each section on the way requires."""
    name, rest = path[0], path[1:]
    if not rest:
        return {name: value}
    annotation = model.model_fields[name].annotation
    (nested,) = _models(annotation)
    if get_origin(annotation) is list:
        return {name: [_section(nested, rest[1:], value)]}
    if get_origin(annotation) is dict:
        return {name: {rest[0]: _section(nested, rest[1:], value)}}
    return {name: _section(nested, rest, value)}


def _section(model: type[BaseModel], path: tuple, value: Any) -> dict:
    required = {n: REQUIRED[n] for n, f in model.model_fields.items() if f.is_required()}
    return {**required, **_setting(path, value, model)}


def _read(settings: Any, path: tuple) -> Any:
    for part in path:
        settings = settings[part] if isinstance(settings, list | dict) else getattr(settings, part)
    return settings


def test_seconds_fields_found_by_introspection_cover_every_section():
    sections = {path[0] for path, _, _ in SECONDS_FIELDS}
    assert {"scrape_interval_seconds", "rules", "alertmanager", "prometheus", "file_sd"} <= sections


@pytest.mark.parametrize(
    ("path", "default", "annotation"),
    SECONDS_FIELDS,
    ids=[".".join(map(str, path)) for path, _, _ in SECONDS_FIELDS],
)
def test_every_seconds_setting_is_a_duration_written_either_way(path, default, annotation):
    assert _is_duration(annotation), f"{path}: make it a Duration (config/duration.py)"
    # The default, spelled both ways, keeps the checks across fields (timeout < interval) true.
    seconds = default if isinstance(default, float) and default.is_integer() else 90.0
    assert _read(load_settings(None, _setting(path, _spelled(seconds))), path) == seconds
    assert _read(load_settings(None, _setting(path, seconds)), path) == seconds

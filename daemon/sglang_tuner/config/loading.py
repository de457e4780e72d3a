"""Settings loaded: the YAML file read, the environment and flags applied, every problem listed
at once (pydantic's, the rule overrides', the key files', the environment variables named). The
only module of the wing that reads files for the settings; the schema it fills (`settings.py`)
reads none."""

import ssl
from collections.abc import Mapping
from difflib import get_close_matches
from os import environ
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sglang_tuner.config.credentials import ssl_context
from sglang_tuner.config.key_files import read_key_file
from sglang_tuner.config.problems import (
    Catalogue,
    ConfigError,
    located_values,
    rule_override_problems,
    validation_problems,
    yaml_path,
)
from sglang_tuner.config.settings import (
    _YAML_DATA,
    AlertmanagerSettings,
    PrometheusSettings,
    Settings,
)
from sglang_tuner.config.text import bounded, joined_surrogates
from sglang_tuner.model.secrets import redact


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what a YAML error is, never the file's text: PyYAML quotes the offending line
    (a URL's password, an API key with it) under its message."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return "not valid YAML"
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    what = "; ".join(str(p) for p in (exc.context, exc.problem) if p)
    return redact(f"not valid YAML{where}: {what}")


def read_yaml(path: Path) -> dict[str, Any]:
    """The YAML file's mapping of settings; ConfigError when it cannot be read or is none."""
    try:
        data = joined_surrogates(bounded(yaml.safe_load(path.read_text())))
    except ValueError as exc:  # a lone UTF-16 surrogate: no text to store or serve
        raise ConfigError(str(path), [redact(str(exc))]) from None
    except OSError as exc:
        raise ConfigError(str(path), [f"cannot read: {exc.strerror}"]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), [yaml_problem(exc)]) from None
    if data is None:
        raise ConfigError(str(path), ["(top level): the file is empty (start from targets:)"])
    if not isinstance(data, dict):
        raise ConfigError(str(path), ["(top level): must be a mapping of settings"])
    return data


# Settings holding the path of a file with one secret line (`key_files.py`).
_SECRET_FILES = ("api_key_file", "password_file", "bearer_token_file")
_SERVICES = (("alertmanager", AlertmanagerSettings), ("prometheus", PrometheusSettings))


def secret_problems(given: Mapping[str, Any]) -> list[str]:
    """The key, password and token files the settings name, each readable and one line, and the
    environment variables they name (`*_env`), each set and not empty: read now, as `run` reads
    them at start. `given` is the settings as written when they are invalid, so these problems
    are listed beside every other one, not after them."""
    problems = []
    for loc, value in located_values(Settings, given):
        field, where = str(loc[-1]), yaml_path(loc)
        if field in _SECRET_FILES and isinstance(value, (str, Path)):
            try:
                read_key_file(Path(value))
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
        elif field.endswith("_env") and isinstance(value, str) and value and not environ.get(value):
            problems.append(f"{where}: environment variable {value} is unset or empty")
    return problems


def service_problems(given: Mapping[str, Any]) -> list[str]:
    """The services we call: one credential at most, TLS files that load (a service section
    that is itself invalid is left to its own problems)."""
    problems = []
    for name, model in _SERVICES:
        try:
            service = model.model_validate(given[name]) if given.get(name) is not None else None
        except ValidationError:
            continue
        if service is None:
            continue
        if service.basic_auth is not None and service.bearer_token_file is not None:
            problems.append(f"{name}: basic_auth and bearer_token_file are exclusive")
        try:
            ssl_context(service.tls)
        except (OSError, ssl.SSLError, ValueError) as exc:
            problems.append(f"{name}.tls: cannot load: {exc}")
    return problems


def load_settings(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    catalogue: Catalogue | None = None,
) -> Settings:
    """Settings from the YAML file, the environment and flag overrides; with a catalogue, rule
    ids and threshold names are checked too. Every problem at once, in one ConfigError."""
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    data = read_yaml(path) if path else {}
    token = _YAML_DATA.set(data)
    settings, problems = None, []
    try:
        settings = Settings(**flags)
    except ValidationError as exc:
        problems = validation_problems(exc, Settings)
    finally:
        _YAML_DATA.reset(token)
    # The files and variables named are read from the settings when valid (the environment's
    # and the flags' included), else from the file and flags as written.
    given = settings.model_dump() if settings is not None else {**data, **flags}
    problems += secret_problems(given) + service_problems(given)
    if catalogue is not None:
        rules = settings.rules if settings is not None else data.get("rules")
        problems += rule_override_problems(rules, catalogue)
    if settings is None or problems:
        raise ConfigError(str(path or "settings"), problems)
    return settings


# Variables of ours that are no setting: the config file's path (`run --config`'s default).
_OWN_VARIABLES = frozenset({"SGLANG_TUNER_CONFIG_FILE"})


def misspelt_variables(environ: Mapping[str, str]) -> list[str]:
    """SGLANG_TUNER_* variables that name no setting but come close to one (`did you mean
    ...?`): pydantic-settings ignores them, so a typo would silently change nothing. A variable
    close to none is left alone (it may hold a key for `api_key_env`)."""
    fields = [name.upper() for name in Settings.model_fields]
    sections = [  # the settings with keys of their own
        name.upper() for name, info in Settings.model_fields.items()
        if "Settings" in repr(info.annotation)
    ]  # fmt: skip
    said = []
    for variable in sorted(environ):
        if not variable.startswith("SGLANG_TUNER_") or variable in _OWN_VARIABLES:
            continue
        key = variable.removeprefix("SGLANG_TUNER_").split("__", 1)[0]
        if key in fields:
            continue
        nested = [f for f in sections if key.startswith(f"{f}_")]
        if nested:  # PROMETHEUS_URL for PROMETHEUS__URL
            meant = variable.replace(f"{nested[0]}_", f"{nested[0]}__", 1)
        else:
            close = get_close_matches(key, fields, n=1, cutoff=0.75)
            meant = variable.replace(key, close[0], 1) if close else ""
        if meant:
            said.append(f"{variable} is no setting (ignored); did you mean {meant}?")
    return said

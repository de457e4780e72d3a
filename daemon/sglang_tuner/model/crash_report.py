"""A crash said in words, as the log told it: the value type that carries a diagnosis from the
log reader (`sources/log/crash.py`) through the target state to the rules.

Signals are numbers; what a crash was (its class, kind, phase, last exception line, the flag a
configuration error names) is text, so it travels beside them, one report per crash.
"""

from dataclasses import dataclass

# The classes of `sources/log/messages/classes.py`, and the reader's own for what none knew.
CRASH, CONFIG_ERROR, NOT_TUNING, UNCLASSIFIED = (
    "crash",
    "config_error",
    "not_tuning",
    "unclassified",
)


@dataclass(frozen=True, slots=True)
class CrashReport:
    """One crash the log showed, at `ts` (the poll or sample that read it, Unix seconds).

    `cls`: crash (a tuning problem's crash kind), config_error (the server refused its flags),
    not_tuning (no flag fixes it: allocator_bug, toolchain, driver, model, request) or
    unclassified; `phase`: load, pool_sizing, capture, prefill, decode, serving, startup or
    unknown; `message`: the last exception line (else a CUDA error printed before the
    traceback); `flag`: the one a configuration error names; `workaround_flag` and
    `workaround_value`: the change SGLang's own message gave as the workaround, if it gave one."""

    ts: float
    cls: str
    kind: str
    phase: str
    message: str
    flag: str = ""
    source: str = ""  # what classified it: the catalogue, a generic family, the log reader
    frame: str = ""  # where its traceback ends ("file in function"), when no line says why
    # SGLang's own workaround printed with the crash ("To work around this error, add --X"):
    # the flag, and its value ("true" for a switch)
    workaround_flag: str = ""
    workaround_value: str = ""

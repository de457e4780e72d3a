"""Every real excerpt of the corpus (tests/fixtures/sglang/logs/corpus) read the same in the forms
a user hands it over in (`bench/paste_forms.FORMS`): behind a log tool's wrapper (docker
compose, `kubectl logs --timestamps`, journalctl's short and short-iso, docker's json-file
lines, Google Cloud Logging's printed entries, CRLF ends) and as a paste decorates it (quoted,
indented, numbered, interleaved with another process's lines, its newlines lost, cut at a
terminal's 120 columns; listed newest first, as log viewers and `journalctl -r` show it). Each
form is built from the excerpt itself, its wrapper's stamp from the line's own time where it
prints one, so the diagnosis must not move: the next change (rule, flag, value) and whether its
crash is named are the original's.

Not held: a paste of unprefixed lines whose newlines were lost (nothing marks where one line
ended), and cutting at the terminal's width an excerpt whose newlines were already lost (its
lines of a thousand characters come back in more pieces than a cut line is joined from), and
newest first, an excerpt with neither a traceback nor three distinct times (nothing in it tells
its first line from its last).
"""

import sys
from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.log_samples import log_samples

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from paste_forms import FORMS, NEWEST_FIRST, orderless, times  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "corpus"
ENTRIES = yaml.safe_load((CORPUS / "index.yaml").read_text())
SETTINGS = log_settings(Namespace(interval=None, window=300.0))
# a paste of lines without SGLang's prefix whose newlines were lost: nothing marks the ends
UNMARKED = {"dsv32-spec-prefill-2048-chunks-queue-2-no-prefix.log"}
# an excerpt whose newlines were already lost, cut again
RECUT = {"rtx5090-capture-failed-ptxas-sm120-newlines-lost.log"}
NOT_HELD = {"newlines lost": UNMARKED, "cut at 120 columns": RECUT}


def _diagnosis(name: str, lines: Sequence[str]) -> tuple[object, ...]:
    """The next change a replay gives (rule, flag, value) and whether its crash is named."""
    ev = replay(SETTINGS, TargetSpec(name, f"log:{name}"), log_samples(lines, 5.0))
    plan = ev.plans.get(name)
    step = plan.next if plan is not None else None
    if step is None:
        return (None,)
    evidence = " ".join(a.evidence for a in ev.advice if a.target == name and a.rule == step.rule)
    named = "unclassified crash" not in evidence
    return step.rule, step.action.flag, step.action.suggested, named


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_every_form_of_an_excerpt_gets_its_diagnosis(entry: dict[str, object]) -> None:
    name = str(entry["file"])
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").splitlines()
    want = _diagnosis(name, lines)
    stamps = times(lines)
    for form, build in FORMS.items():
        if name in NOT_HELD.get(form, set()) or (form in NEWEST_FIRST and orderless(lines)):
            continue
        got = _diagnosis(name, build(lines, stamps))
        assert got == want, f"{form}: {got} != {want}"


def test_a_traceback_whose_newlines_were_lost_names_the_pool_bug_it_printed() -> None:
    """SGLang's decode OOM with free tokens covering the request (an allocator bug), pasted on
    one line: the numbers after the message still make it the bug, not a pool to enlarge."""
    text = (
        "RuntimeError: Decode out of memory. Try to lower your batch size. Try to allocate 148 "
        "tokens. Avaliable tokens: 2048 self.token_to_kv_pool_allocator.available_size()=2048"
    )
    assert _diagnosis("paste", [text])[0] == "allocator_bug"
    assert _diagnosis("lines", text.replace(" Try to allocate", "\nTry to allocate").replace(
        " Avaliable", "\nAvaliable").splitlines())[0] == "allocator_bug"  # fmt: skip

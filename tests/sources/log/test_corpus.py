"""Real SGLang logs from public threads whose outcome is known (tests/fixtures/sglang/logs/corpus,
provenance in its index.yaml): each replayed as `check --log` replays it, the classification
and the next change held against what the thread found.

Two verdicts per excerpt: the next change is never one the thread shows to be harmful (every
excerpt must pass), and, where the thread names the fix, it is that change (the misses are
listed in `MISSES` with the reason, as strict xfails: a fix that makes one pass must move it).
"""

import sys
from argparse import Namespace
from pathlib import Path

import pytest
import yaml
from sglang_tuner.cli.check import log_settings
from sglang_tuner.loop.replay import replay
from sglang_tuner.model.advice import Action
from sglang_tuner.model.next_change import Step
from sglang_tuner.model.target_spec import TargetSpec
from sglang_tuner.sources.log.log_samples import log_samples

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from corpus_score import _same as same_move  # noqa: E402
from corpus_score import advised_move, wanted_moves  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs" / "corpus"
ENTRIES = yaml.safe_load((CORPUS / "index.yaml").read_text())
SETTINGS = log_settings(Namespace(interval=None, window=300.0))
CAPACITY_FIXES = {"kv_pool_exhausted", "decode_oom", "prefill_oom", "mem_fraction_too_high"}
# kind (from the thread) -> next changes that would be wrong for it
HARMFUL: dict[str, set[str]] = {
    "allocator_bug": CAPACITY_FIXES,
    "startup_cuda_oom": {"prefill_oom", "decode_oom", "kv_pool_exhausted"},
    "startup_not_enough_memory": CAPACITY_FIXES | {"cuda_graph_capture_oom"},
    "capture_failure_not_oom": {"cuda_graph_capture_oom", "mem_fraction_too_high"},
    "other_crash": CAPACITY_FIXES | {"startup_not_enough_memory", "cuda_graph_capture_oom"},
    "healthy": CAPACITY_FIXES | {"startup_not_enough_memory", "allocator_bug"},
    "not_a_tuning_problem": CAPACITY_FIXES | {"startup_not_enough_memory"},
}
# kind -> the next change the thread's fix means (None: no flag change is right)
RIGHT: dict[str, str | None] = {
    "allocator_bug": "allocator_bug",
    "startup_not_enough_memory": "startup_not_enough_memory",
    "startup_cuda_oom": None,
    "capture_failure_not_oom": None,
    "other_crash": None,
    "not_a_tuning_problem": None,
    "healthy": None,
    "prefill_oom": "prefill_oom",
    "decode_oom": "decode_oom",
    "cuda_graph_capture_oom": "cuda_graph_capture_oom",
}
# file -> why the next change is not yet the thread's
MISSES = {
    "overlap-retract-alloc-fail-tiny-pool-decode.log": "the excerpt holds the retract path's "
    "allocation failure without the numbers or a leak check",
    "qwen35-27b-fp8-sigquit-new-format-leak-crash.log": "the leak check's line is cut from the "
    "excerpt; only the sigquit remains",
    "v0.5.3post3-kv-leak-usage-creep-then-crash.log": "a slow leak (usage creeping up at a "
    "steady load) is not recognised yet; the crash line lies past the excerpt",
    "llama4-400k-input-prefill-oom-forward-extend.log": "the excerpt starts inside the traceback "
    "after the OOM line",
    "dsr1-h20-nextn-capture-fused-moe-oom-partial.log": "the capture OOM's message is cut from "
    "the excerpt",
    "v0.1-mistral7b-not-enough-memory-traceback-start.log": "only the first two lines of the "
    "traceback are in the excerpt; the 'Not enough memory' line is cut",
}


def _step(entry: dict[str, object]) -> Step | None:
    """The next change the replay gives."""
    name = str(entry["file"])
    lines = (CORPUS / name).read_text(encoding="utf-8", errors="replace").splitlines()
    ev = replay(SETTINGS, TargetSpec(name, f"log:{name}"), log_samples(lines, 5.0))
    plan = ev.plans.get(name)
    return plan.next if plan is not None else None


def _next(entry: dict[str, object]) -> tuple[str | None, str | None]:
    """(rule, flag) of the next change the replay gives."""
    step = _step(entry)
    return (step.rule, step.action.flag) if step is not None else (None, None)


def _moves_the_fix(entry: dict[str, object], action: Action) -> bool:
    """The action moves the thread's fix flag the fix's way, as `bench/corpus_score.py` scores
    a match (a value, or the way its text says where the value is unknown)."""
    said = {"flag": action.flag, "current": action.current, "suggested": action.suggested,
            "text": action.text}  # fmt: skip
    move = advised_move(said)
    return move is not None and any(same_move(move, w) for w in wanted_moves(entry))


def test_corpus_has_fifty_three_real_excerpts_with_provenance():
    assert len(ENTRIES) >= 53
    for entry in ENTRIES:
        assert (CORPUS / entry["file"]).is_file(), entry["file"]
        assert entry["source"] and entry["url"].startswith("https://"), entry["file"]


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e["file"])
def test_corpus_next_change_is_never_one_the_thread_shows_wrong(entry):
    rule, flag = _next(entry)
    if flag is not None and str(entry.get("fix_flag") or "").startswith(flag):
        return  # the very flag the thread changed (its direction: bench/corpus_score.py)
    assert rule not in HARMFUL.get(entry["kind"], set()), f"{entry['file']}: {rule}"


def _with_misses(entries: list[dict[str, object]]) -> list[object]:
    return [
        pytest.param(e, id=str(e["file"]), marks=pytest.mark.xfail(reason=why, strict=True))
        if (why := MISSES.get(str(e["file"])))
        else pytest.param(e, id=str(e["file"]))
        for e in entries
    ]


@pytest.mark.parametrize("entry", _with_misses([e for e in ENTRIES if e["kind"] in RIGHT]))
def test_corpus_next_change_is_the_threads_fix(entry):
    rule, flag = _next(entry)
    want = RIGHT[entry["kind"]]
    if want is None:  # no flag, or the very flag the thread's fix names (SGLang's workaround)
        fix = str(entry.get("fix_flag") or "")
        assert flag is None or fix.startswith(flag), f"{entry['file']}: {rule} changes {flag}"
    else:  # the kind's own rule, or another that moves the thread's fix flag its way
        step = _step(entry)
        assert step is not None, f"{entry['file']}: no next change"
        assert step.rule == want or _moves_the_fix(entry, step.action), (
            f"{entry['file']}: {step.rule}"
        )

"""The real-log corpus and its holdout are indexed: every entry names a file that exists and
carries its provenance and outcome, every log file has an entry, no log is in both sets, and
the holdout is a third of all logs. Nothing here scores the logs (bench/corpus_score.py does).
"""

from pathlib import Path

import pytest
import yaml

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "sglang" / "logs"
SETS = ("corpus", "holdout", "fresh", "unseen", "unseen2")
REQUIRED = (
    "file",
    "source",
    "url",
    "comment",
    "sglang_version",
    "version_source",
    "version_family",
    "gpu",
    "model",
    "tp",
    "symptom",
    "kind",
    "resolution",
    "fix_flag",
    "notes",
    "lines",
)
FAMILIES = {"<=0.3", "0.4.x", "0.5.0-0.5.8", "0.5.9+"}


def _entries(name: str) -> list[dict[str, object]]:
    entries = yaml.safe_load((LOGS / name / "index.yaml").read_text(encoding="utf-8"))
    assert isinstance(entries, list) and entries, f"{name}/index.yaml holds no entries"
    return entries


@pytest.mark.parametrize("name", SETS)
def test_every_entry_names_an_existing_log_with_its_provenance(name):
    for entry in _entries(name):
        missing = [field for field in REQUIRED if field not in entry]
        assert not missing, f"{name}/{entry.get('file')}: missing {missing}"
        log = LOGS / name / str(entry["file"])
        assert log.is_file(), f"{name}/index.yaml names {entry['file']}, which is not there"
        assert str(entry["url"]).startswith("https://"), entry["file"]
        assert entry["version_source"] in ("stated", "inferred"), entry["file"]
        assert entry["version_family"] in FAMILIES, entry["file"]
        text = log.read_text(encoding="utf-8", errors="replace")
        assert len(text.splitlines()) == entry["lines"], f"{entry['file']}: line count"


@pytest.mark.parametrize("name", SETS)
def test_every_log_file_has_one_entry(name):
    files = [str(entry["file"]) for entry in _entries(name)]
    assert len(files) == len(set(files)), f"{name}/index.yaml lists a file twice"
    on_disk = {p.name for p in (LOGS / name).glob("*.log")}
    assert on_disk == set(files), f"{name}: unindexed {on_disk - set(files)}"


@pytest.mark.parametrize("name", ("fresh", "unseen", "unseen2"))
def test_no_thread_of_a_scoring_set_is_in_a_set_drawn_before_it(name):
    drawn = {str(e["url"]) for e in _entries(name)}
    before = SETS[: SETS.index(name)]
    seen = {str(e["url"]) for other in before for e in _entries(other)}
    assert not drawn & seen, f"{name} threads already used: {sorted(drawn & seen)}"
    assert len(drawn) == len(_entries(name)), f"{name}/index.yaml uses a thread twice"


def test_no_log_or_thread_is_in_both_sets_and_the_holdout_is_a_third():
    corpus, holdout = _entries("corpus"), _entries("holdout")
    files = {str(e["file"]) for e in corpus} & {str(e["file"]) for e in holdout}
    assert not files, f"in both sets: {sorted(files)}"
    threads = {str(e["url"]) for e in corpus} & {str(e["url"]) for e in holdout}
    assert not threads, f"threads in both sets: {sorted(threads)}"
    assert len(holdout) == round((len(corpus) + len(holdout)) / 3), (len(corpus), len(holdout))
    assert "never read" in (LOGS / "holdout" / "README.md").read_text(encoding="utf-8").lower()

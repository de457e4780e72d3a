"""The fleet's history read at once: one `query_range` per query for every server, its steps
(the end included), its columns, and why there is none."""

import math
from array import array

from sglang_tuner.config.settings import PrometheusSettings, ShardSettings
from sglang_tuner.model import signals as s
from sglang_tuner.sources.prometheus.promql import UP
from sglang_tuner.sources.prometheus.range_history import History, history_steps
from sglang_tuner.sources.prometheus.source import PrometheusSource

from tests.prometheus_process import FakeQueryAPI, matrix, serve_api

NOW = 1_795_000_000.0


def _labels(i: int) -> dict[str, str]:
    return {"instance": f"10.0.0.{i}:30000", "job": "sglang"}


def _source(api: FakeQueryAPI) -> PrometheusSource:
    source = PrometheusSource(PrometheusSettings(url=api.url), ShardSettings(), 30.0)
    api.names = {q.expr: q.name for q in source.queries}
    return source


def test_history_steps_cover_the_span_up_to_the_end_included():
    assert history_steps(NOW, 120.0, 30.0) == (NOW - 90.0, 4)
    assert history_steps(NOW, 100.0, 30.0) == (NOW - 90.0, 4)  # a partial step counts
    assert history_steps(NOW, 1.0, 30.0) == (NOW, 1)


async def test_history_asks_each_query_once_for_the_whole_fleet_and_lays_out_columns():
    api = FakeQueryAPI({})
    steps = [NOW - 60, NOW - 30, NOW]
    api.range_answers[s.NUM_QUEUE_REQS] = (200, matrix([
        (_labels(1), [(ts, float(k)) for k, ts in enumerate(steps)]),
        (_labels(2), [(steps[0], 5.0), (steps[2], 7.0)]),
    ]))  # fmt: skip
    with serve_api(api):
        source = _source(api)
        past = await source.history(NOW, 90.0, 30.0)
        rounds = list(source.replay(past))
        await source.aclose()
    assert past.error is None and (past.start, past.steps, past.end) == (NOW - 60, 3, NOW)
    assert past.queries == len(source.queries) - 1 == len(api.requests)  # `up` aside
    assert {(r["start"], r["end"], r["step"]) for r in api.requests} == {
        (f"{NOW - 60:.3f}", f"{NOW:.3f}", "30")
    }
    gap = past.columns["10.0.0.2:30000"][s.NUM_QUEUE_REQS]
    assert gap[0] == 5.0 and math.isnan(gap[1]) and gap[2] == 7.0
    assert [r.ts for r in rounds] == steps
    assert [sorted(r.results) for r in rounds][1] == ["10.0.0.1:30000"]  # a gap: no sample
    assert all(api.names.get(r["query"]) != UP for r in api.requests)


async def test_history_says_which_query_failed_and_why():
    api = FakeQueryAPI({})
    api.range_answers[s.TOKEN_USAGE] = (422, {"status": "error", "errorType": "execution",
                                              "error": "too many samples"})  # fmt: skip
    with serve_api(api):
        source = _source(api)
        past = await source.history(NOW, 300.0, 30.0)
        await source.aclose()
    assert past.columns == {} and past.error is not None
    assert s.TOKEN_USAGE in past.error and "too many samples" in past.error


def test_history_spans_count_each_targets_samples_from_its_first():
    nan = float("nan")
    columns = {
        "old": {"a": array("d", [1.0, 2.0, 3.0, 4.0])},
        "new": {"a": array("d", [nan, nan, 3.0, 4.0]), "b": array("d", [nan, nan, nan, 1.0])},
        "none": {"a": array("d", [nan] * 4)},
    }
    past = History(start=0.0, step=15.0, steps=4, columns=columns)
    assert past.spans() == {"old": 60.0, "new": 30.0}

"""MetricsPage: one render per published evaluation, live process metrics, spliced gzip."""

import gzip
import shutil
import subprocess
import threading
import zlib

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sglang_tuner.evaluation import Evaluation, TargetStatus, TunerState
from sglang_tuner.exporter.collector import TunerCollector
from sglang_tuner.exporter.page import MAX_RENDER_SHARE, MetricsPage, wants_gzip
from sglang_tuner.rules import ALL_RULES


def _evaluation(count: int, ts: float = 1_795_000_000.0) -> Evaluation:
    targets = {
        f"gpu-{i}": TargetStatus(
            f"gpu-{i}", f"http://10.0.0.{i % 250}:30000", "offline", up=i % 3 != 0,
            scrapes_total=i, failures_by_reason={"timeout": i % 5},
            labels={"rack": f'r"{i}\\'},  # a quote and a backslash to escape
            signals={"token_usage": 0.5, "num_queue_reqs": float(i)},
        )
        for i in range(count)
    }  # fmt: skip
    return Evaluation(ts=ts, targets=targets, evaluations_total=3)


@pytest.fixture
def state() -> TunerState:
    return TunerState(_evaluation(50))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def page(state: TunerState, clock: Clock) -> MetricsPage:
    return MetricsPage(TunerCollector(ALL_RULES), state.latest, clock=clock)


def _ours(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("sglang_tuner_")]


def test_the_evaluation_is_rendered_once_however_often_it_is_read(
    state: TunerState, page: MetricsPage, clock: Clock
) -> None:
    first = page.body()
    for _ in range(5):
        assert _ours(page.body().decode()) == _ours(first.decode())
        page.body(gzip=True)
    assert page.renders_total == 1
    clock.now += 60
    state.publish(_evaluation(49, ts=1_795_000_005.0))
    assert 'target="gpu-49"' not in page.body().decode()
    assert page.renders_total == 2


def test_a_new_evaluation_waits_until_rendering_took_a_tenth_of_the_time(
    state: TunerState, clock: Clock
) -> None:
    """Rendering holds the interpreter: right after a render, a newer evaluation is served
    only once the last render's cost is at most MAX_RENDER_SHARE of the time since."""
    state.publish(_evaluation(3_000))
    page = MetricsPage(TunerCollector(ALL_RULES), state.latest, clock=clock)
    page.body()
    cost = page.render_seconds
    assert cost > 0
    state.publish(_evaluation(2_999, ts=1_795_000_005.0))
    clock.now += cost * (1 / MAX_RENDER_SHARE - 1) * 0.5
    assert 'target="gpu-2999"' in page.body().decode()  # the previous page, still
    clock.now += cost * (1 / MAX_RENDER_SHARE - 1)
    assert 'target="gpu-2999"' not in page.body().decode()
    assert page.renders_total == 2


def test_scrapers_asking_together_share_one_render(state: TunerState, page: MetricsPage) -> None:
    state.publish(_evaluation(2_000))
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(page.body())) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert page.renders_total == 1
    assert len({len(_ours(b.decode())) for b in bodies}) == 1


def test_process_metrics_are_live_on_every_read(page: MetricsPage) -> None:
    def cpu(body: bytes) -> float:
        families = text_string_to_metric_families(body.decode())
        return next(
            s.value for f in families for s in f.samples if s.name == "process_cpu_seconds_total"
        )

    before = cpu(page.body())
    assert sum(range(5_000_000)) > 0  # some CPU: clock ticks are 10 ms
    assert cpu(page.body()) > before
    assert page.renders_total == 1


def test_gzip_body_is_one_stream_every_reader_inflates_to_the_page(page: MetricsPage) -> None:
    plain = page.body()
    zipped = page.body(gzip=True)
    assert zipped[:2] == b"\x1f\x8b"
    assert len(zipped) < len(plain) / 5
    inflated = gzip.decompress(zipped)  # checks the CRC-32 and the length in the trailer
    assert _ours(inflated.decode()) == _ours(plain.decode())
    reader = zlib.decompressobj(16 + zlib.MAX_WBITS)  # what httpx and most clients use
    assert reader.decompress(zipped) == inflated
    assert reader.eof and reader.unused_data == b""  # one member: nothing left behind
    assert list(text_string_to_metric_families(inflated.decode()))


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_the_page_with_process_metrics_passes_promtool(page: MetricsPage) -> None:
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=gzip.decompress(page.body(gzip=True)),
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("deflate, GZIP;q=0.5", True),
        ("*", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0", False),
        ("identity", False),
        ("", False),
        ("gzip;q=abc", False),
    ],
)
def test_accept_encoding_is_read_as_http_says(header: str, expected: bool) -> None:
    assert wants_gzip(header) is expected

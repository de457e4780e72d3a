"""The queue in front of the batch (predict/queueing.py): TTFT p99 from arrival and service
rates, fitted on today's window."""

import math

import pytest
from helpers import window_from
from sglang_tuner.predict.queueing import (
    UNBOUNDED,
    Queue,
    erlang_c,
    erlang_c_wait,
    fit_queue,
    held_steady,
    pooled_p99,
)

# 20 requests/s on a rank running 100 with 50 waiting, TTFT p99 6 s
CLOSED = Queue(arrivals=20.0, batch=100.0, waiting=50.0, ttft_p99=6.0, closed=True)
OPEN = Queue(arrivals=20.0, batch=100.0, waiting=0.0, ttft_p99=1.5, closed=False)


def test_todays_ttft_p99_is_reproduced_at_todays_batch_and_rate():
    for queue in (CLOSED, OPEN):
        assert queue.ttft_p99_at(queue.batch, 1.0) == queue.ttft_p99
        assert queue.ttft_change(queue.batch, 1.0) == 0.0


def test_a_closed_loop_waits_its_population_over_the_new_capacity():
    # 150 in the server; capped at 30 slots completing at half today's rate: 120 wait their
    # turn at 10 requests/s, 12 s; today's 2.5 s wait (50 at 20/s) leaves 3.5 s of residual
    assert CLOSED.wait(30.0, 0.5) == 12.0
    assert CLOSED.ttft_p99_at(30.0, 0.5) == 12.0 + 3.5
    # room for all 150: nobody waits, the residual is left
    assert CLOSED.ttft_p99_at(150.0, 1.2) == 3.5


def test_a_closed_loop_capped_by_slots_waits_for_the_kth_departure_not_todays_bunching():
    # 1,420 clients on a rank running 419 at 12.5 requests/s, TTFT p99 104 s of which the mean
    # wait (1,001 / 12.5 = 80 s) explains 80: the rest is admission bunched by the pool.
    # Capped at 177 slots, 1,243 wait, departures at 12.5 x 0.95: Gamma(1243)'s p99, plus
    # what TTFT holds past the wait today (p50 82 s - 80 s)
    bunched = Queue(arrivals=12.5, batch=419.0, waiting=1001.0, ttft_p99=104.0, closed=True,
                    ttft_p50=82.0)  # fmt: skip
    k, rate = 1420.0 - 177.0, 12.5 * 0.95
    expected = (k + 2.326 * math.sqrt(k)) / rate + (82.0 - 1001.0 / 12.5)
    assert math.isclose(bunched.ttft_p99_at(177.0, 0.95, slots=True), expected)
    assert 110 < expected < 115  # the simulator measured 113.5 s for this cap
    # the residual model carries today's 24 s of bunching over: 129 s
    assert bunched.ttft_p99_at(177.0, 0.95) > expected + 10
    # not a cap (the batch grows), or open arrivals: the slots change nothing
    assert bunched.ttft_p99_at(500.0, 1.1, slots=True) == bunched.ttft_p99_at(500.0, 1.1)
    assert OPEN.ttft_p99_at(50.0, 0.5, slots=True) == OPEN.ttft_p99_at(50.0, 0.5)


def test_a_paced_closed_loop_moves_as_its_queue_not_as_a_coarse_bucket_reads_it():
    # a 1B on an L4 behind 512 clients, 159 running and 353 waiting at 17.3 requests/s: the
    # mean TTFT (exact, from _sum / _count) 20.5 s is the mean wait; SGLang's bucket (20, 40]
    # reads its p99 as 39.8 s, the simulator's fine histogram 21.9 s
    paced = Queue(arrivals=17.33, batch=159.0, waiting=353.0, ttft_p99=39.8, closed=True,
                  ttft_p50=29.8, ttft_mean=20.5)  # fmt: skip
    now = (353 + 2.326 * math.sqrt(353)) / 17.33  # the wait for the 353rd departure: 22.8 s
    k = 512.0 - 97.0
    then = (k + 2.326 * math.sqrt(k)) / (17.33 * 0.82)
    prefill = 20.5 - 353 / 17.33
    change = paced.ttft_change(97.0, 0.82, slots=True, paced=True)
    assert math.isclose(change, (then + prefill) / (now + prefill) - 1)
    assert 0.35 < change < 0.50  # the simulator measured +35 % for this cap
    # against the bucket's reading, the same cap looked free
    assert paced.ttft_change(97.0, 0.82, slots=True) < 0.1
    # no request waiting after the change, open arrivals, or no mean: the p99 model
    assert paced.paced_change(600.0, 1.1) is None
    assert (
        Queue(17.33, 159.0, 353.0, 39.8, closed=False, ttft_mean=20.5).paced_change(97, 1) is None
    )
    assert Queue(17.33, 159.0, 353.0, 39.8, closed=True).paced_change(97.0, 0.82) is None


def test_a_slower_prefill_scales_ttft_where_nobody_waits_and_adds_its_share_where_some_do():
    # nobody waits: every request's time to its first token is its own prompt's passes (the
    # longest prompts make the tail), so a prefill twice as slow doubles TTFT p99 whole
    idle = Queue(arrivals=20.0, batch=100.0, waiting=0.0, ttft_p99=1.0, closed=True,
                 ttft_p50=0.4)  # fmt: skip
    assert idle.ttft_change(100.0, 1.0) == pytest.approx(0.0)
    assert idle.ttft_change(100.0, 1.0, prefill_scale=2.0) == pytest.approx(1.0)
    assert idle.ttft_change(100.0, 1.0, prefill_scale=0.6) == pytest.approx(-0.4)
    # some wait: the prefill is TTFT p50 less the mean wait, and only it grows; the wait's
    # spread does not (p50 1.0 s, mean wait 10 / 20 = 0.5 s: a prefill of 0.5 s on a p99 of 4 s)
    busy = Queue(arrivals=20.0, batch=100.0, waiting=10.0, ttft_p99=4.0, closed=True,
                 ttft_p50=1.0)  # fmt: skip
    assert busy.ttft_change(100.0, 1.0, prefill_scale=2.0) == pytest.approx(0.5 / 4.0)
    paced = Queue(arrivals=17.33, batch=159.0, waiting=353.0, ttft_p99=39.8, closed=True,
                  ttft_p50=20.0, ttft_mean=20.5)  # fmt: skip
    assert paced.ttft_change(97.0, 1.0, paced=True, prefill_scale=3.0) > paced.ttft_change(
        97.0, 1.0, paced=True
    )


def test_open_arrivals_wait_longer_as_they_near_the_capacity():
    # 50 slots completing 100 requests/s between them: the p99 wait grows toward saturation
    waits = [erlang_c_wait(rate, 2.0, 50) for rate in (60.0, 90.0, 97.0, 99.5)]
    assert waits == sorted(waits) and waits[0] < 0.01 < waits[-1]
    assert erlang_c(99.5, 2.0, 50) > erlang_c(60.0, 2.0, 50)


def test_open_arrivals_past_the_new_capacity_grow_without_bound():
    # fewer slots than today's arrivals keep busy, at a lower rate: the queue grows
    assert OPEN.wait(40.0, 0.7) == UNBOUNDED
    assert OPEN.ttft_change(40.0, 0.7) == UNBOUNDED
    # more capacity than arrivals: a figure, near today's
    assert math.isfinite(OPEN.ttft_change(150.0, 1.3))
    assert abs(OPEN.ttft_change(150.0, 1.3)) < 0.05


def test_erlang_c_holds_for_a_batch_of_thousands():
    assert 0 <= erlang_c(3900.0, 1.0, 4000) <= 1  # no factorial overflow


def test_a_steady_population_is_a_closed_loop_and_a_moving_one_is_not():
    steady = window_from(num_running_reqs="200x20", num_queue_reqs="312x20")
    moving = window_from(
        num_running_reqs="180 220 150 260 200 120 240 190 210 170",
        num_queue_reqs="0x10",
    )  # fmt: skip
    assert held_steady(steady) is True
    assert held_steady(moving) is False
    assert held_steady(window_from(request_rate="3x20")) is None


def test_the_queue_is_fitted_on_the_mean_request_rate_per_rank():
    view = window_from(
        request_rate="2 6 4 4", ttft_p99_seconds="8x4", num_running_reqs="400x4",
        num_queue_reqs="100x4",
    )  # fmt: skip
    queue = fit_queue(view, 2, 200.0, 50.0)
    assert queue is not None and queue.arrivals == 2.0 and queue.closed
    assert queue.ttft_p99 == 8.0


def test_without_a_request_rate_the_arrivals_come_from_littles_law_on_the_queue():
    view = window_from(queue_time_p50_seconds="5x4", ttft_p99_seconds="8x4")
    queue = fit_queue(view, 1, 100.0, 50.0)
    assert queue is not None and queue.arrivals == 10.0  # 50 waiting 5 s each
    assert fit_queue(window_from(ttft_p99_seconds="8x4"), 1, 100.0, 0.0) is None


def test_todays_p99_pools_the_intervals_so_a_bursty_tail_counts():
    same = window_from(request_rate="5x20", ttft_p50_seconds="1x20", ttft_p99_seconds="4x20")
    assert abs((pooled_p99(same) or 0) - 4.0) < 1e-6
    # one interval in ten at 40 s: the median interval says 4 s, the window's requests more
    bursty = window_from(
        request_rate="5x20", ttft_p50_seconds="1x18 20x2", ttft_p99_seconds="4x18 40x2"
    )  # fmt: skip
    p99 = pooled_p99(bursty)
    assert p99 is not None and 20 < p99 < 40
    # without the rate or the p50: the median interval's p99
    assert pooled_p99(window_from(ttft_p99_seconds="4x18 40x2")) == 4.0


def test_a_closed_loops_p99_past_its_prefill_moves_with_the_wait():
    # an 8B on a B200 behind 740 clients, 157 running and 583 waiting at 12.3 requests/s: TTFT
    # p50 50 s, of which the mean wait 47.3 s; p99 51.6 s on a fine grid, 59.8 s as SGLang's
    # bucket (40, 60] reads it. A larger pool runs 450 at 1.102x the rate.
    def queue(p99: float) -> Queue:
        return Queue(arrivals=12.33, batch=157.0, waiting=583.0, ttft_p99=p99, closed=True,
                     ttft_p50=50.0)  # fmt: skip

    read = queue(59.8)
    wait, today = read.wait(450.0, 1.102), read.wait(157.0, 1.0)
    prefill = 50.0 - 583.0 / 12.33
    assert read.prefill() == pytest.approx(prefill)
    expected = prefill + (59.8 - prefill) * wait / today
    assert read.ttft_p99_at(450.0, 1.102) == pytest.approx(expected)
    change = read.ttft_change(450.0, 1.102)
    assert -0.56 < change < -0.49  # the simulator measured -53 %
    # the bucket's bias scales away: the fine grid's p99 predicts about the same change
    assert abs(queue(51.6).ttft_change(450.0, 1.102) - change) < 0.02
    # today's figure is reproduced, and without TTFT p50 the residual is carried as seconds
    assert read.ttft_change(157.0, 1.0) == pytest.approx(0.0)
    bare = Queue(arrivals=12.33, batch=157.0, waiting=583.0, ttft_p99=59.8, closed=True)
    assert bare.ttft_p99_at(450.0, 1.102) == pytest.approx(wait + 59.8 - today)


def test_a_p99_past_a_buckets_width_of_the_wait_holds_what_the_wait_does_not():
    # DeepSeek-V3 under DP attention behind 3,615 clients, per rank 375 running and 60 waiting
    # at 4 requests/s: the mean wait 15 s, TTFT p50 18 s, p99 77 s. A 4 % larger batch cuts the
    # wait by a quarter, and the 59 s past it do not move: -7 % predicted, -5 % measured
    wide = Queue(arrivals=4.0, batch=375.0, waiting=60.0, ttft_p99=77.0, closed=True,
                 ttft_p50=18.0)  # fmt: skip
    wait, today = wide.wait(390.0, 1.0), wide.wait(375.0, 1.0)
    assert wide.ttft_p99_at(390.0, 1.0) == pytest.approx(77.0 - today + wait)
    assert -0.1 < wide.ttft_change(390.0, 1.0) < -0.03

"""The queue in front of one rank's running batch: time to first token from arrival and service
rates, fitted per server on its window.

Requests arrive at `arrivals` per second per rank (finished requests per second over the window:
in a steady state as many arrive as finish). The running batch is the servers; a change moves
it to `batch` slots and its tokens per second by `ratio`, so the rank then completes at most
`capacity = arrivals x ratio` requests per second (the same tokens per request). Two kinds of
client, told apart by what the window shows:

* a closed loop (`closed`): the requests in the server (running + waiting) held steady over
  the window, as when each client sends its next request once the last is answered (a fixed
  concurrency). The population stays; once the batch takes fewer than it, the rest wait their
  turn: wait = (population - batch) / capacity (Little's law), a conveyor with little spread.
* open arrivals: the requests in the server moved as independent arrivals do. At the same
  arrival rate a capacity at or below it grows the queue without bound over the window
  (`UNBOUNDED`); below it the wait is Erlang C's for `batch` servers (M/M/c), its tail
  P(wait > t) = C x exp(-(c mu - lambda) t).

TTFT p99 = the wait's p99 + a residual that the wait does not explain (prefill, the spread of
the queue wait today), fitted so that today's TTFT p99 is reproduced at today's batch. For a
closed loop whose TTFT p50 is read and whose p99 is within a bucket's width (`BUCKET_RATIO`)
of its wait and prefill, only the prefill (`prefill`) is kept in seconds; the rest of today's
p99 moves with the wait: the spread of a conveyor's waits grows with them, and a p99 read off
SGLang's wide TTFT buckets is biased in proportion to itself (an 8B on a B200 behind 740
clients: 51.6 s on a fine grid read as 59.8 s in the bucket (40, 60]; carried as 12.7 s of
residual, a pool raise was predicted -43 % against -53 % measured; scaled, -51 %). A p99 past
that holds something the wait does not (DeepSeek-V3 under DP attention behind 3,615 clients:
p99 77 s where p50 is 18 s), carried as seconds.

A closed loop whose batch a change caps by slots (`--max-running-requests` under today's batch)
is admitted one request per departure, as SGLang's `PrefillAdder` fills each freed slot: a
request k places back waits for the k-th departure, which at departures as a Poisson stream of
rate r is Gamma(k, r), its p99 about (k + 2.33 sqrt(k)) / r (`slot_wait`). Today's residual is
then not carried over: most of it is the bunching of an admission that waits for free pool
tokens (many requests admitted when a batch ends), which the slot cap replaces; what stays is
the prefill, today's TTFT p50 less the mean wait (Little's law). Today's
TTFT p99 is the window's (`window_p99`): from the window's histogram where the samples carry
it, else each scrape interval's p50 and p99 pooled by its requests; never the median
interval's p99, which misses a tail that comes in bursts. Pure: no I/O, no clock.
"""

import math
from dataclasses import dataclass

from sglang_tuner.model.signals import (
    NUM_QUEUE_REQS,
    NUM_RUNNING_REQS,
    QUEUE_TIME_P50_SECONDS,
    REQUEST_RATE,
    TTFT_MEAN_SECONDS,
    TTFT_P50_SECONDS,
    TTFT_P99_SECONDS,
)
from sglang_tuner.model.window import WindowView
from sglang_tuner.model.window_histogram import PREFIX_OF, READ_AS_TAIL, window_quantile

UNBOUNDED = math.inf  # the queue grows for as long as the load lasts
TAIL = 0.01  # p99: the wait exceeded by 1 % of requests
Z_TAIL = 2.326  # the standard normal's 99th percentile: Gamma(k)'s p99 ~ k + Z sqrt(k) for k >> 1
# A population of L requests arriving independently moves by about sqrt(L) (Poisson: a
# coefficient of variation 1/sqrt(L)); one held to half of that, or to 2 %, is a closed loop.
# SGLang's TTFT bucket bounds (its metrics collector's) at most double from one to the next
# (..., 10, 20, 40, 60, 80, 100, 200, 400 s): a p99 within that of the wait and the prefill is
# read as them, coarsely.
BUCKET_RATIO = 2.0
_HELD = 0.5
_HELD_FLOOR = 0.02


@dataclass(frozen=True, slots=True)
class Queue:
    """One rank's arrivals, batch and queue over the window, and today's TTFT p99."""

    arrivals: float  # requests per second per rank
    batch: float  # running requests per rank
    waiting: float  # waiting requests per rank
    ttft_p99: float  # seconds
    closed: bool  # the requests in the server held steady: a fixed client concurrency
    ttft_p50: float | None = None  # seconds, the window's median interval's
    ttft_mean: float | None = None  # seconds, the window's finished requests' (exact)

    @property
    def population(self) -> float:
        """Requests in the server per rank (running + waiting)."""
        return self.batch + self.waiting

    def wait(self, batch: float, ratio: float) -> float:
        """The p99 wait for a slot at `batch` slots and tokens/s x `ratio` (UNBOUNDED where
        open arrivals outrun the capacity)."""
        capacity = self.arrivals * ratio
        if capacity <= 0:
            return UNBOUNDED
        if self.closed:
            return max(0.0, self.population - batch) / capacity
        if capacity > self.arrivals:
            return erlang_c_wait(self.arrivals, capacity / max(1.0, batch), max(1, round(batch)))
        if batch < self.batch:
            return UNBOUNDED  # fewer slots than today's arrivals keep busy (Little's law)
        return self.waiting / self.arrivals  # the batch and its rate as today: today's wait

    def residual(self) -> float:
        """TTFT p99 less the model's wait today (at today's batch and rate): what the wait
        does not explain (prefill, the wait's spread), so that today's p99 is reproduced."""
        return max(0.0, self.ttft_p99 - self._today())

    def _today(self) -> float:
        today = self.wait(self.batch, 1.0)
        return today if math.isfinite(today) else 0.0

    def ttft_p99_at(
        self, batch: float, ratio: float, slots: bool = False, prefill_scale: float = 1.0
    ) -> float:
        """TTFT p99 at `batch` slots and tokens/s x `ratio`: the wait plus today's residual (a
        wait today longer than TTFT p99 itself, the rate read low: scaled instead). `slots`:
        the change caps the batch by slots below today's (`slot_wait`, closed loops only).
        `prefill_scale`: the request's own prefill (`prefill`) takes that many times as long;
        where nobody waits today, all of today's p99 is a request's own time to its first
        token (its prompt's passes: the longest prompts make the tail), and scales whole."""
        own = self.residual() if self.waiting <= 0 and self._today() <= 0 else self.prefill()
        longer = own * (prefill_scale - 1)
        if slots and self.closed and batch < self.batch:
            return self.slot_wait(batch, ratio) + self.prefill() + longer
        wait, today = self.wait(batch, ratio), self._today()
        if today > self.ttft_p99:
            return self.ttft_p99 * wait / today + longer
        fixed = self.prefill()
        if self.closed and today > 0 and math.isfinite(wait) and self.ttft_p50 is not None:
            if self.ttft_p99 <= BUCKET_RATIO * (today + fixed):
                return fixed + (self.ttft_p99 - fixed) * wait / today + longer
        return wait + self.residual() + longer

    def slot_wait(self, batch: float, ratio: float) -> float:
        """The p99 wait for one of `batch` slots freed one per departure, at the population's
        requests past the batch and departures at arrivals x `ratio`: Gamma(k, r)'s p99."""
        capacity = self.arrivals * ratio
        if capacity <= 0:
            return UNBOUNDED
        k = max(0.0, self.population - batch)
        return (k + Z_TAIL * math.sqrt(k)) / capacity

    def prefill(self) -> float:
        """What TTFT holds past the wait: today's TTFT p50 less the mean wait (Little's law),
        none where the window has no TTFT p50 or the wait explains it all."""
        if self.ttft_p50 is None or self.arrivals <= 0:
            return 0.0
        return max(0.0, min(self.ttft_p50 - self.waiting / self.arrivals, self.residual()))

    def ttft_change(
        self,
        batch: float,
        ratio: float,
        slots: bool = False,
        paced: bool = False,
        prefill_scale: float = 1.0,
    ) -> float:
        """TTFT p99's relative change (UNBOUNDED: it grows over the window); `paced`: today
        admission keeps pace with departures (the pool does not bind it), and a closed loop
        that queues before and after moves as its queue does (`paced_change`);
        `prefill_scale`: a request's own prefill then takes that many times today's."""
        if paced:
            found = self.paced_change(batch, ratio, prefill_scale)
            if found is not None:
                return found
        then = self.ttft_p99_at(batch, ratio, slots, prefill_scale)
        return then / self.ttft_p99 - 1 if math.isfinite(then) else UNBOUNDED

    def paced_change(self, batch: float, ratio: float, prefill_scale: float = 1.0) -> float | None:
        """TTFT p99's relative change for a closed loop admitted one request per departure,
        whose requests wait before and after the change: the wait for the k-th departure
        (`slot_wait`, k the requests past the batch) plus the prefill, today's exact mean TTFT
        (the histogram's _sum over its _count) less today's mean wait, both today and then.
        Today's figure is the model's, not the histogram's: a queue so admitted is a conveyor
        whose waits are packed together, and SGLang's TTFT buckets are wide (bounds 10, 20, 40,
        60 s in its metrics collector), so a p99
        packed at a bucket's lower edge reads near its upper one (a 1B on an L4 behind 512
        clients: p99 21.9 s read as 39.8 s; the model 22.9 s). None without the mean, for open
        arrivals, or where no request waits before or after."""
        if not self.closed or not self.ttft_mean or self.arrivals <= 0 or ratio <= 0:
            return None
        if self.waiting <= 0 or self.population - batch <= 0:
            return None
        prefill = max(0.0, self.ttft_mean - self.waiting / self.arrivals)
        now = self.slot_wait(self.batch, 1.0) + prefill
        then = self.slot_wait(batch, ratio) + prefill * prefill_scale
        return then / now - 1 if now > 0 else None


def erlang_c(arrivals: float, per_server: float, servers: int) -> float:
    """The probability that an arrival waits in an M/M/c queue (Erlang C); 1 when saturated.
    From Erlang B's recursion, B(k) = a B(k-1) / (k + a B(k-1)): no factorial of a batch of
    thousands to overflow."""
    load = arrivals / per_server
    rho = load / servers
    if rho >= 1:
        return 1.0
    blocked = 1.0
    for k in range(1, servers + 1):
        blocked = load * blocked / (k + load * blocked)
    return blocked / (1 - rho * (1 - blocked))


def erlang_c_wait(arrivals: float, per_server: float, servers: int, tail: float = TAIL) -> float:
    """The wait exceeded by `tail` of arrivals in an M/M/c queue: P(W > t) = C e^-(c mu - l)t."""
    waits = erlang_c(arrivals, per_server, servers)
    if waits <= tail:
        return 0.0
    return math.log(waits / tail) / (servers * per_server - arrivals)


def held_steady(view: WindowView) -> bool | None:
    """Whether the requests in the server (running + waiting) held steady over the window: a
    closed loop of clients. None when the window does not show both gauges."""
    rows = view.rows((NUM_RUNNING_REQS, NUM_QUEUE_REQS))
    totals = [r[NUM_RUNNING_REQS] + r[NUM_QUEUE_REQS] for r in rows]
    if len(totals) < 3:
        return None
    mean = sum(totals) / len(totals)
    if mean <= 0:
        return None
    spread = math.sqrt(sum((t - mean) ** 2 for t in totals) / (len(totals) - 1)) / mean
    return spread <= max(_HELD_FLOOR, _HELD / math.sqrt(mean))


def window_p99(
    view: WindowView,
    quantiles: tuple[str, str] = (TTFT_P50_SECONDS, TTFT_P99_SECONDS),
    weight: str = REQUEST_RATE,
) -> float | None:
    """A latency's p99 over the whole window (TTFT's by default): from the window's histogram
    where the samples carry their buckets (`model.window_histogram`), as Prometheus's
    `histogram_quantile(0.99, sum(increase(...[window])))`, ITL's top buckets read as a tail
    (`window_histogram.READ_AS_TAIL`); else pooled from each interval's p50 and p99
    (`pooled_p99`)."""
    prefix = PREFIX_OF.get(quantiles[1])
    if prefix is None:
        return pooled_p99(view, quantiles, weight)
    found = window_quantile(view, prefix, 1 - TAIL, tail=prefix in READ_AS_TAIL)
    return found if found is not None else pooled_p99(view, quantiles, weight)


def pooled_p99(
    view: WindowView,
    quantiles: tuple[str, str] = (TTFT_P50_SECONDS, TTFT_P99_SECONDS),
    weight: str = REQUEST_RATE,
) -> float | None:
    """A latency's p99 over the whole window (TTFT's by default): each interval's requests
    (`weight`: its rate) with a tail falling log-linearly from its p50 (half above) to its p99
    (1 % above), pooled, and the time that 1 % of them exceed. The median interval's p99 where
    fewer than three intervals had requests and both quantiles."""
    p50s, p99s = quantiles
    rows = [
        (r[weight], r[p50s], r[p99s])
        for r in view.rows((weight, p50s, p99s))
        if r[weight] > 0 and 0 < r[p50s] <= r[p99s]
    ]
    if len(rows) < 3:
        return view.quantile(p99s, 0.5)
    total = sum(w for w, _, _ in rows)
    low, high = min(p99 for _, _, p99 in rows), max(p99 for _, _, p99 in rows)
    for _ in range(40):  # the share above t falls with t: bisect for 1 %
        mid = (low + high) / 2
        above = sum(w * _above(mid, p50, p99) for w, p50, p99 in rows) / total
        low, high = (mid, high) if above > TAIL else (low, mid)
    return (low + high) / 2


def _above(t: float, p50: float, p99: float) -> float:
    """The share of one interval's requests slower than `t`: 0.5 at its p50, 0.01 at its p99."""
    if p99 <= p50:
        return 1.0 if t < p99 else 0.0
    return min(1.0, 0.5 * math.exp(-(t - p50) * math.log(50) / (p99 - p50)))


def fit_queue(view: WindowView, ranks: int, batch: float, waiting: float) -> Queue | None:
    """The queue of one rank fitted on the window (`batch` and `waiting` per rank, as the
    server model reads them): arrivals from the finished requests' rate (a mean: the rate of
    the window), else from the waiting requests over their median queue time (Little's law).
    None without either, or without TTFT p99. Clients whose population the window cannot
    read are taken as a closed loop (their concurrency kept)."""
    p99, rate = window_p99(view), view.mean(REQUEST_RATE)
    queued = view.quantile(QUEUE_TIME_P50_SECONDS, 0.5)
    if not rate and queued and waiting > 0:
        rate = waiting * ranks / queued
    if not rate or not p99 or rate <= 0 or p99 <= 0:
        return None
    closed = held_steady(view)
    return Queue(
        arrivals=rate / ranks,
        batch=batch,
        waiting=waiting,
        ttft_p99=p99,
        closed=True if closed is None else closed,
        ttft_p50=view.quantile(TTFT_P50_SECONDS, 0.5),
        ttft_mean=_weighted_mean(view, TTFT_MEAN_SECONDS, REQUEST_RATE),
    )


def _weighted_mean(view: WindowView, signal: str, weight: str) -> float | None:
    """The window's mean of a per-interval mean, each interval weighted by its rate."""
    rows = [(r[signal], r[weight]) for r in view.rows((signal, weight)) if r[weight] > 0]
    total = sum(w for _, w in rows)
    return sum(v * w for v, w in rows) / total if total > 0 else None

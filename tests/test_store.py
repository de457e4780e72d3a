"""SQLite persistence: windows survive a restart; advice history is kept."""

from sglang_tuner.config import load_settings
from sglang_tuner.poller import TargetPoller
from sglang_tuner.publish import Publisher
from sglang_tuner.rules import ALL_RULES
from sglang_tuner.rules.base import Action, Confidence, Severity
from sglang_tuner.sources import Snapshot
from sglang_tuner.state import Advice, TunerState
from sglang_tuner.store import Store
from sglang_tuner.targets import TargetSpec


def _poller(name: str = "gpu-a") -> TargetPoller:
    return TargetPoller(TargetSpec(name, "http://127.0.0.1:1"), window_capacity=10)


def test_store_restores_window_samples_after_restart(tmp_path):
    db = tmp_path / "state" / "tuner.db"
    settings = load_settings(None)
    poller = _poller()
    for k in range(15):
        poller.window.append(Snapshot("gpu-a", 100.0 + k, {"num_queue_reqs": float(k)}))
    publisher = Publisher(settings, ALL_RULES, TunerState())
    publisher.history.append(
        (110.0, "gpu-a", "queue_empty", "firing", "client: submit faster", "ev")
    )
    store = Store(db)
    store.save({"gpu-a": poller}, publisher, now=115.0)
    store.close()

    fresh = _poller()
    reopened = Store(db)
    reopened.restore({"gpu-a": fresh}, publisher, now=200.0)
    view = fresh.window.view(now=200.0, window_seconds=1000.0)
    assert view.values("num_queue_reqs") == [float(k) for k in range(5, 15)]  # ring kept 10
    assert reopened.history("gpu-a")[0][1:4] == ("gpu-a", "queue_empty", "firing")
    assert publisher.history == []


def test_store_restore_ignores_other_targets_and_future_samples(tmp_path):
    store = Store(tmp_path / "t.db")
    settings = load_settings(None)
    poller = _poller("b")
    poller.window.append(Snapshot("b", 50.0, {"x": 1.0}))
    poller.window.append(Snapshot("b", 500.0, {"x": 2.0}))
    store.save({"b": poller}, Publisher(settings, ALL_RULES, TunerState()), now=500.0)
    other = _poller("a")
    same = _poller("b")
    store.restore({"a": other, "b": same}, Publisher(settings, ALL_RULES, TunerState()), now=100.0)
    assert len(other.window) == 0
    assert same.window.view(100.0, 1000.0).values("x") == [1.0]


def _firing_publisher(settings) -> Publisher:
    publisher = Publisher(settings, ALL_RULES, TunerState())
    advice = Advice(
        "gpu-a", "queue_empty", Severity.INFO, "pending", 0.0, "s", "e",
        Action("client: submit faster"), "src", Confidence.HIGH,
    )  # fmt: skip
    publisher.tracker.update({("gpu-a", "queue_empty"): advice}, now=100.0)
    publisher.tracker.update({("gpu-a", "queue_empty"): advice}, now=200.0)
    return publisher


def test_store_restores_firing_alerts_after_a_short_outage(tmp_path):
    settings = load_settings(None, {"hold_for_seconds": 60})
    publisher = _firing_publisher(settings)
    assert publisher.tracker.state_of(("gpu-a", "queue_empty"))[0] == "firing"
    store = Store(tmp_path / "t.db")
    store.save({"gpu-a": _poller()}, publisher, now=200.0)

    fresh = Publisher(settings, ALL_RULES, TunerState())
    store.restore({"gpu-a": _poller()}, fresh, now=200.0 + 1800)
    state, active_at, fired_at = fresh.tracker.state_of(("gpu-a", "queue_empty"))
    assert (state, active_at, fired_at) == ("firing", 100.0, 200.0)

    late = Publisher(settings, ALL_RULES, TunerState())
    store.restore({"gpu-a": _poller()}, late, now=200.0 + 3601)  # past the outage tolerance
    assert late.tracker.state_of(("gpu-a", "queue_empty"))[0] == "inactive"

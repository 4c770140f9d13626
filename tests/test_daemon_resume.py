"""Resume equivalence: a job stopped mid-bisection and resumed decides exactly what an
uninterrupted run decides from the same samples.

The real engine runs on a simulated history (attrib/simulation.py) with the daemon's
JobRecorder between it and the runner, against a real SQLite store. The first attempt is
stopped after K measured runs; the second attempt replays those K from the store and measures
the rest with a differently seeded runner (new measurements differ, as they do after a real
restart). An uninterrupted engine fed exactly the recorded sequence must reach the same
verdicts, comparisons and culprits."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.bisection import Bisection, bisection
from attrib.core.model import Status
from attrib.core.stats import TestConfig
from attrib.daemon.recording import JobRecorder
from attrib.daemon.store import NewJob, Store
from attrib.errors import JobStopped
from attrib.evaluate.runners import RunResult
from attrib.outcome import Outcome
from attrib.recipe import BenchmarkSpec
from attrib.simulation import NoiseModel, SimBuilder, SimHistory, SimRunner, linear_history

BENCH = BenchmarkSpec(name="sim", runner="command", command=("x",), min_change_pct=2.0)
NOISE = NoiseModel("gaussian", sigma=0.02)


def _engine(hist: SimHistory, runner: object, seed: int, events: object | None = None) -> Bisection:
    return bisection(hist, SimBuilder(hist), runner, BENCH, TestConfig(), seed, events)


def _decisions(out: Outcome) -> tuple[object, ...]:
    """Everything the engine decided (not wall times or build counts, which differ by design)."""
    comps = tuple((c.candidate, c.reference, c.purpose, c.verdict, c.diffs, c.llr) for c in out.comparisons)
    return (out.status, tuple((c.commit, c.ambiguous_with, c.posterior) for c in out.culprits), comps, out.verdicts, out.rounds)


class ReplayOnly:
    """Returns the recorded runs in the order they were recorded; fails on anything else."""

    def __init__(self, runs: list[tuple[str, RunResult]]) -> None:
        self.runs = runs
        self.i = 0

    def run(self, checkout: Path) -> RunResult:
        key, result = self.runs[self.i]
        assert key == checkout.name, f"call {self.i}: engine asked for {checkout.name}, recorded {key}"
        self.i += 1
        return result


def _job(store: Store, hist: SimHistory, seed: int) -> str:
    job = NewJob("/sim", "/sim", hist.good, hist.bad, "g", "b", "/r.toml", "sim", None, None, seed)
    return store.submit(job, "test", "{}").job_id


@pytest.mark.parametrize(("seed", "stop_after"), [(3, 5), (11, 40), (5, 1)])
def test_resumed_job_decides_what_an_uninterrupted_run_decides(tmp_path: Path, seed: int, stop_after: int):
    hist = linear_history(40, {23: 8.0, 31: 6.0})
    store = Store(tmp_path / "state.db")
    job_id = _job(store, hist, seed)

    first = store.claim("worker-1", lease_s=60)
    assert first is not None

    def stop_midway() -> str | None:
        # checked before each runner call: the worker "dies" after `stop_after` recorded runs
        return "lease lost" if rec1.measured >= stop_after else None

    rec1 = JobRecorder(store, first, "worker-1", stop_midway)
    with pytest.raises(JobStopped):
        _engine(hist, rec1.wrap(SimRunner(hist, NOISE, seed=100 + seed)), first.seed, rec1).run(hist.good, hist.bad)
    assert rec1.measured == stop_after and store.counts()["samples"] == stop_after

    # The worker died: the lease expires and another worker takes the job up.
    second = store.claim("worker-2", lease_s=60, now=first.lease_expires + 1)  # type: ignore[operator]
    assert second is not None and second.id == job_id and second.attempts == 2
    rec2 = JobRecorder(store, second, "worker-2", lambda: None)
    resumed = _engine(hist, rec2.wrap(SimRunner(hist, NOISE, seed=900 + seed)), second.seed, rec2).run(hist.good, hist.bad)
    assert rec2.replayed == stop_after  # every recorded run reused, none measured again
    assert rec2.measured == store.counts()["samples"] - stop_after

    # The uninterrupted reference: the same engine fed the recorded sequence, in order.
    rows = store._conn().execute("SELECT key, n, seq FROM samples WHERE job_id = ? ORDER BY seq", (job_id,)).fetchall()
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))  # no gaps, no call recorded twice
    runs = store.load_runs(job_id)
    replay = ReplayOnly([(r["key"], runs[(r["key"], r["n"])]) for r in rows])
    reference = _engine(hist, replay, seed).run(hist.good, hist.bad)
    assert replay.i == len(rows)
    assert _decisions(resumed) == _decisions(reference)
    assert resumed.status is Status.CULPRIT_FOUND and [c.commit for c in resumed.culprits] == hist.culprits


def test_same_seed_and_runs_give_the_same_decisions():
    """The premise of resuming: with one probe per step the engine is a function of its seed and the runs."""
    hist = linear_history(30, {12: 10.0})
    outs = [_engine(hist, SimRunner(hist, NOISE, seed=4), seed=9).run(hist.good, hist.bad) for _ in range(2)]
    assert _decisions(outs[0]) == _decisions(outs[1])
    other_seed = _engine(hist, SimRunner(hist, NOISE, seed=4), seed=10).run(hist.good, hist.bad)
    # A different seed shuffles rounds differently, so the pairing (and the diffs) change.
    assert _decisions(other_seed) != _decisions(outs[0])

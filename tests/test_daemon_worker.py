"""Workers against a real store: cancellation of a running job stops it at the next runner
call, a stopping daemon hands the job back to the queue, a failure is recorded with its one
line, and a done job gets its report and result files. The bisection itself is the real engine
on a simulated history (attrib/simulation.py), so these run in seconds."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from attrib.bisection import Bisection, bisection
from attrib.core.model import JobState
from attrib.core.stats import TestConfig
from attrib.daemon import worker as worker_mod
from attrib.daemon.config import Settings
from attrib.daemon.recording import JobRecorder
from attrib.daemon.store import Job, NewJob, Store
from attrib.errors import ReferenceFailed
from attrib.evaluate.runners import RunResult
from attrib.recipe import BenchmarkSpec, BuildSpec, Recipe
from attrib.result import BisectResult, dump, from_json
from attrib.result.types import Machine
from attrib.result.writer import Provenance, RunContext, build_result
from attrib.simulation import NoiseModel, SimBuilder, SimRunner, linear_history

HIST = linear_history(30, {17: 10.0})
BENCH = BenchmarkSpec(name="sim", runner="command", command=("x",), min_change_pct=2.0)
RECIPE = Recipe(Path("/r.toml"), "sim", "", BuildSpec(commands=()), (BENCH,))
MACHINE = Machine("bench-01", "Linux", "Test CPU", 2, "3.11", "ci")


def sim_result(engine: Bisection, seed: int) -> BisectResult:
    """The real writer on the simulated engine's outcome, as run_bisect would make it."""
    out = engine.run(HIST.good, HIST.bad)
    ctx = RunContext(Path("/sim"), RECIPE, BENCH, "local", engine.scope.config, seed, Path("/work"), 0.0, 0)
    return build_result(out, ctx, Provenance(MACHINE, "0" * 64))


class SimWorker(worker_mod.Worker):
    """The daemon's worker with the bisection swapped for the simulated one; `on_run` is called
    before every measured run (the test's hook to cancel or stop mid-job)."""

    on_run: Any = None

    def bisect(self, job: Job, recorder: JobRecorder) -> BisectResult:
        sim = SimRunner(HIST, NoiseModel("gaussian", sigma=0.01), seed=1)
        hook = self.on_run

        class Hooked:
            def run(self, checkout: Path) -> RunResult:
                if hook is not None:
                    hook()
                return sim.run(checkout)

        engine = bisection(HIST, SimBuilder(HIST), recorder.wrap(Hooked()), BENCH, TestConfig(), job.seed, recorder)
        return sim_result(engine, job.seed)

    def write_outputs(self, job: Job, result: BisectResult) -> str | None:
        (self.settings.job_dir(job.id)).mkdir(parents=True, exist_ok=True)
        (self.settings.job_dir(job.id) / "result.json").write_text(dump(result))
        return worker_mod.file_report(job.file_issue, result, None, self.settings.state / "filed") if job.file_issue else None


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Store, Settings, SimWorker, str]:
    settings = Settings(state=tmp_path, secret="x" * 32, lease_s=30)
    store = Store(settings.db_path)
    job = NewJob("/sim", "/sim", HIST.good, HIST.bad, "g", "b", "/r.toml", "sim", None, None, seed=5)
    job_id = store.submit(job, "test", "{}").job_id
    return store, settings, SimWorker(store, settings, threading.Event(), 0), job_id


def _claim(store: Store, w: SimWorker) -> Job:
    job = store.claim(w.owner, 30)
    assert job is not None
    return job


def test_done_job_and_filing_hook(setup):
    store, settings, w, job_id = setup
    w.process(_claim(store, w))
    job = store.get(job_id)
    assert job is not None and job.state is JobState.DONE
    assert isinstance(job.result, BisectResult)  # the store hands out the typed record
    assert [c.commit for c in job.result.culprits] == [HIST.main[17]]
    assert from_json(json.loads((settings.job_dir(job_id) / "result.json").read_text())) == job.result
    assert job.filing is None  # no sink asked for; real filing is in tests/test_daemon_e2e.py
    assert job.progress["phase"] == "finished: culprit_found"
    assert (settings.job_dir(job_id) / "result.json").exists()


def test_cancel_while_running_stops_at_the_next_run(setup):
    store, _, w, job_id = setup
    calls = [0]

    def cancel_at_10() -> None:
        calls[0] += 1
        if calls[0] == 10:
            store.request_cancel(job_id)  # what POST /v1/jobs/{id}/cancel does

    w.on_run = cancel_at_10
    w.process(_claim(store, w))
    job = store.get(job_id)
    assert job is not None and job.state is JobState.CANCELLED and calls[0] == 10
    # The run in flight when the cancel came is not recorded; nothing after it was measured.
    assert store.counts()["samples"] == 9
    assert store.claim("other", 30) is None  # never picked up again


def test_stopping_daemon_hands_the_job_back(setup):
    store, _, w, job_id = setup
    calls = [0]

    def stop_at_5() -> None:
        calls[0] += 1
        if calls[0] == 5:
            w.stopping.set()

    w.on_run = stop_at_5
    w.process(_claim(store, w))
    job = store.get(job_id)
    assert job is not None and job.state is JobState.QUEUED and job.lease_owner is None
    assert store.counts()["samples"] == 4
    # The next worker resumes it from the recorded runs and finishes it.
    w2 = SimWorker(store, w.settings, threading.Event(), 1)
    w2.process(_claim(store, w2))
    done = store.get(job_id)
    assert done is not None and done.state is JobState.DONE and done.progress["runs_replayed"] == 4


def test_failure_is_recorded_with_its_line(setup, monkeypatch):
    store, _, w, job_id = setup

    def broken(self: SimWorker, job: Job, recorder: JobRecorder) -> dict[str, Any]:
        raise ReferenceFailed("the good revision c000 did not build (exit 2)")

    monkeypatch.setattr(SimWorker, "bisect", broken)
    w.process(_claim(store, w))
    job = store.get(job_id)
    assert job is not None and job.state is JobState.FAILED and job.error == "the good revision c000 did not build (exit 2)"


def test_a_job_that_keeps_killing_its_worker_is_given_up(setup):
    store, _, w, job_id = setup
    for i in range(worker_mod.MAX_ATTEMPTS):
        # each claimant "dies" with the job: leases that expired long ago (now= is in 1970)
        assert store.claim(f"dies-{i}", 1, now=1000.0 + 2 * i) is not None
    thread = threading.Thread(target=w.run)  # the real loop: claims it once more and gives up
    thread.start()
    try:
        for _ in range(600):  # bounded: 30 s
            job = store.get(job_id)
            if job is not None and not job.state.active:
                break
            threading.Event().wait(0.05)
    finally:
        w.stopping.set()
        thread.join(30)
    job = store.get(job_id)
    assert job is not None and job.state is JobState.FAILED and "gave up after" in (job.error or "")
    assert store.counts()["samples"] == 0  # it was not run a sixth time


def test_filing_hook_calls_the_tracker_when_there_is_one(monkeypatch):
    """The shape attrib.tracker has on main (issue 6): Filing.prepare(...).run(result, plot, log)."""
    import sys
    import types

    calls: list[tuple[Any, ...]] = []

    class Filing:
        @classmethod
        def prepare(cls, file_issue: str, comment: None, labels: None) -> Filing:
            calls.append(("prepare", file_issue, comment, labels))
            return cls()

        def run(self, result: BisectResult, plot: None, log: Any) -> None:
            calls.append(("run", result.status.value, plot))
            log("opened: https://forge.example/acme/k/issues/1")

    fake = types.ModuleType("attrib.tracker")
    fake.Filing = Filing  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "attrib.tracker", fake)
    engine = bisection(HIST, SimBuilder(HIST), SimRunner(HIST, NoiseModel("gaussian", sigma=0.01), seed=1), BENCH, TestConfig(), 1)
    line = worker_mod.file_report("github:acme/k", sim_result(engine, 1), None, Path("/unused"))
    assert line == "opened: https://forge.example/acme/k/issues/1"
    assert calls == [("prepare", "github:acme/k", None, None), ("run", "culprit_found", None)]

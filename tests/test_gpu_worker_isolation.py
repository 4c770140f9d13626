"""A kernel that faults costs one failed run of its commit, not the bisection (issue 33, point 12).

No GPU is lent here, so the GPU worker is played by a strict stand-in (tests/gpu_standin.py): a
real process that speaks the worker's protocol, refuses anything else attrib sends (exit 3), and
dies by SIGSEGV, hangs, writes garbage or reports a fault when asked about a commit of that
name. The real worker's side of the protocol (gpu/worker.serve) is run over the fake device of
tests/test_gpu_protocol.py and its answers are held to the same checks the runner applies."""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_gpu_protocol import FakeDevice, _spec, _tree
from test_local_guard import _wait_gone

from attrib.core.model import Direction
from attrib.evaluate.gpu.isolated import KernelWorker, _artifact_problem, _run_problem
from attrib.evaluate.gpu.worker import PROTOCOL, serve, spec_json
from attrib.evaluate.runners.cupy import CupyRunner, sharing_one_worker
from attrib.recipe import BenchmarkSpec, CupySpec

STANDIN = Path(__file__).parent / "gpu_standin.py"
TIMEOUT_S = 3.0


def _runner(log: Path, timeout_s: float = TIMEOUT_S) -> CupyRunner:
    os.environ["STANDIN_LOG"] = str(log)  # the stand-in inherits attrib's environment
    cupy = CupySpec(kernel="copy", dtype="fp32", shape={"N": 1024}, source="copy.cu")
    spec = BenchmarkSpec("copy", "cupy", (), "ms", Direction.LOWER, timeout_s=timeout_s, reps=3, cupy=cupy)
    return CupyRunner(spec, worker_argv=[sys.executable, str(STANDIN)])


def _checkout(root: Path, name: str, ms: float = 1.0) -> Path:
    d = root / name
    d.mkdir()
    (d / "ms").write_text(f"{ms}\n")
    return d


def _served(log: Path) -> list[tuple[int, str, str]]:
    return [(int(p), op, name) for p, op, name, _ in (line.split() for line in log.read_text().splitlines())]


def test_a_commit_whose_kernels_kill_the_worker_is_one_failed_run_and_the_others_go_on(tmp_path: Path):
    log = tmp_path / "served"
    runner = _runner(log)
    good, bad, segv = _checkout(tmp_path, "good", 1.0), _checkout(tmp_path, "bad", 1.3), _checkout(tmp_path, "segv")
    try:
        r = [runner.run(good), runner.run(bad), runner.run(segv), runner.run(good), runner.run(bad), runner.run(segv)]
        assert r[0].samples == (1.0,) * 3 and r[1].samples == (1.3,) * 3
        assert not r[2].ok and "the GPU worker died while running this commit's kernels (killed by SIGSEGV)" in r[2].error
        assert "the other commits go on in a new one" in r[2].error
        assert r[3].samples == (1.0,) * 3 and r[4].samples == (1.3,) * 3  # the bisection goes on
        assert r[5].error == r[2].error  # remembered: its kernels are not run again
        assert runner.artifact(segv) is None and runner.artifact(good) is not None
        served = _served(log)
        first, second = served[0][0], served[3][0]
        assert first != second
        # Interleaved in one process at a time: good and bad share a worker before and after the fault.
        assert served == [(first, "run", "good"), (first, "run", "bad"), (first, "run", "segv"),
                          (second, "run", "good"), (second, "run", "bad"), (second, "artifact", "good")]  # fmt: skip
        assert isinstance(runner.kernels, KernelWorker) and runner.kernels.started == 2
        assert runner.gpu_environment()["name"] == "stand-in"
    finally:
        runner.close()
    assert _wait_gone([second]) == []  # closed: the worker is gone


@pytest.mark.parametrize(("name", "why"), [
    ("hang", f"the GPU worker did not answer within {TIMEOUT_S:g} s (a hung kernel?)"),
    ("garbage", "the GPU worker answered outside its protocol (not JSON: b'\\x00\\x01 this is not the protocol')"),
    ("fault", "CUDARuntimeError: cudaErrorIllegalAddress"),
])  # fmt: skip
def test_a_hung_garbled_or_faulted_worker_is_ended_and_only_that_commit_fails(tmp_path: Path, name: str, why: str):
    log = tmp_path / "served"
    runner = _runner(log)
    good, odd = _checkout(tmp_path, "good"), _checkout(tmp_path, name)
    try:
        assert runner.run(good).ok
        failed = runner.run(odd)
        assert failed.error == f"{why}; the GPU worker was ended and the other commits go on in a new one"
        first = _served(log)[0][0]
        assert _wait_gone([first]) == [], "the misbehaving worker is still running"
        again = runner.run(good)
        assert again.ok and again.samples == (1.0,) * 3
        assert _served(log)[-1][0] != first
    finally:
        runner.close()


def test_the_stand_in_is_strict_about_the_protocol(tmp_path: Path):
    """It refuses what attrib must not send, so the tests above hold attrib to the protocol."""
    import subprocess

    env = {**os.environ, "STANDIN_LOG": str(tmp_path / "served")}
    setup = json.dumps({"setup": PROTOCOL, "cupy": [spec_json(CupySpec(kernel="copy", dtype="fp32"))]})
    for bad in (
        {"id": 2, "op": "run", "kernel": 0, "checkout": str(tmp_path), "reps": 3},  # ids count from 1
        {"id": 1, "op": "run", "kernel": 0, "checkout": str(tmp_path), "reps": 0},
        {"id": 1, "op": "run", "kernel": 0, "checkout": "relative", "reps": 3},
        {"id": 1, "op": "time", "kernel": 0, "checkout": str(tmp_path)},
        {"id": 1, "op": "run", "kernel": 1, "checkout": str(tmp_path), "reps": 3},  # the setup listed one kernel
        {"id": 1, "op": "run", "checkout": str(tmp_path), "reps": 3},  # protocol 1's request, without a kernel
    ):
        done = subprocess.run([sys.executable, str(STANDIN)], input=f"{setup}\n{json.dumps(bad)}\n", capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 3 and "protocol violation" in done.stderr, (bad, done.stderr)


def test_the_real_worker_answers_within_the_protocol(tmp_path: Path):
    """gpu/worker.serve over the fake device: a hello, a run and an artifact answer the runner
    accepts; a device error while timing is a fault, and the worker ends after answering it."""
    good = _tree(tmp_path / "good", 8)
    spec = _spec(reps=3)
    assert spec.cupy is not None
    requests = [
        {"setup": PROTOCOL, "cupy": [spec_json(spec.cupy)]},
        {"id": 1, "op": "run", "kernel": 0, "checkout": str(good), "reps": 3},
        {"id": 2, "op": "artifact", "kernel": 0, "checkout": str(good)},
    ]
    out = io.StringIO()
    assert serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, FakeDevice) == 0
    hello, run, artifact = (json.loads(line) for line in out.getvalue().splitlines())
    assert hello == {"hello": PROTOCOL, "arch": "sm_90", "info": {"name": "fake"}}
    assert _run_problem(run, 1) == "" and len(run["samples"]) == 3 and run["fault"] is False
    assert _artifact_problem(artifact, 2) == "" and artifact["digest"]

    class Faulting(FakeDevice):
        def time_block(self, *args: object) -> float:
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access was encountered")

    out = io.StringIO()
    requests.insert(2, {"id": 2, "op": "run", "kernel": 0, "checkout": str(good), "reps": 3})  # never read: the worker ended
    assert serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, Faulting) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(answers) == 2 and answers[1]["fault"] is True and _run_problem(answers[1], 1) == ""
    assert answers[1]["error"] == "RuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered"


def test_a_runner_without_a_usable_worker_says_so(tmp_path: Path):
    from attrib.errors import GpuUnavailable

    cupy = CupySpec(kernel="copy", dtype="fp32")
    spec = BenchmarkSpec("copy", "cupy", (), "ms", Direction.LOWER, reps=3, cupy=cupy)
    runner = CupyRunner(spec, worker_argv=[sys.executable, "-c", "print('hello?')"])
    with pytest.raises(GpuUnavailable, match=r"the GPU worker did not start: answered outside its protocol \(not JSON: b'hello\?'\)"):
        runner.run(_checkout(tmp_path, "good"))


def _members(log: Path, timeouts: tuple[float, float] = (TIMEOUT_S, TIMEOUT_S)) -> tuple[BenchmarkSpec, BenchmarkSpec]:
    os.environ["STANDIN_LOG"] = str(log)
    specs = []
    for (kernel, reps), timeout_s in zip((("copy", 3), ("reduce", 5)), timeouts, strict=True):
        cupy = CupySpec(kernel=kernel, dtype="fp32", shape={"N": 1024}, source=f"{kernel}.cu")
        specs.append(BenchmarkSpec(kernel, "cupy", (), "ms", Direction.LOWER, timeout_s=timeout_s, reps=reps, cupy=cupy))
    return specs[0], specs[1]


def test_a_groups_cupy_members_share_one_worker_and_read_what_they_would_alone(tmp_path: Path):
    """Issue 29 item 1: the cupy members of a group time their kernels in one GPU worker (one
    process, one CUDA context), each asking for its own kernel with its own samples per run."""
    log = tmp_path / "served"
    copy, reduce = _members(log)
    a, b = _checkout(tmp_path, "a", 1.0), _checkout(tmp_path, "b", 1.0)
    (a / "ms.reduce").write_text("2.0\n")
    (b / "ms.reduce").write_text("2.5\n")
    runners = sharing_one_worker([copy, reduce], [sys.executable, str(STANDIN)])
    try:
        together = [(r.spec.name, c.name, r.run(c)) for c in (a, b, a, b) for r in runners]
        assert runners[1].artifact(b) is not None
        pids = {p for p, *_ in _served(log)}
        assert len(pids) == 1  # one process served both kernels, every round
        assert [line.split()[3] for line in log.read_text().splitlines()][:2] == ["copy", "reduce"]
    finally:
        runners[0].close()
    assert _wait_gone(list(pids)) == []
    for spec in (copy, reduce):  # each as a runner of its own worker would have it
        alone = CupyRunner(spec, worker_argv=[sys.executable, str(STANDIN)])
        try:
            for name, checkout, res in together:
                if name == spec.name:
                    assert res == replace(alone.run(tmp_path / checkout), duration_s=res.duration_s)
        finally:
            alone.close()
    assert [res.samples for name, _, res in together if name == "reduce"] == [(2.0,) * 5, (2.5,) * 5] * 2


def test_a_kernel_that_kills_the_shared_worker_is_that_members_failed_run_only(tmp_path: Path):
    log = tmp_path / "served"
    copy, reduce = _members(log)
    good, crash = _checkout(tmp_path, "good", 1.0), _checkout(tmp_path, "crash", 1.2)
    (crash / "segv.reduce").write_text("")  # reduce's kernel dies there; copy's does not
    runners = sharing_one_worker([copy, reduce], [sys.executable, str(STANDIN)])
    try:
        r_copy, r_reduce = runners
        first = [r_copy.run(crash), r_reduce.run(crash), r_copy.run(crash), r_reduce.run(crash), r_reduce.run(good)]
        assert first[0].samples == (1.2,) * 3 and first[2].samples == (1.2,) * 3
        assert "the GPU worker died while running this commit's kernels (killed by SIGSEGV)" in first[1].error
        assert first[3].error == first[1].error  # remembered for that kernel and commit only
        assert first[4].samples == (1.0,) * 5
        served = _served(log)
        assert len({p for p, *_ in served}) == 2 and len(served) == 4  # a new worker after the crash
    finally:
        runners[0].close()


def test_the_real_worker_serves_several_kernels_on_one_device(tmp_path: Path):
    good = _tree(tmp_path / "good", 8)
    spec = _spec(reps=3)
    assert spec.cupy is not None
    hot = replace(spec.cupy, mode="hot")
    opened: list[FakeDevice] = []

    def device() -> FakeDevice:
        opened.append(FakeDevice())
        return opened[-1]

    requests = [
        {"setup": PROTOCOL, "cupy": [spec_json(spec.cupy), spec_json(hot)]},
        {"id": 1, "op": "run", "kernel": 0, "checkout": str(good), "reps": 3},
        {"id": 2, "op": "run", "kernel": 1, "checkout": str(good), "reps": 4},
    ]
    out = io.StringIO()
    assert serve(io.StringIO("".join(json.dumps(r) + "\n" for r in requests)), out, device) == 0
    hello, cold_run, hot_run = (json.loads(line) for line in out.getvalue().splitlines())
    assert _run_problem(cold_run, 1) == "" and len(cold_run["samples"]) == 3
    assert _run_problem(hot_run, 2) == "" and len(hot_run["samples"]) == 4
    assert len(opened) == 1  # one device (one CUDA context) for both kernels

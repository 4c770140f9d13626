"""--executor slurm against a real slurmctld and two real slurmd's (scripts/slurm-up).

Real bisections of generated trees through `attrib bisect --executor slurm`; faults made the
way an admin makes them (scancel of a running job); Ctrl-C as SIGINT to the CLI; a daemon
killed with -9 and restarted. The benchmark and build commands also log `$SLURMD_NODENAME
$SLURM_JOB_ID` to a file, so where things ran is checked against Slurm's own environment, not
only against what attrib says. Skipped, with the reason, when no cluster answers.

Every wait is a bounded poll with a generous deadline; nothing asserts how fast it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from conftest import interruptible, run_cli, spec
from test_daemon_e2e import _wait

from attrib.demo import generate_tree

pytestmark = pytest.mark.slow

DEFAULT_CONF = Path(os.environ.get("ATTRIB_SLURM_DIR", "/tmp/attrib-slurm")) / "slurm.conf"
DEADLINE_S = 600.0
REPS = 20
MIN_CHANGE_PCT = 20
STEP_PCT = 100  # the planted culprit doubles the work


def _conf() -> Path:
    return Path(os.environ.get("SLURM_CONF") or DEFAULT_CONF)


def why_no_slurm() -> str:
    if shutil.which("sbatch") is None:
        return "no Slurm client commands (start a test cluster: sudo scripts/slurm-up)"
    conf = _conf()
    if not conf.exists():
        return f"no slurm.conf at {conf} (sudo scripts/slurm-up, or set SLURM_CONF)"
    res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "SLURM_CONF": str(conf)})  # fmt: skip
    if res.returncode != 0:
        return f"the cluster of {conf} does not answer: {res.stderr.strip()[-200:]}"
    if len(set(res.stdout.split()[::2])) < 2:
        return f"the cluster of {conf} has fewer than two nodes: {res.stdout.strip()}"
    return ""


@pytest.fixture(autouse=True)
def slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    why = why_no_slurm()
    if why:
        pytest.skip(f"needs a Slurm cluster: {why}")
    monkeypatch.setenv("SLURM_CONF", str(_conf()))
    assert attrib_jobs() == [], "attrib jobs left in squeue by an earlier test"


def attrib_jobs() -> list[tuple[int, str, str]]:
    """(id, name, state) of every attrib job squeue lists (pending, running, completing)."""
    res = subprocess.run(["squeue", "--noheader", "--format=%i %j %T"], capture_output=True, text=True, check=True, timeout=60)
    rows = [line.split() for line in res.stdout.splitlines() if line.strip()]
    return [(int(r[0]), r[1], r[2]) for r in rows if r[1].startswith("attrib-")]


def _recipe(path: Path, where_log: Path, build_extra: str = "", slurm_extra: str = "") -> Path:
    """The demo's recipe, with every build and run also noting the node and job Slurm gave it.
    build_cpus = 4 (a whole test node): two builds at once cannot share a node."""
    path.write_text(
        f"""schema = 1
name = "demo-slurm"
[build]
commands = ["make bench", "echo build $SLURMD_NODENAME $SLURM_JOB_ID >> {where_log}"{build_extra}]
timeout_s = 120
env = {{ CFLAGS = "-O2" }}

[[benchmark]]
name = "loop"
runner = "command"
command = ["sh", "-c", "echo run $SLURMD_NODENAME $SLURM_JOB_ID >> {where_log}; exec ./bench $0", "{{reps}}"]
timeout_s = 60
reps = {REPS}
# a loaded CI machine: large planted steps and a large minimum change keep the test short
min_change_pct = {MIN_CHANGE_PCT}

[slurm]
build_cpus = 4
{slurm_extra}
"""
    )
    return path


def _where(log: Path) -> dict[str, dict[str, set[str]]]:
    """kind -> job id -> nodes, from the commands' own log lines."""
    out: dict[str, dict[str, set[str]]] = {"build": defaultdict(set), "run": defaultdict(set)}
    for line in log.read_text().splitlines():
        kind, node, job = line.split()
        out[kind][job].add(node)
    return out


def _bisect_argv(tree: Any, recipe: Path, work: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
        "--recipe", str(recipe), "--executor", "slurm", "--workdir", str(work), "--json", str(out), *extra,
    ]  # fmt: skip


def test_bisect_finds_the_culprit_past_a_build_break_with_jobs_2(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=16, culprits=((11, STEP_PCT),), broken=(4, 6)))
    where = tmp_path / "where.log"
    out = tmp_path / "result.json"
    proc = subprocess.run(
        _bisect_argv(tree, _recipe(tmp_path / "r.toml", where), tmp_path / "work", out, "--jobs", "2",
                     "--report", str(tmp_path / "report.md")),
        capture_output=True, text=True, timeout=DEADLINE_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [c["commit"] for c in result["culprits"]] == tree.culprits
    ex = result["executor"]
    assert ex["name"] == "slurm" and ex["nodes_available"] == ["n1", "n2"]
    # Rounds: one allocation each, and every run of it on one node, by Slurm's own account.
    runs = _where(where)["run"]
    measured = [r for r in ex["rounds"] if r["runs"]]
    assert len(measured) == result["rounds"]
    assert {str(r["job"]) for r in measured} == set(runs)
    assert all(len(nodes) == 1 for nodes in runs.values()), runs
    assert all({r["node"]} == runs[str(r["job"])] for r in measured)
    # Builds: separate jobs, spread over both nodes (two at once cannot share one)
    builds = _where(where)["build"]
    assert 2 <= len(builds) <= result["builds_fresh"]  # a broken build stops before it logs
    assert set().union(*builds.values()) == {"n1", "n2"}
    # The commits record where their samples came from; the report names the nodes.
    # Runs before adaptive blocks resized the runner took REPS samples, later ones the chosen size.
    blocks = result["blocks"] or {"reps_before": REPS, "reps": REPS}
    sizes = (blocks["reps_before"], blocks["reps"])
    for c in result["commits"]:
        runs_of = sum(c["nodes"].values())
        assert any(k * sizes[0] + (runs_of - k) * sizes[1] == c["samples"] for k in range(runs_of + 1)), (c, blocks)
    broken = {c["commit"] for c in result["build_failures"]}
    assert broken and broken <= set(tree.broken)
    assert "rounds per node" in (tmp_path / "report.md").read_text()
    # every job attrib submitted is accounted for: one per build command, one per allocation
    lost = sum(len(r["lost"]) for r in ex["rounds"])
    assert ex["jobs_submitted"] == len(ex["build_jobs"]) + len([r for r in ex["rounds"] if r["job"]]) + lost
    assert ex["calls"]["squeue"] > 0
    assert attrib_jobs() == []


def test_a_round_cancelled_by_an_admin_is_a_failed_run_not_a_verdict(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=12, culprits=((7, STEP_PCT),), broken=None))
    out = tmp_path / "result.json"
    proc = subprocess.Popen(
        _bisect_argv(tree, _recipe(tmp_path / "r.toml", tmp_path / "where.log"), tmp_path / "work", out),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed: list[int] = []
    try:
        # scancel (as an admin would) three running round allocations, a few rounds apart
        while len(killed) < 3 and proc.poll() is None:
            running = [j for j, name, state in attrib_jobs() if "-round-" in name and state == "RUNNING" and j not in killed]
            if running and (not killed or running[0] > killed[-1] + 3):
                subprocess.run(["scancel", str(running[0])], check=True, timeout=60)
                killed.append(running[0])
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed
    assert proc.returncode == 0, stderr[-3000:]
    result = json.loads(out.read_text())
    assert [c["commit"] for c in result["culprits"]] == tree.culprits
    rounds = {r["job"]: r for r in result["executor"]["rounds"]}
    hit = [r for r in result["executor"]["rounds"] if "CANCELLED" in r["fault"] or any("CANCELLED" in x for x in r["lost"])]
    assert hit, [rounds.get(k) for k in killed]
    # Slurm's reason reached the log line and the failed run (or the lost allocation)
    assert "CANCELLED" in stderr
    failed = [f for c in result["commits"] for f in c["failed_runs"]]
    assert all("slurm" in f for f in failed)
    assert attrib_jobs() == []


@pytest.mark.parametrize("during", ["build", "round"])
def test_ctrl_c_leaves_no_job_in_squeue(tmp_path: Path, during: str):
    tree = generate_tree(tmp_path / "repo", spec(commits=12, culprits=((7, STEP_PCT),), broken=None))
    # builds that take long enough for Ctrl-C to land while two of them are Slurm jobs
    extra = ', "sleep 300"' if during == "build" else ""
    recipe = _recipe(tmp_path / "r.toml", tmp_path / "where.log", build_extra=extra)
    proc = subprocess.Popen(
        _bisect_argv(tree, recipe, tmp_path / "work", tmp_path / "result.json", "--jobs", "2"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )  # fmt: skip
    try:
        kind = f"-{during}-"
        seen = _wait(f"a running {during} job", every_s=0.05, check=lambda: [j for j in attrib_jobs() if kind in j[1] and j[2] == "RUNNING"])
        if during == "build":
            _wait("both builds running", lambda: len([j for j in attrib_jobs() if kind in j[1] and j[2] == "RUNNING"]) >= 2)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr
    assert seen and attrib_jobs() == []
    if during == "build":  # an interrupted build is not cached as a failure: nothing was recorded
        assert not list((tmp_path / "work" / "builds").glob("*.json"))


def test_a_build_whose_job_is_lost_is_resubmitted_on_the_other_node(tmp_path: Path):
    from attrib.evaluate.executors.slurm import SlurmExecutor
    from attrib.recipe import BuildSpec, SlurmSpec

    work = tmp_path / "work"
    checkout = work / "checkouts" / "k1"
    checkout.mkdir(parents=True)
    executor = SlurmExecutor(SlurmSpec(build_cpus=4), BuildSpec(commands=("true",)), work)
    got: dict[str, Any] = {}
    worker = threading.Thread(
        target=lambda: got.update(r=executor.shell(checkout, "sleep 3; echo built $SLURMD_NODENAME", {}, 120))
    )
    try:
        worker.start()
        first = _wait("the build job to run", lambda: [j for j in attrib_jobs() if "-build-" in j[1] and j[2] == "RUNNING"])
        subprocess.run(["scancel", str(first[0][0])], check=True, timeout=60)
        worker.join(DEADLINE_S)
    finally:
        executor.close()
    res = got["r"]
    assert res.ok and res.stdout.startswith("built"), res
    assert "CANCELLED" in res.stderr and "retried after" in res.stderr
    lost, redone = executor.jobs  # SlurmBuildJob records, as the result's description keeps them
    assert lost.state == "CANCELLED" and redone.state == "COMPLETED"
    assert redone.node != lost.node and res.stdout.split()[-1] == redone.node == res.node
    assert attrib_jobs() == []


def test_leftover_jobs_of_a_daemon_job_are_cancelled_before_it_measures_again(tmp_path: Path):
    from attrib.evaluate.executors.slurm import SlurmExecutor
    from attrib.recipe import BuildSpec, SlurmSpec

    # what a kill -9'd daemon leaves: the round allocation of its job d<id> still running
    job = subprocess.run(["sbatch", "--parsable", "--job-name=attrib-dleft1-round-4", "--output=/dev/null",
                          "--wrap=sleep 600"], capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    left = int(job.stdout.strip().split(";")[0])
    _wait("the leftover to run", lambda: any(j[0] == left and j[2] == "RUNNING" for j in attrib_jobs()))
    other = SlurmExecutor(SlurmSpec(), BuildSpec(commands=("true",)), tmp_path / "w1", run_id="dother")
    assert other.orphans_cancelled == 0 and any(j[0] == left for j in attrib_jobs())  # not its job
    restarted = SlurmExecutor(SlurmSpec(), BuildSpec(commands=("true",)), tmp_path / "w2", run_id="dleft1")
    assert restarted.orphans_cancelled == 1
    assert left not in [j[0] for j in attrib_jobs()]  # gone before the executor is handed out
    other.close()
    restarted.close()
    assert attrib_jobs() == []


def test_plan_time_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tree = generate_tree(tmp_path / "repo", spec(commits=4, culprits=((2, STEP_PCT),), broken=None))
    recipe = _recipe(tmp_path / "r.toml", tmp_path / "where.log", slurm_extra=f'shared_dir = "{tmp_path / "shared"}"')
    res = run_cli("bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
                  "--executor", "slurm", "--workdir", tmp_path / "elsewhere")  # fmt: skip
    assert res.code == 2 and "shared_dir" in res.stderr and "is not under it" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert attrib_jobs() == []
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-such.conf"))
    res = run_cli("bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
                  "--executor", "slurm", "--workdir", tmp_path / "shared" / "w")  # fmt: skip
    assert res.code == 2 and "no Slurm controller answers" in res.stderr, res.stderr


def test_a_work_dir_the_nodes_cannot_see_is_refused_at_plan_time(tmp_path: Path):
    """The CLI runs in a mount namespace of its own with a private tmpfs on the work dir: the
    slurmd's, outside it, see an empty directory there, as a node without the shared mount would."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to give the CLI a mount the nodes do not have")
    tree = generate_tree(tmp_path / "repo", spec(commits=4, culprits=((2, STEP_PCT),), broken=None))
    recipe = _recipe(tmp_path / "r.toml", tmp_path / "where.log")
    private = tmp_path / "private"
    private.mkdir()
    script = 'mount -t tmpfs none "$1" && shift && exec "$@"'
    proc = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script, "sh", str(private), sys.executable, "-m", "attrib", "bisect",
         "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad, "--recipe", str(recipe),
         "--executor", "slurm", "--workdir", str(private / "work")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 2 and "mount" in proc.stderr and "attrib" not in proc.stderr:
        pytest.skip(f"cannot make a private mount here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "a Slurm node cannot read it" in lines[0] and "shared_dir" in lines[0], proc.stderr
    _wait("the check job to end", lambda: attrib_jobs() == [], deadline_s=120)  # srun ran it to its end


def test_slurm_builds_a_tree_with_submodules_at_their_pins(tmp_path: Path):
    """Build jobs on the nodes read each checkout's submodule at its commit's pin (the checkout
    and the submodule mirrors are in the shared work dir): the compiler roll is named."""
    from dependency_tree import recipe_text
    from test_submodules import roll_tree

    _, k = roll_tree(tmp_path, n_super=8, roll=5)
    recipe = tmp_path / "r.toml"
    recipe.write_text(recipe_text(min_change_pct=3.0) + "\n[slurm]\nbuild_cpus = 4\n")
    out = tmp_path / "result.json"
    tree = type("Tree", (), {"path": k.path, "good": k.commits[0], "bad": k.commits[-1]})
    proc = subprocess.run(_bisect_argv(tree, recipe, tmp_path / "work", out), capture_output=True, text=True, timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["executor"]["name"] == "slurm" and result["executor"]["build_jobs"]
    assert [c["commit"] for c in result["culprits"]][:1] == [k.commits[5]]
    assert not result["build_failures"]
    assert attrib_jobs() == []

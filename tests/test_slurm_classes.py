"""Machine classes under --executor slurm (issue 29, item 6), on the real test cluster: n1
carries the feature h100, n2 h200 (scripts/slurm-up declares them). A group of two members,
one configured gpu=H100 and one gpu=H200, is bisected by the real CLI: every run of a member
lands on the node of its class, by Slurm's own environment ($SLURMD_NODENAME), and Slurm's
record of each round's job carries the class's constraint."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import spec
from test_slurm import DEADLINE_S, MIN_CHANGE_PCT, REPS, STEP_PCT, _bisect_argv, attrib_jobs, slurm  # noqa: F401

from attrib.demo import generate_tree

pytestmark = pytest.mark.slow

NODE_OF = {"h100": "n1", "h200": "n2"}


def _features() -> dict[str, str]:
    res = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%N %f"], capture_output=True, text=True, check=True, timeout=60)
    return dict(line.split() for line in res.stdout.splitlines() if line.strip())


@pytest.fixture(autouse=True)
def featured(slurm: None) -> None:  # noqa: F811
    have = _features()
    if any(have.get(node) != feature for feature, node in NODE_OF.items()):
        pytest.skip(f"needs n1 with feature h100 and n2 with h200 (scripts/slurm-up declares them), has {have}")


def _recipe(path: Path, where: Path) -> Path:
    members = "".join(
        f"""
[[benchmark]]
name = "loop_{gpu}"
runner = "command"
command = ["sh", "-c", "echo loop_{gpu} $SLURMD_NODENAME $SLURM_JOB_ID >> {where}; exec ./bench $0", "{{reps}}"]
timeout_s = 60
reps = {REPS}
min_change_pct = {MIN_CHANGE_PCT}
config = {{ gpu = "{gpu.upper()}" }}
"""
        for gpu in ("h100", "h200")
    )
    path.write_text(
        f"""schema = 1
name = "demo-classes"
[build]
commands = ["make bench"]
timeout_s = 120
{members}
[slurm]
build_cpus = 4
[slurm.classes."gpu=H100"]
constraint = "h100"
[slurm.classes."gpu=H200"]
constraint = "h200"
"""
    )
    return path


def test_each_members_rounds_run_on_a_node_of_its_class(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=12, culprits=((7, STEP_PCT),)))
    where = tmp_path / "where.log"
    out = tmp_path / "result.json"
    argv = _bisect_argv(tree, _recipe(tmp_path / "r.toml", where), tmp_path / "work", out,
                        "--benchmark", "loop_h100", "--benchmark", "loop_h200")  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    # both members found the planted culprit
    assert {m["benchmark"]: [c["commit"] for c in m["culprits"]] for m in result["members"]} == {
        "loop_h100": tree.culprits, "loop_h200": tree.culprits,
    }  # fmt: skip
    assert {m["benchmark"]: m["config"] for m in result["members"]} == {"loop_h100": {"gpu": "H100"}, "loop_h200": {"gpu": "H200"}}
    # every run of a member on its class's node, by Slurm's own account ($SLURMD_NODENAME)
    nodes: dict[str, set[str]] = defaultdict(set)
    jobs: dict[str, set[str]] = defaultdict(set)
    for line in where.read_text().splitlines():
        member, node, job = line.split()
        nodes[member].add(node)
        jobs[member].add(job)
    assert dict(nodes) == {"loop_h100": {"n1"}, "loop_h200": {"n2"}}
    assert not jobs["loop_h100"] & jobs["loop_h200"]  # one class per allocation: never paired across nodes
    # the result's rounds say the same, each with its class
    rounds = [r for r in result["executor"]["rounds"] if r["runs"]]
    by_class: dict[str, set[str]] = defaultdict(set)
    for r in rounds:
        by_class[r["machine_class"]].add(r["node"])
    assert dict(by_class) == {"gpu=H100": {"n1"}, "gpu=H200": {"n2"}}
    class_of_job = {str(r["job"]): r["machine_class"] for r in rounds}
    assert all(class_of_job[j] == "gpu=H100" for j in jobs["loop_h100"])
    assert all(class_of_job[j] == "gpu=H200" for j in jobs["loop_h200"])
    # Slurm's record of each round's job: the constraint attrib's sbatch argv carried
    # (finished jobs stay visible MinJobAge = 600 s on the test cluster)
    for r in rounds[:6]:
        shown = subprocess.run(["scontrol", "show", "job", "-o", str(r["job"])], capture_output=True, text=True, timeout=60)
        fields = dict(part.split("=", 1) for part in shown.stdout.split() if "=" in part)
        assert fields.get("Features") == {"gpu=H100": "h100", "gpu=H200": "h200"}[r["machine_class"]], shown.stdout
    assert attrib_jobs() == []


def test_a_single_benchmark_of_a_class_runs_on_its_nodes_only(tmp_path: Path):
    tree = generate_tree(tmp_path / "repo", spec(commits=6, culprits=((3, STEP_PCT),)))
    where = tmp_path / "where.log"
    out = tmp_path / "result.json"
    argv = _bisect_argv(tree, _recipe(tmp_path / "r.toml", where), tmp_path / "work", out, "--benchmark", "loop_h200")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [c["commit"] for c in result["culprits"]] == tree.culprits
    assert {tuple(line.split()[:2]) for line in where.read_text().splitlines()} == {("loop_h200", "n2")}
    rounds = [r for r in result["executor"]["rounds"] if r["runs"]]
    assert rounds and {(r["machine_class"], r["node"]) for r in rounds} == {("gpu=H200", "n2")}
    assert attrib_jobs() == []

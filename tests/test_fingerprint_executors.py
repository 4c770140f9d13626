"""The environment fingerprint read where the work runs (evaluate/fingerprint.py), through the
real executors: the host (local), a container of the real Docker engine (docker), a node of the
real two-node Slurm cluster (slurm); and a real bisection that stops when it changes."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli, spec
from test_slurm import why_no_slurm

from attrib.demo import DEMO_RECIPE, generate_tree
from attrib.evaluate.executors.local import LocalExecutor
from attrib.evaluate.fingerprint import build_compilers, read_fingerprint
from attrib.recipe import BuildSpec, EnvironmentSpec

pytestmark = pytest.mark.slow

MAKE = BuildSpec(commands=("make bench",), env={"CFLAGS": "-O2"})


def _cc_line() -> str:
    out = subprocess.run(["cc", "--version"], capture_output=True, text=True, check=True).stdout
    return out.splitlines()[0].strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f").write_text("x\n")
    subprocess.run(["git", "-C", str(repo), "add", "f"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"], check=True)
    return repo


def test_the_compilers_a_build_calls_are_found_in_its_commands_and_env():
    assert build_compilers(MAKE) == ('"${CC:-cc}"', '"${CXX:-c++}"')
    cuda = BuildSpec(commands=("ccache nvcc -O3 -c k.cu", "/usr/bin/g++-12 main.o -o bench"), env={"CXX": "clang++"})
    assert build_compilers(cuda) == ('"${CXX}"', "nvcc", "/usr/bin/g++-12")
    assert build_compilers(cuda, ("/opt/cuda/bin/nvcc",)) == ("/opt/cuda/bin/nvcc",)
    assert build_compilers(BuildSpec(commands=("./build.sh",))) == ()


def test_local_reads_this_host_and_a_recipes_probe_in_the_checkout(tmp_path):
    repo = _repo(tmp_path)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    probes = {"head": "git rev-parse HEAD", "broken": "exit 3"}
    fp = read_fingerprint(LocalExecutor(tmp_path / "w"), MAKE, EnvironmentSpec((), probes), repo)
    assert fp.get("kernel") == platform.release()
    assert fp.get("compiler") == f"{_cc_line()}; {subprocess.run(['c++', '--version'], capture_output=True, text=True).stdout.splitlines()[0].strip()}"
    assert fp.get("probe.head") == head
    assert fp.unavailable["probe.broken"] == "exit 3"
    assert fp.unavailable["image"] == "not in a container attrib started"
    assert fp.where == platform.node()
    if os.path.exists("/etc/os-release"):
        assert fp.get("os") and fp.get("os") in Path("/etc/os-release").read_text()


def test_docker_reads_inside_the_container_with_the_images_id(engine, tmp_path):
    from attrib.evaluate.executors.docker import DockerExecutor
    from attrib.evaluate.images import CPU_IMAGE

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    executor = DockerExecutor(CPU_IMAGE, client=engine, workdir=tmp_path / "w")
    try:
        fp = read_fingerprint(executor, MAKE, EnvironmentSpec(), checkout)
    finally:
        executor.close()
    inside = engine.containers.run(CPU_IMAGE, ["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME; cc --version | head -n1"], remove=True)
    os_name, cc = inside.decode().strip().splitlines()
    assert fp.get("os") == os_name and (fp.get("compiler") or "").startswith(cc)
    assert fp.get("image") == engine.images.get(CPU_IMAGE).id
    assert fp.get("kernel") == platform.release()  # a container shares the host's kernel
    assert fp.where != platform.node()  # the container's own host name


def test_slurm_reads_the_node_its_job_ran_on(tmp_path, monkeypatch):
    why = why_no_slurm()
    if why:
        pytest.skip(f"needs a Slurm cluster: {why}")
    monkeypatch.setenv("SLURM_CONF", os.environ.get("SLURM_CONF") or "/tmp/attrib-slurm/slurm.conf")
    from attrib.evaluate.executors.slurm import SlurmExecutor
    from attrib.recipe import SlurmSpec

    work = tmp_path / "work"
    checkout = work / "checkouts" / "k1"
    checkout.mkdir(parents=True)
    executor = SlurmExecutor(SlurmSpec(), MAKE, work)
    try:
        fp = read_fingerprint(executor, MAKE, EnvironmentSpec((), {"node": "echo $SLURMD_NODENAME"}), checkout)
    finally:
        executor.close()
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True).stdout.split()
    assert fp.where in nodes and fp.get("probe.node") == fp.where
    assert fp.get("kernel") == platform.release() and fp.get("compiler")


def test_a_bisection_whose_environment_changes_stops_with_one_line_naming_the_key(tmp_path):
    """A probe reads a file outside the tree that every build rewrites (as a driver update
    lands under a running bisection): the run stops, exit 12, one line, no result."""
    tree = generate_tree(tmp_path / "repo", spec(commits=12, culprits=((7, 10),)))
    marker = tmp_path / "driver-version"
    marker.write_text("1\n")
    build = f'commands = ["make bench", "n=$(cat {marker}); echo $((n + 1)) > {marker}"]'
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        DEMO_RECIPE.replace('commands = ["make bench"]', build) + f'\n[environment]\nprobes = {{ driver = "cat {marker}" }}\n'
    )
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out,
    )  # fmt: skip
    assert res.code == 12, res.stdout + res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "environment changed" in ln]
    # read first after the first build (2), again later (at the end, or sooner past a minute)
    assert len(lines) == 1 and re.search(r"environment changed [^:]+: probe.driver 2 -> [3-9]\d* \(stopped", lines[0]), res.stderr
    assert not out.exists()


def test_a_bisections_result_and_report_carry_the_fingerprint(tmp_path):
    tree = generate_tree(tmp_path / "repo", spec(commits=6, culprits=((3, 10),)))
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(DEMO_RECIPE + '\n[environment]\nprobes = { make = "make --version" }\n')
    out = tmp_path / "result.json"
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", recipe,
        "--workdir", tmp_path / "work", "--json", out, "--report", tmp_path / "report.md",
    )  # fmt: skip
    assert res.code in (0, 10), res.stdout + res.stderr
    fp = json.loads(out.read_text())["environment"]["fingerprint"]
    assert fp["values"]["kernel"] == platform.release() and fp["values"]["probe.make"].startswith("GNU Make")
    assert fp["values"]["compiler"].startswith(_cc_line())
    report = (tmp_path / "report.md").read_text()
    assert "## Where it ran" in report and f"- kernel: {platform.release()}" in report


def test_attrib_compares_document_and_report_carry_where_it_ran(tmp_path):
    tree = generate_tree(tmp_path / "repo", spec(commits=4, culprits=((2, 10),)))
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(DEMO_RECIPE)
    out = tmp_path / "compare.json"
    res = run_cli(
        "compare", tree.good, tree.bad, "--repo", tree.path, "--recipe", recipe, "--workdir", tmp_path / "work",
        "--json", out,
    )  # fmt: skip
    assert res.code in (0, 10, 11), res.stdout + res.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "compare" and doc["environment"]["values"]["kernel"] == platform.release()
    report = run_cli("report", out)
    assert report.code == 0 and "## Where it ran" in report.stdout and f"- kernel: {platform.release()}" in report.stdout

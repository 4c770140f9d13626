"""--executor docker against a real Docker engine and the image `attrib images build` makes.

Skipped on a developer machine without an engine; in CI (CI=true) a missing engine or image
fails instead, because .ci/run starts dockerd and builds the image."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import OneCulpritTree, assert_nothing_rebuilt, interruptible, run_cli, spec

from attrib.demo import DEMO_RECIPE

pytestmark = pytest.mark.slow

IMAGE = "attrib/cpu:latest"


def _leftovers(client, workdir: Path) -> list[str]:
    """This test's containers still on the engine (other tests may run beside it)."""
    from attrib.evaluate.executors.docker import leftover_containers

    return leftover_containers(client, workdir)


def _recipe(tmp_path: Path, *, hang: bool = False, image: str = IMAGE, extra_build: str = "") -> Path:
    commands = '["make bench"]'
    if hang:
        commands = '["if grep -q \'does not compile\' util.c; then sleep 60; fi", "make bench"]'
    text = DEMO_RECIPE.replace('commands = ["make bench"]', f"commands = {commands}\nimage = \"{image}\"{extra_build}")
    path = tmp_path / "docker.toml"
    path.write_text(text)
    return path


def _bisect(tree, tmp_path: Path, recipe: Path, work: Path, *extra: str, env: dict[str, str] | None = None):
    out = tmp_path / "result.json"
    out.unlink(missing_ok=True)
    args = [
        "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad, "--recipe", str(recipe),
        "--executor", "docker", "--workdir", str(work), "--json", str(out), "--report", str(tmp_path / "r.md"), *extra,
    ]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "attrib", *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=900)
    result = json.loads(out.read_text()) if out.exists() else None
    return proc, result


def test_docker_bisect_with_a_build_break_that_hangs(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=16, culprits=((11, 10),), broken=(6, 9)))
    # 20 s: a healthy build is ~1 s alone but took 8 s on a loaded CI machine (the first container
    # of a fresh engine); the hang sleeps 60 s, so it still times out
    recipe = _recipe(tmp_path, hang=True).read_text().replace("timeout_s = 120", "timeout_s = 20")
    (tmp_path / "hang.toml").write_text(recipe)
    proc, result = _bisect(tree, tmp_path, tmp_path / "hang.toml", tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    assert [c["commit"] for c in result["culprits"]] == tree.culprits
    assert result["executor"]["name"] == "docker"
    assert result["executor"]["image_id"].startswith("sha256:")
    assert result["executor"]["gpus"] is False
    reasons = [f["reason"] for f in result["build_failures"]]
    assert reasons and all("timed out" in r for r in reasons)
    assert "image `attrib/cpu:latest`" in (tmp_path / "r.md").read_text()
    assert _leftovers(engine, tmp_path / "work") == []


def test_docker_builds_as_non_root_without_network_and_caches(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=12, culprits=((7, 10),), broken=None))
    recipe = _recipe(tmp_path)
    recipe.write_text(
        recipe.read_text().replace('commands = ["make bench"]', 'commands = ["id -u; ls /sys/class/net", "make bench"]')
    )
    proc, first = _bisect(tree, tmp_path, recipe, tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    log = Path(first["commits"][0]["build"]["log"]).read_text()
    lines = log.splitlines()
    assert "1000" in lines and "lo" in lines and "eth0" not in lines, log
    proc, second = _bisect(tree, tmp_path, recipe, tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    assert first["builds_fresh"] == first["builds"] > 0
    # nothing the first run built is built again; a fresh build is a commit the first run never
    # met (both runs time a real program: the second search may probe another commit)
    assert_nothing_rebuilt(first, second)
    assert [c["commit"] for c in second["culprits"]] == tree.culprits
    assert _leftovers(engine, tmp_path / "work") == []


def test_engine_not_reachable_is_one_line_and_exit_2(make_tree, tmp_path):
    tree = make_tree(spec(commits=4, culprits=(), broken=None))
    proc, result = _bisect(tree, tmp_path, _recipe(tmp_path), tmp_path / "work", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "docker engine not reachable" in lines[0] and "dockerd" in lines[0]
    assert "DOCKER_HOST" in lines[0]
    assert result is None and not (tmp_path / "work").exists()


def test_missing_image_names_it_and_the_command_that_builds_it(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=4, culprits=(), broken=None))
    proc, _ = _bisect(tree, tmp_path, _recipe(tmp_path, image="attrib/no-such-image:1"), tmp_path / "work")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "attrib/no-such-image:1" in lines[0] and "attrib images build" in lines[0]
    assert not (tmp_path / "work").exists()


def test_ctrl_c_leaves_no_container_behind(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=12, culprits=((6, 10),), broken=None))
    recipe = _recipe(tmp_path)
    # A benchmark that sleeps: the interrupt lands while a container is running it.
    recipe.write_text(recipe.read_text().replace('command = ["./bench", "{reps}"]', 'command = ["sh", "-c", "sleep 30; ./bench {reps}"]'))
    args = [
        sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
        "--recipe", str(recipe), "--executor", "docker", "--workdir", str(tmp_path / "work"),
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        deadline = time.monotonic() + 120
        while not _leftovers(engine, tmp_path / "work") and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert _leftovers(engine, tmp_path / "work"), "a container should be running by now"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert _leftovers(engine, tmp_path / "work") == []


def test_two_bisections_of_one_repository_at_once(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=16, culprits=((9, 10),), broken=None))
    recipe = _recipe(tmp_path)
    procs = []
    for i in range(2):
        out = tmp_path / f"r{i}.json"
        args = [
            sys.executable, "-m", "attrib", "bisect", "--repo", str(tree.path), "--good", tree.good, "--bad", tree.bad,
            "--recipe", str(recipe), "--executor", "docker", "--workdir", str(tmp_path / "shared-work"), "--json", str(out),
        ]  # fmt: skip
        procs.append((subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out))
    for proc, out in procs:
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        assert [c["commit"] for c in json.loads(out.read_text())["culprits"]] == tree.culprits
    assert _leftovers(engine, tmp_path / "shared-work") == []


def test_docker_and_local_agree_on_the_same_tree(engine, make_tree, tmp_path):
    tree = make_tree(spec(commits=20, culprits=((13, 10),), broken=(4, 6)))
    proc, docker_result = _bisect(tree, tmp_path, _recipe(tmp_path), tmp_path / "work")
    assert proc.returncode == 0, proc.stderr
    local = tmp_path / "local.toml"
    local.write_text(DEMO_RECIPE)
    res = run_cli(
        "bisect", "--repo", tree.path, "--good", tree.good, "--bad", tree.bad, "--recipe", local,
        "--workdir", tmp_path / "lwork", "--json", tmp_path / "local.json",
    )  # fmt: skip
    assert res.code == 0, res.stderr
    local_result = json.loads((tmp_path / "local.json").read_text())
    assert [c["commit"] for c in docker_result["culprits"]] == [c["commit"] for c in local_result["culprits"]] == tree.culprits


@pytest.mark.parametrize(
    ("name", "tree_spec", "code"),
    [
        ("two culprits", {"commits": 24, "culprits": ((7, 6), (17, 7)), "broken": None}, 0),
        ("merge", {"commits": 16, "culprits": (), "broken": None, "merge_at": 9, "side_commits": 4, "side_culprit": (2, 10)}, 0),
        ("no regression", {"commits": 16, "culprits": (), "broken": (3, 5)}, 10),
    ],
)
def test_local_scenarios_pass_in_docker_too(engine, make_tree, tmp_path, name, tree_spec, code):
    tree = make_tree(spec(**tree_spec))
    proc, result = _bisect(tree, tmp_path, _recipe(tmp_path), tmp_path / "work")
    assert proc.returncode == code, (name, proc.stderr)
    assert [c["commit"] for c in result["culprits"]] == tree.culprits
    if tree_spec.get("merge_at"):
        assert result["culprits"][0]["via_merge"] == tree.merge
    assert _leftovers(engine, tmp_path / "work") == []


def test_close_removes_a_container_whose_handle_never_came_back(engine, tmp_path):
    # Ctrl-C inside `containers.run`: the engine made and started the container, but the call
    # never returned it to the executor. close() finds it by the executor's run label; a build
    # thread that asks for a container after close() gets none.
    from attrib.errors import ExecutorClosed
    from attrib.evaluate.executors.docker import DockerExecutor

    ex = DockerExecutor(IMAGE, client=engine, workdir=tmp_path)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    assert ex.run(checkout, ["true"], 30).returncode == 0  # one container it knows of
    engine.containers.run(IMAGE, ["sleep", "infinity"], detach=True, network_mode="none", labels=ex.labels)
    assert len(_leftovers(engine, tmp_path)) == 2
    ex.close()
    assert _leftovers(engine, tmp_path) == []
    with pytest.raises(ExecutorClosed):
        ex.run(checkout, ["true"], 30)
    assert _leftovers(engine, tmp_path) == []


def test_docker_builds_a_tree_with_submodules_at_their_pins(engine, tmp_path):
    """The container sees the checkout with its submodule checked out at each commit's pin: the
    roll of the pinned compiler is named, and both ends built inside the container."""
    from dependency_tree import recipe_text
    from test_submodules import roll_tree

    _, k = roll_tree(tmp_path, n_super=8, roll=5)
    recipe = tmp_path / "docker.toml"
    recipe.write_text(recipe_text().replace("[build]\n", f'[build]\nimage = "{IMAGE}"\n'))
    tree = OneCulpritTree(k.path, k.commits[0], k.commits[-1], k.commits[5])
    proc, result = _bisect(tree, tmp_path, recipe, tmp_path / "work")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert result["executor"]["name"] == "docker"
    assert [c["commit"] for c in result["culprits"]][:1] == [tree.culprit]
    assert not result["build_failures"]
    assert _leftovers(engine, tmp_path / "work") == []

"""What attrib would hand to Slurm, without a cluster: the argv of builds, rounds and steps
(pyxis flags included: pyxis cannot run here, so its contract is checked on the argv it would
get), how squeue's and scontrol's answers read, and the [slurm] table's validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from attrib.errors import ConfigError
from attrib.evaluate.executors.slurm_plan import (
    Backoff,
    Ending,
    JobKind,
    SlurmState,
    build_time_min,
    ending,
    exclusion,
    job_from_scontrol,
    job_from_squeue,
    job_name,
    machine_class,
    run_prefix,
    sbatch_build_argv,
    sbatch_round_argv,
    srun_step_argv,
    with_class,
)
from attrib.recipe import SlurmClass, SlurmSpec, parse_recipe

W = Path("/shared/attrib/work")
CK = W / "checkouts" / "abc"
LOGS = W / "slurm"
SCRIPT = LOGS / "attrib-job.sh"


def _recipe(slurm: str) -> dict:
    import tomllib

    base = 'schema = 1\nname = "r"\n[build]\ncommands = ["make"]\n[[benchmark]]\nname = "b"\nrunner = "command"\ncommand = ["./b"]\n'
    return tomllib.loads(base + "[slurm]\n" + slurm)


def test_defaults_submit_to_the_default_partition_with_names_and_no_requeue():
    argv = sbatch_build_argv(SlurmSpec(), "attrib-x-build-abc-0", CK, LOGS, SCRIPT, ["sh", "-c", "make"], 11, W)
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "--job-name=attrib-x-build-abc-0" in argv and "--no-requeue" in argv and "--time=11" in argv
    assert f"--chdir={CK}" in argv and f"--output={LOGS}/%x-%j.out" in argv
    assert not any(a.startswith(("--partition", "--account", "--qos", "--gres", "--exclusive")) for a in argv)
    # the command reaches attrib's script as arguments, unchanged: no shell of attrib's making
    assert argv[-4:] == [str(SCRIPT), "sh", "-c", "make"]


def test_every_setting_lands_on_the_argv():
    spec = SlurmSpec(
        partition="gpu", account="perf", qos="high", gres="gpu:1", build_gres="gpu:0", constraint="h100",
        build_cpus=16, sbatch_args=("--mem=32G",), round_time_min=20,
    )  # fmt: skip
    build = sbatch_build_argv(spec, "n", CK, LOGS, SCRIPT, ["true"], 5, W, exclude=("n3",))
    for a in ("--partition=gpu", "--account=perf", "--qos=high", "--constraint=h100", "--cpus-per-task=16",
              "--gres=gpu:0", "--exclude=n3", "--mem=32G"):  # fmt: skip
        assert a in build
    rnd = sbatch_round_argv(spec, "attrib-x-round-3", LOGS, SCRIPT)
    assert "--gres=gpu:1" in rnd and "--exclusive" in rnd and "--time=20" in rnd and "--nodes=1" in rnd
    assert rnd[-3:] == [str(SCRIPT), "sleep", "1200"]


def test_a_step_runs_in_the_rounds_allocation():
    argv = srun_step_argv(SlurmSpec(), 42, CK, W, ["./bench", "10"], SCRIPT)
    assert argv[:3] == ["srun", "--jobid=42", "--overlap"]
    assert argv[-3:] == [str(SCRIPT), "./bench", "10"]


def test_pyxis_argv_mounts_the_shared_dir_at_the_same_path():
    spec = SlurmSpec(container_image="nvcr.io#nvidia/pytorch:24.05-py3", container_mounts=("/data:/data:ro",),
                     shared_dir="/shared/attrib")  # fmt: skip
    step = srun_step_argv(spec, 7, CK, W, ["./bench", "10"], SCRIPT)
    assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in step
    assert "--container-mounts=/shared/attrib:/shared/attrib,/data:/data:ro" in step
    assert f"--container-workdir={CK}" in step
    assert str(SCRIPT) not in step and step[-2:] == ["./bench", "10"]  # the script is not inside the image
    build = sbatch_build_argv(spec, "n", CK, LOGS, SCRIPT, ["sh", "-c", "make"], 5, W)
    # pyxis flags are srun's: the batch script runs the build as one containerised step
    at = build.index(str(SCRIPT))
    assert build[at + 1 : at + 3] == ["srun", "--ntasks=1"]
    assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in build[at:]
    assert build[-3:] == ["sh", "-c", "make"]


def test_squeue_entries_of_22_05_and_later_read_the_same():
    old = {"job_id": 4, "name": "attrib-a-build-x-0", "job_state": "FAILED", "nodes": "n1",
           "state_reason": "NonZeroExitCode", "exit_code": 3 << 8, "start_time": 10, "end_time": 12}  # fmt: skip
    new = {**old, "job_state": ["FAILED"], "exit_code": {"status": ["EXIT"], "return_code": {"set": True, "number": 3}},
           "start_time": {"set": True, "number": 10}}  # fmt: skip
    for entry in (old, new):
        info = job_from_squeue(entry)
        assert (info.state, info.exit_status, info.nodes, info.start_time) == (SlurmState.FAILED, 3, "n1", 10)
        assert ending(info) is Ending.EXITED  # the command failed: the build's own result
    cancelled = job_from_squeue({**old, "job_state": "CANCELLED", "exit_code": 15, "state_reason": "None"})
    assert cancelled.exit_signal == 15 and ending(cancelled) is Ending.FAULT


@pytest.mark.parametrize(
    ("state", "reason", "expected"),
    [
        ("COMPLETED", "None", Ending.EXITED),
        ("FAILED", "NonZeroExitCode", Ending.EXITED),
        ("FAILED", "JobLaunchFailure", Ending.FAULT),
        ("TIMEOUT", "None", Ending.TIMED_OUT),
        ("NODE_FAIL", "None", Ending.FAULT),
        ("PREEMPTED", "None", Ending.FAULT),
        ("BOOT_FAIL", "None", Ending.FAULT),
        ("UNKNOWN", "", Ending.FAULT),
    ],
)
def test_endings(state, reason, expected):
    info = job_from_squeue({"job_id": 1, "name": "n", "job_state": state, "state_reason": reason, "exit_code": 0})
    assert ending(info) is expected


def test_scontrol_fallback_line():
    line = ("JobId=3 JobName=attrib-x-round-0 UserId=root(0) JobState=CANCELLED Reason=None ExitCode=0:15 "
            "NodeList=n2 BatchHost=n2")  # fmt: skip
    info = job_from_scontrol(line)
    assert info is not None and (info.job_id, info.state, info.nodes, info.exit_signal) == (3, SlurmState.CANCELLED, "n2", 15)
    assert "CANCELLED on n2" in info.describe()
    assert job_from_scontrol("slurm_load_jobs error: Invalid job id specified") is None


def test_names_and_retries_off_lost_nodes():
    assert job_name("d5f3", JobKind.ROUND, "2") == "attrib-d5f3-round-2"
    assert job_name("d5f3", JobKind.ROUND, "2").startswith(run_prefix("d5f3"))
    assert exclusion({"n1"}, ["n1", "n2"]) == ("n1",)
    assert exclusion({"n1", "n2"}, ["n1", "n2"]) == ()  # never exclude every node: retry anywhere
    assert exclusion({"gone"}, ["n1"]) == ()
    assert build_time_min(SlurmSpec(), 600) == 11 and build_time_min(SlurmSpec(build_time_min=3), 600) == 3


def test_backoff_grows_to_its_cap():
    b, x, seen = Backoff(), Backoff().first_s, []
    for _ in range(20):
        x = b.next(x)
        seen.append(x)
    assert seen == sorted(seen) and seen[-1] == b.max_s


def test_the_slurm_table_parses_with_documented_defaults(tmp_path):
    recipe = parse_recipe(_recipe('partition = "gpu"\nsbatch_args = ["--mem=8G", "--mail-type=END"]\n'), tmp_path / "r.toml")
    assert recipe.slurm == SlurmSpec(partition="gpu", sbatch_args=("--mem=8G", "--mail-type=END"))
    assert parse_recipe(_recipe("max_retries = 0\n"), tmp_path / "r.toml").slurm.max_retries == 0


@pytest.mark.parametrize(
    ("text", "key", "needle"),
    [
        ('sbatch_args = ["--job-name=x"]', "slurm.sbatch_args[0]", "set by attrib"),
        ('sbatch_args = ["-p gpu"]', "slurm.sbatch_args[0]", "long option"),
        ('sbatch_args = ["--mem=1G; rm -rf /"]', None, None),  # one argv element: no shell sees it
        ('container_mounts = ["/a:/b"]', "slurm.container_mounts", "only with slurm.container_image"),
        ('container_image = "x"\ncontainer_mounts = ["rel:/b"]', "slurm.container_mounts[0]", "without commas"),
        ('shared_dir = "relative"', "slurm.shared_dir", "absolute path"),
        ("round_time_min = 0", "slurm.round_time_min", "positive integer"),
        ('partitoin = "gpu"', "slurm.partitoin", "unknown key"),
        ('[slurm.classes.gpu]\nconstraint = "h100"', 'slurm.classes."gpu"', "key=value"),
        ('[slurm.classes."gpu=H100"]', 'slurm.classes."gpu=H100"', "partition and/or constraint"),
        ('[slurm.classes."gpu=H100"]\nconstrain = "h100"', 'slurm.classes."gpu=H100".constrain', "unknown key"),
        ('[slurm.classes."gpu=H100"]\nconstraint = 3', 'slurm.classes."gpu=H100".constraint', "string"),
        ('classes = { "gpu=H100" = "h100" }', 'slurm.classes."gpu=H100"', "a table"),
    ],
)
def test_bad_slurm_tables_name_the_key(tmp_path, text, key, needle):
    if key is None:
        spec = parse_recipe(_recipe(text + "\n"), tmp_path / "r.toml").slurm
        assert spec is not None and spec.sbatch_args == ("--mem=1G; rm -rf /",)
        return
    with pytest.raises(ConfigError) as err:
        parse_recipe(_recipe(text + "\n"), tmp_path / "r.toml")
    assert err.value.key == key and needle in str(err.value) and "\n" not in str(err.value)


CLASSES = '[slurm.classes."gpu=H100"]\nconstraint = "h100"\n[slurm.classes."gpu=H200"]\npartition = "big"\nconstraint = "h200"\n'


def test_machine_classes_parse_and_place_a_configuration(tmp_path):
    recipe = parse_recipe(_recipe('partition = "gpu"\nconstraint = "any"\n' + CLASSES), tmp_path / "r.toml")
    spec = recipe.slurm
    assert spec is not None and spec.classes == (
        SlurmClass("gpu", "H100", constraint="h100"), SlurmClass("gpu", "H200", partition="big", constraint="h200"),
    )  # fmt: skip
    h100 = machine_class(spec, (("dtype", "bf16"), ("gpu", "H100")))
    assert h100 is not None and h100.label == "gpu=H100"
    assert machine_class(spec, (("gpu", "A100"),)) is None and machine_class(spec, ()) is None
    # a class's constraint and partition replace the table's on its rounds; without one the table's hold
    argv = sbatch_round_argv(with_class(spec, h100), "n", LOGS, SCRIPT)
    assert "--constraint=h100" in argv and "--partition=gpu" in argv and "--constraint=any" not in argv
    argv = sbatch_round_argv(with_class(spec, machine_class(spec, (("gpu", "H200"),))), "n", LOGS, SCRIPT)
    assert "--constraint=h200" in argv and "--partition=big" in argv
    assert with_class(spec, None) == spec
    assert "--constraint=any" in sbatch_round_argv(spec, "n", LOGS, SCRIPT)


def test_a_benchmark_configuration_is_declared_and_checked(tmp_path):
    import tomllib

    base = 'schema = 1\nname = "r"\n[build]\ncommands = ["make"]\n[[benchmark]]\nname = "b"\nrunner = "command"\ncommand = ["./b"]\n'
    recipe = parse_recipe(tomllib.loads(base + 'config = { gpu = "H100", dtype = "bf16" }\n'), tmp_path / "r.toml")
    assert recipe.benchmarks[0].config == (("dtype", "bf16"), ("gpu", "H100"))
    for text, key in (('config = { gpu = "" }', "benchmark[0].config.gpu"), ('config = { gpu = "a b" }', "benchmark[0].config.gpu"),
                      ("config = { gpu = 1 }", "benchmark[0].config")):  # fmt: skip
        with pytest.raises(ConfigError) as err:
            parse_recipe(tomllib.loads(base + text + "\n"), tmp_path / "r.toml")
        assert err.value.key == key and "\n" not in str(err.value)
    two = base + 'config = { gpu = "H100", host = "x" }\n[slurm.classes."gpu=H100"]\nconstraint = "a"\n[slurm.classes."host=x"]\nconstraint = "b"\n'
    with pytest.raises(ConfigError) as err:
        parse_recipe(tomllib.loads(two), tmp_path / "r.toml")
    assert err.value.key == "benchmark[0].config" and "gpu=H100 and host=x" in str(err.value)

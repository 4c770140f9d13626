"""Local commands die with what started them (issue 33, point 3): real processes, real signals.

A command runs under a guard (executors/guard.py) that kills its whole process group when the
attrib process that started it dies, kill -9 included, or when its own deadline passes; what is
left of a dead run's commands is found by its ledger's token and ended, and a pid the kernel
gave to another process since is never signalled."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from attrib.evaluate.executors.local import LocalExecutor, run_process

DEADLINE_S = 30.0  # generous bound for a kill to take effect on a busy machine


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return state[state.rindex(")") + 2] == "Z"  # a zombie has ended; only its parent's wait is left


def _wait_gone(pids: list[int], deadline_s: float = DEADLINE_S) -> list[int]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not all(_gone(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if not _gone(p)]


def _wait_file(path: Path) -> str:
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


def _kill(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


PARENT = """
import sys
from pathlib import Path
from attrib.evaluate.executors.local import run_process
run_process(["sh", "-c", "sleep 300 & echo $! > {pids}.tmp; echo $$ >> {pids}.tmp; mv {pids}.tmp {pids}; exec sleep 301"],
            Path({cwd!r}), None, 600)
"""


def test_a_command_and_all_it_started_die_with_the_process_that_ran_it(tmp_path: Path):
    pids_file = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(pids=pids_file, cwd=str(tmp_path))])
    pids: list[int] = []
    try:
        pids = [int(x) for x in _wait_file(pids_file).split()]  # the background sleep, and the exec'd one
        assert len(pids) == 2 and not any(_gone(p) for p in pids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=60)
        assert _wait_gone(pids) == [], "a command outlived the kill -9 of the process that ran it"
    finally:
        parent.kill()
        _kill(pids)


def test_the_guard_ends_a_hung_command_at_its_deadline_without_its_caller(tmp_path: Path):
    """The caller's timeout holds when the caller cannot enforce it (here it never tries): the
    guard's own deadline kills the group."""
    from attrib.evaluate.executors import guard

    ours, theirs = socket.socketpair()
    pids_file = tmp_path / "pids"
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", guard.__file__, str(theirs.fileno()), "1", "--", "sh", "-c",
         f"sleep 300 & echo $! > {pids_file}.tmp; mv {pids_file}.tmp {pids_file}; echo >> {pids_file}; wait"],
        pass_fds=(theirs.fileno(),), start_new_session=True,
    )  # fmt: skip
    theirs.close()
    try:
        [sleeper] = [int(x) for x in _wait_file(pids_file).split()]
        assert proc.wait(timeout=60) == -signal.SIGKILL
        assert time.monotonic() - start >= 1.0
        assert _wait_gone([sleeper]) == []
    finally:
        ours.close()
        proc.kill()


def test_run_process_reports_what_the_command_did_as_without_a_guard(tmp_path: Path):
    done = run_process(["sh", "-c", "echo out; echo err >&2; exit 3"], tmp_path, None, 30)
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out\n", "err\n", False)
    assert run_process(["sh", "-c", "kill -SEGV $$"], tmp_path, None, 30).returncode == -signal.SIGSEGV
    assert not list(tmp_path.glob("core*"))  # the guard leaves no core of its own
    missing = run_process(["no-such-command-here"], tmp_path, None, 30)
    assert (missing.returncode, missing.stderr) == (None, "cannot start no-such-command-here: No such file or directory")
    slow = run_process(["sleep", "30"], tmp_path, None, 0.5)
    assert slow.timed_out and slow.returncode is None and slow.duration_s < 20
    # Python ignores SIGPIPE; a command must not inherit that (`yes | head` would never end).
    piped = run_process(["sh", "-c", "yes | head -n 1"], tmp_path, None, 30)
    assert piped.ok and piped.stdout == "y\n"


def test_what_a_job_left_running_dies_when_its_executor_closes(tmp_path: Path):
    executor = LocalExecutor(tmp_path / "work")
    pids_file = tmp_path / "pids"
    # A build step that leaves a server behind, detached from its group and its output (setsid):
    res = executor.shell(tmp_path, f"setsid sh -c 'echo $$ > {pids_file}; echo >> {pids_file}; exec sleep 300' > /dev/null 2>&1 &", {}, 30)
    assert res.ok, res
    [server] = [int(x) for x in _wait_file(pids_file).split()]
    try:
        assert not _gone(server)
        [ledger] = list((tmp_path / "work" / "processes").iterdir())
        executor.close()
        assert _wait_gone([server]) == []
        assert not ledger.exists()
    finally:
        _kill([server])


def test_leftovers_are_ended_at_start_up_and_a_reused_pid_is_never_signalled(tmp_path: Path):
    from attrib.evaluate.executors.processes import TOKEN_ENV, end_leftovers, start_ticks

    work = tmp_path / "work"
    token = "0" * 31 + "1"
    env = {**os.environ, TOKEN_ENV: token}
    marked = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)  # the dead run's straggler
    # A process that holds the number a recorded guard once had (start time differs): not ours.
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    # A recorded guard still alive with its start time: its group goes, members without the token too.
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & wait"], start_new_session=True)
    try:
        time.sleep(0.3)  # the leader's child started
        ticks = start_ticks(stranger.pid)
        assert ticks is not None
        (work / "repo-1" / "processes").mkdir(parents=True)
        (work / "repo-1" / "processes" / token).write_text(
            f"{token}\n{stranger.pid} {ticks - 1}\n{leader.pid} {start_ticks(leader.pid)}\n12"  # the last line cut by the kill
        )
        members = [int(p) for p in subprocess.run(["pgrep", "-g", str(leader.pid)], capture_output=True, text=True).stdout.split()]
        assert len(members) == 2
        assert end_leftovers(work) >= 2
        assert _wait_gone([marked.pid, *members]) == []
        assert stranger.poll() is None and not _gone(stranger.pid)
        assert list((work / "repo-1" / "processes").iterdir()) == []
    finally:
        for p in (marked, stranger, leader):
            p.kill()
            p.wait()

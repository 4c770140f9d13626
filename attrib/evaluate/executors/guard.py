"""The guard every local command runs under: `python -I -S guard.py FD DEADLINE_S -- ARGV...`.

The attrib process starts it as the leader of a new session (so of a new process group), with
FD one end of a socket pair whose other end only that attrib process holds. The guard starts
ARGV as its child, in its group, and waits for the first of:

* the child ends: the guard ends the same way (its exit code, or by the same signal), so the
  caller sees what it would have seen without a guard;
* the lifeline closes: the kernel closes the other end when the attrib process dies, `kill -9`
  included; the guard kills its whole process group (the command and all it started, itself
  last). A command never runs on behind the back of a dead daemon or CLI;
* DEADLINE_S passes (the caller's timeout and a margin): the same, so a hung benchmark's
  timeout holds even when the process that enforced it is gone.

A command that cannot start is told on the lifeline (`E<errno>`) and the guard exits 127.
Standard library only and no attrib import: with -I -S it starts in about 10 ms on an idle
machine (77 ms on the loaded 2-CPU development machine: an interpreter start, per command).
"""

from __future__ import annotations

import os
import resource
import select
import signal
import sys
import time

# Python ignores SIGPIPE and SIGXFSZ; the command gets the defaults, as subprocess gives them.
RESTORED = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))


def _end_group() -> None:
    os.killpg(0, signal.SIGKILL)  # the guard is in its group: this is its end too


def _exit_like(status: int) -> int:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the child's core, if any, is the child's
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(status)


def main(args: list[str]) -> int:
    if len(args) < 4 or args[2] != "--":
        sys.stderr.write("usage: guard.py FD DEADLINE_S -- ARGV...\n")
        return 2
    lifeline, deadline_s, argv = int(args[0]), float(args[1]), args[3:]
    os.set_inheritable(lifeline, False)  # the command must not hold the lifeline open
    try:
        child = os.posix_spawnp(argv[0], argv, dict(os.environ), setsigdef=RESTORED)
    except OSError as exc:
        os.write(lifeline, f"E{exc.errno}".encode())
        return 127
    watch = os.pidfd_open(child)
    end = time.monotonic() + deadline_s
    while True:
        left = end - time.monotonic()
        if left <= 0:
            _end_group()
        ready, _, _ = select.select([watch, lifeline], [], [], left)
        if watch in ready:
            break
        if lifeline in ready and not os.read(lifeline, 64):  # EOF: the attrib process is gone
            _end_group()
    _, status = os.waitpid(child, 0)
    return _exit_like(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

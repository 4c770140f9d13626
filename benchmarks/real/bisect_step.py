"""One `git bisect run` step, the way people write it: build, time the workload a few times,
compare the median with a threshold. Exit 0 good, 1 bad, 125 skip (build or run failed).

    python3 bisect_step.py CONFIG.json            # inside the bisect work tree (git bisect run)
    python3 bisect_step.py CONFIG.json --measure  # print the value only (for good and bad)

CONFIG.json (written by run.py): build (shell commands, run in the work tree), command (argv,
`{reps}`), reps, runs, threshold (ms, the value above which a commit is bad), direction, log (a JSON-lines file each step appends to: commit, value, verdict, samples).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path


def value(cfg: dict) -> tuple[float | None, int, str]:
    """(median of all samples, samples taken, why it failed) for the checked-out commit."""
    # a clean tree each step, as a fresh checkout would be: cmake caches and objects from the
    # previous commit must not leak into this one
    subprocess.run(["git", "clean", "-fdxq"], check=True)
    for cmd in cfg["build"]:
        proc = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            return None, 0, f"build failed: {cmd}: {proc.stderr.strip()[-300:]}"
    argv = [a.replace("{reps}", str(cfg["reps"])) for a in cfg["command"]]
    samples: list[float] = []
    for _ in range(cfg["runs"]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            return None, len(samples), f"benchmark exited {proc.returncode}"
        samples += [float(x) for x in proc.stdout.split()]
    return statistics.median(samples), len(samples), ""


def main() -> int:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    v, n, why = value(cfg)
    if "--measure" in sys.argv[2:]:
        print(json.dumps({"commit": commit, "value": v, "samples": n, "why": why}))
        return 0 if v is not None else 1
    if v is None:
        verdict, rc = "skip", 125
    else:
        worse = v > cfg["threshold"] if cfg["direction"] == "lower" else v < cfg["threshold"]
        verdict, rc = ("bad", 1) if worse else ("good", 0)
    with open(cfg["log"], "a") as fh:
        fh.write(json.dumps({"commit": commit, "value": v, "verdict": verdict, "samples": n, "why": why}) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())

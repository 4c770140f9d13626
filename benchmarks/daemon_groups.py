"""The daemon and a regression that moves many kernels (issue 29): one nightly upload of a
24-kernel history with two culprits (one slows 16 kernels by 5 %, another 3 others by 4 %, noise
1 %), to a real `attrib daemon` process on loopback.

    .venv/bin/python benchmarks/daemon_groups.py [--rules series|per-kernel] [--bisect]

Prints the change points the upload found, what became of each (queued, grouped, rate_limited,
...), the jobs and the benchmarks of each, at the default max_bisections_per_day (5).
`--rules per-kernel` maps each kernel with its own rule (what a config needed before a rule
could hand on the series' name), so the same script runs on the code before issue 29.

`--bisect` (needs the group search, issue 29a) then lets the daemon bisect the jobs for real
(one worker, the local executor; the tree's one command prints `name value` lines for every
kernel, attrib.demo.generate_group_tree) with filing to a `dir:` sink, and prints each filed
issue with the benchmarks it lists, and the wall time. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

from attrib.daemon.auth import SIGNATURE_HEADER, sign

SECRET = "groups-benchmark-secret-0123456789"
KERNELS, COMMITS = 24, 40
CULPRITS = ((20, tuple(range(16)), 1.05), (30, (16, 17, 18), 1.04))  # (commit, kernels, factor)
NOISE = 0.01


def _tree(root: Path) -> tuple[Path, Path]:
    """The repository and its recipe: generate_group_tree when this attrib has it (the tree the
    bisections can run), else a plain repository of COMMITS commits and a names recipe."""
    try:
        from attrib.demo import generate_group_tree
    except ImportError:
        generate_group_tree = None
    if generate_group_tree is not None:
        t = generate_group_tree(root / "repo", KERNELS, COMMITS, CULPRITS, noise=NOISE, reps=10)
        return t.path, t.recipe
    repo = root / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    for i in range(COMMITS + 1):
        (repo / "notes.txt").write_text(f"{i}\n")
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", f"c{i}"], cwd=repo, check=True)
    recipe = root / "repo.toml"
    names = ", ".join(f'"k{i:02d}"' for i in range(KERNELS))
    recipe.write_text(f'schema = 1\nname = "suite"\n[build]\ncommands = ["true"]\n[[benchmark]]\nname = "suite"\n'
                      f'runner = "command"\ncommand = ["true"]\nnames = [{names}]\n')  # fmt: skip
    return repo, recipe


def _nightly_csv(line: list[str]) -> str:
    """One value per kernel per commit, the culprits' factors applied from their commit on."""
    rng = random.Random(1)
    rows = ["commit,benchmark,value,unit,direction,timestamp,machine"]
    for k in range(KERNELS):
        base = rng.uniform(1.0, 5.0)
        for i, sha in enumerate(line):
            level = base * math.prod(f for at, ks, f in CULPRITS if k in ks and i >= at)
            day = 1 + i
            when = f"2026-{1 + (day - 1) // 28:02d}-{1 + (day - 1) % 28:02d}T02:00:00Z"
            rows.append(f"{sha},k{k:02d},{level * math.exp(rng.gauss(0, NOISE)):.6f},ms,lower,{when},ci-h100")
    return "\n".join(rows) + "\n"


def _request(url: str, path: str, body: bytes | None = None) -> dict:
    headers = {SIGNATURE_HEADER: sign(body, SECRET)} if body is not None else {"Authorization": f"Bearer {SECRET}"}
    req = urllib.request.Request(url + path, data=body, headers=headers, method="POST" if body is not None else "GET")
    with urllib.request.urlopen(req, timeout=600) as answer:
        return json.loads(answer.read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rules", choices=("series", "per-kernel"), default="series")
    ap.add_argument("--bisect", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the bisections")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="attrib-groups-"))
    repo, recipe = _tree(root)
    line = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", "HEAD"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.split()  # fmt: skip
    recipes = recipe.parent
    if args.rules == "series":
        rules = f'{{ pattern = "k*", recipe = "{recipe.name}", benchmark = "{{series}}" }}'
    else:
        rules = ", ".join(f'{{ pattern = "k{k:02d}", recipe = "{recipe.name}", benchmark = "k{k:02d}" }}' for k in range(KERNELS))
    (root / "secret").write_text(SECRET + "\n")
    config = root / "daemon.toml"
    top = [f'state = "{root / "state"}"', f'secret_file = "{root / "secret"}"', f'recipes_dir = "{recipes}"', "port = 0",
           f"workers = {1 if args.bisect else 0}"]  # fmt: skip
    if args.bisect:
        top.append("group_window_s = 0")  # one upload: its groups are made at once; no wait for others
    config.write_text("\n".join(top) + f'\n[history.projects.kernels]\nrepo = "{repo}"\nbranch = "main"\n'
                      'file_issue = "dir:kernels"\n' + f"map = [ {rules} ]\n")  # fmt: skip
    log = open(root / "daemon.log", "ab")  # noqa: SIM115 (the daemon writes to it for its whole life)
    daemon = subprocess.Popen([sys.executable, "-m", "attrib", "daemon", "--config", str(config)], stdout=log, stderr=log)
    try:
        state = root / "state" / "daemon.json"
        while not state.exists():
            assert daemon.poll() is None, (root / "daemon.log").read_text()
            time.sleep(0.05)
        url = json.loads(state.read_text())["url"]
        body = json.dumps({"project": "kernels", "files": [{"name": "nightly.csv", "content": _nightly_csv(line)}]}).encode()
        t0 = time.monotonic()
        answer = _request(url, "/v1/results", body)
        upload_s = time.monotonic() - t0
        flags = answer["flags"]
        states = Counter(f["flag"] for f in flags)
        print(f"upload of {KERNELS} kernels x {len(line)} commits ({args.rules} rules): {upload_s:.2f} s")
        print(f"change points decided: {len(flags)}; " + ", ".join(f"{k} {v}" for k, v in sorted(states.items())))
        jobs = _request(url, "/v1/jobs?limit=1000")["jobs"]
        print(f"jobs: {len(jobs)}")
        for j in sorted(jobs, key=lambda j: -len(j.get("benchmarks", [j["benchmark"]]))):
            members = j.get("benchmarks", [j["benchmark"]])
            rng = f"{line.index(j['good'])}..{line.index(j['bad'])}"
            print(f"  job {j['id']}: range {rng}, {len(members)} benchmark(s): {' '.join(members)}")
        if not args.bisect:
            return 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.timeout:
            jobs = _request(url, "/v1/jobs?limit=1000")["jobs"]
            if all(j["state"] in ("done", "failed", "cancelled") for j in jobs):
                break
            time.sleep(2)
        print(f"bisections: {time.monotonic() - t0:.0f} s wall; " + ", ".join(f"{j['id']} {j['state']} {j['error'] or ''}".strip() for j in jobs))
        filed = sorted((root / "state" / "filed" / "kernels").glob("*/report.md"))
        print(f"issues filed: {len(filed)}")
        for report in filed:
            text = report.read_text()
            listed = re.search(r"<!-- attrib-members: (\[.*?\]) -->", text)
            names = json.loads(listed.group(1)) if listed else []
            title = text.split("\n", 1)[0]
            print(f"  {title}\n    lists {len(names)}: {' '.join(names)}")
        return 0
    finally:
        daemon.terminate()
        daemon.wait(60)
        log.close()


if __name__ == "__main__":
    raise SystemExit(main())

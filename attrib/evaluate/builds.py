"""Builds, cached by (commit tree and pins, recipe [build] section, executor identity).

A build is a checkout (evaluate/checkouts.py: the worktree and its submodules) plus the recipe's build commands run in it
(evaluate/build_step.py: under the compiler cache the recipe asks for); with `[build] artifacts` its
record also carries the content digest of what the benchmark runs (evaluate/artifacts.py). Its record is written only
after the build has finished, atomically, so an interrupted build is simply redone. A failed
build is cached too: bisecting the same range again neither rebuilds nor retries it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import cast

from attrib.core.model import BuildHow, BuildRecord, CacheServed, CommitInfo
from attrib.evaluate.artifacts import hash_artifacts
from attrib.evaluate.build_step import BuildStep
from attrib.evaluate.checkouts import NO_OVERRIDES, Checkouts, Overrides
from attrib.evaluate.compiler_cache import default_dir
from attrib.evaluate.executors import Executor
from attrib.evaluate.incremental import IncrementalTrees
from attrib.fsutil import atomic_write_text, file_lock
from attrib.gitrepo import Mirror, origin_of
from attrib.recipe import BuildSpec
from attrib.workdir import WorkDir

LOG_TAIL_LINES = 20


def log_tail(record: BuildRecord, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a build's log ("" when it cannot be read)."""
    try:
        text = Path(record.log_path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class _CleanCheck:
    differs: bool
    seconds: float = 0.0  # the clean build's own time; 0 when none ran
    started: float = 0.0  # wall clock (time.time) around the check's checkout and build; 0 when none ran
    finished: float = 0.0


class CheckoutBuilder:
    def __init__(
        self, workdir: WorkDir, mirror: Mirror, executor: Executor, spec: BuildSpec, checkouts: Checkouts | None = None
    ) -> None:
        self.workdir = workdir
        self.mirror = mirror
        self.executor = executor
        self.spec = spec
        self.checkouts = checkouts or Checkouts(workdir, mirror, origin=origin_of(mirror.source.path))
        cache_dir = default_dir(spec, workdir.compiler_cache(spec.cache)) if spec.cache else None
        identity = f"{spec.cache_identity()}\n{executor.identity()}"
        incremental = IncrementalTrees(workdir, mirror, spec, identity) if spec.incremental else None
        self.step = BuildStep(executor, spec, cache_dir, incremental)
        self.fresh_builds = 0  # builds actually run by this process (not served from the cache)

    def key(self, commit: CommitInfo, overrides: Overrides = NO_OVERRIDES) -> str:
        tree, pins = self.checkouts.identity(commit.sha, commit.tree, overrides)
        blob = "\n".join([tree, *pins, self.spec.cache_identity(), self.executor.identity()])
        # surrogateescape: a path read from git need not be UTF-8 (the same bytes, the same key)
        return hashlib.sha256(blob.encode(errors="surrogateescape")).hexdigest()[:24]

    def build(self, commit: CommitInfo, overrides: Overrides = NO_OVERRIDES) -> BuildRecord:
        """`overrides`: dependencies at other commits than the pins (evaluate/checkouts.py)."""
        key = self.key(commit, overrides)
        record_path = self.workdir.build_record(key)
        with file_lock(self.workdir.lock(key)):
            cached = self._load(record_path)
            if cached is not None:
                return cached
            record = self._build(commit, key, overrides)
            atomic_write_text(record_path, json.dumps(asdict(record), indent=2))
            self.fresh_builds += 1
            return record

    def prebuilt_among(self, shas: list[str]) -> frozenset[str]:
        """The commits whose prebuilt binary ([build] prebuilt, [build.prebuilt_github]) is there
        to fetch: what the search may have for an unpacking instead of a build (none without
        either key)."""
        source = self.step.prebuilt
        return source.among(shas) if source is not None else frozenset()

    def differ_from_clean(self, builds: Sequence[tuple[CommitInfo, BuildRecord]], width: int = 1) -> tuple[dict[str, bool], float]:
        """Whether each commit built again clean, in a fresh checkout with nothing served from
        the compiler cache, gives other artifacts than its record (a build the cache served some
        of, an incremental or a prebuilt one): a culprit's two ends, up to `width` of them at
        once (the run's build width; built together, one's configure and link overlap the
        other's compilations, benchmarks/REAL.md). Each commit's answer, and the wall seconds
        from the first check build's start to the last one's end (0 when none was built). The
        check costs a build; it needs the recipe's artifacts, and there is nothing to check in a
        clean build the cache served nothing, nor with `[build] cache_check = false`. The clean
        digest is kept in the work dir, with when its build started and finished: the same build
        checked again (a rerun, the daemon's next bisection ending at the same commit) is
        compared with it without a build."""
        todo = list({c.sha: (c, r) for c, r in builds}.values())
        if width > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=width) as pool:
                checks = list(pool.map(lambda b: self._check(*b), todo))
        else:
            checks = [self._check(c, r) for c, r in todo]
        ran = [c for c in checks if c.finished]
        span = max(c.finished for c in ran) - min(c.started for c in ran) if ran else 0.0
        return {c.sha: k.differs for (c, _), k in zip(todo, checks, strict=True)}, span

    def _check(self, commit: CommitInfo, record: BuildRecord) -> _CleanCheck:
        reused = record.cache.hits > 0 or record.how in (BuildHow.INCREMENTAL, BuildHow.PREBUILT)
        if not (self.spec.cache_check and record.ok and record.artifact and reused):
            return _CleanCheck(False)
        key = f"{record.key}-uncached"
        kept = self.workdir.build_record(key)
        try:
            return _CleanCheck(json.loads(kept.read_text())["artifact"] != record.artifact)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # never checked here, or unreadable: build it
        checkout = self.workdir.scratch(key)
        log_path = self.workdir.build_log(key)
        step, hashed = None, None
        started = time.time()  # wall clock: the kept record says when, comparable across checks
        with file_lock(self.workdir.lock(key)):
            try:
                if not self.checkouts.make(commit.sha, checkout):
                    with open(log_path, "w", encoding="utf-8") as log:
                        log.write(f"# attrib build of {commit.sha} clean and without the compiler cache, to check {record.key}\n")
                        step = self.step.run(key, checkout, log, bypass_cache=True)
                    hashed = None if step.reason else hash_artifacts(checkout, self.spec.artifacts)
            finally:
                self.mirror.discard(checkout)
        finished = time.time()
        seconds = step.duration_s if step is not None else 0.0
        # a build that fails or hashes nothing now says nothing about the cache: not a mismatch
        if hashed is None or isinstance(hashed, str):
            return _CleanCheck(False, seconds, started, finished)
        kept_text = json.dumps({"commit": commit.sha, "artifact": hashed.digest, "started": started, "finished": finished})
        atomic_write_text(kept, kept_text)
        return _CleanCheck(hashed.digest != record.artifact, seconds, started, finished)

    def _load(self, record_path: Path) -> BuildRecord | None:
        try:
            data = json.loads(record_path.read_text())
            files = tuple(tuple(f) for f in data.pop("artifact_files", ()))
            how = BuildHow(data.pop("how", BuildHow.CLEAN))
            cache = CacheServed(**data.pop("cache", {}))
            record = BuildRecord(**{**data, "cached": True, "artifact_files": files, "how": how, "cache": cache})
        except (OSError, ValueError, TypeError):
            return None
        if record.ok and not Path(record.checkout).is_dir():
            return None  # the checkout was cleaned away: build again
        return record

    def _build(self, commit: CommitInfo, key: str, overrides: Overrides) -> BuildRecord:
        checkout = self.workdir.checkout(key)
        log_path = self.workdir.build_log(key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        reason = self.checkouts.make(commit.sha, checkout, overrides)
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(f"# attrib build of {commit.sha} (tree {commit.tree}) with {self.executor.identity()}\n")
            for path, sha in sorted(overrides.items()):
                log.write(f"# with {path} at {sha}\n")
            if reason:
                log.write(f"\n# checkout failed: {reason}\n")
            step = None
            if not reason and (overrides or self.checkouts.pinned):
                # neither an incremental tree (moved by git alone: it would keep the pinned
                # dependencies) nor an archive of the commit alone is this checkout
                if self.spec.incremental or self.step.prebuilt is not None:
                    log.write("# built clean: its dependencies are checked out by attrib, not by git\n")
                step = self.step.run(key, checkout, log)
            elif not reason:
                step = self.step.build(commit.sha, key, checkout, log, self.workdir.scratch(f"prebuilt-{key}"))
        reason = reason or (step.reason if step is not None else "")
        seconds = step.duration_s if step is not None else 0.0
        artifact, files = "", cast(tuple[tuple[str, str], ...], ())
        if not reason and self.spec.artifacts:
            hashed = hash_artifacts(checkout, self.spec.artifacts)
            if isinstance(hashed, str):
                reason = hashed  # the benchmark would run something else: untestable, said once
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(f"\n# build failed: {reason}\n")
            else:
                artifact, files = hashed.digest, hashed.files
        if reason:
            self.mirror.discard(checkout)  # an unusable checkout is only disk used
        return BuildRecord(
            key, commit.sha, commit.tree, not reason, reason, str(log_path), str(checkout), seconds, False,
            artifact, files, BuildHow.CLEAN if step is None else step.how, CacheServed() if step is None else step.cache,
            "" if step is None else step.note,
        )  # fmt: skip

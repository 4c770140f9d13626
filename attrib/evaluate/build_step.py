"""What happens between a ready checkout and its artifacts: a prebuilt binary unpacked where the
recipe names one and it is there (evaluate/prebuilt.py, evaluate/prebuilt_github.py), else the
recipe's build commands, run by the executor under the compiler cache the recipe asks for
(evaluate/compiler_cache.py), in an incremental tree when the recipe allows one
(evaluate/incremental.py), else in the checkout.

`BuildStep` is the one thing CheckoutBuilder (evaluate/builds.py) calls once the checkout is made;
making the checkout (worktree, submodules) and the build key are the builder's. A cache that
cannot serve (its directory not writable, the tool not there) never fails a build: the build
runs without it, and the record and the log say why in one line. An incremental build that
fails is built again clean in the checkout, and the record says which it was (`how`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from attrib.core.model import BuildHow, CacheServed
from attrib.evaluate.compiler_cache import CompilerCacheUse, compiler_cache_use
from attrib.evaluate.executors import Executor
from attrib.evaluate.incremental import IncrementalTrees
from attrib.evaluate.prebuilt import PrebuiltSource, Unpacked, prebuilt_archives
from attrib.evaluate.prebuilt_github import GithubArtifacts
from attrib.recipe import BuildSpec


@dataclass(frozen=True)
class StepResult:
    reason: str  # why the build failed; "" when it did not
    duration_s: float
    how: BuildHow = BuildHow.CLEAN
    cache: CacheServed = CacheServed()
    note: str = ""  # why it is not what the recipe asked first


class BuildStep:
    def __init__(
        self, executor: Executor, spec: BuildSpec, cache_dir: Path | None = None, incremental: IncrementalTrees | None = None
    ) -> None:
        self.executor = executor
        self.spec = spec
        self.cache = compiler_cache_use(spec, cache_dir, executor) if spec.cache and cache_dir else None
        self.incremental = incremental
        self.prebuilt = prebuilt_source(spec)

    def build(self, sha: str, key: str, checkout: Path, log: TextIO, scratch: Path) -> StepResult:
        """`sha`'s artifacts in `checkout`: unpacked from its prebuilt archive when the recipe
        names where and it is there and sound; else built, in an incremental tree when the
        recipe allows one and it builds, else by the recipe's commands in the checkout."""
        if self.prebuilt is None:
            return self._built(sha, key, checkout, log)
        start = time.monotonic()
        got = self.prebuilt.unpack(sha, checkout, scratch)
        spent = time.monotonic() - start
        if isinstance(got, Unpacked):
            checked = "checked against its published sha256" if got.checked else "no sha256 published: unchecked"
            log.write(f"# prebuilt: {self.prebuilt.where(sha)} unpacked ({checked}); nothing built\n")
            return StepResult("", spent, BuildHow.PREBUILT, note="" if got.checked else "prebuilt, no digest published")
        log.write(f"# {got.why}: building it\n")
        built = self._built(sha, key, checkout, log)
        return replace(built, duration_s=built.duration_s + spent, note=built.note or got.why)

    def _built(self, sha: str, key: str, checkout: Path, log: TextIO) -> StepResult:
        if self.incremental is None:
            return self.run(key, checkout, log)
        ran: list[StepResult] = []
        why, donor = self.incremental.build(sha, checkout, lambda where: _last(ran, self.run(key, where, log)), log)
        spent = sum(r.duration_s for r in ran)
        if not why:
            how = BuildHow.INCREMENTAL if donor else BuildHow.CLEAN  # an empty slot is a clean build
            return replace(ran[-1], how=how, duration_s=spent)
        log.write(f"\n# incremental build failed ({why}): building clean\n")
        clean = self.run(key, checkout, log)
        return replace(clean, duration_s=spent + clean.duration_s, note=f"incremental build failed: {why}")

    def run(self, key: str, checkout: Path, log: TextIO, *, bypass_cache: bool = False) -> StepResult:
        """The recipe's commands in `checkout`. `bypass_cache`: nothing is served from the cache
        (the builder's check of a cached build against one without it)."""
        env, note = dict(self.spec.env), ""
        cache = self.cache
        if cache is not None:
            note = cache.unusable(self.executor, checkout)
            if note:
                log.write(f"# compiler cache not used: {note}\n")
                cache = None
            else:
                cache.start(key)
                env |= cache.env(key, checkout) | (cache.bypass() if bypass_cache else {})
        reason, total = self._commands(key, checkout, env, cache, log)
        if cache is None:
            return StepResult(reason, total, cache=CacheServed(note=note))
        counts = cache.counts(key)
        if counts is None:
            note = f"what {cache.tool} served this build could not be read"
            log.write(f"# {note}\n")
            return StepResult(reason, total, cache=CacheServed(cache.tool.value, note=note))
        log.write(f"# {cache.tool}: {counts.hits} hit(s), {counts.misses} miss(es)\n")
        return StepResult(reason, total, cache=CacheServed(cache.tool.value, counts.hits, counts.misses))

    def _commands(
        self, key: str, checkout: Path, env: dict[str, str], cache: CompilerCacheUse | None, log: TextIO
    ) -> tuple[str, float]:
        total, reason = 0.0, ""
        for index, command in enumerate(self.spec.command_lines()):
            log.write(f"$ {command}\n")
            log.flush()
            wrapped = cache.wrap(command, key, index) if cache is not None else command
            res = self.executor.shell(checkout, wrapped, env, self.spec.timeout_s)
            total += res.duration_s
            log.write(res.stdout)
            log.write(res.stderr)
            if res.timed_out:
                reason = f"timed out after {self.spec.timeout_s:g} s in `{command}`"
            elif res.returncode != 0:
                reason = f"exit {res.returncode} from `{command}`"
            if reason:
                log.write(f"\n# build failed: {reason}\n")
                break
        return reason, total


def prebuilt_source(spec: BuildSpec) -> PrebuiltSource | None:
    """Where the recipe says a commit's build may already exist, if it does (at most one)."""
    if spec.prebuilt:
        return prebuilt_archives(spec.prebuilt, spec.artifacts)
    if spec.prebuilt_github is not None:
        return GithubArtifacts(spec.prebuilt_github, spec.artifacts)
    return None


def _last(ran: list[StepResult], result: StepResult) -> str:
    """Keep what the incremental tree's build ran (its time, what the cache served) and give
    the tree its outcome."""
    ran.append(result)
    return result.reason

"""Builds, and what byte-identical artifacts settle without a sample.

Builds run concurrently up to `build_width`. Same artifact, same verdict: a candidate whose
artifacts (`[build] artifacts`, or the runner's own, e.g. the cupy runner's compiled module) are
identical to its reference's is good-like, and one identical to a commit already decided against
the same reference takes that verdict; both with zero samples (`Comparison.same_artifact_as`).
When two artifacts differ only by an embedded timestamp or build path, that is noted
(`ArtifactNote`), never hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from attrib.core.model import ArtifactNote, BuildRecord, CommitInfo, DecisionRule, Purpose, Verdict
from attrib.core.stats import shift_estimate
from attrib.evaluate.accounts import Ledger
from attrib.evaluate.artifacts import Artifacts, diagnose
from attrib.evaluate.records import Comparison
from attrib.evaluate.runners import ArtifactRunner, Runner
from attrib.events import Events

SAME_ARTIFACT_LLR = 50.0  # identical bytes: as good as certain, but finite for the posterior
# Purposes whose verdict against a reference a byte-identical commit may take over. A retest
# never takes another commit's verdict (that is what is in doubt), only "same as the reference".
_SHAREABLE = (Purpose.PREFLIGHT, Purpose.PROBE, Purpose.EXTEND, Purpose.REMAINING, Purpose.RETEST)


class Builder(Protocol):
    """Turns a commit into a build record (a checkout with its build commands run, or not)."""

    def build(self, commit: CommitInfo) -> BuildRecord: ...


class Builds:
    """Each commit built once, its artifact's digest, and the twins that digest finds."""

    def __init__(
        self,
        builder: Builder,
        ledger: Ledger,
        events: Events,
        clock: Callable[[], float],
        runner: Callable[[], Runner],
        build_width: int = 1,
    ) -> None:
        self.builder = builder
        self.ledger = ledger
        self.events = events
        self.clock = clock
        self.runner = runner  # the runner now (block sizing may change it): its own artifact
        self.build_width = max(1, build_width)
        self._diagnosed: set[frozenset[str]] = set()

    def build(self, sha: str, info: CommitInfo | None = None) -> BuildRecord:
        """`sha` built (once; registered with `info` if given, e.g. a revert commit)."""
        rec = self.ledger.tally(sha, info)
        if rec.build is None:
            self.events.build_started(rec.info)
            start = self.clock()
            rec.build = self.builder.build(rec.info)
            self.ledger.times.build_s += self.clock() - start
            self.events.build_finished(rec.info, rec.build)
        return rec.build

    def build_all(self, shas: Sequence[str]) -> None:
        """Build several commits, concurrently up to build_width (builds are independent)."""
        todo = [s for s in dict.fromkeys(shas) if self.ledger.tally(s).build is None]
        if self.build_width > 1 and len(todo) > 1:
            with ThreadPoolExecutor(max_workers=self.build_width) as pool:
                list(pool.map(self.build, todo))
        else:
            for sha in todo:
                self.build(sha)

    def artifact(self, sha: str) -> str | None:
        """What the commit's benchmark runs, by content: the build's declared artifacts, else
        the runner's own (the cupy runner's compiled module), else None (not known)."""
        rec = self.ledger.tally(sha)
        if rec.artifact is None and rec.build is not None and rec.build.ok:
            runner = self.runner()
            if rec.build.artifact or not isinstance(runner, ArtifactRunner):
                rec.artifact = rec.build.artifact
            else:
                rec.artifact = runner.artifact(Path(rec.build.checkout)) or ""
        return rec.artifact or None

    def stand_in(self, sha: str) -> str:
        """A measured commit with the same artifact as `sha` (itself if none): a confirmation
        against it measures the same bytes without measuring one more commit."""
        art = self.artifact(sha)
        if art is not None:
            for other, rec in self.ledger.tallies.items():
                if rec.samples and rec.artifact == art:
                    return other
        return sha

    def settled(self, candidates: Sequence[str], reference: str, purpose: Purpose, fresh: bool) -> dict[str, Comparison]:
        """Candidates decided before any round: a side that did not build (SKIP), or, unless the
        test resumes (`fresh` False), a byte-identical twin's verdict."""
        results: dict[str, Comparison] = {}
        for cand in candidates:
            for sha in (reference, cand):
                build = self.ledger.tally(sha).build
                if build is not None and not build.ok and cand not in results:
                    why = f"{self.ledger.tally(sha).info.short} did not build: {build.reason}"
                    results[cand] = self.ledger.keep(
                        Comparison(
                            cand, reference, purpose, Verdict.SKIP, (), 0.0, 0.0, shift_estimate([]), why,
                            DecisionRule.UNTESTABLE,
                        )  # fmt: skip
                    )
            if cand not in results and fresh:
                twin = self.twin(cand, reference, purpose)
                if twin is not None:
                    results[cand] = self.ledger.keep(twin)
                else:
                    self.note_traps(cand, reference)
        return results

    def twin(self, cand: str, reference: str, purpose: Purpose) -> Comparison | None:
        """An earlier verdict that a byte-identical commit settles `cand` with (module doc)."""
        art = self.artifact(cand)
        if art is None:
            return None
        if self.artifact(reference) == art:
            return Comparison(
                cand, reference, purpose, Verdict.GOOD, (), -SAME_ARTIFACT_LLR, 0.0, shift_estimate([0.0]),
                rule=DecisionRule.SAME_ARTIFACT, same_artifact_as=reference,
            )
        ref_art = self.artifact(reference)
        for c in reversed(self.ledger.comparisons):
            if (
                (c.reference == reference or (ref_art is not None and self.artifact(c.reference) == ref_art))
                and c.candidate != cand
                and c.purpose in _SHAREABLE
                and c.verdict in (Verdict.GOOD, Verdict.BAD)
                # a verdict with no rounds behind it (the posterior search's placement of a twin)
                # settles nothing else: identity with the reference is the branch above
                and not (c.same_artifact_as and not c.diffs)
                and self.artifact(c.candidate) == art
            ):
                if purpose is Purpose.RETEST:
                    return None  # asked for fresh rounds: the twin's verdict is what is in doubt
                # The same bytes on both sides: the twin's shifts are this comparison's evidence
                # (and a culprit's estimate); they are not pooled into sigma twice (rounds.py).
                return Comparison(
                    cand, reference, purpose, c.verdict, c.diffs, c.llr, c.sigma, c.estimate,
                    rule=DecisionRule.SAME_ARTIFACT, size_p=c.size_p, smaller=c.smaller,
                    same_artifact_as=c.same_artifact_as or c.candidate,
                )
        return None

    def note_traps(self, a: str, b: str) -> None:
        """Differing artifacts of two commits: noted once per pair when the difference is a
        known trap (a timestamp, a build path)."""
        pair = frozenset((a, b))
        ra, rb = self.ledger.tally(a).build, self.ledger.tally(b).build
        if pair in self._diagnosed or ra is None or rb is None or not ra.artifact_files or not rb.artifact_files:
            return
        self._diagnosed.add(pair)
        if ra.artifact == rb.artifact:
            return
        traps = diagnose(
            Path(ra.checkout), Path(rb.checkout), Artifacts(ra.artifact, ra.artifact_files), Artifacts(rb.artifact, rb.artifact_files)
        )
        if traps:
            self.ledger.artifact_notes.append(ArtifactNote(a, b, traps))

"""The end-of-run check: each culprit's two ends built again clean, after the search.

The verdict that names a culprit rests on the binaries of its two ends; a compiler cache or an
incremental tree that gave a wrong one there must be said, never silent. A build per end the
cache served or an incremental tree built; none for a clean build without a cache
(evaluate/builds.CheckoutBuilder.differ_from_clean decides which)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from attrib.core.model import BuildRecord, CommitInfo, Note, NoteKind
from attrib.outcome import Outcome


class CleanBuilds(Protocol):
    def differ_from_clean(
        self, builds: Sequence[tuple[CommitInfo, BuildRecord]], width: int
    ) -> tuple[dict[str, bool], float]: ...


def checked_ends(builder: CleanBuilds, outcomes: Sequence[Outcome], width: int) -> list[Outcome]:
    """`outcomes` with a CACHE_MISMATCH note for each culprit end whose clean build differs.
    The ends are checked together, up to the run's build width (`width`, as the preflight builds
    the range's ends), and a group's members' shared ends once. Those builds' wall time counts
    in the run's build time, and apart as its `build_check` (on the first outcome with an end)."""
    ends = {
        sha: (rec.info, rec.build)
        for o in outcomes
        for sha in _culprit_ends(o)
        if (rec := o.commits.get(sha)) is not None and rec.build is not None
    }
    differs, seconds = builder.differ_from_clean(list(ends.values()), width)
    checked = []
    for o in outcomes:
        mine = [sha for sha in _culprit_ends(o) if sha in ends]
        times = o.times
        if mine and seconds:
            times = replace(times, build_s=times.build_s + seconds, build_check_s=times.build_check_s + seconds)
            seconds = 0.0
        notes = (*o.notes, *(Note(NoteKind.CACHE_MISMATCH, (sha,)) for sha in mine if differs[sha]))
        checked.append(replace(o, notes=notes, times=times))
    return checked


def _culprit_ends(o: Outcome) -> dict[str, None]:
    """Each culprit's last good commit and its own, in order, each once."""
    return dict.fromkeys(sha for c in o.culprits for sha in (c.last_good, c.commit))

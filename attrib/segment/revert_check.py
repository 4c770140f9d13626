"""The revert check: bad with a culprit reverted on top, compared with bad itself.

A culprit that did it leaves the reverted build better than bad (RECOVERED); the `Reverter`
makes the revert commit (None when it conflicts), the evaluation stage builds and measures it.
"""

from __future__ import annotations

from attrib.core.model import Purpose, RevertStatus, Step, Verdict
from attrib.outcome import RevertCheck, Reverter
from attrib.segment.scope import Scope


def revert_check(scope: Scope, reverter: Reverter | None, culprit: str, bad: str) -> RevertCheck:
    """Build bad with the culprit reverted and show that the regression goes away."""
    if reverter is None:
        return RevertCheck(RevertStatus.UNAVAILABLE, None, None, "no way to make revert commits here")
    scope.phase(Step.REVERT_CHECK, (bad, culprit))
    info = reverter(culprit, bad)
    if info is None:
        return RevertCheck(RevertStatus.CONFLICT, None, None, f"reverting {culprit[:10]} on {bad[:10]} conflicts")
    build = scope.evidence.build(info.sha, info)
    if not build.ok:
        return RevertCheck(RevertStatus.BUILD_FAILED, info.sha, None, build.reason)
    (comp,) = scope.evidence.compare([bad], info.sha, Purpose.REVERT)
    status = {Verdict.BAD: RevertStatus.RECOVERED, Verdict.GOOD: RevertStatus.NOT_RECOVERED}.get(
        comp.verdict, RevertStatus.INCONCLUSIVE
    )
    return RevertCheck(status, info.sha, comp)

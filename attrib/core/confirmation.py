"""What a confirmation of a located step means: pure, one decision for every search.

A posterior search (alone, or for each member of a group) locates a step and confirms it,
culprit^ against culprit in paired rounds under the indifference zone. What that paired test,
with the posterior its rounds leave, means is decided here and only here; segment/ turns the
answer into a culprit, a smaller step or another turn of the search, and notes why.

It must never build, measure or word anything: a verdict, its rule and numbers in, a
`Meaning` out.
"""

from __future__ import annotations

from enum import StrEnum

from attrib.core.model import DecisionRule, Verdict
from attrib.core.requests import DEFAULT_LOCATE_AT

# a test that ended undecided, at its cap or before it (futility): either way its rounds are
# all the evidence there is, and a step they put below the minimum is a smaller step
UNDECIDED = (DecisionRule.CAP, DecisionRule.FUTILITY)


class Meaning(StrEnum):
    """What a confirmation of (culprit^, culprit) says."""

    CULPRIT = "culprit"  # the step is named (confirmed BAD, or the search has nothing left to ask)
    SMALLER = "smaller"  # a step below the minimum there: never a culprit; the rest is looked for
    NOT_HELD = "not_held"  # BAD, but located provisionally and no longer held: the search goes on
    DISAGREED = "disagreed"  # the paired rounds did not confirm it: the search goes on with them


def meaning(
    verdict: Verdict,
    rule: DecisionRule | None,
    size_p: float,
    beta: float,
    held: float,
    *,
    provisional: bool,
    final: bool,
    locate_at: float = DEFAULT_LOCATE_AT,
) -> Meaning:
    """The meaning of a confirmation whose paired test ended `verdict` by `rule`, with
    `size_p` = P(step >= the minimum) from its rounds, and the posterior (with its rounds)
    holding the located position at `held`. `provisional`: located before the noise was known
    (it stands only if the posterior holds it again). `final`: the search has nothing left to
    ask (its cap is spent, or its confirmations disagreed as often as allowed): its answer
    stands, whatever it is.

    An undecided test (`UNDECIDED`, at its cap or stopped for futility) whose rounds put the
    step below the minimum at 1 - beta is a smaller step alone and in a group alike: the two
    copies this replaced had drifted (a group took it so only at the cap, and sent a futility
    stop round again for another confirmation that ends the same way)."""
    if size_p < beta and (
        (verdict is Verdict.INCONCLUSIVE and rule in UNDECIDED) or (verdict is Verdict.BAD and rule is DecisionRule.FINAL_LOOK)
    ):
        # the zone's test ran out, as it may for a step strictly inside the zone, and its
        # rounds put this step below the minimum: rule 1 lets it go unnamed; not an open range
        # that makes a bisection with a real culprit inconclusive. So too a step the cap's final
        # look put above ignore_below (core/sequential.final_look) with rounds that put it below the
        # minimum: a step inside the zone, reported as the smaller step it is
        return Meaning.SMALLER
    if verdict is Verdict.GOOD and (held >= locate_at or final):
        # the paired rounds put the step at or below ignore_below (a step of the minimum there
        # is called GOOD with at most beta): never a culprit, whether the posterior still holds
        # it or the search has nothing left to ask
        return Meaning.SMALLER
    if verdict is Verdict.BAD and provisional and held < locate_at and not final:
        # located before the noise was known: with the confirmation's rounds it is, and the
        # posterior no longer holds this position
        return Meaning.NOT_HELD
    if verdict is Verdict.BAD or final:
        return Meaning.CULPRIT
    return Meaning.DISAGREED

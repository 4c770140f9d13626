"""The one decision of what a confirmation means (core/confirmation.py), for a search alone and
for each member of a group: the cases the two copies it replaced disagreed on, and the rest."""

from __future__ import annotations

import pytest

from attrib.core.confirmation import Meaning, meaning
from attrib.core.model import DecisionRule, Verdict

BETA = 0.05


@pytest.mark.parametrize("rule", [DecisionRule.CAP, DecisionRule.FUTILITY])
def test_an_undecided_test_whose_rounds_put_the_step_below_the_minimum_is_a_smaller_step(rule: DecisionRule) -> None:
    # the group's copy took a futility stop so only at the cap: another confirmation, then a
    # culprit "not confirmed" once its retries were spent
    for final in (False, True):
        assert meaning(Verdict.INCONCLUSIVE, rule, 0.01, BETA, 0.999, provisional=False, final=final) is Meaning.SMALLER


def test_an_undecided_test_that_leaves_the_minimum_possible_is_not_a_smaller_step() -> None:
    said = meaning(Verdict.INCONCLUSIVE, DecisionRule.FUTILITY, 0.4, BETA, 0.999, provisional=False, final=False)
    assert said is Meaning.DISAGREED
    final = meaning(Verdict.INCONCLUSIVE, DecisionRule.FUTILITY, 0.4, BETA, 0.999, provisional=False, final=True)
    assert final is Meaning.CULPRIT


def test_good_is_a_smaller_step_where_the_position_holds_or_nothing_is_left() -> None:
    assert meaning(Verdict.GOOD, DecisionRule.SPRT, 0.0, BETA, 0.995, provisional=False, final=False) is Meaning.SMALLER
    assert meaning(Verdict.GOOD, DecisionRule.SPRT, 0.0, BETA, 0.3, provisional=False, final=True) is Meaning.SMALLER
    assert meaning(Verdict.GOOD, DecisionRule.SPRT, 0.0, BETA, 0.3, provisional=False, final=False) is Meaning.DISAGREED


def test_bad_names_the_culprit_unless_it_was_provisional_and_is_no_longer_held() -> None:
    assert meaning(Verdict.BAD, DecisionRule.SPRT, 1.0, BETA, 0.5, provisional=False, final=False) is Meaning.CULPRIT
    assert meaning(Verdict.BAD, DecisionRule.SPRT, 1.0, BETA, 0.5, provisional=True, final=False) is Meaning.NOT_HELD
    assert meaning(Verdict.BAD, DecisionRule.SPRT, 1.0, BETA, 0.995, provisional=True, final=False) is Meaning.CULPRIT
    assert meaning(Verdict.BAD, DecisionRule.SPRT, 1.0, BETA, 0.5, provisional=True, final=True) is Meaning.CULPRIT

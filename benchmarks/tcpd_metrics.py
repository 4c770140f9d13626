"""TCPDBench's evaluation metrics, re-implemented from their source for benchmarks/detect_real.py.

Source: alan-turing-institute/TCPDBench, analysis/scripts/metrics.py (G.J.J. van den Burg,
MIT licence; van den Burg & Williams 2020, "An Evaluation of Change Point Detection
Algorithms", arXiv:2003.06222). Facts carried over, code written here:

* Locations are 0-based; a change point at t means a new segment starts at t.
* F1 (`f_measure`, alpha = 0.5): 0 is added to every annotator's set and to the predictions.
  Precision is the number of true positives of the union of all annotators' points against
  the predictions, over the number of predictions; recall is the mean over annotators of each
  one's true positives over the size of their set. A true positive is an annotated point with
  a not yet used prediction within `margin` (5); the closest prediction is used up.
* Cover (`covering`): the partitions of [0, n) the locations define; for every annotator the
  covering of their partition by the predicted one (Arbelaez et al. 2011, eq. 8: the
  length-weighted best Jaccard overlap), averaged over annotators.

The doctests of the original are kept as tests (tests/test_tcpd_metrics.py) so a departure
from TCPDBench's figures shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def true_positives(truth: Iterable[int], predictions: Iterable[int], margin: int = 5) -> set[int]:
    """Annotated points matched by a prediction within `margin`, each prediction used once.
    The original walks a Python set; for ties in distance it takes the smaller location, as
    sorting (distance, location) pairs does there."""
    left = set(predictions)
    found: set[int] = set()
    for tau in truth:
        close = sorted((abs(tau - x), x) for x in left if abs(tau - x) <= margin)
        if close:
            found.add(tau)
            left.remove(close[0][1])
    return found


def f_measure(
    annotations: Mapping[str, Iterable[int]], predictions: Iterable[int], margin: int = 5
) -> tuple[float, float, float]:
    """(F1, precision, recall) as TCPDBench computes them."""
    per_annotator = [set(a) | {0} for a in annotations.values()]
    found = set(predictions) | {0}
    union = set().union(*per_annotator)
    precision = len(true_positives(union, found, margin)) / len(found)
    recall = sum(len(true_positives(t, found, margin)) / len(t) for t in per_annotator) / len(per_annotator)
    f1 = precision * recall / (0.5 * recall + 0.5 * precision) if precision + recall else 0.0
    return f1, precision, recall


def partition(locations: Iterable[int], n_obs: int) -> list[set[int]]:
    cuts = sorted({c for c in locations if 0 < c < n_obs})
    edges = [0, *cuts, n_obs]
    return [set(range(a, b)) for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _cover_single(predicted: list[set[int]], truth: list[set[int]]) -> float:
    total = sum(map(len, predicted))
    return sum(len(r) * max(len(r & p) / len(r | p) for p in predicted) for r in truth) / total


def covering(annotations: Mapping[str, Iterable[int]], predictions: Iterable[int], n_obs: int) -> float:
    predicted = partition(predictions, n_obs)
    scores = [_cover_single(predicted, partition(a, n_obs)) for a in annotations.values()]
    return sum(scores) / len(scores)

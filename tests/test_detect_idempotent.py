"""Detection is idempotent (issue 21): the same data give the same change points however often
and in whatever order detect runs; new nights add changes only after the last decided one; a
late night between a decided change's two commits may move it, and the note says so."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from attrib.core.detect import DetectSettings, detect
from attrib.core.model import Direction
from attrib.history.detection import detect_series
from attrib.history.store import FileRows, HistoryStore, StoredRow


def stepped(n: int, steps: dict[int, float], seed: int, trend: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    level = np.zeros(n)
    for at, size in steps.items():
        level[at:] += size
    return np.exp(level + trend * np.arange(n) + rng.normal(0, 0.02, n))


def test_detect_again_with_its_own_answer_changes_nothing():
    for seed in range(8):
        v = stepped(400, {80: 0.08, 200: -0.1, 330: 0.06}, seed, trend=0.0002 * (seed % 3))
        first = detect(v, Direction.LOWER)
        assert [c.index for c in first], f"seed {seed}: the planted steps are found at all"
        again = detect(v, Direction.LOWER, decided=[c.index for c in first])
        assert [c.index for c in again] == [c.index for c in first], f"seed {seed}"


def test_night_by_night_then_again_is_stable():
    v = stepped(300, {100: 0.1, 220: -0.1}, seed=3)
    decided: list[int] = []
    for night in range(20, len(v) + 1):
        decided = [c.index for c in detect(v[:night], Direction.LOWER, decided=decided)]
    for _ in range(3):
        assert [c.index for c in detect(v, Direction.LOWER, decided=decided)] == decided
    assert decided == sorted(decided)


def test_a_new_change_only_after_the_last_decided_one():
    v = stepped(300, {60: 0.1, 240: 0.1}, seed=5)
    # decided at 150 (say, by an earlier call on other data): the step at 60 is not added
    # before it, the one at 240 is added after it
    got = [c.index for c in detect(v, Direction.LOWER, decided=[150])]
    assert 150 in got
    assert all(i >= 150 for i in got)
    assert any(abs(i - 240) <= 2 for i in got)


def test_a_reopened_change_moves_to_where_the_level_moves_and_says_so():
    v = stepped(200, {100: 0.1}, seed=7)
    assert [c.index for c in detect(v, Direction.LOWER)] == [100]
    moved = detect(v, Direction.LOWER, decided=[97], reopened=[97])
    assert [(c.index, c.moved_from) for c in moved] == [(100, 97)]
    kept = detect(v, Direction.LOWER, decided=[97])  # not reopened: decided stays where it was
    assert [(c.index, c.moved_from) for c in kept] == [(97, None)]


def _sha(i: int) -> str:
    return hashlib.sha1(str(i).encode()).hexdigest()


def _store(tmp_path: Path, values, commits, name="a") -> HistoryStore:
    store = HistoryStore(tmp_path / "h.db")
    rows = [
        StoredRow(str(i), c, "loop", {}, float(x), "s", Direction.LOWER, None)
        for i, (c, x) in enumerate(zip(commits, values, strict=True))
    ]
    store.ingest("p", [FileRows(name, "csv", name, rows)])
    return store


def test_history_detect_twice_adds_nothing_in_any_series_order(tmp_path: Path):
    line = [_sha(i) for i in range(300)]
    store = HistoryStore(tmp_path / "h.db")
    for k in range(4):
        v = stepped(300, {90 + 20 * k: 0.1, 250: -0.08}, seed=10 + k)
        rows = [
            StoredRow(str(i), c, f"b{k}", {}, float(x), "s", Direction.LOWER, None)
            for i, (c, x) in enumerate(zip(line, v, strict=True))
        ]
        store.ingest("p", [FileRows(f"f{k}", "csv", f"d{k}", rows)])
    series = store.series("p")
    first = {
        s.id: [(c.before, c.after) for c in (f.change for f in detect_series(store, s, line, DetectSettings()))]
        for s in series
    }
    assert all(first.values())
    for order in (series, series[::-1]):
        for s in order:
            got = detect_series(store, s, line, DetectSettings())
            assert [(f.change.before, f.change.after) for f in got] == first[s.id]
            assert not any(f.new for f in got)


def test_history_late_night_between_a_change_moves_it_with_a_note(tmp_path: Path):
    line = [_sha(i) for i in range(200)]
    v = stepped(200, {100: 0.1}, seed=7)
    # commits 98 and 99 had no result yet: the change is decided between 97 and 100
    have = [i for i in range(200) if i not in (98, 99)]
    store = _store(tmp_path, [v[i] for i in have], [line[i] for i in have])
    s = store.series("p")[0]
    got = detect_series(store, s, line, DetectSettings())
    assert [(f.change.before, f.change.after) for f in got] == [(line[97], line[100])]
    # the late nights arrive, at the old level: the level moves at 100 still, but the pair is now (99, 100)
    late = [StoredRow(str(i), line[i], "loop", {}, float(v[i]), "s", Direction.LOWER, None) for i in (98, 99)]
    store.ingest("p", [FileRows("late", "csv", "late", late)])
    got = detect_series(store, s, line, DetectSettings())
    assert [(f.change.before, f.change.after) for f in got] == [(line[99], line[100])]
    assert "late result" in got[0].change.note and line[98][:10] in got[0].change.note

"""Groups in the daemon's store (issue 29): the benchmarks of a job, the queued jobs a flag of an
overlapping range may join, and the two writes that make it join, inside the caller's
transaction (store.submit_within). Whether two ranges overlap is the caller's to say: the
nightly history knows the first-parent positions, a CI flag asks git (`overlaps`).

Issue 40: a flag joins only a job of its own filing target (`file_issue`: a change point of one
project was filed to another's tracker); a job holds at most MAX_GROUP_MEMBERS benchmarks (a
flag that would take it past joins none, and one selecting more is refused: flags.py); and a
flag whose benchmarks an active job (queued or running) already bisects over the same range is
a duplicate of that job (`covering`), not a second job.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attrib.core.model import JobState
from attrib.daemon.schema import (
    ACTIVE_STATES,
    FLAGS,
    JOB_COLUMNS,
    JOB_MEMBERS,
    TRANSITIONS,
    FlagRow,
    Job,
    JobMember,
    NewJob,
    Transition,
)
from attrib.errors import FlagError
from attrib.gitrepo import GitRepo
from attrib.sqlite import SqliteStore

# Benchmarks of one group job. Each member is measured at every commit the search tests: a
# 500-member group was still in its preflight after 4,750 runs (issue 40). A recipe's suite of
# kernels is tens to a couple of hundred; more is a flag to split.
MAX_GROUP_MEMBERS = 256


@dataclass(frozen=True)
class Join:
    """A queued job a new flag may join (its range overlaps the flag's), and the
    range the job then covers: the union of both."""

    job_id: str
    good: str
    bad: str


class GroupQueries(SqliteStore):
    """The store's reads of groups, and a flag joining one (daemon/store.py's Store is one)."""

    def join(self, job: NewJob, route: str, body: str, members: Sequence[str], join: Sequence[Join]) -> str | None:
        """The flag joins the first job of `join` still queued (its members added, its range the
        union); None, and nothing stored, when none is queued any more."""
        now = time.time()
        with self._errors("join a group"), self._write() as c:
            target = join_queued(c, join, now, members or (job.benchmark,))
            if target is None:
                return None
            add_members(c, target, members or (job.benchmark,))
            note = f"an overlapping range joined its group via {route}"
            c.execute(TRANSITIONS.insert(), TRANSITIONS.values(Transition(target, now, JobState.QUEUED, JobState.QUEUED, None, note)))
            c.execute(FLAGS.insert(), FLAGS.values(FlagRow(uuid.uuid4().hex[:16], target, now, route, True, body)))
        return target

    def members(self, job_ids: Sequence[str]) -> dict[str, list[str]]:
        """The benchmarks of each job that is a group, in the order asked (absent: one benchmark)."""
        if not job_ids:
            return {}
        with self._errors("read a job's benchmarks"):
            rows = self._conn().execute(
                f"SELECT job_id, benchmark FROM job_members WHERE job_id IN ({', '.join('?' * len(job_ids))}) ORDER BY job_id, position",
                tuple(job_ids),
            ).fetchall()
        out: dict[str, list[str]] = {}
        for r in rows:
            out.setdefault(r[0], []).append(r[1])
        return out

    def open_groups(self, repo_path: str, recipe: str, file_issue: str | None, states: Sequence[JobState] = (JobState.QUEUED,)) -> list[Job]:
        """Jobs of `repo_path`, `recipe` and filing target `file_issue` in `states` (queued: those
        a flag of an overlapping range may still join), oldest first."""
        with self._errors("list queued jobs"):
            rows = self._conn().execute(
                f"SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ({', '.join('?' * len(states))}) AND repo_path = ? AND recipe = ?"
                " AND file_issue IS ? ORDER BY created, rowid",
                (*states, repo_path, recipe, file_issue),
            ).fetchall()
        return [Job.from_row(r) for r in rows]


def join_queued(c: sqlite3.Connection, join: Sequence[Join], now: float, members: Sequence[str]) -> str | None:
    """The first job of `join` still queued and with room for `members` (MAX_GROUP_MEMBERS), its
    range widened to the union; None if none is."""
    for j in join:
        if len(set(_have(c, j.job_id)) | set(members)) > MAX_GROUP_MEMBERS:
            continue
        cur = c.execute("UPDATE jobs SET good = ?, bad = ?, updated = ? WHERE id = ? AND state = ?", (j.good, j.bad, now, j.job_id, JobState.QUEUED))
        if cur.rowcount == 1:
            return j.job_id
    return None


def _have(c: sqlite3.Connection, job_id: str) -> list[str]:
    """A job's benchmarks, in order (a job without member rows is its benchmark alone)."""
    have = [r[0] for r in c.execute("SELECT benchmark FROM job_members WHERE job_id = ? ORDER BY position", (job_id,))]
    if not have:
        row = c.execute("SELECT benchmark FROM jobs WHERE id = ?", (job_id,)).fetchone()
        have = [row[0]] if row is not None else []
    return have

def add_members(c: sqlite3.Connection, job_id: str, members: Sequence[str]) -> None:
    """Benchmarks join a job: its own one first (a job without rows is its benchmark alone)."""
    if not members:
        return
    have = _have(c, job_id)
    if len(set(have) | set(members)) > MAX_GROUP_MEMBERS:
        # only a flag of the job's own range and lead benchmark gets here (the others join none)
        raise FlagError("benchmarks", f"job {job_id} would become a group of {len(set(have) | set(members))} benchmarks; at most {MAX_GROUP_MEMBERS}")
    if not c.execute("SELECT 1 FROM job_members WHERE job_id = ?", (job_id,)).fetchone():
        c.execute(JOB_MEMBERS.insert(), JOB_MEMBERS.values(JobMember(job_id, have[0], 0)))
    for name in members:
        if name not in have:
            c.execute(JOB_MEMBERS.insert(), JOB_MEMBERS.values(JobMember(job_id, name, len(have))))
            have.append(name)


def overlaps(repo: GitRepo, good: str, bad: str, other_good: str, other_bad: str) -> bool:
    """Whether the ranges good..bad and other_good..other_bad share a commit that could be the
    culprit: each one's good is an ancestor of the other's bad, and neither ends where the other
    begins (on a line: good < other_bad and other_good < bad)."""
    if bad == other_good or other_bad == good:
        return False
    return repo.is_ancestor(good, other_bad) and repo.is_ancestor(other_good, bad)


def union(repo: GitRepo, good: str, bad: str, other_good: str, other_bad: str) -> tuple[str, str]:
    """The range covering both (of two overlapping ranges): the older good, the newer bad."""
    first = good if repo.is_ancestor(good, other_good) else other_good
    last = bad if repo.is_ancestor(other_bad, bad) else other_bad
    return first, last


def joins(store: GroupQueries, job: NewJob, members: Sequence[str], window_s: float, now: float) -> list[Join]:
    """The queued jobs of `job`'s repository and recipe, queued less than `window_s` ago, whose
    range overlaps `job`'s (git decides) and which lack one of its `members`: what a CI flag may
    join, oldest first. A flag of benchmarks a job already has stays a job of its own range."""
    if window_s <= 0:
        return []
    repo = GitRepo(Path(job.repo_path))
    queued = store.open_groups(job.repo_path, job.recipe, job.file_issue)
    have = store.members([j.id for j in queued])
    out = []
    for j in queued:
        if set(members or (job.benchmark,)) <= set(have.get(j.id, [j.benchmark])):
            continue
        if now - j.created <= window_s and overlaps(repo, job.good, job.bad, j.good, j.bad):
            out.append(Join(j.id, *union(repo, job.good, job.bad, j.good, j.bad)))
    return out


def covering(store: GroupQueries, job: NewJob, members: Sequence[str]) -> list[str]:
    """Active jobs (queued or running) of `job`'s repository, recipe, filing target and range
    that already bisect every one of its `members`, oldest first: a flag of them is a duplicate
    of the first still active, not a second job (as a flag of a job's own range and first
    benchmark always was: NewJob.dedup_key). Another range, even one inside the job's, is
    another question and stays a job of its own."""
    active = store.open_groups(job.repo_path, job.recipe, job.file_issue, ACTIVE_STATES)
    same = [j for j in active if (j.good, j.bad) == (job.good, job.bad)]
    have = store.members([j.id for j in same])
    wanted = set(members or (job.benchmark,))
    return [j.id for j in same if wanted <= set(have.get(j.id, [j.benchmark]))]

"""One error root. Each subclass builds its own one-line message; the CLI catches the root once."""

from __future__ import annotations

import os


class AttribError(Exception):
    """Root of every error attrib raises on purpose. `exit_code` is what the CLI returns."""

    exit_code = 1


class InputError(AttribError):
    """The user gave us something we cannot use (exit 2): a revision, a path, a recipe."""

    exit_code = 2


class ConfigError(InputError):
    """A configuration attrib reads (a recipe, the daemon's --config file and its [history]
    table, `attrib detect --setting`) has a key it cannot use: one line naming the file (or the
    option), the dotted key and what was expected there. Every configuration is read by the one
    decoder (attrib/codec.py), whose FieldErrors become this at the boundary."""

    def __init__(self, path: object, key: str, expected: str) -> None:
        # Escape the key: a quoted TOML key may hold a newline, and the message is one line.
        shown = key.encode("unicode_escape").decode("ascii")
        where = f"{path}: key '{shown}'" if key else f"{path}"
        super().__init__(f"{where}: {expected}")
        self.path, self.key = path, key


class RepoError(InputError):
    """Repository missing, revision unknown, or the range makes no sense."""


class FieldError(AttribError):
    """Inside decoding (attrib/codec.py): a value that does not fit its type, turned at the
    boundary into the error naming the file (ResultFormatError for a result, ConfigError for a
    configuration); `path` is the dotted key (empty: the document itself)."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"{path}: {expected}")
        self.path, self.expected = path, expected


class ResultFormatError(InputError):
    """A file handed to `attrib report` (or a stored job result) is not a result attrib wrote:
    names the file and the field, and what was expected there."""

    def __init__(self, source: object, field: str, expected: str) -> None:
        where = f"{source}: field '{field}'" if field else f"{source}"
        super().__init__(f"{where}: {expected}")
        self.source, self.field, self.expected = source, field, expected


class BenchmarkMissing(InputError):
    """A reference revision does not have the benchmark the recipe names (a Google Benchmark
    filter that matches nothing there): the recipe or the range is wrong (exit 2)."""


class ReferenceFailed(AttribError):
    """The good or bad reference itself cannot be built or measured: nothing to compare against."""


class GpuUnavailable(InputError):
    """The recipe asks for a GPU (or NVRTC) that this machine does not have; says which and why."""


class KernelCompileError(AttribError):
    """NVRTC rejected a kernel. Inside a bisection this is that commit's failure, never the end."""

    def __init__(self, name: str, arch: str, log: str) -> None:
        first = next((ln for ln in log.splitlines() if "error" in ln), log.splitlines()[0] if log else "")
        super().__init__(f"{name} ({arch}) does not compile: {first.strip()}")
        self.log = log


# --- executors and images -------------------------------------------------------------------


class EngineUnavailable(InputError):
    def __init__(self, detail: str) -> None:
        host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        super().__init__(
            f"docker engine not reachable at {host} ({detail}); start it (as root: `dockerd &`, "
            "or `systemctl start docker`) or point DOCKER_HOST at a running engine"
        )


class ImageMissing(InputError):
    def __init__(self, image: str) -> None:
        super().__init__(f"docker image {image!r} not found on the engine; build it with `attrib images build`")


class ImageBuildError(AttribError):
    """An image could not be built (the message says which step and why)."""


class TargetError(InputError):
    """A --file-issue/--comment-on target (or a flag's file_issue) names no tracker project."""

    def __init__(self, option: str, spec: str, why: str) -> None:
        super().__init__(f"{option} {spec!r}: {why}")
        self.spec, self.why = spec, why


class TrackerError(AttribError):
    """Filing into an issue tracker failed (exit 1). The result JSON and the report are written
    before any filing starts, so nothing measured is lost; the message names the target."""

class PrebuiltUnavailable(AttribError):
    """A prebuilt archive ([build] prebuilt) could not be fetched; the commit is built instead."""


class ResponseTooLarge(AttribError):
    """An HTTP answer (attrib/http.py) longer than the bound the caller gave, whoever the caller:
    a tracker, the artifact fetch, a daemon client (never retried: it would be as long again)."""


# --- the daemon (issue 7) ------------------------------------------------------------------


class StateError(AttribError):
    """The daemon's state database cannot be used (locked by another process, not a database)."""


class Unauthorized(AttribError):
    """Missing or wrong signature, token or bearer secret, or a signed time outside the
    tolerance (HTTP 401); nothing is parsed or stored."""


class StateInUse(InputError):
    """Another daemon holds the --state directory (exit 2); names its pid and address."""


class QueueFull(AttribError):
    """The bounded queue of the daemon holds its maximum of queued jobs (HTTP 429)."""


class FlagError(InputError):
    """A regression flag (HTTP body, webhook payload) is malformed; names the field (HTTP 400)."""

    def __init__(self, field: str, expected: str) -> None:
        # One line whatever the client sent: a message may quote a value holding line breaks.
        expected = expected.replace("\r", "\\r").replace("\n", "\\n")
        super().__init__(f"field '{field}': {expected}")
        self.field = field


class FlagRefused(FlagError):
    """An authentic webhook's flag the daemon will not take from its sender (HTTP 403): the run
    of a fork's pull request, or a flag for another repository than the sender, where the
    daemon's [webhooks] config does not allow it (daemon/senders.py)."""


class UpstreamError(AttribError):
    """A forge the daemon asked (GitHub, for a workflow run's artifact) cannot be reached or
    answered an error (HTTP 502); one line naming the repository and, for 401/403/404, the
    permission the token needs."""


class JobStopped(AttribError):
    """Raised inside a running bisection to unwind it: cancelled, daemon stopping, lease lost."""

    def __init__(self, why: str) -> None:
        super().__init__(f"job stopped: {why}")
        self.why = why  # one of worker.STOP_REASONS


class ClientError(AttribError):
    """`attrib submit/jobs/status/cancel`: the daemon cannot be reached or refused the request."""


# --- benchmark tools' output formats (issue 15) ---------------------------------------------


class FormatError(InputError):
    """A benchmark tool's output (Google Benchmark JSON, NVBench JSON or its sample files) is
    not what that tool writes. One line naming the source, the benchmark and the field. In a
    bisection it is that commit's failed run, never the end (the runner turns it into one)."""

    def __init__(self, source: object, benchmark: str, field: str, expected: str) -> None:
        where = [str(source)]
        if benchmark:
            where.append(f"benchmark '{_one_line(benchmark)}'")
        if field:
            where.append(f"field '{_one_line(field)}'")
        super().__init__(f"{': '.join(where)}: {_one_line(expected)}")
        self.source, self.benchmark, self.field = source, benchmark, field


def _one_line(text: str) -> str:
    # A benchmark name is whatever the tree under test printed; keep the message on one line.
    return text.replace("\r", "\\r").replace("\n", "\\n")
# --- nightly history (issue 14) --------------------------------------------------------------


class IngestError(InputError):
    """A results file for the history has a bad row: one line naming the file, the row (1-based
    data row, or the JSON path) and the field, and what was expected. Nothing of the file is
    stored when any row is bad."""

    def __init__(self, source: object, row: str, field: str, expected: str) -> None:
        where = [str(source)] + ([f"row {row}"] if row else []) + ([f"field '{field}'"] if field else [])
        super().__init__(": ".join(where) + f": {expected}".replace("\n", "\\n"))
        self.source, self.row, self.field = source, row, field


class BadRows(InputError):
    """Every bad row of the files given, one IngestError line each (at most MAX_SHOWN), so a
    CI job sees all its mistakes at once; nothing of any file was stored."""

    MAX_SHOWN = 50

    def __init__(self, errors: list[IngestError], parsed: list[object] | None = None) -> None:
        lines = [str(e) for e in errors[: self.MAX_SHOWN]]
        self.parsed = parsed or []  # the rows that did parse: their commits are checked too
        if len(errors) > self.MAX_SHOWN:
            lines.append(f"... and {len(errors) - self.MAX_SHOWN} more bad rows")
        super().__init__("\n".join(lines))
        self.errors = errors


# --- the Slurm executor (issue 13) ----------------------------------------------------------


class SlurmUnavailable(InputError):
    """--executor slurm cannot be used as configured (exit 2, before anything is built): no
    Slurm commands on PATH, no controller answering, or a work dir the nodes do not see."""


class ExecutorClosed(AttribError):
    """A build thread still going after Ctrl-C or SIGTERM asks a closed executor for more work:
    nothing is started and no build record is written for it."""


class SlurmInterrupted(AttribError):
    """A build waiting on a Slurm job is unwound because attrib was interrupted (Ctrl-C,
    SIGTERM): its job is cancelled and no build record is written for it."""


class EnvironmentChanged(AttribError):
    """The environment fingerprint taken while a bisection ran differs from the one taken at its
    start (a driver updated, clocks unlocked, another image): the bisection stops rather than
    compare commits measured in two environments (exit 12). The one line names each key that
    changed, before and after (core/environment.changed_line)."""

    exit_code = 12

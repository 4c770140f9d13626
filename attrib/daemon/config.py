"""The daemon's settings: command-line options over an optional TOML file over defaults.

```toml
# attrib-daemon.toml: every key optional; the command line wins
state = "/var/lib/attrib"
host = "127.0.0.1"
port = 8765
secret_file = "/etc/attrib/secret"
workers = 1
executor = "local"
recipes_dir = "/srv/attrib/recipes"
max_queue = 100
lease_s = 30
github_api_url = "https://api.github.com"   # default: $GITHUB_API_URL, else this
github_token_file = "/etc/attrib/github-token"   # default: $GITHUB_TOKEN (actions:read)
signature_tolerance_s = 300      # signed timestamps this far from our clock are refused
allow_legacy_signature = false   # accept the old sha256= form (no timestamp) during a migration
allow_http_repos = false         # fetch plain http:// repository URLs (cleartext code we then build)
group_window_s = 1800            # a nightly history job waits this long for overlapping ranges to join it
[webhooks."github:acme/kernels"]   # per sender: what its webhooks' flags may name (daemon/senders.py)
repos = ["/srv/git/kernels"]     # besides the sender's own URLs: local paths or git URLs  [none]
allow_forks = false              # flags from runs of forks' code  [false]
[history]   # nightly results: projects, repositories, benchmark -> recipe (attrib/history/projects.py)
```
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from attrib.codec import NonEmptyStr, config_errors, decode_table
from attrib.daemon.auth import DEFAULT_TOLERANCE_S
from attrib.daemon.senders import WebhookRule, parse_webhooks
from attrib.daemon.store import DEFAULT_BUSY_TIMEOUT_S, DEFAULT_LEASE_S, DEFAULT_MAX_QUEUE
from attrib.errors import ConfigError, InputError
from attrib.evaluate.executors import ExecutorKind, executor_kind
from attrib.history.projects import HistoryConfig, parse_history

DEFAULT_HOST = "127.0.0.1"  # loopback: exposing the daemon is a choice someone makes on purpose
DEFAULT_PORT = 8765
DEFAULT_WORKERS = 1  # bisections compete for the machine they time on: one at a time by default
MIN_SECRET_CHARS = 16
DEFAULT_GITHUB_API = "https://api.github.com"
GITHUB_TOKEN_VAR = "GITHUB_TOKEN"
DEFAULT_HEAD_TIMEOUT_S = 10.0  # a silent or trickling connection holds its slot this long at most
# Change points of one upload arrive together, but other machines' and configurations' nights
# arrive over the next minutes: a history job waits this long for them to join (Skia Perf waits 30 min).
DEFAULT_GROUP_WINDOW_S = 1800.0


@dataclass(frozen=True)
class Settings:
    state: Path
    secret: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = DEFAULT_WORKERS
    executor: ExecutorKind = ExecutorKind.LOCAL  # parsed from the option or the config file
    recipes_dir: Path = Path(".")
    max_queue: int = DEFAULT_MAX_QUEUE
    lease_s: float = DEFAULT_LEASE_S
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S
    # workflow_run webhooks fetch the `attrib-flag` artifact from here (docs/daemon.md). The
    # token is read from the file (or the environment) when it is needed, never kept here.
    github_api_url: str = DEFAULT_GITHUB_API
    github_token_file: Path | None = None
    signature_tolerance_s: float = DEFAULT_TOLERANCE_S
    allow_legacy_signature: bool = False
    allow_http_repos: bool = False
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S  # a request head must be complete within this
    group_window_s: float = DEFAULT_GROUP_WINDOW_S  # overlapping ranges join a queued job this long
    history: HistoryConfig = HistoryConfig()  # POST /v1/results takes only the projects named here
    # a webhook's flag: its sender's own repository, never a fork's run, unless a rule here says
    webhooks: Mapping[str, WebhookRule] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.state / "state.db"

    def job_dir(self, job_id: str) -> Path:
        return self.state / "jobs" / job_id


# Keys of the TOML file and their types (decoded by attrib/codec.py); paths are relative to the
# file's directory. Ranges are checked in `settings`, where the command line's values are too.
_KEYS: dict[str, Any] = {
    "state": Path,
    "host": NonEmptyStr,
    "port": int,
    "secret_file": Path,
    "workers": int,
    "executor": str,
    "recipes_dir": Path,
    "max_queue": int,
    "lease_s": float,
    "busy_timeout_s": float,
    "github_api_url": str,
    "github_token_file": Path,
    "signature_tolerance_s": float,
    "allow_legacy_signature": bool,
    "allow_http_repos": bool,
    "head_timeout_s": float,
    "group_window_s": float,
    "history": dict[str, Any],
    "webhooks": dict[str, Any],
}


def read_config(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"--config {path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(path, "", f"not a TOML file ({exc})") from None
    with config_errors(path):
        out = decode_table(_KEYS, (), data)
    for key, value in out.items():
        if isinstance(value, Path):
            out[key] = (path.parent / value).resolve()
    if "history" in out:
        out["history"] = parse_history(path, out["history"])
    if "webhooks" in out:
        out["webhooks"] = parse_webhooks(path, out["webhooks"])
    return out


def read_secret(path: Path, option: str = "--secret-file") -> str:
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        raise InputError(f"{option} {path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot read ({exc.strerror})") from None
    if len(secret) < MIN_SECRET_CHARS:
        raise InputError(f"{option} {path}: expected a secret of at least {MIN_SECRET_CHARS} characters")
    return secret


def github_token(token_file: Path | None, env: dict[str, str] | None = None) -> str | None:
    """The token for GitHub's API: the file's content, else $GITHUB_TOKEN, else None. Never
    logged, never stored; read on each use so a rotated token takes effect."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise InputError(f"github_token_file {token_file}: cannot read ({exc.strerror})") from None
        if not token:
            raise InputError(f"github_token_file {token_file}: empty")
        return token
    return (os.environ if env is None else env).get(GITHUB_TOKEN_VAR, "").strip() or None


def settings(cli: dict[str, Any], config: Path | None) -> Settings:
    """Merge: command line (values not None) over the config file over defaults; validate."""
    merged = read_config(config) if config is not None else {}
    merged.update({k: v for k, v in cli.items() if v is not None})
    if "state" not in merged:
        raise InputError("--state: missing (on the command line or in the config file)")
    if "secret_file" not in merged:
        raise InputError("--secret-file: missing (on the command line or in the config file)")
    secret = read_secret(Path(merged.pop("secret_file")))
    merged["executor"] = executor_kind(merged.get("executor", "local"))  # one line naming the choices
    for key, low in (("workers", 0), ("max_queue", 1), ("port", 0), ("group_window_s", 0)):
        if key in merged and merged[key] < low:
            raise InputError(f"--{key.replace('_', '-')} {merged[key]}: expected at least {low}")
    for key, default in (("lease_s", DEFAULT_LEASE_S), ("signature_tolerance_s", DEFAULT_TOLERANCE_S), ("head_timeout_s", DEFAULT_HEAD_TIMEOUT_S)):
        if merged.get(key, default) <= 0:
            raise InputError(f"{key} {merged[key]}: expected a positive number of seconds")
    known = {f.name for f in fields(Settings)}
    values = {k: v for k, v in merged.items() if k in known}
    values["state"] = Path(values["state"]).resolve()
    values["recipes_dir"] = Path(values.get("recipes_dir", Path.cwd())).resolve()
    if not values["recipes_dir"].is_dir():
        raise InputError(f"--recipes-dir {values['recipes_dir']}: no such directory")
    api = values.get("github_api_url") or os.environ.get("GITHUB_API_URL") or DEFAULT_GITHUB_API
    if not api.startswith(("https://", "http://")) or any(c.isspace() for c in api):
        raise InputError(f"--github-api-url {api!r}: expected an http(s) URL")
    values["github_api_url"] = api.rstrip("/")
    if values.get("github_token_file") is not None:
        values["github_token_file"] = Path(values["github_token_file"]).resolve()
        github_token(values["github_token_file"])  # unreadable or empty: say so at start, not per event
    return Settings(secret=secret, **values)

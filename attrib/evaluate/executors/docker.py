"""Build and run in containers on a real Docker engine, through the docker SDK.

Each checkout gets one container from the recipe's image with the checkout mounted at /src,
as a non-root user, with the network off unless the recipe asks for it, and CPU and memory
limits; its build commands and benchmark runs are execs in it. Past the recipe's timeout the
container is killed and removed. Containers carry the labels `attrib.run=<id>` and
`attrib.workdir=<work dir>` and are removed by `close()`, which the session calls in a
`finally`, so neither a timeout nor Ctrl-C (nor SIGTERM, which the CLI turns into one)
leaves one behind. When the engine has the NVIDIA runtime, benchmark runs get the GPUs (a device
request) and the result says so.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import DeviceRequest

from attrib.errors import EngineUnavailable, ExecutorClosed, ImageMissing
from attrib.evaluate.executors.base import DockerDescription, ProcessResult, command_environment

CONTAINER_WORKDIR = "/src"
BUILD_UID = 1000  # the image's non-root user (containers/Dockerfile.cpu creates it)
LABEL = "attrib.run"
WORKDIR_LABEL = "attrib.workdir"
DEFAULT_IMAGE = "attrib/cpu:latest"
DEFAULT_MEMORY = "4g"
EXEC_REAP_S = 10  # after killing a timed-out container, how long to wait for its exec to end


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise EngineUnavailable(type(exc).__name__) from None
    return client


def require_image(client: docker.DockerClient, image: str) -> docker.models.images.Image:
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        raise ImageMissing(image) from None


class DockerExecutor:
    name = "docker"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        network: bool = False,
        cpus: float | None = None,
        memory: str = DEFAULT_MEMORY,
        client: docker.DockerClient | None = None,
        workdir: Path | None = None,
        mounts: Mapping[Path, str] | None = None,
        pass_env: Sequence[str] = (),
    ) -> None:
        self.client = client or connect()
        img = require_image(self.client, image)
        self.image = image
        self.image_id: str = img.id
        self.digests: list[str] = list(img.attrs.get("RepoDigests") or [])
        self.network = network
        self.pass_env = tuple(pass_env)  # the recipe's [build] pass_env: the image has the rest
        self.cpus = cpus or float(os.cpu_count() or 1)
        self.memory = memory
        self.run_id = uuid.uuid4().hex[:12]
        # which bisection a container belongs to: its own run, and the work dir it builds in
        self.labels = {LABEL: self.run_id, WORKDIR_LABEL: str(workdir or "")}
        runtimes = self.client.info().get("Runtimes") or {}
        self.gpus = "nvidia" in runtimes
        # host directories every container sees besides its checkout (the compiler cache); one
        # that cannot be made is left out, and the build step says why its cache is not used
        self.mounts = {str(host): {"bind": inside, "mode": "rw"} for host, inside in (mounts or {}).items() if _made(host)}
        self._owned: set[Path] = set()
        self._live: dict[Path, Container] = {}
        self._lock = threading.Lock()
        self._closed = False

    def identity(self) -> str:
        return f"docker:{self.image_id}"

    def describe(self) -> DockerDescription:
        return DockerDescription(image=self.image, image_id=self.image_id, digests=tuple(self.digests), gpus=self.gpus)

    def round(self) -> AbstractContextManager[object]:
        return nullcontext()  # one engine, one host: every run of a round is on it already

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        return self._run(checkout, ["sh", "-c", command], command_environment(self.pass_env, env, base=False), timeout_s)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        return self._run(checkout, list(argv), command_environment(self.pass_env, base=False), timeout_s)

    def _user(self, checkout: Path) -> str:
        if os.geteuid() != 0:
            return f"{os.getuid()}:{os.getgid()}"  # the checkout is ours already
        for tree in (checkout, *(Path(host) for host in self.mounts)):
            if tree not in self._owned:
                # root on the host: hand the tree to the image's build user, never build as root
                for root, dirs, files in os.walk(tree):
                    for name in (*dirs, *files):
                        os.lchown(os.path.join(root, name), BUILD_UID, BUILD_UID)
                os.lchown(tree, BUILD_UID, BUILD_UID)
                self._owned.add(tree)
        return f"{BUILD_UID}:{BUILD_UID}"

    def _container(self, checkout: Path) -> Container:
        """The long-lived container of one checkout: started once, every command is an exec in
        it (a fresh container per command costs about half a second, an exec milliseconds)."""
        with self._lock:
            if self._closed:  # a build thread still going after Ctrl-C: start nothing more
                raise ExecutorClosed("the docker executor was closed (interrupted)")
            live = self._live.get(checkout)
            if live is None:
                live = self.client.containers.run(
                    self.image,
                    ["sleep", "infinity"],
                    detach=True,
                    working_dir=CONTAINER_WORKDIR,
                    user=self._user(checkout),
                    volumes={str(checkout): {"bind": CONTAINER_WORKDIR, "mode": "rw"}, **self.mounts},
                    # the engine may run without a bridge (dockerd --bridge=none): host or nothing
                    network_mode="host" if self.network else "none",
                    mem_limit=self.memory,
                    nano_cpus=int(self.cpus * 1e9),
                    labels=self.labels,
                    device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])] if self.gpus else None,
                )
                self._live[checkout] = live
            return live

    def _discard(self, checkout: Path) -> None:
        with self._lock:
            live = self._live.pop(checkout, None)
        if live is not None:
            try:
                live.remove(force=True)  # kills whatever still runs in it
            except docker.errors.NotFound:
                pass

    def close(self) -> None:
        """Remove every container this executor started (also on Ctrl-C: callers use finally).

        Found on the engine by its run label, not from the handles it holds: a Ctrl-C that
        lands inside `containers.run` leaves a container the engine made and started but whose
        handle never came back (the full suite once left one behind that way). Holding the
        lock, it waits for a creation in flight on another thread, and none starts after."""
        with self._lock:
            self._closed = True
            self._live = {}
        for container in self.client.containers.list(all=True, filters={"label": f"{LABEL}={self.run_id}"}):
            try:
                container.remove(force=True)  # kills whatever still runs in it
            except docker.errors.NotFound:
                pass

    def _run(self, checkout: Path, argv: list[str], env: dict[str, str], timeout_s: float) -> ProcessResult:
        start = time.monotonic()
        api = self.client.api
        container = self._container(checkout)
        exec_id = api.exec_create(container.id, argv, environment=env, workdir=CONTAINER_WORKDIR)["Id"]
        output: dict[str, tuple[bytes | None, bytes | None]] = {}
        worker = threading.Thread(target=lambda: output.update(io=api.exec_start(exec_id, demux=True)), daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            # Past the timeout: kill and remove the container, which ends the exec; the next
            # command for this checkout gets a fresh container.
            self._discard(checkout)
            worker.join(EXEC_REAP_S)
            return ProcessResult(None, "", "", True, time.monotonic() - start)
        out, err = output.get("io") or (None, None)
        code = api.exec_inspect(exec_id).get("ExitCode")
        return ProcessResult(
            None if code is None else int(code),
            (out or b"").decode(errors="replace"),
            (err or b"").decode(errors="replace"),
            False,
            time.monotonic() - start,
        )


def _made(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return True


def leftover_containers(client: docker.DockerClient, workdir: Path | None = None) -> list[str]:
    """Containers attrib made (for one work dir, if given) that still exist: none after a run."""
    label = LABEL if workdir is None else f"{WORKDIR_LABEL}={workdir.resolve()}"
    return [c.id for c in client.containers.list(all=True, filters={"label": label})]


def remove_leftovers(client: docker.DockerClient, under: Path) -> int:
    """Remove every container attrib made for a work dir under `under`, whatever runs in it: at
    a daemon's start, what the executors of a dead one left (a kill -9 runs no close(), and an
    exec in a container, a hung benchmark's, runs on until the container goes). Returns how many."""
    root = under.resolve()
    removed = 0
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        workdir = Path(container.labels.get(WORKDIR_LABEL) or "/")
        if workdir == root or workdir.is_relative_to(root):
            try:
                container.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
    return removed

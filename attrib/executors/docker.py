"""Build and run in containers on a real Docker engine, through the docker SDK.

Every command gets a fresh container from the recipe's image with the checkout mounted at
/src, as a non-root user, with the network off unless the recipe asks for it, CPU and memory
limits, and the recipe's timeout: past it the container is killed. Containers carry the label
`attrib.run=<id>` and are removed in a `finally`, so neither a timeout nor Ctrl-C leaves one
behind. When the engine has the NVIDIA runtime, benchmark runs get the GPUs (a device
request) and the result says so.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest

from ..errors import InputError
from . import ProcessResult

CONTAINER_WORKDIR = "/src"
BUILD_UID = 1000  # the image's non-root user (containers/Dockerfile.cpu creates it)
LABEL = "attrib.run"
DEFAULT_IMAGE = "attrib/cpu:latest"
DEFAULT_MEMORY = "4g"


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


def connect() -> docker.DockerClient:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise EngineUnavailable(type(exc).__name__) from None
    return client


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
    ) -> None:
        self.client = client or connect()
        try:
            img = self.client.images.get(image)
        except docker.errors.ImageNotFound:
            raise ImageMissing(image) from None
        self.image = image
        self.image_id: str = img.id
        self.digests: list[str] = list(img.attrs.get("RepoDigests") or [])
        self.network = network
        self.cpus = cpus or float(os.cpu_count() or 1)
        self.memory = memory
        self.run_id = uuid.uuid4().hex[:12]
        runtimes = self.client.info().get("Runtimes") or {}
        self.gpus = "nvidia" in runtimes
        self._owned: set[Path] = set()

    def identity(self) -> str:
        return f"docker:{self.image_id}"

    def describe(self) -> dict[str, object]:
        return {"image": self.image, "image_id": self.image_id, "digests": self.digests, "gpus": self.gpus}

    def shell(self, checkout: Path, command: str, env: Mapping[str, str], timeout_s: float) -> ProcessResult:
        return self._run(checkout, ["sh", "-c", command], dict(env), timeout_s, gpus=False)

    def run(self, checkout: Path, argv: Sequence[str], timeout_s: float) -> ProcessResult:
        return self._run(checkout, list(argv), {}, timeout_s, gpus=self.gpus)

    def _user(self, checkout: Path) -> str:
        if os.geteuid() != 0:
            return f"{os.getuid()}:{os.getgid()}"  # the checkout is ours already
        if checkout not in self._owned:
            # root on the host: hand the checkout to the image's build user, never build as root
            for root, dirs, files in os.walk(checkout):
                for name in (*dirs, *files):
                    os.lchown(os.path.join(root, name), BUILD_UID, BUILD_UID)
            os.lchown(checkout, BUILD_UID, BUILD_UID)
            self._owned.add(checkout)
        return f"{BUILD_UID}:{BUILD_UID}"

    def _run(self, checkout: Path, argv: list[str], env: dict[str, str], timeout_s: float, gpus: bool) -> ProcessResult:
        start = time.monotonic()
        container = self.client.containers.create(
            self.image,
            argv,
            working_dir=CONTAINER_WORKDIR,
            volumes={str(checkout): {"bind": CONTAINER_WORKDIR, "mode": "rw"}},
            user=self._user(checkout),
            environment=env,
            # the engine may run without a bridge (dockerd --bridge=none): host or nothing
            network_mode="host" if self.network else "none",
            mem_limit=self.memory,
            nano_cpus=int(self.cpus * 1e9),
            labels={LABEL: self.run_id},
            device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None,
        )
        try:
            container.start()
            try:
                status = container.wait(timeout=timeout_s)
                code, timed_out = int(status.get("StatusCode", -1)), False
            except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
                container.kill()
                code, timed_out = None, True
            out = container.logs(stdout=True, stderr=False).decode(errors="replace")
            err = container.logs(stdout=False, stderr=True).decode(errors="replace")
        finally:
            container.remove(force=True)
        return ProcessResult(code, out, err, timed_out, time.monotonic() - start)


def leftover_containers(client: docker.DockerClient) -> list[str]:
    """Containers attrib made that still exist (there should be none after a run)."""
    return [c.id for c in client.containers.list(all=True, filters={"label": LABEL})]

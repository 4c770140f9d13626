"""Container images without a registry: a Debian base made with debootstrap and `docker import`,
then the images of containers/ built on top of it.

    attrib images build            # attrib/debian-base:bookworm, then attrib/cpu:latest

Where a registry is reachable the Dockerfiles' FROM works as usual (pass BASE=debian:bookworm).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

from attrib.errors import ImageBuildError, InputError
from attrib.shipped import Shipped, shipped_dir

BASE_IMAGE = "attrib/debian-base:bookworm"
CPU_IMAGE = "attrib/cpu:latest"
RECIPE_IMAGE_REPO = "attrib/recipe"
DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# The toolchain goes into the base itself, so building the images on top needs no network;
# ccache too, for recipes with [build] cache = "ccache" (issue 31).
BASE_PACKAGES = ("gcc", "g++", "libc6-dev", "make", "python3", "git", "ca-certificates", "ccache")
# What an image was made from, as labels: an image made from other packages or another base is
# made again, not used as it is (`attrib images build` without --force).
PACKAGES_LABEL = "attrib.packages"
BASE_LABEL = "attrib.base"
CONTAINERS_DIR = shipped_dir(Shipped.CONTAINERS)
DEBOOTSTRAP_TIMEOUT_S = 1800


def _exists(client: docker.DockerClient, tag: str) -> str | None:
    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _labels(client: docker.DockerClient, tag: str) -> dict[str, str]:
    return dict(client.images.get(tag).labels or {})


def stale(labels: dict[str, str], label: str, want: str) -> str | None:
    """Why an image with `labels` is not what it would be made from now (None: it is)."""
    have = labels.get(label)
    if have == want:
        return None
    return f"it was made from {label} {have!r}, not {want!r}" if have else f"it has no {label} label (made by an older attrib)"


def build_base(
    client: docker.DockerClient,
    *,
    suite: str = DEFAULT_SUITE,
    mirror: str = DEFAULT_MIRROR,
    force: bool = False,
    log: Callable[[str], None] = print,
) -> str:
    """debootstrap a minimal Debian with the toolchain into a folder and `docker import` it."""
    found = _exists(client, BASE_IMAGE)
    packages = ",".join(BASE_PACKAGES)
    why = stale(_labels(client, BASE_IMAGE), PACKAGES_LABEL, packages) if found else None
    if found and not force and why is None:
        log(f"{BASE_IMAGE} exists ({found[:19]}); --force rebuilds it")
        return found
    if why is not None and not force:
        log(f"{BASE_IMAGE} is made again: {why}")
    if shutil.which("debootstrap") is None:
        raise InputError("debootstrap is not installed; install it with `apt-get install debootstrap`")
    if os.geteuid() != 0:
        raise InputError("building the base image needs root (debootstrap creates device nodes and owners)")
    with tempfile.TemporaryDirectory(prefix="attrib-base-") as tmp:
        rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        log(f"debootstrap {suite} from {mirror} into {rootfs} (a minute or two)")
        cmd = [
            "debootstrap", "--variant=minbase", f"--include={packages}",
            suite, str(rootfs), mirror,
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT_S)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise ImageBuildError(f"debootstrap failed (exit {done.returncode}): {' | '.join(tail)}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        repo, tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(
            str(tarball),
            repository=repo,
            tag=tag,
            changes=[
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                'CMD ["/bin/sh"]',
                f"LABEL {PACKAGES_LABEL}={packages}",
            ],
        )
    image_id = _exists(client, BASE_IMAGE)
    if image_id is None:
        raise ImageBuildError(f"docker import did not produce {BASE_IMAGE}")
    log(f"built {BASE_IMAGE} ({image_id[:19]})")
    return image_id


def _build(
    client: docker.DockerClient,
    context: Path,
    dockerfile: str,
    tag: str,
    log: Callable[[str], None],
    labels: dict[str, str] | None = None,
) -> str:
    try:
        image, _ = client.images.build(
            labels=labels or {},
            path=str(context),
            dockerfile=dockerfile,
            tag=tag,
            buildargs={"BASE": BASE_IMAGE},
            network_mode="host",  # engines started with --bridge=none have no default network
            rm=True,
            forcerm=True,
        )
    except docker.errors.BuildError as exc:
        lines = [str(chunk.get("stream", chunk.get("error", ""))).strip() for chunk in exc.build_log]
        tail = " | ".join(line for line in lines if line)[-400:]
        raise ImageBuildError(f"docker build of {context / dockerfile} failed: {exc.msg}; {tail}") from None
    except docker.errors.APIError as exc:
        raise ImageBuildError(f"docker build of {context / dockerfile} failed: {exc.explanation}") from None
    log(f"built {tag} ({str(image.id)[:19]})")
    return str(image.id)


def build_cpu(client: docker.DockerClient, *, force: bool = False, log: Callable[[str], None] = print) -> str:
    found = _exists(client, CPU_IMAGE)
    base = _exists(client, BASE_IMAGE) or ""  # a registry base (BASE=debian:...) leaves it empty
    why = stale(_labels(client, CPU_IMAGE), BASE_LABEL, base) if found and base else None
    if found and not force and why is None:
        log(f"{CPU_IMAGE} exists ({found[:19]}); --force rebuilds it")
        return found
    if why is not None and not force:
        log(f"{CPU_IMAGE} is made again: {why}")
    if not (CONTAINERS_DIR / "Dockerfile.cpu").is_file():
        raise InputError(f"{CONTAINERS_DIR / 'Dockerfile.cpu'}: not found (containers/ ships with attrib: reinstall it)")
    return _build(client, CONTAINERS_DIR, "Dockerfile.cpu", CPU_IMAGE, log, {BASE_LABEL: base} if base else None)


def build_recipe_image(client: docker.DockerClient, dockerfile: Path, log: Callable[[str], None] = print) -> str:
    """The image of a recipe's [build].dockerfile, tagged by its text. It is built at every run,
    through the engine's layer cache: the cache knows the id its FROM resolves to and the
    checksums of what it COPYs, so an image whose base was made again (`attrib images build`)
    or whose copied files changed is made again, where a tag by the text alone kept the old one.
    An unchanged one costs the context's upload and cache hits."""
    try:
        text = dockerfile.read_bytes()
    except OSError:
        raise InputError(f"{dockerfile}: Dockerfile named by build.dockerfile not found") from None
    tag = f"{RECIPE_IMAGE_REPO}:{hashlib.sha256(text).hexdigest()[:16]}"
    before = _exists(client, tag)
    said: list[str] = []
    image_id = _build(client, dockerfile.parent, dockerfile.name, tag, said.append)
    if image_id != before:  # an unchanged image is said nothing of, as before
        log(f"{tag} made again ({image_id[:19]}): its base or the files it copies changed" if before else said[-1])
    return tag

"""Where the data attrib ships beside its code lives: kernels/ (the CUDA sources of the kernel
suite), recipes/ (the example recipes the demo reads) and containers/ (the Dockerfiles of
`attrib images build`).

In a checkout they sit at the top of the repository, beside attrib/, where a user reading the
project looks for them; the wheel carries the same files inside the package (pyproject.toml's
hatchling force-include maps kernels/ to attrib/kernels/ and so on). This is the one function
that knows both places; every reader asks it and none spells a path of its own.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


class Shipped(StrEnum):
    KERNELS = "kernels"
    RECIPES = "recipes"
    CONTAINERS = "containers"


def shipped_dir(what: Shipped) -> Path:
    """The directory of `what`: inside the installed package (a wheel) or, from a checkout or an
    editable install, at the repository's top level. Neither existing is an installation
    broken by hand; the caller's read fails then, naming the path it tried."""
    installed = _PACKAGE / what.value
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / what.value

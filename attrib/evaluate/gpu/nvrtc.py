"""NVRTC through ctypes: source -> cubin (or PTX) plus ptxas's verbose report.

attrib compiles kernels itself rather than through CuPy's RawModule(code=...), for two
reasons: CuPy's on-disk cache is keyed by the source text, not by the headers it includes, so
it could serve one commit's binary for another commit's header change; and static metrics
must be available on machines with no GPU, where CuPy cannot run but NVRTC can.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attrib.errors import GpuUnavailable, KernelCompileError

_LIB: ctypes.CDLL | None = None
_LIB_PATH = ""
_LIB_LOCK = threading.Lock()


def _candidates() -> list[str]:
    """Where libnvrtc may be: the pip wheels (cu12 and cu13 layouts), CUDA_PATH, the loader."""
    found: list[str] = []
    if env := os.environ.get("ATTRIB_NVRTC"):
        found.append(env)
    for entry in sys.path:
        for pattern in (
            "nvidia/cuda_nvrtc/lib/libnvrtc.so*",
            "nvidia/cu13/lib/libnvrtc.so*",
            "nvidia/cu12/lib/libnvrtc.so*",
        ):
            found += sorted(glob.glob(os.path.join(entry, pattern)), reverse=True)
    for root in filter(None, (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda")):
        found += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")), reverse=True)
    if name := ctypes.util.find_library("nvrtc"):
        found.append(name)
    try:  # NVIDIA's own locator, where installed (CuPy 14 and cuda-python use it)
        from cuda import pathfinder

        found.append(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    except Exception:
        pass
    # builtins libraries sit next to the real one and are not it
    return [f for f in found if "builtins" not in os.path.basename(f) and ".alt." not in os.path.basename(f)]


def library() -> ctypes.CDLL:
    global _LIB, _LIB_PATH
    with _LIB_LOCK:
        if _LIB is None:
            # NVRTC 13 keeps compiled results in the CUDA compute cache (~/.nv/ComputeCache)
            # and answers a cache hit with an empty log: the ptxas report, which static
            # metrics are read from, is gone (seen on an H200, NVRTC 13.0). attrib wants every
            # commit compiled from its own sources anyway, so the cache is off for this process.
            os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
            errors = []
            for path in _candidates():
                try:
                    _LIB = ctypes.CDLL(path)
                    _LIB_PATH = path
                    break
                except OSError as exc:
                    errors.append(f"{path}: {exc}")
            if _LIB is None:
                tried = "; ".join(errors) or "no libnvrtc.so found"
                raise GpuUnavailable(
                    f"NVRTC is not installed ({tried}); install the 'nvrtc' extra: pip install 'attrib[nvrtc]'"
                )
        return _LIB


def library_path() -> str:
    library()
    return _LIB_PATH


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


@dataclass(frozen=True)
class Compiled:
    binary: bytes  # cubin for a real architecture (sm_XY), PTX text for a virtual one
    log: str  # NVRTC's log, which carries ptxas's verbose report
    lowered: dict[str, str]  # name expression (e.g. "attention_fwd<64, true>") -> symbol
    arch: str
    options: tuple[str, ...]


def compile_source(
    source: str,
    name: str,
    *,
    arch: str = "sm_90",
    options: tuple[str, ...] = (),
    name_expressions: tuple[str, ...] = (),
) -> Compiled:
    """Compile to a cubin for `arch` (sm_XY) or to PTX (compute_XY). Raises KernelCompileError
    with NVRTC's log when the source does not compile."""
    lib = library()
    ptx_only = arch.startswith("compute_")
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "-default-device", *options]
    if not ptx_only:
        opts.append("--ptxas-options=--verbose")  # registers, spills, smem: static metrics
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), "create")
    try:
        for expr in name_expressions:
            _check(lib.nvrtcAddNameExpression(prog, expr.encode()), f"name expression {expr!r}")
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
        log = _read(lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog, prog).decode(errors="replace").strip()
        if rc != 0:
            raise KernelCompileError(name, arch, log or _error_string(lib, rc))
        if ptx_only:
            binary = _read(lib.nvrtcGetPTXSize, lib.nvrtcGetPTX, prog).rstrip(b"\0")
        else:
            binary = _read(lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN, prog)
        lowered = {}
        for expr in name_expressions:
            out = ctypes.c_char_p()
            _check(lib.nvrtcGetLoweredName(prog, expr.encode(), ctypes.byref(out)), f"lowered name {expr!r}")
            lowered[expr] = (out.value or b"").decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return Compiled(binary, log, lowered, arch, tuple(opts))


def compile_file(path: Path, **kwargs: object) -> Compiled:
    try:
        source = path.read_text()
    except OSError as exc:
        raise KernelCompileError(
            str(path), str(kwargs.get("arch", "")), f"cannot read source ({exc.strerror})"
        ) from None
    return compile_source(source, path.name, **kwargs)  # type: ignore[arg-type]


def _read(size_fn: Any, get_fn: Any, prog: ctypes.c_void_p) -> bytes:
    size = ctypes.c_size_t()
    _check(size_fn(prog, ctypes.byref(size)), "size")
    buf = ctypes.create_string_buffer(size.value)
    _check(get_fn(prog, buf), "read")
    return buf.raw[: size.value]


def _error_string(lib: ctypes.CDLL, rc: int) -> str:
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return (lib.nvrtcGetErrorString(rc) or b"").decode() or f"NVRTC error {rc}"


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise KernelCompileError("nvrtc", what, _error_string(library(), rc))


def ptxas_report_isolated(path: Path, arch: str, options: tuple[str, ...], name_expressions: tuple[str, ...]) -> str:
    """The compile log from a fresh process with the CUDA compute cache off.

    NVRTC 13 answers a compute-cache hit with an empty log (seen on an H200). When this
    process had loaded NVRTC before CUDA_CACHE_DISABLE was set (CuPy may load it first), the
    in-process log can come back empty; a process started with the variable set reports."""
    import json
    import subprocess
    import sys

    request = json.dumps({"path": str(path), "arch": arch, "options": list(options), "names": list(name_expressions)})
    proc = subprocess.run(
        [sys.executable, "-m", "attrib.evaluate.gpu.nvrtc", request],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CUDA_CACHE_DISABLE": "1"},
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise KernelCompileError(path.name, arch, f"error: the isolated compile for the ptxas report failed: {tail[0]}")
    return str(json.loads(proc.stdout)["log"])


if __name__ == "__main__":  # the isolated compile behind ptxas_report_isolated
    import json
    import sys

    req = json.loads(sys.argv[1])
    # options already hold the arch and the verbose flag: pass only what compile_source adds to
    extra = tuple(
        o
        for o in req["options"]
        if not o.startswith(("--gpu-architecture=", "-std=", "--ptxas-options=")) and o != "-default-device"
    )
    out = compile_file(Path(req["path"]), arch=req["arch"], options=extra, name_expressions=tuple(req["names"]))
    print(json.dumps({"log": out.log}))

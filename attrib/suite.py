"""The kernel suite: for each kernel in kernels/, how to compile it (defines, entry points),
which problem shapes it takes, how to set up and launch one problem, the NumPy reference it
must match before it is timed, and the work it does (for bandwidth and FLOP/s figures).

A recipe's `cupy` benchmark names one of these by `kernel`; the source, defines and headers
can come from the tree under test, the launch contract (signature, grid) comes from here.
Everything that touches a GPU takes the CuPy module as an argument, so importing this module
needs neither CuPy nor a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attrib.shipped import Shipped, shipped_dir

KERNELS_DIR = shipped_dir(Shipped.KERNELS)
TIMING_SOURCE = "timing.cu"
Shape = Mapping[str, int]


@dataclass(frozen=True)
class Work:
    flops: float  # 0 for memory-bound kernels
    bytes: float  # minimum global traffic the algorithm needs
    tensor_cores: bool = False  # which arithmetic peak applies


@dataclass
class Problem:
    """One problem instance on the device: `launch()` enqueues the kernel(s) on the current
    stream; `check()` compares the output with the NumPy reference (None when it matches)."""

    launch: Callable[[], None]
    check: Callable[[], str | None]
    arrays: list[Any] = field(default_factory=list)  # keeps device memory alive


@dataclass(frozen=True)
class KernelDef:
    name: str
    source: str  # file in kernels/
    summary: str
    entries: Callable[[Shape, str], tuple[str, ...]]  # name expressions, primary first
    shape_keys: tuple[str, ...]
    default_shape: Shape
    check_shape: Shape
    dtypes: tuple[str, ...]
    defines: Callable[[str], dict[str, str]]
    setup: Callable[[Any, dict[str, Any], Shape, str, np.random.Generator], Problem]
    work: Callable[[Shape, str], Work]
    validate: Callable[[Shape], str | None] = lambda shape: None
    structural: tuple[str, ...] = ()  # shape keys that pick the code (template arguments)

    def check_shape_for(self, shape: Shape) -> dict[str, int]:
        """The small correctness-check size, with the keys that change the code kept."""
        return {**self.check_shape, **{k: v for k, v in shape.items() if k in self.structural}}

    def shape_errors(self, shape: Mapping[str, Any]) -> str | None:
        for key in shape:
            if key not in self.shape_keys:
                return f"unknown shape key '{key}' for kernel {self.name} (expected: {', '.join(self.shape_keys)})"
        for key, value in shape.items():
            if type(value) is not int or value <= 0:
                return f"shape.{key} must be a positive integer, got {value!r}"
        full = {**self.default_shape, **shape}
        return self.validate(full)


# --- reference helpers ------------------------------------------------------------------------


def _close(got: np.ndarray, want: np.ndarray, rtol: float, what: str) -> str | None:
    """Relative error against the reference's scale, the way GEMM libraries test."""
    got = np.asarray(got, dtype=np.float64)
    if not np.all(np.isfinite(got)):
        return f"{what}: output has non-finite values"
    scale = max(float(np.max(np.abs(want))), 1e-30)
    err = float(np.max(np.abs(got - want))) / scale
    if err > rtol:
        return f"{what}: max error {err:.2e} of the output's scale exceeds {rtol:.0e}"
    return None


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, rounded to nearest even (what __float2bfloat16 does)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u: np.ndarray) -> np.ndarray:
    return (u.astype(np.uint32) << 16).view(np.float32)


def _half_bits(x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(bits to upload, the exact float32 values those bits hold) for fp16 or bf16."""
    if dtype == "bf16":
        bits = to_bf16_bits(x)
        return bits, from_bf16_bits(bits)
    h = x.astype(np.float16)
    return h.view(np.uint16), h.astype(np.float32)


def _grid1(n: int, threads: int) -> int:
    return max(1, math.ceil(n / threads))


# --- copy -------------------------------------------------------------------------------------


def _copy_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    n = s["N"]
    src = cp.asarray(rng.standard_normal(n, dtype=np.float32))
    dst = cp.empty_like(src)
    n4 = n // 4
    grid = min(_grid1(n4, 256), 132 * 16)

    def launch() -> None:
        f["copy_f4"]((grid,), (256,), (src, dst, np.int64(n4)))

    def check() -> str | None:
        return None if bool(cp.array_equal(src, dst)) else "copy: destination differs from the source"

    return Problem(launch, check, [src, dst])


# --- reduce -----------------------------------------------------------------------------------


def _reduce_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    n = s["N"]
    host = rng.random(n, dtype=np.float32)
    x = cp.asarray(host)
    blocks = min(_grid1(n, 256), 1024)
    partial = cp.empty(blocks, dtype=np.float32)
    out = cp.zeros(1, dtype=np.float32)

    def launch() -> None:
        f["reduce_partial"]((blocks,), (256,), (x, partial, np.int64(n)))
        f["reduce_final"]((1,), (256,), (partial, out, np.int32(blocks)))

    def check() -> str | None:
        want = np.array([host.astype(np.float64).sum()])
        return _close(cp.asnumpy(out), want, 1e-5, "reduce")

    return Problem(launch, check, [x, partial, out])


# --- softmax / layernorm ----------------------------------------------------------------------


def _softmax_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    r, c = s["ROWS"], s["COLS"]
    host = rng.standard_normal((r, c), dtype=np.float32) * 3
    x, y = cp.asarray(host), cp.empty((r, c), dtype=np.float32)

    def launch() -> None:
        f["softmax_rows"]((r,), (256,), (x, y, np.int32(c)))

    def check() -> str | None:
        h = host.astype(np.float64)
        e = np.exp(h - h.max(axis=1, keepdims=True))
        return _close(cp.asnumpy(y), e / e.sum(axis=1, keepdims=True), 1e-4, "softmax")

    return Problem(launch, check, [x, y])


def _layernorm_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    r, c = s["ROWS"], s["COLS"]
    host = rng.standard_normal((r, c), dtype=np.float32) + 2
    g_host = rng.standard_normal(c, dtype=np.float32)
    b_host = rng.standard_normal(c, dtype=np.float32)
    x, gamma, beta = cp.asarray(host), cp.asarray(g_host), cp.asarray(b_host)
    y = cp.empty((r, c), dtype=np.float32)
    eps = 1e-5

    def launch() -> None:
        f["layernorm_rows"]((r,), (256,), (x, gamma, beta, y, np.int32(c), np.float32(eps)))

    def check() -> str | None:
        h = host.astype(np.float64)
        mu, var = h.mean(axis=1, keepdims=True), h.var(axis=1, keepdims=True)
        want = (h - mu) / np.sqrt(var + eps) * g_host + b_host
        return _close(cp.asnumpy(y), want, 1e-4, "layernorm")

    return Problem(launch, check, [x, gamma, beta, y])


# --- GEMMs ------------------------------------------------------------------------------------


def _sgemm_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    m, n, k = s["M"], s["N"], s["K"]
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    a, b, c = cp.asarray(a_h), cp.asarray(b_h), cp.empty((m, n), dtype=np.float32)
    grid = (_grid1(n, 64), _grid1(m, 64))

    def launch() -> None:
        f["sgemm"](grid, (256,), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))

    def check() -> str | None:
        return _close(cp.asnumpy(c), a_h.astype(np.float64) @ b_h.astype(np.float64), 1e-4, "sgemm")

    return Problem(launch, check, [a, b, c])


def _mma_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    m, n, k = s["M"], s["N"], s["K"]
    a_bits, a_val = _half_bits(rng.standard_normal((m, k), dtype=np.float32), dtype)
    b_bits, b_val = _half_bits(rng.standard_normal((n, k), dtype=np.float32), dtype)
    a, b, c = cp.asarray(a_bits), cp.asarray(b_bits), cp.empty((m, n), dtype=np.float32)
    grid = (_grid1(n, 64), _grid1(m, 64))

    def launch() -> None:
        f["gemm_mma"](grid, (128,), (a, b, c, np.int32(m), np.int32(n), np.int32(k)))

    def check() -> str | None:
        # inputs are exact in 16 bits and products exact in fp32: only accumulation order differs
        return _close(cp.asnumpy(c), a_val.astype(np.float64) @ b_val.astype(np.float64).T, 1e-3, f"gemm {dtype}")

    return Problem(launch, check, [a, b, c])


def _mma_validate(s: Shape) -> str | None:
    return None if s["K"] % 32 == 0 else f"shape.K must be a multiple of 32 for gemm_mma, got {s['K']}"


# --- attention --------------------------------------------------------------------------------


def _attention_entries(s: Shape, dtype: str) -> tuple[str, ...]:
    return (f"attention_fwd<{s['D']}, {'true' if s['CAUSAL'] else 'false'}>",)


def _attention_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    bh, sl, d, causal = s["BH"], s["S"], s["D"], bool(s["CAUSAL"])
    q_h, k_h, v_h = (rng.standard_normal((bh, sl, d), dtype=np.float32) for _ in range(3))
    q, kk, v = cp.asarray(q_h), cp.asarray(k_h), cp.asarray(v_h)
    o = cp.empty((bh, sl, d), dtype=np.float32)
    scale = 1.0 / math.sqrt(d)
    fn = next(iter(f.values()))

    def launch() -> None:
        fn((_grid1(sl, 64), bh), (64,), (q, kk, v, o, np.int32(sl), np.float32(scale)))

    def check() -> str | None:
        sc = np.einsum("bqd,bkd->bqk", q_h.astype(np.float64), k_h.astype(np.float64)) * scale
        if causal:
            sc = np.where(np.triu(np.ones((sl, sl), bool), 1), -np.inf, sc)
        p = np.exp(sc - sc.max(axis=2, keepdims=True))
        want = np.einsum("bqk,bkd->bqd", p / p.sum(axis=2, keepdims=True), v_h.astype(np.float64))
        return _close(cp.asnumpy(o), want, 1e-4, "attention")

    return Problem(launch, check, [q, kk, v, o])


def _attention_work(s: Shape, dtype: str) -> Work:
    pairs = s["S"] * s["S"] * (0.5 if s["CAUSAL"] else 1.0)
    return Work(4.0 * s["BH"] * pairs * s["D"], 4.0 * s["BH"] * s["S"] * s["D"] * 4)


def _attention_validate(s: Shape) -> str | None:
    if s["D"] not in (32, 64, 128):
        return f"shape.D must be 32, 64 or 128 for attention, got {s['D']}"
    if s["CAUSAL"] not in (0, 1):
        return f"shape.CAUSAL must be 0 or 1, got {s['CAUSAL']}"
    return None


# --- MoE --------------------------------------------------------------------------------------

MOE_TOPK = 2
MOE_ENTRIES = ("moe_grouped_gemm", "moe_zero", "moe_gate", "moe_offsets", "moe_scatter", "moe_combine")


def _moe_setup(cp: Any, f: dict[str, Any], s: Shape, dtype: str, rng: np.random.Generator) -> Problem:
    t, h, ff, e = s["T"], s["H"], s["F"], s["E"]
    x_h = rng.standard_normal((t, h), dtype=np.float32)
    w_h = rng.standard_normal((e, ff, h), dtype=np.float32) / math.sqrt(h)
    logits_h = rng.standard_normal((t, e), dtype=np.float32)
    x, w, logits = cp.asarray(x_h), cp.asarray(w_h), cp.asarray(logits_h)
    slots = t * MOE_TOPK
    idx, wts = cp.empty(slots, dtype=np.int32), cp.empty(slots, dtype=np.float32)
    counts, offsets, cursor = (cp.empty(e + 1, dtype=np.int32) for _ in range(3))
    xp, pos_of = cp.empty((slots, h), dtype=np.float32), cp.empty(slots, dtype=np.int32)
    yp, y = cp.empty((slots, ff), dtype=np.float32), cp.empty((t, ff), dtype=np.float32)
    gemm_grid = (_grid1(ff, 64), _grid1(slots, 64), e)  # worst case: every slot on one expert

    def launch() -> None:
        f["moe_zero"]((1,), (64,), (counts, np.int32(e)))
        f["moe_gate"]((_grid1(t, 128),), (128,), (logits, idx, wts, counts, np.int32(t), np.int32(e)))
        f["moe_offsets"]((1,), (1,), (counts, offsets, cursor, np.int32(e)))
        f["moe_scatter"]((slots,), (128,), (x, idx, cursor, xp, pos_of, np.int32(h)))
        f["moe_grouped_gemm"](gemm_grid, (256,), (xp, w, offsets, yp, np.int32(h), np.int32(ff)))
        f["moe_combine"]((t,), (128,), (yp, pos_of, wts, y, np.int32(ff)))

    def check() -> str | None:
        lg = logits_h.astype(np.float64)
        probs = np.exp(lg - lg.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        top = np.argsort(-lg, axis=1, kind="stable")[:, :MOE_TOPK]
        tw = np.take_along_axis(probs, top, axis=1)
        tw /= tw.sum(axis=1, keepdims=True)
        want = np.zeros((t, ff))
        for k in range(MOE_TOPK):
            for ex in range(e):
                rows = top[:, k] == ex
                want[rows] += tw[rows, k : k + 1] * (x_h[rows].astype(np.float64) @ w_h[ex].astype(np.float64).T)
        return _close(cp.asnumpy(y), want, 1e-4, "moe")

    return Problem(launch, check, [x, w, logits, idx, wts, counts, offsets, cursor, xp, pos_of, yp, y])


def _moe_work(s: Shape, dtype: str) -> Work:
    t, h, ff = s["T"], s["H"], s["F"]
    return Work(2.0 * t * MOE_TOPK * h * ff, 4.0 * (t * h + s["E"] * ff * h + t * ff))


def _moe_validate(s: Shape) -> str | None:
    return None if 2 <= s["E"] <= 256 else f"shape.E must be between 2 and 256 experts, got {s['E']}"


# --- the catalogue ----------------------------------------------------------------------------


def _fixed(*names: str) -> Callable[[Shape, str], tuple[str, ...]]:
    return lambda shape, dtype: names


def _no_defines(dtype: str) -> dict[str, str]:
    return {}


SUITE: dict[str, KernelDef] = {
    k.name: k
    for k in (
        KernelDef(
            "copy",
            "copy.cu",
            "device-to-device copy (memory bandwidth)",
            _fixed("copy_f4"),
            ("N",),
            {"N": 1 << 28},
            {"N": 1 << 16},
            ("fp32",),
            _no_defines,
            _copy_setup,
            lambda s, d: Work(0.0, 8.0 * s["N"]),
            lambda s: None if s["N"] % 4 == 0 else f"shape.N must be a multiple of 4, got {s['N']}",
        ),
        KernelDef(
            "reduce",
            "reduce.cu",
            "sum of N floats, two deterministic passes",
            _fixed("reduce_partial", "reduce_final"),
            ("N",),
            {"N": 1 << 28},
            {"N": 100_003},
            ("fp32",),
            _no_defines,
            _reduce_setup,
            lambda s, d: Work(float(s["N"]), 4.0 * s["N"]),
        ),
        KernelDef(
            "softmax",
            "softmax.cu",
            "row softmax",
            _fixed("softmax_rows"),
            ("ROWS", "COLS"),
            {"ROWS": 16384, "COLS": 4096},
            {"ROWS": 37, "COLS": 1000},
            ("fp32",),
            _no_defines,
            _softmax_setup,
            lambda s, d: Work(0.0, 8.0 * s["ROWS"] * s["COLS"]),
        ),
        KernelDef(
            "layernorm",
            "layernorm.cu",
            "layer normalisation with scale and shift",
            _fixed("layernorm_rows"),
            ("ROWS", "COLS"),
            {"ROWS": 16384, "COLS": 4096},
            {"ROWS": 37, "COLS": 1000},
            ("fp32",),
            _no_defines,
            _layernorm_setup,
            lambda s, d: Work(0.0, 8.0 * s["ROWS"] * s["COLS"] + 8.0 * s["COLS"]),
        ),
        KernelDef(
            "gemm_fp32",
            "gemm_fp32.cu",
            "fp32 GEMM on CUDA cores (register-tiled)",
            _fixed("sgemm"),
            ("M", "N", "K"),
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 130, "N": 70, "K": 50},
            ("fp32",),
            _no_defines,
            _sgemm_setup,
            lambda s, d: Work(
                2.0 * s["M"] * s["N"] * s["K"], 4.0 * (s["M"] * s["K"] + s["K"] * s["N"] + s["M"] * s["N"])
            ),
        ),
        KernelDef(
            "gemm_mma",
            "gemm_mma.cu",
            "fp16/bf16 GEMM on tensor cores (mma.sync m16n8k16)",
            _fixed("gemm_mma"),
            ("M", "N", "K"),
            {"M": 4096, "N": 4096, "K": 4096},
            {"M": 200, "N": 136, "K": 96},
            ("bf16", "fp16"),
            lambda dtype: {"GEMM_BF16": "1"} if dtype == "bf16" else {},
            _mma_setup,
            lambda s, d: Work(
                2.0 * s["M"] * s["N"] * s["K"], 2.0 * (s["M"] * s["K"] + s["N"] * s["K"]) + 4.0 * s["M"] * s["N"], True
            ),
            _mma_validate,
        ),
        KernelDef(
            "attention",
            "attention.cu",
            "flash-style attention forward (online softmax)",
            _attention_entries,
            ("BH", "S", "D", "CAUSAL"),
            {"BH": 32, "S": 2048, "D": 64, "CAUSAL": 0},
            {"BH": 2, "S": 100, "D": 64, "CAUSAL": 0},
            ("fp32",),
            _no_defines,
            _attention_setup,
            _attention_work,
            _attention_validate,
            structural=("D", "CAUSAL"),
        ),
        KernelDef(
            "moe",
            "moe.cu",
            "MoE: top-2 gating, permutation, grouped expert GEMM, combine",
            _fixed(*MOE_ENTRIES),
            ("T", "H", "F", "E"),
            {"T": 8192, "H": 1024, "F": 1024, "E": 8},
            {"T": 50, "H": 64, "F": 72, "E": 8},
            ("fp32",),
            _no_defines,
            _moe_setup,
            _moe_work,
            _moe_validate,
        ),
    )
}


@dataclass(frozen=True)
class SuiteBenchmark:
    """One named configuration of a suite kernel: what `attrib inspect` and scripts/gpu-check list."""

    name: str
    kernel: str
    dtype: str
    shape: Shape = field(default_factory=dict)


SUITE_BENCHMARKS = (
    SuiteBenchmark("copy", "copy", "fp32"),
    SuiteBenchmark("reduce", "reduce", "fp32"),
    SuiteBenchmark("softmax", "softmax", "fp32"),
    SuiteBenchmark("layernorm", "layernorm", "fp32"),
    SuiteBenchmark("gemm_fp32", "gemm_fp32", "fp32"),
    SuiteBenchmark("gemm_fp16", "gemm_mma", "fp16"),
    SuiteBenchmark("gemm_bf16", "gemm_mma", "bf16"),
    SuiteBenchmark("attention", "attention", "fp32"),
    SuiteBenchmark("attention_causal", "attention", "fp32", {"CAUSAL": 1}),
    SuiteBenchmark("moe", "moe", "fp32"),
)

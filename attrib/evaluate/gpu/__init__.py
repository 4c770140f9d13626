"""GPU kernels: NVRTC compilation and static metrics (no GPU needed), the kernel suite, and
the timing protocol behind the `cupy` runner (GPU needed). CuPy is imported lazily, only by
`device.py`, so everything else works on a machine without CUDA."""

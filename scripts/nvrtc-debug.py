import sys
if sys.argv[1] == "cupy":
    import cupy  # noqa
from attrib.gpu import nvrtc
out = nvrtc.compile_source('extern "C" __global__ void k(float* x){ x[0]=1.0f; }', "k.cu", arch="sm_90")
print(nvrtc._candidates()); print(sys.argv[1], nvrtc.library_path(), nvrtc.version(), repr(out.log[:200]), out.options)

"""What ncu16.py profiles as a kernel with no work: one CTA of 128 threads that does nothing
(`null_empty`), then one that stores a float a thread (`null_store`), each launched once. The
span a launch has beyond its busiest SM's active cycles with (next to) nothing to do."""
import cupy

SRC = r'''
extern "C" __global__ void null_empty() {}
extern "C" __global__ void null_store(float* o) { o[threadIdx.x] = 1.0f; }
'''
mod = cupy.RawModule(code=SRC)
out = cupy.zeros(128, cupy.float32)
mod.get_function("null_empty")((1,), (128,), ())
mod.get_function("null_store")((1,), (128,), (out,))
cupy.cuda.Device().synchronize()

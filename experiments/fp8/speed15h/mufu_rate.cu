// mufu_rate.cu -- results per clock per SM of the exponential's forms and of the conversions
// around P in fa3.cu's FP8 softmax (issue 24, session 15; experiments/fp8/speed15h/README.md).
// One kernel per form (FORM, 0..9): each thread runs U independent chains y = op(y) for ITERS
// trips; one CTA of 1024 threads per SM, the SM clock (clock64) read around the loop. The
// chains keep every input in the range the softmax sees (x <= 0), so no form runs on inf/NaN.
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -DFORM=F mufu_rate.cu
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef unsigned u32;
#ifndef FORM
#error "FORM must be defined (0..9)"
#endif
constexpr int U = 16;  // independent chains per thread

__device__ __forceinline__ float ex2f(float x) {  // fa3.cu's fast_exp2
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ u32 ex2h2(u32 x) {
    u32 y;
    asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ u32 ex2bh2(u32 x) {
    u32 y;
    asm volatile("ex2.approx.ftz.bf16x2 %0, %1;" : "=r"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ unsigned short ex2h(unsigned short x) {
    unsigned short y;
    asm volatile("ex2.approx.f16 %0, %1;" : "=h"(y) : "h"(x));
    return y;
}
__device__ __forceinline__ u32 pack_h2(float hi, float lo) {  // F2FP.F16.F32.PACK_AB
    u32 y;
    asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(y) : "f"(hi), "f"(lo));
    return y;
}
__device__ __forceinline__ unsigned short e4m3_h2(u32 x) {
    unsigned short y;
    asm volatile("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ unsigned short e4m3_f32(float hi, float lo) {
    unsigned short y;
    asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(y) : "f"(hi), "f"(lo));
    return y;
}
// fa3.cu's exp2_h2 (EXP2_H2, at 40e79ec): 2^x of two halves, x <= 8, on the FMA/ALU pipes
__device__ __forceinline__ u32 poly_h2(u32 xb) {
    const __half2 x = __hmax2(*reinterpret_cast<const __half2*>(&xb), __float2half2_rn(-15.f));
    const __half2 t = __hadd2(x, __float2half2_rn(1039.f));
    const __half2 f = __hsub2(x, __hsub2(t, __float2half2_rn(1039.f)));
    const __half2 p = __hfma2(__hfma2(__float2half2_rn(0.2394f), f, __float2half2_rn(0.703f)), f,
                              __float2half2_rn(1.f));
    const u32 tb = *reinterpret_cast<const u32*>(&t);
    const u32 sb = (tb << 10) & 0x7C007C00u;
    const __half2 r = __hmul2(p, *reinterpret_cast<const __half2*>(&sb));
    return *reinterpret_cast<const u32*>(&r);
}

extern "C" __global__ void __launch_bounds__(1024, 1)
rate(u32* out, long long* cyc, int iters) {
    u32 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {  // x in [-0.9, -0.1] (f32 bits, or two halves)
        const float x = -0.1f - 0.05f * ((threadIdx.x + u) % 17);
        r[u] = (FORM == 0 || FORM == 4 || FORM == 6 || FORM == 8) ? __float_as_uint(x)
               : (FORM == 3) ? (u32)__half_as_ushort(__float2half(x))
               : (FORM == 2) ? (u32)__bfloat16_as_ushort(__float2bfloat16(x)) * 0x10001u
                             : (u32)__half_as_ushort(__float2half(x)) * 0x10001u;
    }
    __syncthreads();
    const long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
#if FORM == 0  // ex2.approx.ftz.f32 of -y: y stays in (0.5, 1)
            r[u] = __float_as_uint(ex2f(-__uint_as_float(r[u])));
#elif FORM == 1  // ex2.approx.f16x2 of -y
            r[u] = ex2h2(r[u] ^ 0x80008000u);
#elif FORM == 2  // ex2.approx.ftz.bf16x2 of -y
            r[u] = ex2bh2(r[u] ^ 0x80008000u);
#elif FORM == 3  // ex2.approx.f16 of -y
            r[u] = ex2h((unsigned short)(r[u] ^ 0x8000u));
#elif FORM == 4  // f32 pair to f16x2 (the chain reads the result's bits as the next f32)
            r[u] = pack_h2(__uint_as_float(r[u]), __uint_as_float(r[u]));
#elif FORM == 5  // f16x2 to e4m3x2 (the result's bytes as the next halves' low bytes)
            r[u] = (u32)e4m3_h2(r[u]) * 0x10001u;
#elif FORM == 6  // f32 pair to e4m3x2 (fa3.cu's pack4_e4m3 half)
            r[u] = (u32)e4m3_f32(__uint_as_float(r[u]), __uint_as_float(r[u]));
#elif FORM == 7  // the f16x2 polynomial of -y
            r[u] = poly_h2(r[u] ^ 0x80008000u);
#elif FORM == 8  // FFMA (the issue rate's reference)
            r[u] = __float_as_uint(fmaf(__uint_as_float(r[u]), 0.999f, -0.0001f));
#elif FORM == 9  // half the chains ex2.approx.ftz.f32, half the f16x2 polynomial
            if (u % 2 == 0)
                r[u] = __float_as_uint(ex2f(-__uint_as_float(r[u])));
            else
                r[u] = poly_h2(r[u] ^ 0x80008000u);
#endif
        }
    }
    const long long t1 = clock64();
    u32 acc = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= r[u];
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

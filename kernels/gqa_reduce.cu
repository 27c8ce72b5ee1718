// gqa_reduce.cu -- the last kernel of a GQA/MQA backward pass (naive.cu, fa2_bwd.cu): each query
// head's dK and dV were written to per-query-head buffers; sum them over the heads that share
// one K/V head.
//
// Entry: gqa_reduce(dKx, dVx, dK, dV, Nk, H, KVH)
//   dKx, dVx (B,H,Nk,d), dK, dV (B,KVH,Nk,d), elem_t, contiguous; K/V head g sums query heads
//   g*(H/KVH) .. (g+1)*(H/KVH)-1 in fp32 and rounds once.
// Grid (ceil(Nk*d/8 / REDUCE_THREADS), KVH, B), REDUCE_THREADS threads: one 16-byte vector of
//   dK and one of dV per thread. Defines (from the Plan): HEAD_DIM, REDUCE_THREADS.
// IO: reads B*H*Nk*d elements of each of dKx, dVx once and writes B*KVH*Nk*d of each of dK, dV.
#include "common.cuh"

#if !defined(HEAD_DIM) || !defined(REDUCE_THREADS)
#error "gqa_reduce needs HEAD_DIM and REDUCE_THREADS"
#endif
static_assert(HEAD_DIM % 8 == 0, "rows of whole 16-byte vectors");
static_assert(REDUCE_THREADS % 32 == 0, "REDUCE_THREADS: whole warps");

__device__ __forceinline__ void gq_add8(float* acc, uint4 v) {
    const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float lo, hi;
        unpack2_elem(w[e], lo, hi);
        acc[2 * e] += lo;
        acc[2 * e + 1] += hi;
    }
}

__device__ __forceinline__ uint4 gq_pack8(const float* a) {
    return make_uint4(pack2_elem(a[0], a[1]), pack2_elem(a[2], a[3]), pack2_elem(a[4], a[5]),
                      pack2_elem(a[6], a[7]));
}

extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
gqa_reduce(const elem_t* __restrict__ dKx, const elem_t* __restrict__ dVx, elem_t* __restrict__ dK,
           elem_t* __restrict__ dV, int Nk, int H, int KVH) {
    const size_t n = (size_t)Nk * HEAD_DIM;  // elements per head
    const size_t v = ((size_t)blockIdx.x * REDUCE_THREADS + threadIdx.x) * 8;
    if (v >= n) return;
    const int group = H / KVH;
    const int kvh = blockIdx.y, b = blockIdx.z;
    const size_t src = ((size_t)b * H + (size_t)kvh * group) * n + v;
    const size_t dst = ((size_t)b * KVH + kvh) * n + v;
    float ak[8], av[8];
    const uint4 k0 = *reinterpret_cast<const uint4*>(dKx + src);
    const uint4 v0 = *reinterpret_cast<const uint4*>(dVx + src);
    const u32 kw[4] = {k0.x, k0.y, k0.z, k0.w}, vw[4] = {v0.x, v0.y, v0.z, v0.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        unpack2_elem(kw[e], ak[2 * e], ak[2 * e + 1]);
        unpack2_elem(vw[e], av[2 * e], av[2 * e + 1]);
    }
    for (int g = 1; g < group; ++g) {  // group - 1 additions per element
        gq_add8(ak, *reinterpret_cast<const uint4*>(dKx + src + g * n));
        gq_add8(av, *reinterpret_cast<const uint4*>(dVx + src + g * n));
    }
    *reinterpret_cast<uint4*>(dK + dst) = gq_pack8(ak);
    *reinterpret_cast<uint4*>(dV + dst) = gq_pack8(av);
}

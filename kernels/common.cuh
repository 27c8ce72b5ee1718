// common.cuh -- device helpers shared by the iosim attention kernels (naive.cu, fa1.cu, fa2.cu).
//
// Header-only and free of system/CUDA headers, so that it compiles the same way under NVRTC
// (CuPy RawModule at run time) and under offline `nvcc -cubin` (CI, no GPU).
//
// What it provides:
//   * dtype selection: exactly one of ELEM_BF16=1 / ELEM_FP16=1 must be defined. `elem_t` is the
//     raw 16-bit storage type (unsigned short); conversions go through PTX `cvt` so no
//     cuda_bf16.h / cuda_fp16.h is needed:
//       elem_to_float(elem_t), float_to_elem(float), pack2_elem(float lo, float hi) -> u32,
//       unpack2_elem(u32, float& lo, float& hi)
//   * mma_m16n8k16(d[4], a[4], b[2])  -- mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.f32,
//     accumulating in place (d += a*b).
//   * ldmatrix_x4 / ldmatrix_x2 / ldmatrix_x4_trans / ldmatrix_x2_trans (shared address as u32).
//   * cp_async_16(smem_addr, gptr, pred): cp.async.cg.shared.global, 16 bytes, zero-filled when
//     !pred (no global bytes are read then); cp_async_commit(); cp_async_wait<N>();
//     cp_async_4 (4 bytes, for fp32 row statistics).
//   * red_add_f32x2(p, a, b): fp32 atomic add of two adjacent floats (fire-and-forget).
//   * smem_u32(ptr): generic -> shared-window address.
//   * swz<ROW_CHUNKS>(row, chunk): element offset of the 16-byte chunk `chunk` of row `row` in a
//     row-major tile whose rows hold ROW_CHUNKS 16-byte chunks (ROW_CHUNKS a multiple of 8), with
//     the XOR swizzle chunk ^ (row & 7): 8 consecutive rows reading the same logical chunk
//     (an ldmatrix 8x8 matrix) hit 8 different 16-byte bank groups, i.e. no bank conflicts.
//   * warp reductions: warp_max, warp_sum (32 lanes); quad_max, quad_sum (the 4 lanes that share
//     a row of an mma accumulator fragment: xor 1, 2).
//   * fast_exp2(x): ex2.approx.ftz.f32 (exp2(-inf) = 0).
//
// Rule for this file: helpers may be ADDED; existing signatures never change.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned short elem_t;  // raw bits of one bf16 / fp16 element

#if defined(ELEM_BF16) && defined(ELEM_FP16)
#error "define only one of ELEM_BF16 / ELEM_FP16"
#elif !defined(ELEM_BF16) && !defined(ELEM_FP16)
#error "define ELEM_BF16=1 or ELEM_FP16=1"
#endif

#define IOSIM_DEVICE __device__ __forceinline__

// ---------------------------------------------------------------- dtype conversions
IOSIM_DEVICE float elem_to_float(elem_t x) {
#if defined(ELEM_BF16)
    return __uint_as_float(((u32)x) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
#endif
}

// Two floats -> one 32-bit register holding (lo in bits 0..15, hi in bits 16..31), round to nearest.
IOSIM_DEVICE u32 pack2_elem(float lo, float hi) {
    u32 r;
#if defined(ELEM_BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

IOSIM_DEVICE elem_t float_to_elem(float x) {
    return (elem_t)(pack2_elem(x, 0.0f) & 0xffffu);
}

IOSIM_DEVICE void unpack2_elem(u32 v, float& lo, float& hi) {
    lo = elem_to_float((elem_t)(v & 0xffffu));
    hi = elem_to_float((elem_t)(v >> 16));
}

// ---------------------------------------------------------------- tensor cores
// d[4] (fp32 accum, m16n8) += a[4] (m16k16, row) * b[2] (k16n8, col)
IOSIM_DEVICE void mma_m16n8k16(float* d, const u32* a, const u32* b) {
#if defined(ELEM_BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// ---------------------------------------------------------------- shared memory addressing
template <typename T>
IOSIM_DEVICE u32 smem_u32(const T* p) {
    return (u32)__cvta_generic_to_shared((const void*)p);
}

// Element offset of 16-byte chunk `chunk` of row `row`, rows of ROW_CHUNKS chunks (8 elements
// each), XOR-swizzled: physical chunk = chunk ^ (row & 7).
template <int ROW_CHUNKS>
IOSIM_DEVICE int swz(int row, int chunk) {
    static_assert(ROW_CHUNKS % 8 == 0, "swizzle needs rows of a multiple of 8 chunks (64 elements)");
    return row * (ROW_CHUNKS * 8) + ((chunk ^ (row & 7)) << 3);
}

// ---------------------------------------------------------------- ldmatrix
IOSIM_DEVICE void ldmatrix_x4(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
IOSIM_DEVICE void ldmatrix_x2(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}
IOSIM_DEVICE void ldmatrix_x4_trans(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
IOSIM_DEVICE void ldmatrix_x2_trans(u32* r, u32 addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(addr));
}

// ---------------------------------------------------------------- cp.async
// 16-byte global -> shared copy, L2 only (.cg). When !pred, writes 16 zero bytes and reads
// nothing (src-size 0); callers should still pass an in-bounds gptr (e.g. the tensor base).
IOSIM_DEVICE void cp_async_16(u32 smem_addr, const void* gptr, bool pred) {
    int src_size = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :
                 : "r"(smem_addr), "l"(gptr), "r"(src_size)
                 : "memory");
}
IOSIM_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
IOSIM_DEVICE void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// 4-byte global -> shared copy through L1 (.ca: .cg takes only 16 bytes), zero-filled when !pred.
IOSIM_DEVICE void cp_async_4(u32 smem_addr, const void* gptr, bool pred) {
    int src_size = pred ? 4 : 0;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :
                 : "r"(smem_addr), "l"(gptr), "r"(src_size)
                 : "memory");
}

// ---------------------------------------------------------------- atomics
// p[0] += a, p[1] += b in global memory (p 8-byte aligned): one vector reduction on sm_90,
// two scalar ones before it.
IOSIM_DEVICE void red_add_f32x2(float* p, float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
#else
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p), "f"(a) : "memory");
    asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(p + 1), "f"(b) : "memory");
#endif
}

// ---------------------------------------------------------------- reductions
IOSIM_DEVICE float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
IOSIM_DEVICE float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
IOSIM_DEVICE float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
    return v;
}
IOSIM_DEVICE float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    return v;
}

// ---------------------------------------------------------------- math
IOSIM_DEVICE float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

#define IOSIM_LOG2E 1.4426950408889634f
#define IOSIM_LN2 0.6931471805599453f
#define IOSIM_NEG_INF (__int_as_float(0xff800000))

// ---------------------------------------------------------------- mma.sync online softmax
// One key tile's online softmax (log2 domain) of mma.sync accumulators (fa2.cu, decode.cu): s
// holds MT m16 tiles x NT_S n8 tiles of S (per warp the m16n8 layout: rows r0, r0 + 8 in halves
// hr = 0, 1); s becomes P = exp2(s·sl2 − m_new) in place, m and l are updated per row and o is
// rescaled by exp2(m_old − m_new) (a row that has seen only masked keys keeps m = −inf, P = 0).
template <int MT, int NT_S, int NT_O>
IOSIM_DEVICE void online_softmax(float (&s)[MT][NT_S][4], float (&m_i)[MT][2],
                                 float (&l_i)[MT][2], float (&o)[MT][NT_O][4], float sl2) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            float mx = IOSIM_NEG_INF;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
                mx = fmaxf(mx, fmaxf(s[mt][nt][2 * hr], s[mt][nt][2 * hr + 1]));
            mx = quad_max(mx);
            const float m_new = fmaxf(m_i[mt][hr], mx * sl2);
            const float m_use = (m_new == IOSIM_NEG_INF) ? 0.f : m_new;
            const float alpha = fast_exp2(m_i[mt][hr] - m_use);
            m_i[mt][hr] = m_new;
            float rs = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT_S; ++nt)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const float p = fast_exp2(fmaf(s[mt][nt][2 * hr + c], sl2, -m_use));
                    s[mt][nt][2 * hr + c] = p;
                    rs += p;
                }
            l_i[mt][hr] = l_i[mt][hr] * alpha + rs;
#pragma unroll
            for (int nt = 0; nt < NT_O; ++nt) {
                o[mt][nt][2 * hr] *= alpha;
                o[mt][nt][2 * hr + 1] *= alpha;
            }
        }
}

// P in the A-fragment layout of m16n8k16: the S accumulators of n8 tiles 2kk, 2kk+1 make k16
// step kk.
template <int MT, int NT_S, int KS>
IOSIM_DEVICE void pack_p(const float (&s)[MT][NT_S][4], u32 (&pa)[MT][KS][4]) {
    static_assert(NT_S == 2 * KS, "two n8 tiles of S per k16 step of P V");
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
            pa[mt][kk][0] = pack2_elem(s[mt][2 * kk][0], s[mt][2 * kk][1]);
            pa[mt][kk][1] = pack2_elem(s[mt][2 * kk][2], s[mt][2 * kk][3]);
            pa[mt][kk][2] = pack2_elem(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
            pa[mt][kk][3] = pack2_elem(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
}

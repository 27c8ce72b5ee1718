// hopper.cuh -- sm_90a device helpers for fa3.cu: TMA tensor copies, mbarriers, wgmma
// descriptors and fences, named barriers, setmaxnreg.
//
// Like common.cuh, free of system/CUDA headers (NVRTC and offline nvcc compile it the same way).
//   * TmaDesc: the 128 opaque bytes of a CUtensorMap (cuTensorMapEncodeTiled on the host),
//     passed as a `const __grid_constant__` kernel parameter.
//   * tma_load_3d(dst, map, bar, c0, c1, c2): one box of a 3-D tensor map into shared memory,
//     completing (byte count) on mbarrier `bar`; rows outside the tensor are zero-filled.
//   * mbar_init / mbar_expect_tx / mbar_arrive / mbar_wait(bar, parity): mbarrier in shared
//     memory (addresses as u32 shared-window offsets).
//   * sw128_desc(addr, lbo): wgmma matrix descriptor of a tile stored in 128-byte-swizzled
//     rows (the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B): 8-row groups 1024 bytes
//     apart (SBO); `lbo` = byte distance between 64-element column panels, used by MN-major
//     operands only. `addr` must sit in a 1024-byte-aligned panel (swizzle phase 0).
//     sw_desc<SW>(addr, lbo): the same for SW-byte swizzled rows (SW = 128, 64 or 32: the
//     layout CU_TENSOR_MAP_SWIZZLE_64B / _32B writes, 8-row groups 8*SW bytes apart), for
//     K-major operands whose rows are narrower than 128 bytes (fa3.cu's e4m3 Q and K at d = 64,
//     its Vt panels of 64 or 32 keys).
//   * wgmma_fence / wgmma_commit / wgmma_wait<N>, fence_regs(r, n): keep the compiler from
//     moving accumulator accesses across the asynchronous MMAs.
//   * pack4_e4m3(a, b, c, d): four floats to the four e4m3 bytes of one register (FP8 P).
//   * fence_proxy_async(): shared-memory stores by this thread made visible to the async proxy
//     (a wgmma that reads a tile the threads just wrote, kernels/fa3_bwd.cu's dSᵀ).
//   * named_bar_sync(id, threads), setmaxnreg_inc<R> / setmaxnreg_dec<R>.
//   * bulk_reduce_add_f32(dst, src, bytes), bulk_commit, bulk_wait_read, bulk_wait: a bulk
//     reduce-add from shared to global memory by the copy engine (cp.reduce.async.bulk).
//   * sem_wait_eq(p, v) / sem_release(p, v): a flag in global memory between CTAs (kernels/
//     fa3_bwd.cu's deterministic dQ turns): spin until *p == v (acquire, GPU scope); then, after
//     the caller's threads synchronised, *p = v (release, GPU scope: the writes the threads made
//     before the barrier are visible to whoever sees v), as CUTLASS's GenericBarrier.
#pragma once
#include "common.cuh"

struct alignas(64) TmaDesc {
    u64 opaque[16];
};

// ---------------------------------------------------------------- mbarrier
IOSIM_DEVICE void mbar_init(u32 bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA) before first use.
IOSIM_DEVICE void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
IOSIM_DEVICE void mbar_expect_tx(u32 bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}
IOSIM_DEVICE void mbar_arrive(u32 bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Spin until the phase of parity `parity` has completed (a fresh barrier counts the phase
// before its first as completed, so waiting on parity 1 passes at once).
IOSIM_DEVICE void mbar_wait(u32 bar, u32 parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}

// ---------------------------------------------------------------- TMA
IOSIM_DEVICE void tma_prefetch(const TmaDesc* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}
IOSIM_DEVICE void tma_load_3d(u32 dst, const TmaDesc* map, u32 bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
}

// ---------------------------------------------------------------- wgmma
// Descriptor bits: start address >> 4 [0,14), LBO >> 4 [16,30), SBO >> 4 [32,46), layout type
// [62,64): 1 = 128-byte swizzle, 2 = 64-byte, 3 = 32-byte (SBO: 8 rows of SW bytes).
template <int SW>
IOSIM_DEVICE u64 sw_desc(u32 addr, u32 lbo_bytes) {
    static_assert(SW == 128 || SW == 64 || SW == 32, "swizzle span: 128, 64 or 32 bytes");
    return (u64)((addr & 0x3FFFFu) >> 4) | ((u64)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
           ((u64)(8u * SW >> 4) << 32) | ((u64)(SW == 128 ? 1 : SW == 64 ? 2 : 3) << 62);
}
IOSIM_DEVICE u64 sw128_desc(u32 addr, u32 lbo_bytes) { return sw_desc<128>(addr, lbo_bytes); }
IOSIM_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
IOSIM_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
IOSIM_DEVICE void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
IOSIM_DEVICE void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
template <int N>
IOSIM_DEVICE void fence_regs(float* r) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// Four floats -> four e4m3 bytes of one register, `a` in the lowest byte (saturating, round to
// nearest; cvt puts its first source in the upper half).
IOSIM_DEVICE u32 pack4_e4m3(float a, float b, float c, float d) {
    unsigned short lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
    return (u32)lo | ((u32)hi << 16);
}

// ---------------------------------------------------------------- bulk reductions
// *dst += *src elementwise over `bytes` (a multiple of 16, both 16-byte aligned), fp32, by the
// copy engine from shared to global memory (kernels/fa3_bwd.cu DQ_BULK=1); the issuing thread
// commits it to its bulk group and waits for the group's reads (before the buffer is written
// again) or for its completion.
IOSIM_DEVICE void bulk_reduce_add_f32(float* dst, u32 src, u32 bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 ::"l"(dst), "r"(src), "r"(bytes) : "memory");
}
IOSIM_DEVICE void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
IOSIM_DEVICE void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
IOSIM_DEVICE void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// ---------------------------------------------------------------- flags between CTAs
IOSIM_DEVICE void sem_wait_eq(const int* p, int v) {
    int x;
    do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(x) : "l"(p) : "memory");
    } while (x != v);
}
IOSIM_DEVICE void sem_release(int* p, int v) {
    asm volatile("fence.acq_rel.gpu;\nst.relaxed.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

// ---------------------------------------------------------------- warpgroups
IOSIM_DEVICE void named_bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int R>
IOSIM_DEVICE void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
IOSIM_DEVICE void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

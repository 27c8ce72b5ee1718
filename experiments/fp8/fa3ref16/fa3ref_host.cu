// A C entry to one instantiation of FlashAttention-3's Hopper forward (Dao-AILab/flash-attention
// hopper/, BSD-3; commit in README.md beside this file), for timing it as a reference peer of
// kernels/fa3.cu (issue 24). Our own code: it fills FA3's Flash_fwd_params as hopper/flash_api.cpp's
// mha_fwd does for dense (non-varlen, non-paged, one split, no GQA packing) inputs and calls
// run_flash_fwd with the template arguments run_mha_fwd_'s switches would pick, so that only the
// one kernel is compiled. Built by build.sh with -DHDIM=128|256 -DCAUSAL=0|1 [-DVCOL=1] (one object
// each). VCOL=1: V column-major, (b, h, d, s) (FA3's V_colmajor, key tile 192 at d = 128: no
// transpose inside the kernel, like ours, whose quantisation kernel writes V transposed). At
// flash-attention 0251105a that path does not compile (its release build leaves it out:
// FLASHATTENTION_ENABLE_VCOLMAJOR unset; three errors, the first at flash_fwd_launch_template.h:108,
// a V stride tuple that the column-major StrideV cannot be built from); kept so the try reproduces.
//
// Layout (FA3's own): q, k, v, o are (b, s, h, d) contiguous (v (b, h, d, s) with VCOL=1); q, k,
// v fp8 e4m3, o bf16;
// lse float (b, h, s); descales float (b, h_k) or null; sem one int, zeroed here before a causal
// launch (the dynamic persistent scheduler's tile counter).
#include "flash_fwd_launch_template.h"

#ifndef HDIM
#error "HDIM must be defined (128 or 256)"
#endif
#ifndef CAUSAL
#error "CAUSAL must be defined (0 or 1)"
#endif
#ifndef VCOL
#define VCOL 0
#endif

// Referenced by run_flash_fwd under a run-time `if (Varlen && ...)` that is false here (Varlen is a
// template argument, false): defined so the library loads with no undefined symbol, never called.
#if CAUSAL == 0 && HDIM == 128 && VCOL == 0
void prepare_varlen_num_blocks(Flash_fwd_params&, cudaStream_t, bool, int, int, bool) { abort(); }
#endif

#define FA3REF_CAT2(a, b, c) fa3ref_fwd_d##a##_c##b##_v##c
#define FA3REF_CAT(a, b, c) FA3REF_CAT2(a, b, c)
#define FA3REF_NAME FA3REF_CAT(HDIM, CAUSAL, VCOL)

extern "C" int FA3REF_NAME(void* q, void* k, void* v, void* o, float* lse, int b, int s_q, int s_k,
                           int h, int h_k, float softmax_scale, float* q_descale, float* k_descale,
                           float* v_descale, int* sem, int num_sm, cudaStream_t stream) {
    Flash_fwd_params p = {};
    constexpr int d = HDIM;
    p.is_e4m3 = true;
    p.q_ptr = q; p.k_ptr = k; p.v_ptr = v; p.o_ptr = o;
    p.q_row_stride = p.o_row_stride = int64_t(h) * d;
    p.k_row_stride = p.v_row_stride = int64_t(h_k) * d;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = d;
    p.v_dim_stride = 1;  // V row-major: FA3 transposes it inside the kernel (V_colmajor false)
    p.q_batch_stride = p.o_batch_stride = int64_t(s_q) * h * d;
    p.k_batch_stride = p.v_batch_stride = int64_t(s_k) * h_k * d;
    if (VCOL) {  // (b, h, d, s): V_colmajor's strides (hopper/flash_fwd_launch_template.h)
        p.v_row_stride = 1;
        p.v_dim_stride = s_k;
        p.v_head_stride = int64_t(d) * s_k;
        p.v_batch_stride = int64_t(h_k) * d * s_k;
    }
    p.softmax_lse_ptr = lse;
    p.b = b; p.b_k = b; p.h = h; p.h_k = h_k;
    p.seqlen_q = s_q; p.seqlen_k = s_k;
    p.seqlen_q_rounded = (s_q + 127) / 128 * 128;
    p.seqlen_k_rounded = (s_k + 127) / 128 * 128;
    p.total_q = b * s_q; p.total_k = b * s_k;
    p.d = p.d_rounded = p.dv = p.dv_rounded = d;
    p.scale_softmax = softmax_scale;
    p.softcap = 0.f;
    p.p_dropout = 1.f; p.rp_dropout = 1.f; p.p_dropout_in_uint8_t = 255;
    p.is_causal = CAUSAL;
    p.is_local = false;
    p.window_size_left = s_k - 1;
    p.window_size_right = CAUSAL ? 0 : s_q - 1;
    p.attention_chunk = 0;
    p.q_descale_ptr = q_descale; p.k_descale_ptr = k_descale; p.v_descale_ptr = v_descale;
    p.q_descale_batch_stride = p.k_descale_batch_stride = p.v_descale_batch_stride = h_k;
    p.q_descale_head_stride = p.k_descale_head_stride = p.v_descale_head_stride = 1;
    p.num_splits = 1;
    p.pack_gqa = false;
    p.arch = 90;
    p.num_sm = num_sm;
    p.tile_count_semaphore = CAUSAL ? sem : nullptr;
    if (CAUSAL) {
        if (cudaMemsetAsync(sem, 0, sizeof(int), stream) != cudaSuccess) return 1;
    }
    // run_mha_fwd_'s switches for these inputs: no local window, V row-major, no varlen, no Qv,
    // no append-KV, no cluster (FA3 clusters fp8 only at head dim 192), no split, no GQA packing.
    run_flash_fwd<90, d, d, 1, cutlass::float_e4m3_t, cutlass::bfloat16_t, bool(CAUSAL),
                  false /*Is_local*/, false /*Has_softcap*/, false /*Varlen*/,
                  false /*PagedKVNonTMA*/, false /*AppendKV*/, false /*HasQv*/,
                  false /*PackGQA*/, false /*Split*/, bool(VCOL) /*V_colmajor*/>(p, stream);
    return int(cudaGetLastError());
}

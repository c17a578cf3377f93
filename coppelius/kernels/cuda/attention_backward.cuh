// Coppelius tensor-core causal attention, backward: attention_backward (the block kinds and the
// order of every sum are described at the top of attention.cuh, with the tile constants).
#pragma once
#include "attention.cuh"

#ifndef COPPELIUS_TC_ATTENTION_BACKWARD
#define COPPELIUS_TC_ATTENTION_BACKWARD
namespace coptc {

// ------------------------------------------------------------------------------------ backward

// D = rowsum(dO * out) of a tile's ROWS rows, from its shared tiles (zero past hs and T), into sD;
// AT_THREADS / ROWS threads a row, each summing whole 8-column chunks.
template <int ROWS, int HSP>
__device__ __forceinline__ void at_tile_rowdot(float* sD, const __half* sO, const __half* sX) {
    constexpr int TPR = AT_THREADS / ROWS, PER = HSP / TPR;
    static_assert(PER % 8 == 0 && TPR <= 32, "D: whole chunks a thread, a row's threads in one warp");
    const int r = threadIdx.x / TPR, part = threadIdx.x % TPR;
    float dsum = 0.f;
#pragma unroll
    for (int c = 0; c < PER / 8; ++c) {
        const int off = swz<HSP / 8>(r, part * (PER / 8) + c);
#pragma unroll
        for (int e = 0; e < 8; e += 2) {
            const float2 a = __half22float2(*reinterpret_cast<const __half2*>(sO + off + e));
            const float2 x = __half22float2(*reinterpret_cast<const __half2*>(sX + off + e));
            dsum += a.x * x.x;
            dsum += a.y * x.y;
        }
    }
#pragma unroll
    for (int w = 1; w < TPR; w <<= 1) dsum += __shfl_xor_sync(0xffffffffu, dsum, w);
    if (part == 0) sD[r] = dsum;
}

// The locals every backward block function starts from (a macro, not a function returning a struct: that one
// changed attention_backward's machine code, checked 2026-12-01): the head size, the thread's lane and warp and its
// fragment row g / column pair t2, and (batch b, head h)'s columns of qkv (row stride rs = 3C: gq, gk, gv), of dout
// and out (stride C: gdo, go) and its lse row gl; vec: 16-byte loads possible.
#define AT_BWD_HEAD_LOCALS                                                                 \
    const int hs = C / NH;                                                                 \
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;                         \
    const int g = lane >> 2, t2 = (lane & 3) * 2;                                          \
    const size_t rs = (size_t)3 * C;                                                       \
    const __half* gq = qkv + (size_t)b * T * rs + (size_t)h * hs;                          \
    const __half* gk = gq + C;                                                             \
    const __half* gv = gq + 2 * C;                                                         \
    const __half* gdo = dout + (size_t)b * T * C + (size_t)h * hs;                         \
    const __half* go = outp + (size_t)b * T * C + (size_t)h * hs;                          \
    const float* gl = lse + ((size_t)b * NH + h) * T;                                      \
    const bool vec = (hs % 8) == 0 && (C % 8) == 0 && aligned16(qkv) && aligned16(dout)

// Key block: keys [k0, k0 + 64) of (b, h); writes dk and dv of those keys. For HSP 128 the query
// tiles are walked twice, dv accumulated in the first pass and dk in the second, so that only one
// 16 x 128 accumulator a warp is live (S^T is computed in both passes).
template <int HSP>
__device__ __forceinline__ void attn_bwd_keys(__half* __restrict__ dqkv, const __half* __restrict__ dout,
                                              const __half* __restrict__ qkv, const __half* __restrict__ outp,
                                              const float* __restrict__ lse, int b, int h, int kb, int T, int C,
                                              int NH) {
    constexpr int BCK = AT_BCK, BRK = AttnTiles<HSP>::BWD_BRK, KT = HSP / 16, ND = HSP / 8;
    constexpr int SUB = BRK < 32 ? BRK : 32, NQ = SUB / 8;
    constexpr bool SPLIT = HSP > 64;
    constexpr int PASSES = SPLIT ? 2 : 1;
    extern __shared__ __align__(1024) unsigned char coptc_smem[];
    __half* sK = reinterpret_cast<__half*>(coptc_smem);
    __half* sV = sK + BCK * HSP;
    __half* sQ = sV + BCK * HSP;
    __half* sO = sQ + BRK * HSP;  // dO tile
    __half* sX = sO + BRK * HSP;  // out tile (for D)
    float* sL = reinterpret_cast<float*>(sX + BRK * HSP);  // lse * log2(e)
    float* sD = sL + BRK;                                  // rowsum(dO * O)

    AT_BWD_HEAD_LOCALS;
    const float scale = rsqrtf((float)hs);
    const float sc = scale * LOG2E;
    const int k0 = kb * BCK;
    const int kw = k0 + warp * 16;  // this warp's first key
    const bool pair_ok = (hs % 2) == 0 && (C % 2) == 0 && (reinterpret_cast<size_t>(dqkv) & 3) == 0;
    __half* gdk = dqkv + (size_t)b * T * rs + (size_t)h * hs + C;

    at_load<BCK, HSP>(sK, gk, k0, T, hs, rs, vec);
    at_load<BCK, HSP>(sV, gv, k0, T, hs, rs, vec);
    cp_async_commit();

    unsigned kf[KT][4], vf[KT][4];
    float acc[ND][4];                 // dv (SPLIT: dv in pass 0, dk in pass 1)
    float acc2[SPLIT ? 1 : ND][4];    // dk
    const int nqt = (T + BRK - 1) / BRK;
#pragma unroll 1
    for (int pass = 0; pass < PASSES; ++pass) {
        const bool want_dp = !SPLIT || pass == 1;
        at_zero<ND>(acc);
        if constexpr (!SPLIT) at_zero<ND>(acc2);
        for (int i = k0 / BRK; i < nqt; ++i) {
            const int q0 = i * BRK;
            __syncthreads();  // the previous tile's readers are done
            at_load<BRK, HSP>(sQ, gq, q0, T, hs, rs, vec);
            at_load<BRK, HSP>(sO, gdo, q0, T, hs, (size_t)C, vec);
            if (want_dp) at_load<BRK, HSP>(sX, go, q0, T, hs, (size_t)C, vec);
            cp_async_commit();
            if (tid < BRK) sL[tid] = q0 + tid < T ? gl[q0 + tid] * LOG2E : 0.f;
            cp_async_wait<0>();
            __syncthreads();
            if (want_dp) {
                at_tile_rowdot<BRK, HSP>(sD, sO, sX);
                __syncthreads();
            }
            if (i == k0 / BRK) {
                at_frag_a<HSP>(kf, sK, warp * 16, lane);
                if (want_dp) at_frag_a<HSP>(vf, sV, warp * 16, lane);
            }
            if (q0 + BRK - 1 < kw) continue;  // every query of the tile precedes this warp's keys
#pragma unroll 1
            for (int sub = 0; sub < BRK / SUB; ++sub) {  // SUB queries at a time: fewer registers live
                const int qs = q0 + sub * SUB;
                if (qs + SUB - 1 < kw) continue;
                const __half* q_s = sQ + sub * SUB * HSP;  // (the swizzle period divides SUB rows)
                const __half* o_s = sO + sub * SUB * HSP;
                float st[NQ][4], dpt[NQ][4];
                const bool need_mask = qs < kw + 15 || qs + SUB > T;
                at_zero<NQ>(st);
                at_mm_nt<HSP, SUB>(st, kf, q_s, lane);
                if (want_dp) {
                    at_zero<NQ>(dpt);
                    at_mm_nt<HSP, SUB>(dpt, vf, o_s, lane);
                }
#pragma unroll
                for (int ni = 0; ni < NQ; ++ni)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int ql = sub * SUB + ni * 8 + t2 + (e & 1);  // query within the tile (column)
                        float p = exp2_approx(fmaf(st[ni][e], sc, -sL[ql]));
                        if (need_mask) {
                            const int key = kw + g + (e >> 1) * 8, q = q0 + ql;
                            if (key > q || q >= T) p = 0.f;
                        }
                        st[ni][e] = p;                                        // P^T
                        if (want_dp) dpt[ni][e] = p * (dpt[ni][e] - sD[ql]);  // dS^T
                    }
                if constexpr (!SPLIT) {
                    at_mm_pv<HSP, SUB>(acc, st, o_s, lane);    // dv += P^T dO
                    at_mm_pv<HSP, SUB>(acc2, dpt, q_s, lane);  // dk += dS^T Q
                } else {
                    if (pass == 0) at_mm_pv<HSP, SUB>(acc, st, o_s, lane);
                    else at_mm_pv<HSP, SUB>(acc, dpt, q_s, lane);
                }
            }
        }
        if constexpr (!SPLIT) {
            at_store<HSP>(gdk, rs, acc2, scale, kw, T, hs, pair_ok, lane);
            at_store<HSP>(gdk + C, rs, acc, 1.f, kw, T, hs, pair_ok, lane);
        } else {
            if (pass == 0) at_store<HSP>(gdk + C, rs, acc, 1.f, kw, T, hs, pair_ok, lane);
            else at_store<HSP>(gdk, rs, acc, scale, kw, T, hs, pair_ok, lane);
        }
    }
}

// The key block on sm_90a, HSP 64: the warpgroup multiplies whole 64 x 64 tiles, and the query tiles
// (Q, dO, out: one stage of three tiles) are double-buffered: tile i + 1 loads while tile i multiplies,
// and tile i's dV and dK products run on while tile i + 1's D is summed. S^T with dP^T, and dV with dK,
// are one commit group each; dS^T = P^T (dP^T - D) is formed from the packed fp16 P^T (fewer registers
// live than P^T and dP^T in fp32 beside dV and dK). dk and dv sum the query tiles in order, each element
// in one thread: deterministic.
__device__ __forceinline__ void attn_bwd_keys_wg(__half* __restrict__ dqkv, const __half* __restrict__ dout,
                                                 const __half* __restrict__ qkv, const __half* __restrict__ outp,
                                                 const float* __restrict__ lse, int b, int h, int kb, int T, int C,
                                                 int NH) {
    constexpr int HSP = 64, BK = AT_BCK, BQ = 64, TILE = BQ * HSP, NQ = BQ / 8, STAGE = 3 * TILE;
    extern __shared__ __align__(1024) unsigned char coptc_smem[];
    __half* sK = reinterpret_cast<__half*>(coptc_smem);
    __half* sV = sK + BK * HSP;
    __half* sQ = sV + BK * HSP;                               // [2 stages][Q, dO, out][BQ][HSP]
    float* sL = reinterpret_cast<float*>(sQ + 2 * STAGE);     // lse * log2(e) of the tile's rows
    float* sD = sL + BQ;                                      // rowsum(dO * out) of the tile's rows

    AT_BWD_HEAD_LOCALS;
    const float scale = rsqrtf((float)hs);
    const float sc = scale * LOG2E;
    const int k0 = kb * BK;
    const int kw = k0 + warp * 16;  // this warp's first key
    const int first = k0 / BQ, nqt = (T + BQ - 1) / BQ;

    auto load_tile = [&](int i) {  // Q, dO and out rows of query tile i into its stage
        __half* st = sQ + (i & 1) * STAGE;
        at_load<BQ, HSP>(st, gq, i * BQ, T, hs, rs, vec);
        at_load<BQ, HSP>(st + TILE, gdo, i * BQ, T, hs, (size_t)C, vec);
        at_load<BQ, HSP>(st + 2 * TILE, go, i * BQ, T, hs, (size_t)C, vec);
    };
    // lse as loaded; times log2(e) where sL is written a tile later (the product beside the load waited for it:
    // ncu at gpt2's shape, H200, 2026-12-04: 2.4% of the launch's stall samples)
    auto lse_row = [&](int i) { return tid < BQ && i * BQ + tid < T ? gl[i * BQ + tid] : 0.f; };
    at_load<BK, HSP>(sK, gk, k0, T, hs, rs, vec);
    at_load<BK, HSP>(sV, gv, k0, T, hs, rs, vec);
    load_tile(first);
    cp_async_commit();
    float lse_next = lse_row(first);

    float dv[8][4], dk[8][4];
    unsigned pa[4][4], da[4][4];  // packed P^T and dS^T: the A operands of the dV and dK products in flight
    at_zero<8>(dv);
    at_zero<8>(dk);
    at_zero<4>(pa);
    at_zero<4>(da);
    // a query tile's body, with the causal and T masks (the diagonal tile, a last tile past T) or without them
    auto step = [&](const int i, auto masked) {
        constexpr bool MASKED = decltype(masked)::value;
        const int q0 = i * BQ;
        const __half* q_s = sQ + (i & 1) * STAGE;
        const __half* o_s = q_s + TILE;
        cp_async_wait<0>();
        at_fence_async();
        __syncthreads();  // tile i is in; tile i - 1's readers of sL and sD are done
        if (tid < BQ) sL[tid] = lse_next * LOG2E;
        at_tile_rowdot<BQ, HSP>(sD, o_s, q_s + 2 * TILE);
        at_wg_wait();  // tile i - 1's dV and dK products are done with its stage
        at_wg_pinned(dv, pa);
        at_wg_pinned(dk, da);
        __syncthreads();  // sL and sD written; no warp's product reads tile i - 1's stage any more
        if (i + 1 < nqt) {
            load_tile(i + 1);
            cp_async_commit();
            lse_next = lse_row(i + 1);
        }
        float st[NQ][4], dpt[NQ][4];
        at_wg_nt<true>(st, sK, q_s, dpt, sV, o_s);  // S^T = K Q^T, dP^T = V dO^T
#pragma unroll
        for (int ni = 0; ni < NQ; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int ql = ni * 8 + t2 + (e & 1);  // query within the tile (column)
                float p = exp2_approx(fmaf(st[ni][e], sc, -sL[ql]));
                if constexpr (MASKED) {
                    const int key = kw + g + (e >> 1) * 8, q = q0 + ql;
                    if (key > q || q >= T) p = 0.f;
                }
                st[ni][e] = p;
            }
        at_pack_tile(pa, st);
#pragma unroll
        for (int ni = 0; ni < NQ; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const __half2 p2 = *reinterpret_cast<const __half2*>(&pa[ni >> 1][((ni & 1) << 1) | (e >> 1)]);
                const float p = (e & 1) ? __high2float(p2) : __low2float(p2);
                dpt[ni][e] = p * (dpt[ni][e] - sD[ni * 8 + t2 + (e & 1)]);
            }
        at_pack_tile(da, dpt);
        at_wg_pv_async<true>(dv, pa, o_s, dk, da, q_s);  // dv += P^T dO, dk += dS^T Q
    };
    int i = first;
    do {  // at least once: were there a way past the loop, zeros, not wgmma, would define dv and dk there (C7515)
        if (i == first || (i + 1) * BQ > T) step(i, StaticBool<true>{});
        else step(i, StaticBool<false>{});
    } while (++i < nqt);
    at_wg_wait();
    at_wg_pinned(dv, pa);
    at_wg_pinned(dk, da);
    const bool pair_ok = (hs % 2) == 0 && (C % 2) == 0 && (reinterpret_cast<size_t>(dqkv) & 3) == 0;
    __half* gdk = dqkv + (size_t)b * T * rs + (size_t)h * hs + C;
    at_store<HSP>(gdk, rs, dk, scale, kw, T, hs, pair_ok, lane);
    at_store<HSP>(gdk + C, rs, dv, 1.f, kw, T, hs, pair_ok, lane);
}

// Query block: queries [q0, q0 + 64) of (b, h); writes dq of those queries.
template <int HSP>
__device__ __forceinline__ void attn_bwd_queries(__half* __restrict__ dqkv, const __half* __restrict__ dout,
                                                 const __half* __restrict__ qkv, const __half* __restrict__ outp,
                                                 const float* __restrict__ lse, int b, int h, int qb, int T, int C,
                                                 int NH) {
    constexpr int BR = AT_BR, BC = AttnTiles<HSP>::BWD_BCQ, ST = AttnTiles<HSP>::BWD_QST;
    constexpr bool WG = AT_WGMMA && HSP == 64;  // the warpgroup multiplies whole 64 x 64 tiles
    constexpr int KT = HSP / 16, ND = HSP / 8, SUB = WG ? BC : 32, NKV = SUB / 8;
    extern __shared__ __align__(1024) unsigned char coptc_smem[];
    __half* sQ = reinterpret_cast<__half*>(coptc_smem);
    __half* sO = sQ + BR * HSP;   // dO
    __half* sK = sO + BR * HSP;   // [ST][BC][HSP]
    __half* sV = sK + ST * BC * HSP;
    // WG: the out tile of the block's rows and their D, in the bytes the key block's second stage takes beyond these
    // (formats/geometry.py: attention_shared_bytes), so that D's loads travel with the first tiles' (from global
    // memory beside them they were the block's longest wait at small's T = 256: ncu, H200, 2026-12-04)
    __half* sX = sV + ST * BC * HSP;
    float* sD = reinterpret_cast<float*>(sX + BR * HSP);

    AT_BWD_HEAD_LOCALS;
    const float scale = rsqrtf((float)hs);
    const float sc = scale * LOG2E;
    const int q0 = qb * BR;
    const int qw = q0 + warp * 16;

    at_load<BR, HSP>(sQ, gq, q0, T, hs, rs, vec);
    at_load<BR, HSP>(sO, gdo, q0, T, hs, (size_t)C, vec);
    at_load<BC, HSP>(sK, gk, 0, T, hs, rs, vec);
    at_load<BC, HSP>(sV, gv, 0, T, hs, rs, vec);
    if constexpr (WG) at_load<BR, HSP>(sX, go, q0, T, hs, (size_t)C, vec);
    cp_async_commit();

    // lse (log2 units) and D of this thread's two rows, qw + g and qw + g + 8 (WG: lse as loaded, both finished
    // once the first tiles are in)
    float lr[2], dr[2];
    if constexpr (WG) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int q = qw + g + r * 8;
            lr[r] = q < T ? gl[q] : 0.f;
            dr[r] = 0.f;
        }
    } else {
        const int q = qw + (lane & 15), half_ = lane >> 4;
        float dsum = 0.f;
        if (q < T) {
            const int per = (hs + 1) / 2;
            const int d0 = min(hs, half_ * per), d1 = min(hs, d0 + per);
            const __half *o_row = gdo + (size_t)q * C, *x_row = go + (size_t)q * C;
            dsum = vec && per % 8 == 0 && aligned16(outp) ? at_dot<true>(o_row, x_row, d0, d1)
                                                           : at_dot<false>(o_row, x_row, d0, d1);
        }
        dsum += __shfl_xor_sync(0xffffffffu, dsum, 16);
        const float lq = q < T ? gl[q] * LOG2E : 0.f;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            dr[r] = __shfl_sync(0xffffffffu, dsum, g + r * 8);
            lr[r] = __shfl_sync(0xffffffffu, lq, g + r * 8);
        }
    }

    constexpr bool Q_REGS = HSP <= 64;  // Q and dO fragments held (else reloaded a sub-tile)
    unsigned qf[KT][4], of[Q_REGS ? KT : 1][4];
    float dq[ND][4];
    at_zero<ND>(dq);
    const int last = min(q0 + BR, T) - 1;
    const int nkv = last / BC + 1;

    unsigned da[4][4];  // WG: packed dS, the A operand of the dq product in flight
    at_zero<4>(da);
    int j = 0;
    do {  // at least once (nkv >= 1), as attn_bwd_keys_wg's loop
        const __half* k_s = sK + (ST == 2 ? (j & 1) : 0) * BC * HSP;
        const __half* v_s = sV + (ST == 2 ? (j & 1) : 0) * BC * HSP;
        if (ST == 1 && j > 0) {
            __syncthreads();  // the stage's readers are done
            at_load<BC, HSP>(sK, gk, j * BC, T, hs, rs, vec);
            at_load<BC, HSP>(sV, gv, j * BC, T, hs, rs, vec);
            cp_async_commit();
        }
        cp_async_wait<0>();
        if constexpr (WG) {  // tile j - 1's dq product is done with its stage
            at_wg_wait();
            at_wg_pinned(dq, da);
            at_fence_async();
        }
        __syncthreads();  // tile j is in; (ST 2) no warp reads tile j - 1's stage any more
        if (WG && j == 0) {  // D of the block's rows from its dO and out tiles, summed as at_dot's two halves
            at_tile_rowdot<BR, HSP>(sD, sO, sX);
            __syncthreads();
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                dr[r] = sD[warp * 16 + g + r * 8];
                lr[r] *= LOG2E;
            }
        }
        if (ST == 2 && j + 1 < nkv) {
            at_load<BC, HSP>(sK + ((j + 1) & 1) * BC * HSP, gk, (j + 1) * BC, T, hs, rs, vec);
            at_load<BC, HSP>(sV + ((j + 1) & 1) * BC * HSP, gv, (j + 1) * BC, T, hs, rs, vec);
            cp_async_commit();
        }
        if (!WG && Q_REGS && j == 0) {
            at_frag_a<HSP>(qf, sQ, warp * 16, lane);
            at_frag_a<HSP>(of, sO, warp * 16, lane);
        }
#pragma unroll 1
        for (int sub = 0; sub < BC / SUB; ++sub) {  // SUB keys at a time: fewer registers live
            const int k0 = j * BC + sub * SUB;
            if (!WG && k0 > qw + 15) continue;  // no key of the sub-tile is visible to this warp's rows
            const __half* ks = k_s + sub * SUB * HSP;  // (the swizzle period divides SUB rows)
            const __half* vs = v_s + sub * SUB * HSP;
            float s[NKV][4], dp[NKV][4];
            if constexpr (!WG) {
                at_zero<NKV>(s);
                at_zero<NKV>(dp);
            }
            if constexpr (WG) {
                at_wg_nt<true>(s, sQ, ks, dp, sO, vs);
            } else if constexpr (Q_REGS) {
                at_mm_nt<HSP, SUB>(s, qf, ks, lane);
                at_mm_nt<HSP, SUB>(dp, of, vs, lane);
            } else {  // one fragment array, reloaded: fewer registers live
                at_frag_a<HSP>(qf, sQ, warp * 16, lane);
                at_mm_nt<HSP, SUB>(s, qf, ks, lane);
                at_frag_a<HSP>(qf, sO, warp * 16, lane);
                at_mm_nt<HSP, SUB>(dp, qf, vs, lane);
            }
            const bool need_mask = k0 + SUB - 1 > qw || k0 + SUB > T;
            // the last key a row sees, as an offset ni * 8 + (e & 1) from k0 + t2 (one compare an element, with
            // the offset a constant; as `key > q || key >= T || q >= T` it took four): every key of a sub-tile
            // needing no mask, none of a row past T
            int limit[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int q = qw + g + r * 8;
                limit[r] = !need_mask ? SUB : q >= T ? -1 : min(q, T - 1) - k0 - t2;
            }
#pragma unroll
            for (int ni = 0; ni < NKV; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = e >> 1;
                    float p = exp2_approx(fmaf(s[ni][e], sc, -lr[r]));
                    if (ni * 8 + (e & 1) > limit[r]) p = 0.f;
                    s[ni][e] = p * (dp[ni][e] - dr[r]);  // dS
                }
            if constexpr (WG) {
                at_pack_tile(da, s);
                at_wg_pv_async<false>(dq, da, ks, dq, da, ks);
            } else {
                at_mm_pv<HSP, SUB>(dq, s, ks, lane);
            }
        }
    } while (++j < nkv);
    if constexpr (WG) {
        at_wg_wait();
        at_wg_pinned(dq, da);
    }
    const bool pair_ok = (hs % 2) == 0 && (C % 2) == 0 && (reinterpret_cast<size_t>(dqkv) & 3) == 0;
    at_store<HSP>(dqkv + (size_t)b * T * rs + (size_t)h * hs, rs, dq, scale, qw, T, hs, pair_ok, lane);
}

template <int HSP>
__device__ __forceinline__ void attn_bwd_block(__half* dqkv, const __half* dout, const __half* qkv, const __half* out,
                                               const float* lse, int B, int T, int C, int NH) {
    const int x = blockIdx.x, b = blockIdx.z, h = blockIdx.y;
    const int nt = (T + AT_BR - 1) / AT_BR;  // = key blocks = query blocks (AT_BCK == AT_BR)
    if ((x & 1) == 0) {
        if constexpr (AT_WGMMA && HSP == 64) attn_bwd_keys_wg(dqkv, dout, qkv, out, lse, b, h, x >> 1, T, C, NH);
        else attn_bwd_keys<HSP>(dqkv, dout, qkv, out, lse, b, h, x >> 1, T, C, NH);
    } else
        attn_bwd_queries<HSP>(dqkv, dout, qkv, out, lse, b, h, nt - 1 - (x >> 1), T, C, NH);
}

// (as attn_fwd: a function per head size, sm_90a's wgmma path inlined into the kernel)
template <int HSP>
__device__ __noinline__ void attn_bwd(__half* dqkv, const __half* dout, const __half* qkv, const __half* out,
                                      const float* lse, int B, int T, int C, int NH) {
    attn_bwd_block<HSP>(dqkv, dout, qkv, out, lse, B, T, C, NH);
}

}  // namespace coptc

// dqkv (B,T,3C) from dout, qkv, out, lse; P recomputed from lse.
extern "C" __global__ void __launch_bounds__(128, COPTC_ATTN_MIN_BLOCKS)
    attention_backward(__half* dqkv, const __half* dout, const __half* qkv, const __half* out, const float* lse, int B,
                       int T, int C, int NH) {
    cpl::grid_dependency();
    if (T <= 0 || NH <= 0) return;
    const int hs = C / NH;
    if (hs <= 16) coptc::attn_bwd<16>(dqkv, dout, qkv, out, lse, B, T, C, NH);
    else if (hs <= 32) coptc::attn_bwd<32>(dqkv, dout, qkv, out, lse, B, T, C, NH);
    else if (hs <= 64) {
        if constexpr (coptc::AT_WGMMA) coptc::attn_bwd_block<64>(dqkv, dout, qkv, out, lse, B, T, C, NH);
        else coptc::attn_bwd<64>(dqkv, dout, qkv, out, lse, B, T, C, NH);
    }
    else coptc::attn_bwd<128>(dqkv, dout, qkv, out, lse, B, T, C, NH);
}
#endif  // COPPELIUS_TC_ATTENTION_BACKWARD

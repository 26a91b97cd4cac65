//! SGEMM template, row-major: C[M x N] = A[M x K] * B[K x N].
//!
//! Each work-item computes a TM x (TN * VW) block of C in registers: TM consecutive rows and
//! TN vectors of VW consecutive columns. Vector j of work-item x covers the columns
//! (j * WG0 + x) * VW .. + VW of its group's tile, so neighbouring work-items touch neighbouring
//! columns (CPU runtimes vectorise across dimension 0; VW = 1 leaves that to them).
//! A work-group is WG0 x WG1 work-items and owns a BM x BN tile of C.
//!
//! Structural switches (resolved into concrete variants by kf-mutate's structural mutator):
//!   VW            1 (scalar) or 2, 4, 8, 16 (explicit vloadN / vstoreN of B and C)
//!   LOCAL_B       stage TK x BN tiles of B in local memory (rows padded by PAD floats)
//!   LOCAL_A       stage BM x TK tiles of A in local memory (rows padded by PAD floats)
//!   DOUBLE_BUFFER two local B buffers: load tile t+1 while computing tile t (needs LOCAL_B)
//!   PREFETCH      prefetch() the B rows of the next K tile
//!   SUBGROUP      lane x of a 16-wide sub-group loads A[row][k + x] and sub_group_broadcast()
//!                 hands it to the others (needs VW = 1, WG0 = 16, no LOCAL_A)
//!   PACK_B        copy each KC x BN panel of B once into local memory, laid out so that
//!                 every work-item's TN vectors of a k row are contiguous, and reuse it for
//!                 the group's RB row blocks (needs KC > 0; replaces LOCAL_B)
//! Tunables: TM, TN, WG0, WG1, TK (K tile), PAD, UNROLL (k-loop unroll), and the cache
//! blocking: KC (outer K block, 0 = all of K: C is accumulated in registers over KC rows of B
//! and read back between blocks), RB (row blocks per work-group: the group walks RB
//! blocks of BM rows under the same KC x BN panel of B, which stays in cache or local memory)
//! and CB (column blocks per work-group, the blocking over N: within one K block the group
//! walks CB panels of BN columns, so its RB x BM x KC block of A comes from memory once and
//! from the cache for the other CB - 1 panels; 1 = no N blocking, CB > 1 needs KC > 0).
// SGEMM: each work-item computes a TM x (TN * VW) block of C in registers.
#ifndef VW
#define VW 1
#endif
#ifndef LOCAL_A
#define LOCAL_A 0
#endif
#ifndef LOCAL_B
#define LOCAL_B 0
#endif
#ifndef DOUBLE_BUFFER
#define DOUBLE_BUFFER 0
#endif
#ifndef PREFETCH
#define PREFETCH 0
#endif
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#ifndef TM
#define TM 1
#endif
#ifndef TN
#define TN 1
#endif
#ifndef WG0
#define WG0 16
#endif
#ifndef WG1
#define WG1 1
#endif
#ifndef TK
#define TK 32
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef PACK_B
#define PACK_B 0
#endif
#ifndef KC
#define KC 0
#endif
#ifndef RB
#define RB 1
#endif
#ifndef CB
#define CB 1
#endif

#if VW == 1
typedef float floatv;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif VW == 2
typedef float2 floatv;
#define VLOAD(p) vload2(0, (p))
#define VSTORE(v, p) vstore2((v), 0, (p))
#elif VW == 4
typedef float4 floatv;
#define VLOAD(p) vload4(0, (p))
#define VSTORE(v, p) vstore4((v), 0, (p))
#elif VW == 8
typedef float8 floatv;
#define VLOAD(p) vload8(0, (p))
#define VSTORE(v, p) vstore8((v), 0, (p))
#elif VW == 16
typedef float16 floatv;
#define VLOAD(p) vload16(0, (p))
#define VSTORE(v, p) vstore16((v), 0, (p))
#endif

#define BM (WG1 * TM)
#define BN (WG0 * TN * VW)

#if SUBGROUP
#define KU WG0
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1)))
__attribute__((intel_reqd_sub_group_size(WG0)))
#else
#define KU 1
__kernel __attribute__((reqd_work_group_size(WG0, WG1, 1)))
#endif
void gemm(const int M, const int N, const int K,
          __global const float* A,
          __global const float* B,
          __global float* C) {
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
#if LOCAL_A || LOCAL_B || PREFETCH || PACK_B
    const int lid = ly * WG0 + lx;
#endif
#if LOCAL_A
    __local float As[BM][TK + PAD];
#endif
#if LOCAL_B && DOUBLE_BUFFER
    __local float Bs[2][TK][BN + PAD];
#elif LOCAL_B
    __local float Bs[TK][BN + PAD];
#endif
#if PACK_B
    // Work-item-major panel: row r holds, for each lx, its TN vectors side by side.
    __local float Bp[KC * BN];
#endif
    // KC = 0: one block over all of K (KC is a compile-time constant).
    const int KBLOCK = KC > 0 ? KC : K;
    for (int kc = 0; kc < K; kc += KBLOCK) {
        // N blocking: the group's CB column panels in turn, under the same block of A.
        for (int cb = 0; cb < CB; ++cb) {
            const int col_base = (get_group_id(0) * CB + cb) * BN;
#if PACK_B
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int idx = lid; idx < KC * (BN / VW); idx += WG0 * WG1) {
                const int r = idx / (BN / VW);
                const int v = idx % (BN / VW);
                const int dst = r * BN + ((v % WG0) * TN + v / WG0) * VW;
                VSTORE(VLOAD(B + (kc + r) * N + col_base + v * VW), &Bp[dst]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#endif
            for (int rb = 0; rb < RB; ++rb) {
                const int row_base = (get_group_id(1) * RB + rb) * BM;
                const int row0 = row_base + ly * TM;

                floatv acc[TM][TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) {
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        // From the second K block on, the block of C so far is in C.
                        acc[i][j] = KC > 0 && kc > 0
                                        ? VLOAD(C + (row0 + i) * N + col_base + (j * WG0 + lx) * VW)
                                        : (floatv)(0.0f);
                    }
                }
#if LOCAL_B && DOUBLE_BUFFER
                // Stage the first B tile; every iteration then stages the next one into the other buffer
                // before computing on the current one, so one barrier per tile suffices.
                for (int idx = lid; idx < TK * (BN / VW); idx += WG0 * WG1) {
                    const int r = idx / (BN / VW);
                    const int c = (idx % (BN / VW)) * VW;
                    VSTORE(VLOAD(B + (kc + r) * N + col_base + c), &Bs[0][r][c]);
                }
                barrier(CLK_LOCAL_MEM_FENCE);
#endif
                for (int k0 = kc; k0 < kc + KBLOCK; k0 += TK) {
#if PREFETCH
                    if (k0 + TK < kc + KBLOCK) {
                        for (int r = lid; r < TK; r += WG0 * WG1) {
                            prefetch(B + (k0 + TK + r) * N + col_base, BN);
                        }
                    }
#endif
#if LOCAL_B && DOUBLE_BUFFER
                    const int cur = ((k0 - kc) / TK) & 1;
                    if (k0 + TK < kc + KBLOCK) {
                        for (int idx = lid; idx < TK * (BN / VW); idx += WG0 * WG1) {
                            const int r = idx / (BN / VW);
                            const int c = (idx % (BN / VW)) * VW;
                            VSTORE(VLOAD(B + (k0 + TK + r) * N + col_base + c), &Bs[cur ^ 1][r][c]);
                        }
                    }
#elif LOCAL_B
                    for (int idx = lid; idx < TK * (BN / VW); idx += WG0 * WG1) {
                        const int r = idx / (BN / VW);
                        const int c = (idx % (BN / VW)) * VW;
                        VSTORE(VLOAD(B + (k0 + r) * N + col_base + c), &Bs[r][c]);
                    }
#endif
#if LOCAL_A
                    for (int idx = lid; idx < BM * (TK / VW); idx += WG0 * WG1) {
                        const int r = idx / (TK / VW);
                        const int c = (idx % (TK / VW)) * VW;
                        VSTORE(VLOAD(A + (row_base + r) * K + k0 + c), &As[r][c]);
                    }
#endif
#if LOCAL_A || (LOCAL_B && !DOUBLE_BUFFER)
                    barrier(CLK_LOCAL_MEM_FENCE);
#endif
#pragma unroll UNROLL
                    for (int kk = 0; kk < TK; kk += KU) {
#if SUBGROUP
                        float a_lane[TM];
#pragma unroll
                        for (int i = 0; i < TM; ++i) {
                            a_lane[i] = A[(row0 + i) * K + k0 + kk + get_sub_group_local_id()];
                        }
#pragma unroll
                        for (int u = 0; u < KU; ++u) {
#else
                        {
                            const int u = 0;
#endif
                            floatv b[TN];
#pragma unroll
                            for (int j = 0; j < TN; ++j) {
#if PACK_B
                                b[j] = VLOAD(&Bp[(k0 - kc + kk + u) * BN + (lx * TN + j) * VW]);
#elif LOCAL_B && DOUBLE_BUFFER
                                b[j] = VLOAD(&Bs[cur][kk + u][(j * WG0 + lx) * VW]);
#elif LOCAL_B
                                b[j] = VLOAD(&Bs[kk + u][(j * WG0 + lx) * VW]);
#else
                                b[j] = VLOAD(B + (k0 + kk + u) * N + col_base + (j * WG0 + lx) * VW);
#endif
                            }
#pragma unroll
                            for (int i = 0; i < TM; ++i) {
#if SUBGROUP
                                const float a = sub_group_broadcast(a_lane[i], u);
#elif LOCAL_A
                                const float a = As[ly * TM + i][kk + u];
#else
                                const float a = A[(row0 + i) * K + k0 + kk + u];
#endif
#pragma unroll
                                for (int j = 0; j < TN; ++j) {
                                    acc[i][j] = fma((floatv)(a), b[j], acc[i][j]);
                                }
                            }
                        }
                    }
#if LOCAL_A || LOCAL_B
                    barrier(CLK_LOCAL_MEM_FENCE);
#endif
                }

#pragma unroll
                for (int i = 0; i < TM; ++i) {
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
#ifdef EPILOGUE
                        // A task's epilogue (EPILOGUE(acc, row, col), defined by its binding:
                        // kf_mutate::TaskBinding::define), once the last K block is in (C holds
                        // partial sums between blocks); its accessors read single elements.
#ifndef KF_COL_OF
#define KF_COL_OF(c, p) ((p)[c])
#define KF_ROW_OF(r, p) ((p)[r])
#define KF_AT(r, c, p) ((p)[(long)(r) * N + (c)])
#endif
                        if (kc + KBLOCK >= K) {
                            const int row = row0 + i;
                            const int col = col_base + (j * WG0 + lx) * VW;
                            float lanes[VW];
                            VSTORE(acc[i][j], lanes);
                            for (int q = 0; q < VW; ++q) {
                                C[row * N + col + q] = EPILOGUE(lanes[q], row, col + q);
                            }
                            continue;
                        }
#endif
                        VSTORE(acc[i][j], C + (row0 + i) * N + col_base + (j * WG0 + lx) * VW);
                    }
                }
            }
        }
    }
}

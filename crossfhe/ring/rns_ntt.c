/* The negacyclic NTT over an RNS basis (crossfhe.ring.ntt) as a native CPU kernel, built on first use by
   crossfhe.math.native.

   The same transform as the radix-2 XLA kernels of crossfhe.ring.ntt, on the same tables (the plan's w, w_shoup,
   wi, wi_shoup, inv_last, inv_last_shoup, arranged in kernel order) and in the same output order: the
   Cooley-Tukey stages with pair distance >= N2 = 32 on rows of length N2 (row-major), a transpose, and the last
   five stages on the transposed [N2, N1] layout, whose result is the slot order. The inverse mirrors it. Outputs
   are in [0, q) (the forward's in [0, 2q) when not `full`): exact, so the words equal the XLA kernels' words.

   Lazy ranges as the XLA kernels (Harvey 2014): moduli below 2^30 keep forward values in [0, 4q) and inverse ones
   in [0, 2q); "wide" moduli in [2^30, 2^31) keep [0, 2q) and [0, q). Each modulus takes its own range here (XLA's
   kernels take the plan's), so the lazy forward's words may differ from XLA's by q; the full outputs cannot.

   Why native: XLA:CPU runs each stage (or pair of stages) as a pass over its whole array, so the Python side calls
   it on a few limbs at a time (crossfhe.ring.ntt's chunks), and it widens the 32 x 32 -> 64-bit products to
   64-bit lanes. Here a polynomial's long stages are passes over 256 KiB (N 2^16, in L2); then each block of
   BLOCK words goes through its remaining head stages, its transpose and the five tail stages in L1, and on
   AVX-512 the high halves of the products come from two vpmuludq per 16 lanes. Stages go in pairs where they can
   (bf4: the four quarters of two radix-2 stages held in registers, so a word is loaded and stored once per
   two stages; the same arithmetic in the same order, so the same words). Before each block its tail twiddle rows
   (31 runs of 512 B, 8 KiB apart at N 2^16) are prefetched, as the hardware prefetcher does not follow them. Rows
   are independent: the Python side hands each thread a range of rows. */

#include <stdint.h>
#include <stdlib.h>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#define N2 32
#define BLOCK 4096 /* words per block of the L1 phase (16 KiB): 128 rows of N2, one tile of the transposed layout */

static inline uint32_t shoup(uint32_t x, uint32_t w, uint32_t ws, uint32_t q) {
    return x * w - (uint32_t)(((uint64_t)x * ws) >> 32) * q; /* x w mod q, in [0, 2q), for x < 2^32 */
}

static inline uint32_t csub(uint32_t x, uint32_t c) {
    uint32_t y = x - c;
    return y < x ? y : x; /* x >= c ? x - c : x (for 0 < c: y wraps above x exactly when x < c) */
}

#ifdef __AVX512F__
typedef __m512i V;
#define VL 16
static inline V vld(const uint32_t *p) { return _mm512_loadu_si512((const void *)p); }
static inline void vst(uint32_t *p, V v) { _mm512_storeu_si512((void *)p, v); }
static inline V vset(uint32_t x) { return _mm512_set1_epi32((int)x); }
static inline V vcsub(V x, V c) { return _mm512_min_epu32(x, _mm512_sub_epi32(x, c)); }
/* x w mod q in [0, 2q): ws's low word in each 64-bit lane is used by both products (ws_odd: ws >> 32 per lane) */
static inline V vshoup(V x, V w, V ws, V ws_odd, V q) {
    V e = _mm512_srli_epi64(_mm512_mul_epu32(x, ws), 32);
    V o = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), ws_odd);
    V hi = _mm512_mask_mov_epi32(e, 0xAAAA, o);
    return _mm512_sub_epi32(_mm512_mullo_epi32(x, w), _mm512_mullo_epi32(hi, q));
}
#endif

#ifdef __AVX512F__
/* 16 lanes of ct / gs below, twiddles (w, ws, ws >> 32 per 64-bit lane) given as vectors */
static inline void ct16(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, V w, V ws, V wso, V q,
                        V bound, int wide) {
    V hi = vcsub(vld(a), bound), v = vshoup(vld(b), w, ws, wso, q);
    if (wide) v = vcsub(v, q);
    vst(oa, _mm512_add_epi32(hi, v));
    vst(ob, _mm512_add_epi32(_mm512_sub_epi32(hi, v), bound));
}

static inline void gs16(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, V w, V ws, V wso, V q,
                        V bound, int wide) {
    V x = vld(a), y = vld(b), v = vshoup(_mm512_add_epi32(_mm512_sub_epi32(x, y), bound), w, ws, wso, q);
    vst(oa, vcsub(_mm512_add_epi32(x, y), bound));
    vst(ob, wide ? vcsub(v, q) : v);
}
#endif

/* Cooley-Tukey (ct: (a + w b, a - w b)) or Gentleman-Sande (gs: (a + b, w (a - b))) butterflies on a[j], b[j],
   j < t; the twiddle is (w, ws)[j * step] (step 0: one twiddle for all). Inputs may alias outputs (oa = a, ob = b)
   or not (the first stage reads the input). */
static inline void butterflies(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, int64_t t,
                               const uint32_t *w, const uint32_t *ws, int step, uint32_t q, int wide, int gs) {
    uint32_t bound = wide ? q : q + q;
    int64_t j = 0;
#ifdef __AVX512F__
    V vq = vset(q), vb = vset(bound);
    void (*f)(const uint32_t *, const uint32_t *, uint32_t *, uint32_t *, V, V, V, V, V, int) = gs ? gs16 : ct16;
    if (step == 0) {
        V vw = vset(w[0]), vws = vset(ws[0]);
        for (; j + VL <= t; j += VL) f(a + j, b + j, oa + j, ob + j, vw, vws, vws, vq, vb, wide);
    } else {
        for (; j + VL <= t; j += VL) {
            V vws = vld(ws + j);
            f(a + j, b + j, oa + j, ob + j, vld(w + j), vws, _mm512_srli_epi64(vws, 32), vq, vb, wide);
        }
    }
#endif
    for (; j < t; j++) {
        uint32_t x = a[j], y = b[j], v;
        if (gs) {
            v = shoup(x - y + bound, w[j * step], ws[j * step], q);
            oa[j] = csub(x + y, bound);
            ob[j] = wide ? csub(v, q) : v;
        } else {
            uint32_t hi = csub(x, bound);
            v = shoup(y, w[j * step], ws[j * step], q);
            if (wide) v = csub(v, q);
            oa[j] = hi + v;
            ob[j] = hi - v + bound;
        }
    }
}

static void ct(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, int64_t t, const uint32_t *w,
               const uint32_t *ws, int step, uint32_t q, int wide) {
    butterflies(a, b, oa, ob, t, w, ws, step, q, wide, 0);
}

/* one butterfly of ct() (scalar, and 16 lanes) */
static inline void ct1(uint32_t x, uint32_t y, uint32_t *ox, uint32_t *oy, uint32_t w, uint32_t ws, uint32_t q,
                       uint32_t bound, int wide) {
    uint32_t hi = csub(x, bound), v = shoup(y, w, ws, q);
    if (wide) v = csub(v, q);
    *ox = hi + v;
    *oy = hi - v + bound;
}

#ifdef __AVX512F__
static inline void ct1v(V x, V y, V *ox, V *oy, V w, V ws, V wso, V q, V bound, int wide) {
    V hi = vcsub(x, bound), v = vshoup(y, w, ws, wso, q);
    if (wide) v = vcsub(v, q);
    *ox = _mm512_add_epi32(hi, v);
    *oy = _mm512_add_epi32(_mm512_sub_epi32(hi, v), bound);
}
#endif

static void gs(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, int64_t t, const uint32_t *w,
               const uint32_t *ws, int step, uint32_t q, int wide) {
    butterflies(a, b, oa, ob, t, w, ws, step, q, wide, 1);
}

/* one butterfly of gs() (scalar, and 16 lanes) */
static inline void gs1(uint32_t x, uint32_t y, uint32_t *ox, uint32_t *oy, uint32_t w, uint32_t ws, uint32_t q,
                       uint32_t bound, int wide) {
    uint32_t v = shoup(x - y + bound, w, ws, q);
    *ox = csub(x + y, bound);
    *oy = wide ? csub(v, q) : v;
}

#ifdef __AVX512F__
static inline void gs1v(V x, V y, V *ox, V *oy, V w, V ws, V wso, V q, V bound, int wide) {
    V v = vshoup(_mm512_add_epi32(_mm512_sub_epi32(x, y), bound), w, ws, wso, q);
    *ox = vcsub(_mm512_add_epi32(x, y), bound);
    *oy = wide ? vcsub(v, q) : v;
}
#endif

/* Two radix-2 stages at once on the quarters A = a, B = a + ha, C = a + 2 ha, D = a + 3 ha (their words j < len;
   the outputs at o + k ho, o may be a), with twiddle k = (w_k, ws_k)[j * step] (step 0: one for all). Cooley-Tukey
   (gs = 0): (A, C) and (B, D) with twiddle 1, then (A, B) with twiddle 2 and (C, D) with twiddle 3; Gentleman-Sande
   (gs = 1): (A, B) with twiddle 1 and (C, D) with twiddle 2, then (A, C) and (B, D) with twiddle 3. The words of two
   ct() or gs() passes, each word loaded and stored once. */
#ifdef __AVX512F__
/* 16 lanes of bf4 at word j, twiddles given as vectors (k: w, ws, ws >> 32 per 64-bit lane) */
static inline void bf4v(const uint32_t *a, int64_t ha, uint32_t *o, int64_t ho, int64_t j, V a1, V s1, V o1, V a2,
                        V s2, V o2, V a3, V s3, V o3, V vq, V vb, int wide, int gs) {
    V A = vld(a + j), B = vld(a + ha + j), C = vld(a + 2 * ha + j), D = vld(a + 3 * ha + j);
    if (gs) {
        gs1v(A, B, &A, &B, a1, s1, o1, vq, vb, wide);
        gs1v(C, D, &C, &D, a2, s2, o2, vq, vb, wide);
        gs1v(A, C, &A, &C, a3, s3, o3, vq, vb, wide);
        gs1v(B, D, &B, &D, a3, s3, o3, vq, vb, wide);
    } else {
        ct1v(A, C, &A, &C, a1, s1, o1, vq, vb, wide);
        ct1v(B, D, &B, &D, a1, s1, o1, vq, vb, wide);
        ct1v(A, B, &A, &B, a2, s2, o2, vq, vb, wide);
        ct1v(C, D, &C, &D, a3, s3, o3, vq, vb, wide);
    }
    vst(o + j, A);
    vst(o + ho + j, B);
    vst(o + 2 * ho + j, C);
    vst(o + 3 * ho + j, D);
}
#endif

static inline void bf4(const uint32_t *a, int64_t ha, uint32_t *o, int64_t ho, int64_t len, const uint32_t *w1,
                       const uint32_t *ws1, const uint32_t *w2, const uint32_t *ws2, const uint32_t *w3,
                       const uint32_t *ws3, int step, uint32_t q, int wide, int gs) {
    uint32_t bound = wide ? q : q + q;
    int64_t j = 0;
#ifdef __AVX512F__
    V vq = vset(q), vb = vset(bound);
    if (step == 0) {
        V a1 = vset(w1[0]), s1 = vset(ws1[0]), a2 = vset(w2[0]), s2 = vset(ws2[0]), a3 = vset(w3[0]),
          s3 = vset(ws3[0]);
        for (; j + VL <= len; j += VL) bf4v(a, ha, o, ho, j, a1, s1, s1, a2, s2, s2, a3, s3, s3, vq, vb, wide, gs);
    } else {
        for (; j + VL <= len; j += VL) {
            V s1 = vld(ws1 + j), s2 = vld(ws2 + j), s3 = vld(ws3 + j);
            bf4v(a, ha, o, ho, j, vld(w1 + j), s1, _mm512_srli_epi64(s1, 32), vld(w2 + j), s2,
                 _mm512_srli_epi64(s2, 32), vld(w3 + j), s3, _mm512_srli_epi64(s3, 32), vq, vb, wide, gs);
        }
    }
#endif
    for (; j < len; j++) {
        uint32_t A = a[j], B = a[ha + j], C = a[2 * ha + j], D = a[3 * ha + j];
        int64_t k = j * step;
        if (gs) {
            gs1(A, B, &A, &B, w1[k], ws1[k], q, bound, wide);
            gs1(C, D, &C, &D, w2[k], ws2[k], q, bound, wide);
            gs1(A, C, &A, &C, w3[k], ws3[k], q, bound, wide);
            gs1(B, D, &B, &D, w3[k], ws3[k], q, bound, wide);
        } else {
            ct1(A, C, &A, &C, w1[k], ws1[k], q, bound, wide);
            ct1(B, D, &B, &D, w1[k], ws1[k], q, bound, wide);
            ct1(A, B, &A, &B, w2[k], ws2[k], q, bound, wide);
            ct1(C, D, &C, &D, w3[k], ws3[k], q, bound, wide);
        }
        o[j] = A;
        o[ho + j] = B;
        o[2 * ho + j] = C;
        o[3 * ho + j] = D;
    }
}

/* The last inverse stage (one block): (N^-1 (a + b), psi^-1 N^-1 (a - b)) in [0, q). */
static void gs_last(const uint32_t *a, const uint32_t *b, uint32_t *oa, uint32_t *ob, int64_t t,
                    const uint32_t *last, const uint32_t *lasts, uint32_t q, int wide) {
    uint32_t bound = wide ? q : q + q;
    int64_t j = 0;
#ifdef __AVX512F__
    V vq = vset(q), vb = vset(bound), l0 = vset(last[0]), l0s = vset(lasts[0]), l1 = vset(last[1]),
      l1s = vset(lasts[1]);
    for (; j + VL <= t; j += VL) {
        V x = vld(a + j), y = vld(b + j);
        vst(oa + j, vcsub(vshoup(_mm512_add_epi32(x, y), l0, l0s, l0s, vq), vq));
        vst(ob + j, vcsub(vshoup(_mm512_add_epi32(_mm512_sub_epi32(x, y), vb), l1, l1s, l1s, vq), vq));
    }
#endif
    for (; j < t; j++) {
        uint32_t x = a[j], y = b[j];
        oa[j] = csub(shoup(x + y, last[0], lasts[0], q), q);
        ob[j] = csub(shoup(x - y + bound, last[1], lasts[1], q), q);
    }
}

/* The forward's last reduction, [0, 4q) (or [0, 2q) if wide) -> [0, q) if full, else [0, 2q); out of place. */
static void reduce(const uint32_t *x, uint32_t *out, int64_t len, uint32_t q, int wide, int full) {
    uint32_t two_q = q + q;
    int64_t j = 0;
#ifdef __AVX512F__
    V vq = vset(q), v2q = vset(two_q);
    for (; j + VL <= len; j += VL) {
        V v = vld(x + j);
        if (!wide) v = vcsub(v, v2q);
        vst(out + j, full ? vcsub(v, vq) : v);
    }
#endif
    for (; j < len; j++) {
        uint32_t v = x[j];
        if (!wide) v = csub(v, two_q);
        out[j] = full ? csub(v, q) : v;
    }
}

/* src [rows, cols] -> dst [cols, rows] */
static void transpose(const uint32_t *restrict src, uint32_t *restrict dst, int64_t rows, int64_t cols) {
    int64_t r0 = 0;
#ifdef __AVX512F__
    if (rows % 16 == 0 && cols % 16 == 0) {
        /* lanes j of lo / hi: (j & 1) 16 + (j >> 1) and that + 8 (set_epi32 lists lane 15 first) */
        const V lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const V hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
        for (; r0 < rows; r0 += 16)
            for (int64_t c0 = 0; c0 < cols; c0 += 16) {
                V v[16], u[16];
                for (int i = 0; i < 16; i++) v[i] = vld(src + (r0 + i) * cols + c0);
                /* each round rotates the 8 bits (row, lane) of every word's place left by one; four transpose */
                for (int round = 0; round < 4; round++) {
                    for (int i = 0; i < 8; i++) {
                        u[2 * i] = _mm512_permutex2var_epi32(v[i], lo, v[i + 8]);
                        u[2 * i + 1] = _mm512_permutex2var_epi32(v[i], hi, v[i + 8]);
                    }
                    for (int i = 0; i < 16; i++) v[i] = u[i];
                }
                for (int i = 0; i < 16; i++) vst(dst + (c0 + i) * rows + r0, v[i]);
            }
        return;
    }
#endif
    for (; r0 < rows; r0++)
        for (int64_t c = 0; c < cols; c++) dst[c * rows + r0] = src[r0 * cols + c];
}

/* the tail stages' twiddle rows of the block at r0 (rows words at mm + b n1 + r0 for each tail stage mm and b) */
static inline void prefetch_tail(const uint32_t *w, const uint32_t *ws, int64_t n1, int64_t n, int64_t r0,
                                 int64_t rows) {
    for (int64_t s = 0, mm = n1; mm < n; s++, mm *= 2)
        for (int64_t b = 0; b < ((int64_t)1 << s); b++)
            for (int64_t k = 0; k < rows; k += 16) {
                __builtin_prefetch(w + mm + b * n1 + r0 + k, 0, 0);
                __builtin_prefetch(ws + mm + b * n1 + r0 + k, 0, 0);
            }
}

static void forward_one(const uint32_t *restrict in, uint32_t *restrict out, uint32_t *restrict x,
                        uint32_t *restrict tile, int64_t n, uint32_t q, const uint32_t *restrict w,
                        const uint32_t *restrict ws, int wide, int full) {
    int64_t n1 = n / N2, size = n < BLOCK ? n : BLOCK, rows = size / N2;
    /* Long head stages: whole-row passes (the first reads the input). */
    const uint32_t *src = in;
    int64_t m = 1;
    while (m < n1 && n / m > size) {
        int64_t t = n / (2 * m);
        if (2 * m < n1 && n / (2 * m) > size) { /* two stages: m and 2m */
            for (int64_t i = 0; i < m; i++)
                bf4(src + 2 * i * t, t / 2, x + 2 * i * t, t / 2, t / 2, w + m + i, ws + m + i, w + 2 * m + 2 * i,
                    ws + 2 * m + 2 * i, w + 2 * m + 2 * i + 1, ws + 2 * m + 2 * i + 1, 0, q, wide, 0);
            src = x;
            m *= 4;
            continue;
        }
        for (int64_t i = 0; i < m; i++)
            ct(src + 2 * i * t, src + 2 * i * t + t, x + 2 * i * t, x + 2 * i * t + t, t, w + m + i, ws + m + i, 0, q,
               wide);
        src = x;
        m *= 2;
    }
    /* Block by block: the other head stages, the transpose to [N2, rows], the tail stages, the output rows. */
    for (int64_t blk = 0; blk < n / size; blk++) {
        const uint32_t *sb = src + blk * size;
        uint32_t *xb = x + blk * size;
        if (blk + 1 < n / size) prefetch_tail(w, ws, n1, n, (blk + 1) * rows, rows);
        for (int64_t mm = m; mm < n1; mm *= 2) {
            int64_t t = n / (2 * mm), sub = size / (2 * t);
            if (2 * mm < n1) { /* two stages: mm and 2 mm */
                for (int64_t i = 0; i < sub; i++) {
                    int64_t idx = mm + blk * sub + i, idx2 = 2 * mm + 2 * (blk * sub + i);
                    bf4(sb + 2 * i * t, t / 2, xb + 2 * i * t, t / 2, t / 2, w + idx, ws + idx, w + idx2, ws + idx2,
                        w + idx2 + 1, ws + idx2 + 1, 0, q, wide, 0);
                }
                sb = xb;
                mm *= 2;
                continue;
            }
            for (int64_t i = 0; i < sub; i++) {
                int64_t idx = mm + blk * sub + i;
                ct(sb + 2 * i * t, sb + 2 * i * t + t, xb + 2 * i * t, xb + 2 * i * t + t, t, w + idx, ws + idx, 0, q,
                   wide);
            }
            sb = xb;
        }
        /* the block phase has a stage (size > N2), so sb is xb here: the head's words are in x */
        transpose(xb, tile, rows, N2);
        int64_t r0 = blk * rows;
        for (int64_t s = 0, mm = n1; mm < n; s++, mm *= 2) {
            int64_t t = N2 >> (s + 1);
            if (2 * mm < n) { /* two stages: s and s + 1 */
                for (int64_t b = 0; b < ((int64_t)1 << s); b++) {
                    const uint32_t *wb = w + mm + b * n1 + r0, *wsb = ws + mm + b * n1 + r0;
                    const uint32_t *w2 = w + 2 * mm + 2 * b * n1 + r0, *ws2 = ws + 2 * mm + 2 * b * n1 + r0;
                    for (int64_t hh = 0; hh < t / 2; hh++) {
                        uint32_t *a = tile + (b * 2 * t + hh) * rows;
                        bf4(a, t / 2 * rows, a, t / 2 * rows, rows, wb, wsb, w2, ws2, w2 + n1, ws2 + n1, 1, q, wide, 0);
                    }
                }
                s++;
                mm *= 2;
                continue;
            }
            for (int64_t b = 0; b < ((int64_t)1 << s); b++) {
                const uint32_t *wb = w + mm + b * n1 + r0, *wsb = ws + mm + b * n1 + r0;
                for (int64_t h = 0; h < t; h++) {
                    uint32_t *a = tile + (b * 2 * t + h) * rows;
                    ct(a, a + t * rows, a, a + t * rows, rows, wb, wsb, 1, q, wide);
                }
            }
        }
        for (int64_t c = 0; c < N2; c++) reduce(tile + c * rows, out + c * n1 + r0, rows, q, wide, full);
    }
}

static void inverse_one(const uint32_t *restrict in, uint32_t *restrict out, uint32_t *restrict x,
                        uint32_t *restrict tile, int64_t n, uint32_t q, const uint32_t *restrict wi,
                        const uint32_t *restrict wis, const uint32_t *restrict last, const uint32_t *restrict lasts,
                        int wide) {
    int64_t n1 = n / N2, size = n < BLOCK ? n : BLOCK, rows = size / N2;
    uint32_t *dst = n > size ? x : out; /* where the block phase leaves its words */
    for (int64_t blk = 0; blk < n / size; blk++) {
        int64_t r0 = blk * rows;
        if (blk + 1 < n / size) {
            prefetch_tail(wi, wis, n1, n, r0 + rows, rows);
            for (int64_t c = 0; c < N2; c++)
                for (int64_t k = 0; k < rows; k += 16) __builtin_prefetch(in + c * n1 + r0 + rows + k, 0, 0);
        }
        /* Tail stages s = 4 .. 0 (m = N1 2^s) on the tile [N2, rows]; the first reads its rows from the input. */
        for (int64_t s = 4, mm = n1 << 4; s >= 0; s--, mm /= 2) {
            int64_t t = N2 >> (s + 1);
            const uint32_t *src = s == 4 ? in + r0 : tile;
            int64_t stride = s == 4 ? n1 : rows;
            if (s >= 1 && mm / 2 > 1) { /* two stages: s and s - 1 */
                for (int64_t b = 0; b < ((int64_t)1 << (s - 1)); b++) {
                    const uint32_t *w1 = wi + mm + 2 * b * n1 + r0, *ws1 = wis + mm + 2 * b * n1 + r0;
                    const uint32_t *w3 = wi + mm / 2 + b * n1 + r0, *ws3 = wis + mm / 2 + b * n1 + r0;
                    for (int64_t h = 0; h < t; h++) {
                        int64_t c = b * 4 * t + h;
                        bf4(src + c * stride, t * stride, tile + c * rows, t * rows, rows, w1, ws1, w1 + n1, ws1 + n1,
                            w3, ws3, 1, q, wide, 1);
                    }
                }
                s--;
                mm /= 2;
                continue;
            }
            for (int64_t b = 0; b < ((int64_t)1 << s); b++)
                for (int64_t h = 0; h < t; h++) {
                    int64_t c = b * 2 * t + h;
                    const uint32_t *a = src + c * stride;
                    uint32_t *o = tile + c * rows;
                    if (mm == 1)
                        gs_last(a, a + t * stride, o, o + t * rows, rows, last, lasts, q, wide);
                    else
                        gs(a, a + t * stride, o, o + t * rows, rows, wi + mm + b * n1 + r0, wis + mm + b * n1 + r0, 1,
                           q, wide);
                }
        }
        uint32_t *xb = dst + blk * size;
        transpose(tile, xb, N2, rows);
        /* Head stages with pair distance N2 .. size / 2, inside the block. */
        for (int64_t t = N2; t < size; t *= 2) {
            int64_t mm = n / (2 * t), sub = size / (2 * t);
            if (2 * t < size && mm / 2 > 1) { /* two stages: t and 2t */
                for (int64_t i = 0; i < sub / 2; i++) {
                    uint32_t *a = xb + 4 * i * t;
                    int64_t i1 = mm + blk * sub + 2 * i, i3 = mm / 2 + blk * (sub / 2) + i;
                    bf4(a, t, a, t, t, wi + i1, wis + i1, wi + i1 + 1, wis + i1 + 1, wi + i3, wis + i3, 0, q, wide, 1);
                }
                t *= 2;
                continue;
            }
            for (int64_t i = 0; i < sub; i++) {
                uint32_t *a = xb + 2 * i * t;
                if (mm == 1)
                    gs_last(a, a + t, a, a + t, t, last, lasts, q, wide);
                else
                    gs(a, a + t, a, a + t, t, wi + mm + blk * sub + i, wis + mm + blk * sub + i, 0, q, wide);
            }
        }
    }
    /* Long stages: whole-row passes, the last (one block, N^-1 folded in) writing the output. */
    for (int64_t t = size; t < n; t *= 2) {
        int64_t mm = n / (2 * t);
        if (mm / 2 > 1) { /* two stages: t and 2t (neither the last) */
            for (int64_t i = 0; i < mm / 2; i++) {
                uint32_t *a = x + 4 * i * t;
                bf4(a, t, a, t, t, wi + mm + 2 * i, wis + mm + 2 * i, wi + mm + 2 * i + 1, wis + mm + 2 * i + 1,
                    wi + mm / 2 + i, wis + mm / 2 + i, 0, q, wide, 1);
            }
            t *= 2;
            continue;
        }
        uint32_t *o = mm == 1 ? out : x;
        for (int64_t i = 0; i < mm; i++) {
            const uint32_t *a = x + 2 * i * t;
            if (mm == 1)
                gs_last(a, a + t, o, o + t, t, last, lasts, q, wide);
            else
                gs(a, a + t, o + 2 * i * t, o + 2 * i * t + t, t, wi + mm + i, wis + mm + i, 0, q, wide);
        }
    }
}

int cf_ntt_abi_version(void) { return 4; }

/* count rows of in / out uint32 [., n] (distinct buffers): row rows[i] with the tables of index tab[i], that is
   q[t], the [n] twiddle tables w[t], ws[t] (forward: w, w_shoup; inverse: wi, wi_shoup) and last + 2t, lasts + 2t
   (inverse). inverse = 0: the forward transform (full = 1: output in [0, q), else [0, 2q)). Rows sharing a table
   are best listed together (its 512 KiB at N 2^16 stay in cache). Returns 0, -1 (no memory) or -2 (bad n). */
int cf_ntt(const uint32_t *in, uint32_t *out, const int64_t *rows, const int32_t *tab, int64_t count, int64_t n,
           const uint32_t *q, const uint32_t *const *w, const uint32_t *const *ws, const uint32_t *last,
           const uint32_t *lasts, int inverse, int full) {
    if (n < 2 * N2 || (n & (n - 1))) return -2;
    int64_t size = n < BLOCK ? n : BLOCK;
    uint32_t *x = aligned_alloc(64, (size_t)(n + size) * sizeof(uint32_t));
    if (!x) return -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t r = rows[i], t = tab[i];
        uint32_t qt = q[t];
        int wide = qt >= (1u << 30);
        if (inverse)
            inverse_one(in + r * n, out + r * n, x, x + n, n, qt, w[t], ws[t], last + 2 * t, lasts + 2 * t, wide);
        else
            forward_one(in + r * n, out + r * n, x, x + n, n, qt, w[t], ws[t], wide, full);
    }
    free(x);
    return 0;
}

/* The key switch's multiply-accumulate (crossfhe.core.keyswitch): for len words t of one output row,
   ob[t] = sum_j y_j[t] b_j[t] mod q and oa[t] = sum_j y_j[t] a_j[t] mod q, j < d, with the rows y_j = y[j],
   b_j = b + j bstride and a_j = a + j astride, every word in [0, q), q < 2^31. Runs of four products and the residue
   carried in are summed exactly in 64 bits (4 (2^31 - 1)^2 + 2^31 < 2^64); each sum s is reduced with the quotient
   estimate floor(fl(s) fl(1/q)), whose relative error below 2^-51 puts the remainder in [-q, 2q), then one
   correction either way. Outputs in [0, q): the exact residues, the XLA kernels' words. */
static inline uint64_t reduce64(uint64_t s, uint32_t q, double qinv) {
    uint64_t e = (uint64_t)((double)s * qinv);
    int64_t r = (int64_t)(s - e * q);
    if (r < 0) r += q;
    if (r >= (int64_t)q) r -= q;
    return (uint64_t)r;
}

#ifdef __AVX512DQ__
static inline __m512i vreduce64(__m512i s, __m512i vq, __m512d vqinv) {
    __m512i e = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(s), vqinv));
    __m512i r = _mm512_sub_epi64(s, _mm512_mullo_epi64(e, vq));
    r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512()), r, vq);
    return _mm512_mask_sub_epi64(r, _mm512_cmpge_epi64_mask(r, vq), r, vq);
}
#endif

void cf_mac_row(const uint32_t *const *y, const uint32_t *b, int64_t bstride, const uint32_t *a, int64_t astride,
                int64_t d, int64_t len, uint32_t q, uint32_t *ob, uint32_t *oa) {
    const double qinv = 1.0 / (double)q;
    int64_t t = 0;
#ifdef __AVX512DQ__
    const __m512i vq = _mm512_set1_epi64(q);
    const __m512d vqinv = _mm512_set1_pd(qinv);
    for (; t + 8 <= len; t += 8) {
        __m512i sb = _mm512_setzero_si512(), sa = _mm512_setzero_si512();
        for (int64_t j0 = 0; j0 < d; j0 += 4) {
            int64_t j1 = j0 + 4 < d ? j0 + 4 : d;
            for (int64_t j = j0; j < j1; j++) {
                __m512i vy = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(y[j] + t)));
                __m512i vb = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(b + j * bstride + t)));
                __m512i va = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(a + j * astride + t)));
                sb = _mm512_add_epi64(sb, _mm512_mul_epu32(vy, vb));
                sa = _mm512_add_epi64(sa, _mm512_mul_epu32(vy, va));
            }
            sb = vreduce64(sb, vq, vqinv);
            sa = vreduce64(sa, vq, vqinv);
        }
        _mm256_storeu_si256((__m256i *)(ob + t), _mm512_cvtepi64_epi32(sb));
        _mm256_storeu_si256((__m256i *)(oa + t), _mm512_cvtepi64_epi32(sa));
    }
#endif
    for (; t < len; t++) {
        uint64_t sb = 0, sa = 0;
        for (int64_t j0 = 0; j0 < d; j0 += 4) {
            int64_t j1 = j0 + 4 < d ? j0 + 4 : d;
            for (int64_t j = j0; j < j1; j++) {
                uint64_t vy = y[j][t];
                sb += vy * b[j * bstride + t];
                sa += vy * a[j * astride + t];
            }
            sb = reduce64(sb, q, qinv);
            sa = reduce64(sa, q, qinv);
        }
        ob[t] = (uint32_t)sb;
        oa[t] = (uint32_t)sa;
    }
}

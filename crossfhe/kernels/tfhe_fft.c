/* The TFHE grouped blind rotation through a float64 FFT, as one native CPU kernel (crossfhe.kernels.cpu_native
   registers it, through tfhe_fft_ffi.cc, as an XLA FFI custom call).

   The same computation as crossfhe.core.fourier.blind_rotate_grouped (one component, 2^nu = 1), step for step:
   the gadget digits from the float64 value of each centered coefficient, the negacyclic twist and a complex
   FFT of N/2 points, the key products and the monomials X^e - 1 slot-wise, one inverse FFT per output
   polynomial, the exact reduction of its integer values mod Q, added to the accumulator (one uint64 word in
   [0, Q) per coefficient, Q < 2^63). Only the order of the FFT's slots differs: the key (its planes) and the
   slot exponents are laid out in the order cf_fft_forward produces, which the Python side reads off it.

   Why native: XLA:CPU compiles complex products to scalar code and runs each FFT as a library call; here the
   products, the digits and the reduction are vector loops (GCC, -O3 -march=native). The FFT is radix-2
   decimation in frequency (its inverse in time) on split real / imaginary planes: the long-distance stages two
   to a pass over memory, and on AVX-512 the last six (first six of the inverse) on 64-slot tiles held in
   registers, three across vectors and, after an 8 x 8 transpose, three across lanes; the tile is stored
   transposed, hence the slot order. Its twiddles come from the Python side, each rounded once from long double.
   Built on first use by crossfhe.kernels.cpu_native with the system C compiler; nothing here is needed for
   correctness (the XLA kernel computes the same function).

   Rounding steps are exact or single IEEE operations, so whether a compiler contracts a product and a sum into
   one FMA (GCC does in GNU C, XLA:CPU does, XLA's GPU build did not) cannot change a word on exact inputs: the
   scaled digit value is rint(x_c scale), one rounding of a product, ties to even (floor(x_c scale + 0.5) rounds
   otherwise once contracted to floor(fma(x_c, scale, 0.5)) where x_c scale lies within an ulp of a
   half-integer: for B^l >= 2^53 a few coefficients in a hundred), and every other floor(x + 0.5) takes an exact
   product or a value far closer than 1/2 to an integer. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VB 8 /* slots per key block: one 512-bit vector of float64 */
#define PAD 24 /* scratch rows are h + PAD (or n + PAD) doubles apart: rows 2^k doubles apart share L1 sets, and
                  the product loop's 14 streams would evict each other */

/* Radix-2 stages on split planes (re, im) of length h; tw[m + j] = exp(-2 pi i j / (2m)) for m = 1, 2, 4, ...
   (dif_*: decimation in frequency; dit_*: the inverse, conjugate twiddles). One DIF stage of half-size m:
   butterflies j, j + m in blocks of 2m. */
static void dif_stage(double *restrict re, double *restrict im, const double *restrict twr, const double *restrict twi,
                      int64_t h, int64_t m) {
    for (int64_t b = 0; b < h; b += 2 * m) {
        double *restrict ar = re + b, *restrict ai = im + b;
        double *restrict br = re + b + m, *restrict bi = im + b + m;
        const double *restrict wr = twr + m, *restrict wi = twi + m;
        for (int64_t j = 0; j < m; j++) {
            double ur = ar[j], ui = ai[j], vr = br[j], vi = bi[j];
            double dr = ur - vr, di = ui - vi;
            ar[j] = ur + vr;
            ai[j] = ui + vi;
            br[j] = dr * wr[j] - di * wi[j];
            bi[j] = dr * wi[j] + di * wr[j];
        }
    }
}

/* The DIF stages of half-sizes 2q and q on one block of 4q slots (quarters 0-3), in one pass over memory: the
   operations of two dif_stage calls, so the same words. GCC honours restrict on parameters only (on block-scope
   pointers it could not vectorize this loop), hence a function of its own. */
__attribute__((noinline)) static void dif_block2(double *restrict r0, double *restrict r1, double *restrict r2,
                                                 double *restrict r3, double *restrict i0, double *restrict i1,
                                                 double *restrict i2, double *restrict i3, const double *restrict w1r,
                                                 const double *restrict w1i, const double *restrict w3r,
                                                 const double *restrict w3i, const double *restrict w2r,
                                                 const double *restrict w2i, int64_t q) {
    for (int64_t j = 0; j < q; j++) {
        double d0r = r0[j] - r2[j], d0i = i0[j] - i2[j], d1r = r1[j] - r3[j], d1i = i1[j] - i3[j];
        double b0r = r0[j] + r2[j], b0i = i0[j] + i2[j], b1r = r1[j] + r3[j], b1i = i1[j] + i3[j];
        double b2r = d0r * w1r[j] - d0i * w1i[j], b2i = d0r * w1i[j] + d0i * w1r[j];
        double b3r = d1r * w3r[j] - d1i * w3i[j], b3i = d1r * w3i[j] + d1i * w3r[j];
        double e0r = b0r - b1r, e0i = b0i - b1i, e1r = b2r - b3r, e1i = b2i - b3i;
        r0[j] = b0r + b1r;
        i0[j] = b0i + b1i;
        r1[j] = e0r * w2r[j] - e0i * w2i[j];
        i1[j] = e0r * w2i[j] + e0i * w2r[j];
        r2[j] = b2r + b3r;
        i2[j] = b2i + b3i;
        r3[j] = e1r * w2r[j] - e1i * w2i[j];
        i3[j] = e1r * w2i[j] + e1i * w2r[j];
    }
}

static inline void prefetch_some(void);
#define PF_CHUNK 64

static void dif_stage2(double *re, double *im, const double *twr, const double *twi, int64_t h, int64_t m) {
    const int64_t q = m / 2;
    for (int64_t b = 0; b < h; b += 2 * m)
        for (int64_t j = 0; j < q; j += PF_CHUNK) { /* in chunks: the prefetch runs during these passes too */
            const int64_t len = q - j < PF_CHUNK ? q - j : PF_CHUNK;
            prefetch_some();
            dif_block2(re + b + j, re + b + q + j, re + b + m + j, re + b + m + q + j, im + b + j, im + b + q + j,
                       im + b + m + j, im + b + m + q + j, twr + m + j, twi + m + j, twr + m + q + j, twi + m + q + j,
                       twr + q + j, twi + q + j, len);
        }
}

/* DIF stages of half-sizes h/2 down to m_last, two per pass where two remain. */
static void dif_stages(double *restrict re, double *restrict im, const double *restrict twr,
                       const double *restrict twi, int64_t h, int64_t m_last) {
    int64_t m = h >> 1;
    for (; m / 2 >= m_last && m >= 2; m >>= 2) dif_stage2(re, im, twr, twi, h, m);
    if (m >= m_last && m >= 1) dif_stage(re, im, twr, twi, h, m);
}

/* One inverse (DIT) stage of half-size m: (a, b) <- (a + b conj(w), a - b conj(w)). */
static void dit_stage(double *restrict re, double *restrict im, const double *restrict twr, const double *restrict twi,
                      int64_t h, int64_t m) {
    for (int64_t b = 0; b < h; b += 2 * m) {
        double *restrict ar = re + b, *restrict ai = im + b;
        double *restrict br = re + b + m, *restrict bi = im + b + m;
        const double *restrict wr = twr + m, *restrict wi = twi + m;
        for (int64_t j = 0; j < m; j++) {
            double xr = br[j], xi = bi[j];
            double vr = xr * wr[j] + xi * wi[j];
            double vi = xi * wr[j] - xr * wi[j];
            double ur = ar[j], ui = ai[j];
            ar[j] = ur + vr;
            ai[j] = ui + vi;
            br[j] = ur - vr;
            bi[j] = ui - vi;
        }
    }
}

/* The DIT stages of half-sizes q and 2q on one block of 4q slots in one pass (the operations of two dit_stage
   calls). */
__attribute__((noinline)) static void dit_block2(double *restrict r0, double *restrict r1, double *restrict r2,
                                                 double *restrict r3, double *restrict i0, double *restrict i1,
                                                 double *restrict i2, double *restrict i3, const double *restrict w1r,
                                                 const double *restrict w1i, const double *restrict w2r,
                                                 const double *restrict w2i, const double *restrict w3r,
                                                 const double *restrict w3i, int64_t q) {
    for (int64_t j = 0; j < q; j++) {
        double v1r = r1[j] * w1r[j] + i1[j] * w1i[j], v1i = i1[j] * w1r[j] - r1[j] * w1i[j];
        double v3r = r3[j] * w1r[j] + i3[j] * w1i[j], v3i = i3[j] * w1r[j] - r3[j] * w1i[j];
        double a0r = r0[j] + v1r, a0i = i0[j] + v1i, a1r = r0[j] - v1r, a1i = i0[j] - v1i;
        double a2r = r2[j] + v3r, a2i = i2[j] + v3i, a3r = r2[j] - v3r, a3i = i2[j] - v3i;
        double u2r = a2r * w2r[j] + a2i * w2i[j], u2i = a2i * w2r[j] - a2r * w2i[j];
        double u3r = a3r * w3r[j] + a3i * w3i[j], u3i = a3i * w3r[j] - a3r * w3i[j];
        r0[j] = a0r + u2r;
        i0[j] = a0i + u2i;
        r2[j] = a0r - u2r;
        i2[j] = a0i - u2i;
        r1[j] = a1r + u3r;
        i1[j] = a1i + u3i;
        r3[j] = a1r - u3r;
        i3[j] = a1i - u3i;
    }
}

static void dit_stage2(double *re, double *im, const double *twr, const double *twi, int64_t h, int64_t q) {
    const int64_t m = 2 * q;
    for (int64_t b = 0; b < h; b += 2 * m)
        for (int64_t j = 0; j < q; j += PF_CHUNK) {
            const int64_t len = q - j < PF_CHUNK ? q - j : PF_CHUNK;
            prefetch_some();
            dit_block2(re + b + j, re + b + q + j, re + b + m + j, re + b + m + q + j, im + b + j, im + b + q + j,
                       im + b + m + j, im + b + m + q + j, twr + q + j, twi + q + j, twr + m + j, twi + m + j,
                       twr + m + q + j, twi + m + q + j, len);
        }
}

/* DIT stages of half-sizes m_first up to h/2, two per pass where two remain. */
static void dit_stages(double *restrict re, double *restrict im, const double *restrict twr,
                       const double *restrict twi, int64_t h, int64_t m_first) {
    int64_t m = m_first;
    for (; 2 * m < h; m <<= 2) dit_stage2(re, im, twr, twi, h, m);
    if (m < h) dit_stage(re, im, twr, twi, h, m);
}

/* The next step's keys, brought towards the cache a few lines per chunk of 64 slots or coefficients of the step's
   loops (the FFT passes and tiles, the digits, the twist, the monomials, the key products, the reduction: spread
   over all of the step, so that the key products find them in L2: P4, one item, keys streamed from memory):
   cursor, end, lines per call, calls this step (the next step spreads its lines over as many). PF_CHUNK: the
   chunk. */
static __thread const char *pf_cur, *pf_end;
static __thread int64_t pf_lines, pf_calls;

static inline void prefetch_some(void) {
    pf_calls++;
    for (int64_t i = 0; i < pf_lines && pf_cur < pf_end; i++, pf_cur += 64) __builtin_prefetch(pf_cur, 0, 2);
}

#ifdef __AVX512F__
#include <immintrin.h>
#define TAIL 64 /* the last six DIF stages (first six DIT ones) run on 64-slot tiles in registers */

static inline void transpose8(__m512d r[8]) {
    __m512d t0 = _mm512_unpacklo_pd(r[0], r[1]), t1 = _mm512_unpackhi_pd(r[0], r[1]);
    __m512d t2 = _mm512_unpacklo_pd(r[2], r[3]), t3 = _mm512_unpackhi_pd(r[2], r[3]);
    __m512d t4 = _mm512_unpacklo_pd(r[4], r[5]), t5 = _mm512_unpackhi_pd(r[4], r[5]);
    __m512d t6 = _mm512_unpacklo_pd(r[6], r[7]), t7 = _mm512_unpackhi_pd(r[6], r[7]);
    __m512d u0 = _mm512_shuffle_f64x2(t0, t2, 0x88), u2 = _mm512_shuffle_f64x2(t0, t2, 0xdd);
    __m512d u1 = _mm512_shuffle_f64x2(t1, t3, 0x88), u3 = _mm512_shuffle_f64x2(t1, t3, 0xdd);
    __m512d u4 = _mm512_shuffle_f64x2(t4, t6, 0x88), u6 = _mm512_shuffle_f64x2(t4, t6, 0xdd);
    __m512d u5 = _mm512_shuffle_f64x2(t5, t7, 0x88), u7 = _mm512_shuffle_f64x2(t5, t7, 0xdd);
    r[0] = _mm512_shuffle_f64x2(u0, u4, 0x88);
    r[4] = _mm512_shuffle_f64x2(u0, u4, 0xdd);
    r[1] = _mm512_shuffle_f64x2(u1, u5, 0x88);
    r[5] = _mm512_shuffle_f64x2(u1, u5, 0xdd);
    r[2] = _mm512_shuffle_f64x2(u2, u6, 0x88);
    r[6] = _mm512_shuffle_f64x2(u2, u6, 0xdd);
    r[3] = _mm512_shuffle_f64x2(u3, u7, 0x88);
    r[7] = _mm512_shuffle_f64x2(u3, u7, 0xdd);
}

/* (a, b) <- (a + b, (a - b) w), w = (wr, wi) a scalar twiddle */
static inline void dif_bfly(__m512d *ar, __m512d *ai, __m512d *br, __m512d *bi, double wr, double wi) {
    __m512d dr = _mm512_sub_pd(*ar, *br), di = _mm512_sub_pd(*ai, *bi);
    *ar = _mm512_add_pd(*ar, *br);
    *ai = _mm512_add_pd(*ai, *bi);
    __m512d vwr = _mm512_set1_pd(wr), vwi = _mm512_set1_pd(wi);
    *br = _mm512_sub_pd(_mm512_mul_pd(dr, vwr), _mm512_mul_pd(di, vwi));
    *bi = _mm512_add_pd(_mm512_mul_pd(dr, vwi), _mm512_mul_pd(di, vwr));
}

/* (a, b) <- (a + b conj(w), a - b conj(w)) */
static inline void dit_bfly(__m512d *ar, __m512d *ai, __m512d *br, __m512d *bi, double wr, double wi) {
    __m512d vwr = _mm512_set1_pd(wr), vwi = _mm512_set1_pd(wi);
    __m512d vr = _mm512_add_pd(_mm512_mul_pd(*br, vwr), _mm512_mul_pd(*bi, vwi));
    __m512d vi = _mm512_sub_pd(_mm512_mul_pd(*bi, vwr), _mm512_mul_pd(*br, vwi));
    *br = _mm512_sub_pd(*ar, vr);
    *bi = _mm512_sub_pd(*ai, vi);
    *ar = _mm512_add_pd(*ar, vr);
    *ai = _mm512_add_pd(*ai, vi);
}

/* the same with a vector of twiddles (one per lane) */
static inline void dif_bfly_v(__m512d *ar, __m512d *ai, __m512d *br, __m512d *bi, const double *wr, const double *wi) {
    __m512d dr = _mm512_sub_pd(*ar, *br), di = _mm512_sub_pd(*ai, *bi);
    *ar = _mm512_add_pd(*ar, *br);
    *ai = _mm512_add_pd(*ai, *bi);
    __m512d vwr = _mm512_loadu_pd(wr), vwi = _mm512_loadu_pd(wi);
    *br = _mm512_sub_pd(_mm512_mul_pd(dr, vwr), _mm512_mul_pd(di, vwi));
    *bi = _mm512_add_pd(_mm512_mul_pd(dr, vwi), _mm512_mul_pd(di, vwr));
}

static inline void dit_bfly_v(__m512d *ar, __m512d *ai, __m512d *br, __m512d *bi, const double *wr, const double *wi) {
    __m512d vwr = _mm512_loadu_pd(wr), vwi = _mm512_loadu_pd(wi);
    __m512d vr = _mm512_add_pd(_mm512_mul_pd(*br, vwr), _mm512_mul_pd(*bi, vwi));
    __m512d vi = _mm512_sub_pd(_mm512_mul_pd(*bi, vwr), _mm512_mul_pd(*br, vwi));
    *br = _mm512_sub_pd(*ar, vr);
    *bi = _mm512_sub_pd(*ai, vi);
    *ar = _mm512_add_pd(*ar, vr);
    *ai = _mm512_add_pd(*ai, vi);
}

/* A 64-slot tile: 8 vectors of each plane */
static inline void tile_load(const double *re, const double *im, __m512d r[8], __m512d i_[8]) {
    for (int k = 0; k < 8; k++) {
        r[k] = _mm512_loadu_pd(re + 8 * k);
        i_[k] = _mm512_loadu_pd(im + 8 * k);
    }
}

static inline void tile_store(double *re, double *im, const __m512d r[8], const __m512d i_[8]) {
    for (int k = 0; k < 8; k++) {
        _mm512_storeu_pd(re + 8 * k, r[k]);
        _mm512_storeu_pd(im + 8 * k, i_[k]);
    }
}

static void dif_tail(double *restrict re, double *restrict im, const double *restrict twr, const double *restrict twi,
                     int64_t h) {
    for (int64_t g = 0; g < h; g += TAIL) {
        prefetch_some();
        __m512d r[8], i_[8];
        tile_load(re + g, im + g, r, i_);
        for (int k = 0; k < 4; k++)
            dif_bfly_v(&r[k], &i_[k], &r[k + 4], &i_[k + 4], twr + 32 + 8 * k, twi + 32 + 8 * k);
        for (int k = 0; k < 8; k += 4)
            for (int j = 0; j < 2; j++)
                dif_bfly_v(&r[k + j], &i_[k + j], &r[k + j + 2], &i_[k + j + 2], twr + 16 + 8 * j, twi + 16 + 8 * j);
        for (int k = 0; k < 8; k += 2) dif_bfly_v(&r[k], &i_[k], &r[k + 1], &i_[k + 1], twr + 8, twi + 8);
        transpose8(r);
        transpose8(i_);
        for (int k = 0; k < 4; k++) dif_bfly(&r[k], &i_[k], &r[k + 4], &i_[k + 4], twr[4 + k], twi[4 + k]);
        for (int k = 0; k < 8; k += 4)
            for (int j = 0; j < 2; j++)
                dif_bfly(&r[k + j], &i_[k + j], &r[k + j + 2], &i_[k + j + 2], twr[2 + j], twi[2 + j]);
        for (int k = 0; k < 8; k += 2) dif_bfly(&r[k], &i_[k], &r[k + 1], &i_[k + 1], twr[1], twi[1]);
        tile_store(re + g, im + g, r, i_);
    }
}

static void dit_head(double *restrict re, double *restrict im, const double *restrict twr, const double *restrict twi,
                     int64_t h) {
    for (int64_t g = 0; g < h; g += TAIL) {
        prefetch_some();
        __m512d r[8], i_[8];
        tile_load(re + g, im + g, r, i_);
        for (int k = 0; k < 8; k += 2) dit_bfly(&r[k], &i_[k], &r[k + 1], &i_[k + 1], twr[1], twi[1]);
        for (int k = 0; k < 8; k += 4)
            for (int j = 0; j < 2; j++)
                dit_bfly(&r[k + j], &i_[k + j], &r[k + j + 2], &i_[k + j + 2], twr[2 + j], twi[2 + j]);
        for (int k = 0; k < 4; k++) dit_bfly(&r[k], &i_[k], &r[k + 4], &i_[k + 4], twr[4 + k], twi[4 + k]);
        transpose8(r);
        transpose8(i_);
        for (int k = 0; k < 8; k += 2) dit_bfly_v(&r[k], &i_[k], &r[k + 1], &i_[k + 1], twr + 8, twi + 8);
        for (int k = 0; k < 8; k += 4)
            for (int j = 0; j < 2; j++)
                dit_bfly_v(&r[k + j], &i_[k + j], &r[k + j + 2], &i_[k + j + 2], twr + 16 + 8 * j, twi + 16 + 8 * j);
        for (int k = 0; k < 4; k++)
            dit_bfly_v(&r[k], &i_[k], &r[k + 4], &i_[k + 4], twr + 32 + 8 * k, twi + 32 + 8 * k);
        tile_store(re + g, im + g, r, i_);
    }
}
#endif

/* Forward FFT of length h on split planes: X[k] = sum_j x[j] exp(-2 pi i j k / h), in a fixed slot order (DIF:
   bit-reversed, with 8 x 8 tiles transposed where the AVX-512 tail runs); cf_fft_forward exposes it. */
static void fft_dif(double *restrict re, double *restrict im, const double *restrict twr, const double *restrict twi,
                    int64_t h) {
#ifdef __AVX512F__
    if (h >= TAIL) {
        dif_stages(re, im, twr, twi, h, TAIL);
        dif_tail(re, im, twr, twi, h);
        return;
    }
#endif
    dif_stages(re, im, twr, twi, h, 1);
}

/* The inverse (unscaled, times h), from the slot order of fft_dif to natural order. */
static void fft_dit_inv(double *restrict re, double *restrict im, const double *restrict twr,
                        const double *restrict twi, int64_t h) {
#ifdef __AVX512F__
    if (h >= TAIL) {
        dit_head(re, im, twr, twi, h);
        dit_stages(re, im, twr, twi, h, TAIL);
        return;
    }
#endif
    dit_stages(re, im, twr, twi, h, 1);
}

void cf_fft_forward(double *re, double *im, const double *tw, int64_t h) { fft_dif(re, im, tw, tw + h, h); }
void cf_fft_inverse(double *re, double *im, const double *tw, int64_t h) { fft_dit_inv(re, im, tw, tw + h, h); }

static inline double rnd(double x) { return floor(x + 0.5); }

/* digits of one polynomial (levels == 1): row out */
static void digits1(const uint64_t *restrict x, double *restrict out, int64_t n, uint64_t q, double scale,
                    double base, double inv_base, int approx) {
    const uint64_t half_q = q >> 1;
    for (int64_t j0 = 0; j0 < n; j0 += PF_CHUNK) {
        prefetch_some();
        const int64_t j1 = j0 + PF_CHUNK < n ? j0 + PF_CHUNK : n;
        for (int64_t j = j0; j < j1; j++) {
            int64_t xc = (int64_t)x[j] - (x[j] > half_q ? (int64_t)q : 0);
            double v = rint((double)xc * scale);
            if (approx) v = v - rnd(v * inv_base) * base;
            out[j] = v;
        }
    }
}

/* digits of one polynomial, levels rows ds doubles apart, most significant first; level by level (row 0 holds
   the rest as it goes), so that every loop is a vector loop (one loop over the levels inside the coefficients'
   loop was scalar) */
static void digits_any(const uint64_t *restrict x, double *restrict dig, int64_t n, int64_t ds, int64_t levels,
                       uint64_t q, double scale, double base, double inv_base, int approx) {
    const uint64_t half_q = q >> 1;
    double *restrict v = dig;
    for (int64_t j = 0; j < n; j++) {
        int64_t xc = (int64_t)x[j] - (x[j] > half_q ? (int64_t)q : 0);
        v[j] = rint((double)xc * scale);
    }
    for (int64_t lv = levels - 1; lv > 0; lv--) {
        double *restrict d = dig + lv * ds;
        for (int64_t j = 0; j < n; j++) {
            double hi = rnd(v[j] * inv_base);
            d[j] = v[j] - hi * base;
            v[j] = hi;
        }
    }
    if (approx)
        for (int64_t j = 0; j < n; j++) v[j] = v[j] - rnd(v[j] * inv_base) * base;
}

/* out[c] = sum_t mono_t * sum_r ev_r * key[t][r][c], all slot-wise; key blocked by VB slots. */
#define PRODUCTS(NAME, K1, R, T)                                                                          \
    static void NAME(const double *restrict ev, const double *restrict mono, const double *restrict kg,      \
                     double *restrict out, int64_t h, int64_t ps) {                                        \
        for (int64_t pb = 0; pb < h; pb += VB) {                                                            \
            const double *restrict kb = kg + pb * (T) * (R) * (K1) * 2;                                     \
            for (int64_t u = 0; u < VB; u++) {                                                              \
                const int64_t p = pb + u;                                                                   \
                double er[R], ei[R], orr[K1], oi[K1];                                                       \
                for (int r = 0; r < (R); r++) {                                                             \
                    er[r] = ev[2 * r * ps + p];                                                              \
                    ei[r] = ev[(2 * r + 1) * ps + p];                                                        \
                }                                                                                           \
                for (int c = 0; c < (K1); c++) orr[c] = oi[c] = 0.0;                                        \
                for (int t = 0; t < (T); t++) {                                                             \
                    const double mr = mono[2 * t * ps + p], mi = mono[(2 * t + 1) * ps + p];                  \
                    for (int c = 0; c < (K1); c++) {                                                        \
                        double pr = 0.0, pi = 0.0;                                                          \
                        for (int r = 0; r < (R); r++) {                                                     \
                            const double *restrict k = kb + (((t * (R) + r) * (K1) + c) * 2) * VB + u;      \
                            pr += er[r] * k[0] - ei[r] * k[VB];                                             \
                            pi += er[r] * k[VB] + ei[r] * k[0];                                             \
                        }                                                                                   \
                        orr[c] += mr * pr - mi * pi;                                                        \
                        oi[c] += mr * pi + mi * pr;                                                         \
                    }                                                                                       \
                }                                                                                           \
                for (int c = 0; c < (K1); c++) {                                                            \
                    out[2 * c * ps + p] = orr[c];                                                            \
                    out[(2 * c + 1) * ps + p] = oi[c];                                                       \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
    }

PRODUCTS(products_2_2_3, 2, 2, 3)

/* Two key bits a group (patterns 01, 10, 11 with exponents e0, e1, e0 + e1), one component: with A = X^e0 and
   B = X^e1 (mono holds A and B, not minus one), sum_t (X^e_t - 1) P_t = A (P0 + B P2) + B P1 - (P0 + P1 + P2): two
   monomials instead of three, the same three complex products. */
#define PRODUCTS_PAIR(NAME, K1, R)                                                                          \
    static void NAME(const double *restrict ev, const double *restrict mono, const double *restrict kg,      \
                     double *restrict out, int64_t h, int64_t ps) {                                        \
        for (int64_t pb = 0; pb < h; pb += VB) {                                                            \
            if (!(pb & (PF_CHUNK - 1))) prefetch_some();                                                    \
            const double *restrict kb = kg + pb * 3 * (R) * (K1) * 2;                                       \
            if (pb + 4 * VB < h) /* this step's key 4 blocks on, into L1 (already bound for L2) */          \
                for (int64_t l = 0; l < 3 * (R) * (K1) * 2 * VB; l += 8)                                    \
                    __builtin_prefetch(kb + 4 * 3 * (R) * (K1) * 2 * VB + l, 0, 3);                         \
            for (int64_t u = 0; u < VB; u++) {                                                              \
                const int64_t p = pb + u;                                                                   \
                double er[R], ei[R], qr[3][K1], qi[3][K1];                                                  \
                for (int r = 0; r < (R); r++) {                                                             \
                    er[r] = ev[2 * r * ps + p];                                                              \
                    ei[r] = ev[(2 * r + 1) * ps + p];                                                        \
                }                                                                                           \
                for (int t = 0; t < 3; t++)                                                                 \
                    for (int c = 0; c < (K1); c++) {                                                        \
                        double pr = 0.0, pi = 0.0;                                                          \
                        for (int r = 0; r < (R); r++) {                                                     \
                            const double *restrict k = kb + (((t * (R) + r) * (K1) + c) * 2) * VB + u;      \
                            pr += er[r] * k[0] - ei[r] * k[VB];                                             \
                            pi += er[r] * k[VB] + ei[r] * k[0];                                             \
                        }                                                                                   \
                        qr[t][c] = pr;                                                                      \
                        qi[t][c] = pi;                                                                      \
                    }                                                                                       \
                const double ar = mono[p], ai = mono[ps + p], br = mono[2 * ps + p], bi = mono[3 * ps + p];  \
                for (int c = 0; c < (K1); c++) {                                                            \
                    const double sr = qr[0][c] + (br * qr[2][c] - bi * qi[2][c]);                           \
                    const double si = qi[0][c] + (br * qi[2][c] + bi * qr[2][c]);                           \
                    out[2 * c * ps + p] = (ar * sr - ai * si) + (br * qr[1][c] - bi * qi[1][c])             \
                                          - (qr[0][c] + qr[1][c] + qr[2][c]);                               \
                    out[(2 * c + 1) * ps + p] = (ar * si + ai * sr) + (br * qi[1][c] + bi * qr[1][c])       \
                                                - (qi[0][c] + qi[1][c] + qi[2][c]);                         \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
    }

PRODUCTS_PAIR(products_pair_2_2, 2, 2)
PRODUCTS_PAIR(products_pair_2_4, 2, 4)
PRODUCTS(products_2_4_3, 2, 4, 3)

static void products_any(const double *restrict ev, const double *restrict mono, const double *restrict kg,
                         double *restrict out, int64_t h, int64_t ps, int64_t k1, int64_t r_count,
                         int64_t t_count) {
    for (int64_t i = 0; i < 2 * k1 * ps; i++) out[i] = 0.0;
    for (int64_t pb = 0; pb < h; pb += VB) {
        const double *restrict kb = kg + pb * t_count * r_count * k1 * 2;
        for (int64_t t = 0; t < t_count; t++)
            for (int64_t c = 0; c < k1; c++)
                for (int64_t u = 0; u < VB; u++) {
                    const int64_t p = pb + u;
                    double pr = 0.0, pi = 0.0;
                    for (int64_t r = 0; r < r_count; r++) {
                        const double *k = kb + (((t * r_count + r) * k1 + c) * 2) * VB + u;
                        double er = ev[2 * r * ps + p], ei = ev[(2 * r + 1) * ps + p];
                        pr += er * k[0] - ei * k[VB];
                        pi += er * k[VB] + ei * k[0];
                    }
                    double mr = mono[2 * t * ps + p], mi = mono[(2 * t + 1) * ps + p];
                    out[2 * c * ps + p] += mr * pr - mi * pi;
                    out[(2 * c + 1) * ps + p] += mr * pi + mi * pr;
                }
    }
}

static inline uint64_t reduce_add(double yy, uint64_t x, uint64_t q, double inv_q) {
    /* floor(yy / Q), through a truncation (GCC does not vectorize (int64_t)floor(x)) */
    const double v = yy * inv_q;
    int64_t m = (int64_t)v;
    m -= (double)m > v ? 1 : 0;
    const double rest = yy - rnd(yy * 0x1p-64) * 0x1p64; /* yy mod 2^64, in [-2^63, 2^63): exact */
#ifdef __AVX512DQ__
    const uint64_t low = (uint64_t)(int64_t)rest; /* one vector conversion (vcvttpd2qq) */
#else /* no vector double -> int64 conversion: two halves through int32 range */
    const double a1 = rnd(rest * 0x1p-32);
    const double a0 = rest - a1 * 0x1p32;
    const uint64_t low = ((uint64_t)(int64_t)a1 << 32) + (uint64_t)(int64_t)a0;
#endif
    const int64_t qs = (int64_t)q;
    int64_t tt = (int64_t)(low - (uint64_t)m * q);
    tt = tt < 0 ? tt + qs : tt;
    tt = tt >= qs ? tt - qs : tt;
    const int64_t s = (int64_t)x + tt;
    return (uint64_t)(s >= qs ? s - qs : s);
}

static void untwist_reduce_add(const double *restrict re, const double *restrict im, const double *restrict cs,
                               const double *restrict sn, uint64_t *restrict x, int64_t h, double inv_h, uint64_t q,
                               double inv_q) {
    for (int64_t j0 = 0; j0 < h; j0 += PF_CHUNK) {
        prefetch_some();
        const int64_t j1 = j0 + PF_CHUNK < h ? j0 + PF_CHUNK : h;
        for (int64_t j = j0; j < j1; j++) {
            const double a = re[j] * inv_h, b = im[j] * inv_h;
            x[j] = reduce_add(rnd(a * cs[j] + b * sn[j]), x[j], q, inv_q);
        }
        for (int64_t j = j0; j < j1; j++) {
            const double a = re[j] * inv_h, b = im[j] * inv_h;
            x[j + h] = reduce_add(rnd(b * cs[j] - a * sn[j]), x[j + h], q, inv_q);
        }
    }
}

/* For every component: P[t][c] = sum_r ev_r * key[t][r][c] for every pattern t and output c, slot-wise (no
   monomials: the extended rotation moves the products between components before their monomials meet them).
   The components are the inner loop, so each block of the key is read once for all of them (not once per
   component). ev and prod: comps blocks ev_comp and prod_comp apart. */
static void products_split(const double *restrict ev, const double *restrict kg, double *restrict prod, int64_t h,
                           int64_t ps, int64_t k1, int64_t r_count, int64_t t_count, int64_t comps, int64_t ev_comp,
                           int64_t prod_comp) {
    const int64_t block = t_count * r_count * k1 * 2 * VB;
    for (int64_t pb = 0; pb < h; pb += VB) {
        const double *restrict kb = kg + pb * t_count * r_count * k1 * 2;
        if (!(pb & (PF_CHUNK - 1))) prefetch_some();
        if (pb + 4 * VB < h) /* this step's key four blocks on, into L1 (already bound for L2) */
            for (int64_t l = 0; l < block; l += 8) __builtin_prefetch(kb + 4 * block + l, 0, 3);
        for (int64_t comp = 0; comp < comps; comp++) {
            const double *restrict evc = ev + comp * ev_comp + pb;
            for (int64_t t = 0; t < t_count; t++)
                for (int64_t c = 0; c < k1; c++) {
                    double pr[VB] = {0}, pi[VB] = {0};
                    for (int64_t r = 0; r < r_count; r++) {
                        const double *restrict k = kb + (((t * r_count + r) * k1 + c) * 2) * VB;
                        const double *restrict er = evc + 2 * r * ps, *restrict ei = er + ps;
                        for (int64_t u = 0; u < VB; u++) {
                            pr[u] += er[u] * k[u] - ei[u] * k[VB + u];
                            pi[u] += er[u] * k[VB + u] + ei[u] * k[u];
                        }
                    }
                    double *restrict o = prod + comp * prod_comp + (t * k1 + c) * 2 * ps + pb;
                    for (int64_t u = 0; u < VB; u++) {
                        o[u] = pr[u];
                        o[ps + u] = pi[u];
                    }
                }
        }
    }
}

/* (orr, oi) += m mv - own slot-wise (complex); restrict parameters, so that GCC vectorizes it. */
__attribute__((noinline)) static void combine(double *restrict orr, double *restrict oi, const double *restrict mr,
                                              const double *restrict mi, const double *restrict mvr,
                                              const double *restrict mvi, const double *restrict ownr,
                                              const double *restrict owni, int64_t h) {
    for (int64_t p = 0; p < h; p++) {
        orr[p] += mr[p] * mvr[p] - mi[p] * mvi[p] - ownr[p];
        oi[p] += mr[p] * mvi[p] + mi[p] * mvr[p] - owni[p];
    }
}

/* acc: uint64 [batch][comps][k1][n] in [0, q), updated in place (comps = 2^nu components of an accumulator of
   degree 2^nu n). src, power: int32 [batch][groups][comps][t_count]: output component r of pattern t takes the
   products of component src and X^power in the ring of degree n (crossfhe.core.ggsw.component_move; with one
   component, src is 0 and power the pattern's exponent). key: float64 [groups][h / VB][t_count][k1 levels][k1]
   [2][VB] (re, im planes of the key's FFT values in the slot order of cf_fft_forward, blocked by VB slots).
   tw: [2][h] (fft twiddles); twist: [2][h] (cos, sin of pi j / n); roots: [2][2n] (cos, sin of pi j / n, the
   powers of w); zeta: [2][h] (cos, sin of -2 pi j / h, the powers of w^-4); slot_k: int32 [h], the index k of
   the point w^(1 - 4k) that slot p holds (the kernel's FFT order). scale: B^levels /
   q, or 1.0 for an exact gadget. inv_q: 1.0 / q as the Python side computes it. Returns 0, -1 if scratch
   memory could not be had, -2 for a bad shape. */
int cf_blind_rotate_grouped(uint64_t *acc, const int32_t *src, const int32_t *power, const double *key,
                            int64_t batch, int64_t groups, int64_t comps, int64_t t_count, int64_t k1, int64_t levels,
                            int64_t n, int64_t base_log, double scale, uint64_t q, double inv_q, const double *tw,
                            const double *twist, const double *roots, const double *zeta, const int32_t *slot_k) {
    const int64_t h = n / 2, r_count = k1 * levels;
    if (h % VB || comps < 1) return -2;
    const double base = (double)((int64_t)1 << base_log), inv_base = 1.0 / base, inv_h = 1.0 / (double)h;
    const double *twr = tw, *twi = tw + h, *cs = twist, *sn = twist + h;
    const double *rre = roots, *rim = roots + 2 * n, *zre = zeta, *zim = zeta + h;
    const int32_t mask = (int32_t)(2 * n - 1);
    const int approx = scale != 1.0;
    const int64_t ps = h + PAD, ds = n + PAD; /* scratch row pitches */
    const int64_t ev_comp = 2 * r_count * ps, prod_comp = comps > 1 ? 2 * t_count * k1 * ps : 0;
    size_t words = (size_t)(r_count * ds + comps * ev_comp + 2 * t_count * ps + 2 * k1 * ps + comps * prod_comp);
    words = (words + 7) & ~(size_t)7;
    double *work = aligned_alloc(64, sizeof(double) * words);
    if (!work) return -1;
    double *dig = work, *ev = dig + r_count * ds, *mono = ev + comps * ev_comp, *out = mono + 2 * t_count * ps;
    double *prod = out + 2 * k1 * ps;
    const int64_t key_step = t_count * r_count * k1 * 2 * h;
    /* whether the slot order splits k over a slot's low three bits and the rest (a bit permutation does) */
    int split_k = 1;
    for (int64_t p = 0; p < h && split_k; p++)
        split_k = slot_k[p] == slot_k[p & ~(int64_t)(VB - 1)] + slot_k[p & (VB - 1)];
    for (int64_t g = 0; g < groups; g++) {
        const double *kg = key + g * key_step;
        if (g + 1 < groups) { /* the next step's keys, spread over this step's prefetch_some calls */
            /* calls per step: the previous step's count (the first step: the FFT tiles alone) */
            const int64_t per = h >= PF_CHUNK ? h / PF_CHUNK : 1;
            const int64_t calls = g ? pf_calls : batch * comps * per * (r_count + k1);
            pf_cur = (const char *)(kg + key_step);
            pf_end = pf_cur + key_step * (int64_t)sizeof(double);
            pf_lines = (key_step * (int64_t)sizeof(double) / 64 + calls - 1) / (calls > 0 ? calls : 1);
        }
        pf_calls = 0;
        for (int64_t bi = 0; bi < batch; bi++) {
            uint64_t *a = acc + bi * comps * k1 * n;
            const int64_t at = (bi * groups + g) * comps * t_count; /* this item's and step's src / power */
            for (int64_t comp = 0; comp < comps; comp++) {
                const uint64_t *x = a + comp * k1 * n;
                double *evc = ev + comp * ev_comp;
                for (int64_t c = 0; c < k1; c++) {
                    if (levels == 1)
                        digits1(x + c * n, dig + c * ds, n, q, scale, base, inv_base, approx);
                    else
                        digits_any(x + c * n, dig + c * levels * ds, n, ds, levels, q, scale, base, inv_base, approx);
                }
                for (int64_t r = 0; r < r_count; r++) {
                    const double *restrict lo = dig + r * ds, *restrict hi = lo + h;
                    double *restrict er = evc + 2 * r * ps, *restrict ei = er + ps;
                    for (int64_t j0 = 0; j0 < h; j0 += PF_CHUNK) {
                        prefetch_some();
                        const int64_t j1 = j0 + PF_CHUNK < h ? j0 + PF_CHUNK : h;
                        for (int64_t j = j0; j < j1; j++) {
                            er[j] = lo[j] * cs[j] - hi[j] * sn[j];
                            ei[j] = lo[j] * sn[j] + hi[j] * cs[j];
                        }
                    }
                    fft_dif(er, ei, twr, twi, h);
                }
            }
            if (comps > 1) products_split(ev, kg, prod, h, ps, k1, r_count, t_count, comps, ev_comp, prod_comp);
            for (int64_t comp = 0; comp < comps; comp++) {
                const int32_t *e = power + at + comp * t_count, *from = src + at + comp * t_count;
                /* two key bits a group, one component, pattern 11's exponent the sum of the others' (the grouped
                   exponents always are; checked): its monomial is not made (PRODUCTS_PAIR) */
                const uint32_t e01 = ((uint32_t)e[0] + (uint32_t)e[1]) & (uint32_t)mask;
                const int pair = comps == 1 && k1 == 2 && (r_count == 2 || r_count == 4) && t_count == 3 &&
                                 e01 == ((uint32_t)e[2] & (uint32_t)mask);
                for (int64_t t = 0; t < (pair ? 2 : t_count); t++) {
                    /* X^e at slot k's point w^(1 - 4k) is w^e zeta^(e k mod h), zeta = w^-4: one gather from an
                       h-entry table (L1) per slot instead of one from the 2n-entry roots */
                    double *restrict mr = mono + 2 * t * ps, *restrict mi = mr + ps;
                    const uint32_t et = (uint32_t)e[t], hm = (uint32_t)(h - 1); /* products wrap mod 2^32 */
                    /* one component: X^e - 1 here, fused below (the pair products take X^e itself) */
                    const double one = comps == 1 && !pair ? 1.0 : 0.0;
                    const double wr = rre[et & (uint32_t)mask], wi = rim[et & (uint32_t)mask];
                    if (split_k) { /* slot 8a + j holds k = K(8a) + K(j): X^e = (w^e zeta^(e K(j))) zeta^(e K(8a)),
                                      eight lane values a step and one scalar per VB slots, no gathers */
                        double lr[VB], li[VB];
                        for (int j = 0; j < VB; j++) {
                            const uint32_t jj = (et * (uint32_t)slot_k[j]) & hm;
                            lr[j] = wr * zre[jj] - wi * zim[jj];
                            li[j] = wr * zim[jj] + wi * zre[jj];
                        }
                        for (int64_t p0 = 0; p0 < h; p0 += PF_CHUNK) {
                            prefetch_some();
                            const int64_t p1 = p0 + PF_CHUNK < h ? p0 + PF_CHUNK : h;
                            for (int64_t p = p0; p < p1; p += VB) {
                                const uint32_t ja = (et * (uint32_t)slot_k[p]) & hm;
                                const double sr = zre[ja], si = zim[ja];
                                for (int j = 0; j < VB; j++) {
                                    mr[p + j] = lr[j] * sr - li[j] * si - one;
                                    mi[p + j] = lr[j] * si + li[j] * sr;
                                }
                            }
                        }
                    } else
                        for (int64_t p0 = 0; p0 < h; p0 += PF_CHUNK) {
                            prefetch_some();
                            const int64_t p1 = p0 + PF_CHUNK < h ? p0 + PF_CHUNK : h;
                            for (int64_t p = p0; p < p1; p++) {
                                const uint32_t j = (et * (uint32_t)slot_k[p]) & hm;
                                mr[p] = wr * zre[j] - wi * zim[j] - one;
                                mi[p] = wr * zim[j] + wi * zre[j];
                            }
                        }
                }
                if (comps == 1) {
                    if (pair && r_count == 2) products_pair_2_2(ev, mono, kg, out, h, ps);
                    else if (pair) products_pair_2_4(ev, mono, kg, out, h, ps);
                    else if (k1 == 2 && r_count == 2 && t_count == 3) products_2_2_3(ev, mono, kg, out, h, ps);
                    else if (k1 == 2 && r_count == 4 && t_count == 3) products_2_4_3(ev, mono, kg, out, h, ps);
                    else products_any(ev, mono, kg, out, h, ps, k1, r_count, t_count);
                } else { /* out[c] = sum_t X^power P[src][t][c] - P[comp][t][c] */
                    for (int64_t c = 0; c < k1; c++) {
                        double *restrict orr = out + 2 * c * ps, *restrict oi = orr + ps;
                        for (int64_t p = 0; p < h; p++) orr[p] = oi[p] = 0.0;
                        for (int64_t t = 0; t < t_count; t++) {
                            const double *mr = mono + 2 * t * ps;
                            const double *mv = prod + from[t] * prod_comp + (t * k1 + c) * 2 * ps;
                            const double *own = prod + comp * prod_comp + (t * k1 + c) * 2 * ps;
                            combine(orr, oi, mr, mr + ps, mv, mv + ps, own, own + ps, h);
                        }
                    }
                }
                uint64_t *x = a + comp * k1 * n;
                for (int64_t c = 0; c < k1; c++) {
                    double *orr = out + 2 * c * ps, *oi = orr + ps;
                    fft_dit_inv(orr, oi, twr, twi, h);
                    untwist_reduce_add(orr, oi, cs, sn, x + c * n, h, inv_h, q, inv_q);
                }
            }
        }
    }
    pf_cur = pf_end = NULL;
    free(work);
    return 0;
}

/* ABI version, checked by the loader: bump when a signature or a layout changes. */
int cf_abi_version(void) { return 4; }

/* The centered fast basis conversion of crossfhe.math.modular.centered_gemm_rows as an XLA FFI custom call on the
   CPU platform: "crossfhe_conv_centered". The same words (its outputs are the canonical residues in [0, q_j)):

       z[g, j, n] = sum_i center(y[g, i, n]) w[d, j, i]  mod q[d, j],   d = g mod D,

   center(y) = y - c_i where y > half_i (c_i the source modulus), else y: the sum is taken as
   sum_i u_i w_ji + negk_j with u_i = center(y_i) + c_i in [0, 2^32) and negk_j = -sum_i c_i w_ji mod q_j (block()).
   With AVX-512 IFMA the products go into two 64-bit accumulators (vpmadd52luq / vpmadd52huq: their low and high
   52 bits, 8 lanes per instruction, four vectors at once to cover the instructions' latency); the total is reduced
   once with the quotient estimate floor(fl(t) fl(1/q)) (relative error below 2^-51, so the remainder is in [-q, 2q)
   before one correction either way). Without IFMA the same sums run in portable 64-bit code (cf_conv_fast() = 0
   says so, and the Python side keeps XLA's float64 product there).

   Operands: y uint32 [G, S, N] (G groups: the batch times D digits, digit d = g mod D), half and c uint32 [D, S],
   w uint32 [D, M, S] (in [0, q_j)), negk and q uint32 [D, M] (q below 2^31); S below 2^10. Result: uint32
   [G, M, N]. Groups and blocks of coefficients go to XLA's intra-op threads; a block's u (S rows of 64-bit words, at
   most 32 KiB: 256 coefficients for S = 15, block_size()) is made once and stays in the level-1 cache while each
   target row is summed. */
#include <cstdint>
#include <string>
#include <vector>

#ifdef __AVX512IFMA__
#include <immintrin.h>
#endif

#include "ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

/* Coefficients per block: the largest power of two from 32 to 512 whose u (S rows of 64-bit words) fits in 32 KiB,
   a level-1 data cache, since every target row reads all of it again (block_size()). */
constexpr int64_t kMaxBlock = 512, kMinBlock = 32, kCacheBytes = 32768;

int64_t block_size(int64_t s) {
    int64_t b = kMaxBlock;
    while (b > kMinBlock && s * b * 8 > kCacheBytes) b /= 2;
    return b;
}

inline uint64_t reduce64(uint64_t s, uint32_t q, double qinv) {
    uint64_t e = static_cast<uint64_t>(static_cast<double>(s) * qinv);
    int64_t r = static_cast<int64_t>(s - e * q);
    if (r < 0) r += q;
    if (r >= static_cast<int64_t>(q)) r -= q;
    return static_cast<uint64_t>(r);
}

/* One block of one group: u[i][t] = center(y_i[t]) + c_i = (y > half_i ? y : y + c_i) in [0, 2^32), made once for
   all targets; then z_j[t] = sum_i u_i[t] w_ji + negk_j mod q_j, negk_j = -sum_i c_i w_ji mod q_j. Each product is
   below 2^63: its low 52 bits go to one accumulator, the rest to another, so a sum of S terms stays below S 2^52 and
   S 2^11; lo + hi [2^52]_q + negk < 2^63 for S < 2^10 is reduced once. */
void block(const uint32_t *yg, int64_t n, int64_t s, int64_t m, int64_t len, int64_t blk, const uint32_t *half,
           const uint32_t *c, const uint32_t *w, const uint32_t *negk, const uint32_t *q, uint32_t *og, uint64_t *u) {
    for (int64_t i = 0; i < s; i++) {
        int64_t t = 0;
#ifdef __AVX512IFMA__
        const __m512i vh = _mm512_set1_epi64(half[i]), vc = _mm512_set1_epi64(c[i]);
        for (; t + 8 <= len; t += 8) {  // branch-free: a data-dependent branch here mispredicts half the time
            const __m512i x = _mm512_maskz_cvtepu32_epi64(
                0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(yg + i * n + t)));
            _mm512_storeu_si512(reinterpret_cast<void *>(u + i * blk + t),
                                _mm512_mask_add_epi64(x, _mm512_cmple_epu64_mask(x, vh), x, vc));
        }
#endif
        for (; t < len; t++) {
            const uint64_t x = yg[i * n + t];
            u[i * blk + t] = x + (x > half[i] ? 0 : c[i]);
        }
    }
    for (int64_t j = 0; j < m; j++) {
        const uint32_t qj = q[j], *wj = w + j * s;
        const double qinv = 1.0 / static_cast<double>(qj);
        const uint64_t r52 = (uint64_t{1} << 52) % qj;
        uint32_t *out = og + j * n;
        int64_t t = 0;
#ifdef __AVX512IFMA__
        const __m512i vq = _mm512_set1_epi64(qj), vr52 = _mm512_set1_epi64(static_cast<int64_t>(r52)),
                      vk = _mm512_set1_epi64(negk[j]);
        const __m512d vqinv = _mm512_set1_pd(qinv);
        for (; t + 32 <= len; t += 32) {
            __m512i lo[4], hi[4];
            for (int k = 0; k < 4; k++) lo[k] = hi[k] = _mm512_setzero_si512();
            for (int64_t i = 0; i < s; i++) {
                const __m512i wi = _mm512_set1_epi64(wj[i]);
                const uint64_t *ui = u + i * blk + t;
                for (int k = 0; k < 4; k++) {
                    const __m512i x = _mm512_loadu_si512(reinterpret_cast<const void *>(ui + 8 * k));
                    lo[k] = _mm512_madd52lo_epu64(lo[k], x, wi);
                    hi[k] = _mm512_madd52hi_epu64(hi[k], x, wi);
                }
            }
            for (int k = 0; k < 4; k++) {
                __m512i v = _mm512_add_epi64(_mm512_add_epi64(lo[k], vk), _mm512_mullo_epi64(hi[k], vr52));
                __m512i e = _mm512_maskz_cvttpd_epu64(0xFF, _mm512_mul_pd(_mm512_maskz_cvtepu64_pd(0xFF, v), vqinv));
                __m512i r = _mm512_sub_epi64(v, _mm512_mullo_epi64(e, vq));
                r = _mm512_mask_add_epi64(r, _mm512_cmplt_epi64_mask(r, _mm512_setzero_si512()), r, vq);
                r = _mm512_mask_sub_epi64(r, _mm512_cmpge_epi64_mask(r, vq), r, vq);
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + t + 8 * k), _mm512_maskz_cvtepi64_epi32(0xFF, r));
            }
        }
#endif
        for (; t < len; t++) {
            uint64_t lo = 0, hi = 0;
            for (int64_t i = 0; i < s; i++) {
                const uint64_t p = u[i * blk + t] * wj[i];  // < 2^63
                lo += p & ((uint64_t{1} << 52) - 1);
                hi += p >> 52;
            }
            out[t] = static_cast<uint32_t>(reduce64(lo + negk[j] + hi * r52, qj, qinv));
        }
    }
}

ffi::Error conv_centered(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> y, ffi::Buffer<ffi::U32> half,
                         ffi::Buffer<ffi::U32> c, ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> negk,
                         ffi::Buffer<ffi::U32> q, ffi::ResultBuffer<ffi::U32> out) {
    const std::string who = "crossfhe_conv_centered";
    auto yd = y.dimensions();
    auto od = out->dimensions();
    auto wd = w.dimensions();
    if (yd.size() != 3 || od.size() != 3 || wd.size() != 3)
        return ffi::Error::InvalidArgument(who + ": y [G, S, N], w [D, M, S] and the result [G, M, N]");
    const int64_t groups = yd[0], s = yd[1], n = yd[2], digits = wd[0], m = wd[1];
    if (wd[2] != s || od[0] != groups || od[1] != m || od[2] != n || digits < 1 || groups % digits != 0)
        return ffi::Error::InvalidArgument(who + ": the shapes of y, w and the result do not agree");
    if (s >= 1024) return ffi::Error::InvalidArgument(who + ": at most 1023 source rows");
    const int64_t tab = digits * m * s;
    if (static_cast<int64_t>(w.element_count()) != tab || static_cast<int64_t>(half.element_count()) != digits * s ||
        static_cast<int64_t>(c.element_count()) != digits * s || static_cast<int64_t>(negk.element_count()) != digits * m ||
        static_cast<int64_t>(q.element_count()) != digits * m)
        return ffi::Error::InvalidArgument(who + ": the tables do not match [D, M, S]");
    const uint32_t *yp = y.typed_data(), *hp = half.typed_data(), *cp = c.typed_data(), *wp = w.typed_data();
    const uint32_t *kp = negk.typed_data(), *qp = q.typed_data();
    for (int64_t k = 0; k < digits * m; k++)
        if (qp[k] < 2 || qp[k] >= (1u << 31)) return ffi::Error::InvalidArgument(who + ": a modulus is out of range");
    uint32_t *op = out->typed_data();
    const int64_t blk = block_size(s), blocks = (n + blk - 1) / blk;
    crossfhe::parallel_for(pool, groups * blocks, 1, [&](int64_t lo, int64_t hi) {
        std::vector<uint64_t> u(static_cast<size_t>(s * blk));
        for (int64_t item = lo; item < hi; item++) {
            const int64_t g = item / blocks, b0 = (item % blocks) * blk;
            const int64_t len = n - b0 < blk ? n - b0 : blk;
            const int64_t d = g % digits;
            block(yp + g * s * n + b0, n, s, m, len, blk, hp + d * s, cp + d * s, wp + d * m * s, kp + d * m, qp + d * m,
                  op + g * m * n + b0, u.data());
        }
    });
    return ffi::Error::Success();
}

}  // namespace

extern "C" int cf_conv_abi_version(void) { return 3; }

/* 1 where the build has the IFMA path (the one faster than XLA's float64 product), else 0 */
extern "C" int cf_conv_fast(void) {
#ifdef __AVX512IFMA__
    return 1;
#else
    return 0;
#endif
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_conv_centered_ffi, conv_centered,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

/* The native RNS NTT (rns_ntt.c) as XLA FFI custom calls on the CPU platform: "crossfhe_rns_ntt" and
   "crossfhe_rns_ntt_rows".

   Operands of "crossfhe_rns_ntt": x uint32 [..., limbs, n] (leading axes are batch axes), then the plan's tables q
   [limbs] (any shape of limbs words), w and ws [limbs, n] (forward: w, w_shoup; inverse: wi, wi_shoup), last and
   lasts [limbs, 2] (N^-1 and psi^-1 N^-1 with their Shoup companions; read by the inverse only). Attributes:
   inverse (0 forward, 1 inverse) and full (forward: 1 for outputs in [0, q), else [0, 2q)). Result: uint32 of x's
   shape. Row r of x uses the tables of limb r mod limbs. Table operands may carry leading axes of size 1 (vmap's
   expand_dims). Rows sharing a modulus are run together, so its tables are read once for all of them; groups of
   rows go to XLA's intra-op threads.

   "crossfhe_rns_ntt_rows" takes one operand more after q: tq [u], the moduli of the table rows, and then w, ws
   [u, n] and last, lasts [u, 2]; limb l uses the table row whose modulus is q[l] (the first such row; an error if
   none). So one table over a whole chain serves every concatenation of its moduli (ModUp's digits at every level)
   without copies of its rows. */
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "../math/ffi_parallel.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

extern "C" int cf_ntt(const uint32_t *in, uint32_t *out, const int64_t *rows, const int32_t *tab, int64_t count,
                      int64_t n, const uint32_t *q, const uint32_t *const *w, const uint32_t *const *ws,
                      const uint32_t *last, const uint32_t *lasts, int inverse, int full);
extern "C" void cf_mac_row(const uint32_t *const *y, const uint32_t *b, int64_t bstride, const uint32_t *a,
                           int64_t astride, int64_t d, int64_t len, uint32_t q, uint32_t *ob, uint32_t *oa);

/* The transform of x with the tables of row tab(l) for limb l, tab(l) the first row of tq equal to q[l]. */
static ffi::Error transform(ffi::ThreadPool &pool, const char *name, ffi::Buffer<ffi::U32> &x,
                            ffi::Buffer<ffi::U32> &q, ffi::Buffer<ffi::U32> &tq, ffi::Buffer<ffi::U32> &w,
                            ffi::Buffer<ffi::U32> &ws, ffi::Buffer<ffi::U32> &last, ffi::Buffer<ffi::U32> &lasts,
                            ffi::ResultBuffer<ffi::U32> &out, int32_t inverse, int32_t full) {
    auto dims = x.dimensions();
    std::string who(name);
    if (dims.size() < 2) return ffi::Error::InvalidArgument(who + ": x must be [..., limbs, n]");
    const int64_t n = dims[dims.size() - 1], limbs = dims[dims.size() - 2];
    const int64_t total = static_cast<int64_t>(x.element_count());
    const int64_t u = static_cast<int64_t>(tq.element_count());
    if (n < 64 || (n & (n - 1)) != 0) return ffi::Error::InvalidArgument(who + ": n must be a power of two >= 64");
    if (static_cast<int64_t>(q.element_count()) != limbs || static_cast<int64_t>(w.element_count()) != u * n ||
        static_cast<int64_t>(ws.element_count()) != u * n || static_cast<int64_t>(last.element_count()) != 2 * u ||
        static_cast<int64_t>(lasts.element_count()) != 2 * u)
        return ffi::Error::InvalidArgument(who + ": the tables do not match x's limbs and n");
    const int64_t rows = total / n, batch = rows / (limbs > 0 ? limbs : 1);
    if (rows == 0) return ffi::Error::Success();
    const uint32_t *qs = q.typed_data(), *tqs = tq.typed_data();
    std::vector<int64_t> row_of(limbs);
    for (int64_t l = 0; l < limbs; l++) {
        row_of[l] = -1;
        for (int64_t m = 0; m < u; m++)
            if (tqs[m] == qs[l]) {
                row_of[l] = m;
                break;
            }
        if (row_of[l] < 0) return ffi::Error::InvalidArgument(who + ": a limb's modulus has no table row");
    }
    std::vector<const uint32_t *> wp(u), wsp(u);
    for (int64_t m = 0; m < u; m++) {
        wp[m] = w.typed_data() + m * n;
        wsp[m] = ws.typed_data() + m * n;
    }
    /* Rows grouped by table row: a concatenated plan (ModUp's digits) repeats moduli, and every row of one modulus
       takes the same tables, read once for all of them. */
    std::vector<int64_t> order(rows);
    std::vector<int32_t> tab(rows);
    int64_t i = 0;
    for (int64_t m = 0; m < u; m++) {
        for (int64_t l = 0; l < limbs; l++) {
            if (row_of[l] != m) continue;
            for (int64_t b = 0; b < batch; b++, i++) {
                order[i] = b * limbs + l;
                tab[i] = static_cast<int32_t>(m);
            }
        }
    }
    const uint32_t *in = x.typed_data();
    uint32_t *dst = out->typed_data();
    std::atomic<int> failed{0};
    /* a group is about 2^18 words of work (four rows at n 2^16): enough to pay for a handoff */
    int64_t grain = (int64_t{1} << 18) / n;
    if (grain < 1) grain = 1;
    crossfhe::parallel_for(pool, rows, grain, [&](int64_t lo, int64_t hi) {
        int rc = cf_ntt(in, dst, order.data() + lo, tab.data() + lo, hi - lo, n, tqs, wp.data(), wsp.data(),
                        last.typed_data(), lasts.typed_data(), inverse, full);
        if (rc != 0) failed.store(rc);
    });
    if (failed.load() != 0) return ffi::Error::Internal(who + ": no scratch memory");
    return ffi::Error::Success();
}

static ffi::Error rns_ntt(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                          ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws, ffi::Buffer<ffi::U32> last,
                          ffi::Buffer<ffi::U32> lasts, ffi::ResultBuffer<ffi::U32> out, int32_t inverse,
                          int32_t full) {
    return transform(pool, "crossfhe_rns_ntt", x, q, q, w, ws, last, lasts, out, inverse, full);
}

static ffi::Error rns_ntt_rows(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::U32> q,
                               ffi::Buffer<ffi::U32> tq, ffi::Buffer<ffi::U32> w, ffi::Buffer<ffi::U32> ws,
                               ffi::Buffer<ffi::U32> last, ffi::Buffer<ffi::U32> lasts,
                               ffi::ResultBuffer<ffi::U32> out, int32_t inverse, int32_t full) {
    return transform(pool, "crossfhe_rns_ntt_rows", x, q, tq, w, ws, last, lasts, out, inverse, full);
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_rns_ntt_ffi, rns_ntt,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int32_t>("inverse")
                                  .Attr<int32_t>("full"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_rns_ntt_rows_ffi, rns_ntt_rows,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>()
                                  .Attr<int32_t>("inverse")
                                  .Attr<int32_t>("full"));

/* "crossfhe_permute": out[..., j] = x[..., idx[j]] along the last axis (an automorphism of EVAL slots, the same
   permutation for every row). x uint32 [..., n], idx int32 [n] (leading axes of size 1 allowed) with entries in
   [0, n). Rows go to XLA's intra-op threads. */
static ffi::Error permute(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> x, ffi::Buffer<ffi::S32> idx,
                          ffi::ResultBuffer<ffi::U32> out) {
    auto dims = x.dimensions();
    if (dims.size() < 1) return ffi::Error::InvalidArgument("crossfhe_permute: x must have a last axis");
    const int64_t n = dims[dims.size() - 1];
    if (static_cast<int64_t>(idx.element_count()) != n)
        return ffi::Error::InvalidArgument("crossfhe_permute: idx must have n entries");
    const int32_t *ix = idx.typed_data();
    for (int64_t j = 0; j < n; j++)
        if (ix[j] < 0 || ix[j] >= n) return ffi::Error::InvalidArgument("crossfhe_permute: index out of range");
    const int64_t rows = n > 0 ? static_cast<int64_t>(x.element_count()) / n : 0;
    const uint32_t *in = x.typed_data();
    uint32_t *dst = out->typed_data();
    int64_t grain = (int64_t{1} << 18) / (n > 0 ? n : 1);
    if (grain < 1) grain = 1;
    crossfhe::parallel_for(pool, rows, grain, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; r++) {
            const uint32_t *src = in + r * n;
            uint32_t *o = dst + r * n;
            for (int64_t j = 0; j < n; j++) o[j] = src[ix[j]];
        }
    });
    return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_permute_ffi, permute,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

/* "crossfhe_mac_digits": the key switch's multiply-accumulate with both halves of a key, out[..., 0, l, :] =
   sum_j Y[..., j, l, :] b[j, brow[l], :] mod q[l] and out[..., 1, l, :] the same with a[j, arow[l], :], j < D, where
   the ModUp digits Y are read in place from two operands: Y[..., j, l, :] = row ymap[j, l] of the rows of y1
   [..., R1, N] followed by those of y2 [..., R2, N] (the converted limbs and the input's own), so they are never
   assembled. ymap int32 [D, L]; b [Db, Lb, N] and a [Da, La, N] with D <= Db, Da (the key's rows, read in place
   through brow and arow, int32 [L]); q uint32 [L]; leading axes of size 1 on the tables allowed (vmap's
   expand_dims). Every word in [0, q[l]), q[l] < 2^31. Result uint32 [..., 2, L, N] (cf_mac_row). Rows and blocks
   of 4096 words go to XLA's intra-op threads. */
static ffi::Error mac_digits(ffi::ThreadPool pool, ffi::Buffer<ffi::U32> y1, ffi::Buffer<ffi::U32> y2,
                             ffi::Buffer<ffi::S32> ymap, ffi::Buffer<ffi::U32> b, ffi::Buffer<ffi::U32> a,
                             ffi::Buffer<ffi::S32> brow, ffi::Buffer<ffi::S32> arow, ffi::Buffer<ffi::U32> q,
                             ffi::ResultBuffer<ffi::U32> out) {
    const std::string who = "crossfhe_mac_digits";
    auto y1d = y1.dimensions(), y2d = y2.dimensions(), md = ymap.dimensions(), bd = b.dimensions(),
         ad = a.dimensions();
    if (y1d.size() < 2 || y2d.size() != y1d.size() || md.size() < 2 || bd.size() < 3 || ad.size() < 3)
        return ffi::Error::InvalidArgument(who + ": y1 [..., R1, N], y2 [..., R2, N], ymap [D, L], b, a [D', L', N]");
    const int64_t n = y1d[y1d.size() - 1], r1 = y1d[y1d.size() - 2], r2 = y2d[y2d.size() - 2];
    const int64_t d = md[md.size() - 2], rows = md[md.size() - 1];
    const int64_t db = bd[bd.size() - 3], lb = bd[bd.size() - 2], da = ad[ad.size() - 3], la = ad[ad.size() - 2];
    if (y2d[y2d.size() - 1] != n || bd[bd.size() - 1] != n || ad[ad.size() - 1] != n || d > db || d > da ||
        static_cast<int64_t>(b.element_count()) != db * lb * n || static_cast<int64_t>(a.element_count()) != da * la * n ||
        static_cast<int64_t>(ymap.element_count()) != d * rows)
        return ffi::Error::InvalidArgument(who + ": the key's digits or N do not match the ModUp rows");
    const int64_t batch = r1 * n > 0 ? static_cast<int64_t>(y1.element_count()) / (r1 * n) : 0;
    if (static_cast<int64_t>(y2.element_count()) != batch * r2 * n)
        return ffi::Error::InvalidArgument(who + ": y1 and y2 have different batch axes");
    if (static_cast<int64_t>(brow.element_count()) != rows || static_cast<int64_t>(arow.element_count()) != rows ||
        static_cast<int64_t>(q.element_count()) != rows)
        return ffi::Error::InvalidArgument(who + ": brow, arow and q must have one entry per output row");
    const int32_t *br = brow.typed_data(), *ar = arow.typed_data(), *ym = ymap.typed_data();
    const uint32_t *qs = q.typed_data();
    for (int64_t l = 0; l < rows; l++)
        if (br[l] < 0 || br[l] >= lb || ar[l] < 0 || ar[l] >= la || qs[l] < 2 || qs[l] >= (1u << 31))
            return ffi::Error::InvalidArgument(who + ": a row index or modulus is out of range");
    for (int64_t k = 0; k < d * rows; k++)
        if (ym[k] < 0 || ym[k] >= r1 + r2) return ffi::Error::InvalidArgument(who + ": a ModUp row is out of range");
    if (d > 64) return ffi::Error::InvalidArgument(who + ": at most 64 digits");
    const int64_t block = n < 4096 ? n : 4096, blocks = (n + block - 1) / block;
    const uint32_t *p1 = y1.typed_data(), *p2 = y2.typed_data(), *bp = b.typed_data(), *ap = a.typed_data();
    uint32_t *op = out->typed_data();
    crossfhe::parallel_for(pool, batch * rows * blocks, 4, [&](int64_t lo, int64_t hi) {
        const uint32_t *ys[64];
        for (int64_t item = lo; item < hi; item++) {
            const int64_t blk = item % blocks, l = (item / blocks) % rows, bt = item / (blocks * rows);
            const int64_t t0 = blk * block, len = n - t0 < block ? n - t0 : block;
            for (int64_t j = 0; j < d; j++) {
                const int64_t src = ym[j * rows + l];
                ys[j] = (src < r1 ? p1 + (bt * r1 + src) * n : p2 + (bt * r2 + src - r1) * n) + t0;
            }
            cf_mac_row(ys, bp + br[l] * n + t0, lb * n, ap + ar[l] * n + t0, la * n, d, len, qs[l],
                       op + ((bt * 2) * rows + l) * n + t0, op + ((bt * 2 + 1) * rows + l) * n + t0);
        }
    });
    return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(cf_mac_digits_ffi, mac_digits,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::U32>>());

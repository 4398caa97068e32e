// bridge_init (seed 9, 12.6, 18.4): see bridge_init.h for what each part means.  The stage reads
// the router of one layer at a time (twice: norms, then the chosen rows), then the embedding,
// then the output embedding, each through the job's checkpoint mapping; the leg scores are BLIS
// products over a fixed grid of row blocks (bridge_leg_scores: bytes independent of the thread count).
// Stage digest: the arrays it wrote (outputs.h); a disabled bridge digests the canonical record
// "stk.bridge_init.disabled" NUL instead.
#include "stages/bridge_init.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/checksum.h"
#include "core/error.h"
#include "core/prng.h"
#include "core/parallel.h"
#include "ingest/checkpoint.h"
#include "ingest/model.h"
#include "kernels/abs_gemm.h"
#include "kernels/elementwise.h"
#include "kernels/random.h"
#include "stages/attn_common.h"
#include "stages/outputs.h"
#include "stages/plan.h"
#include "stages/stages.h"

namespace stk {

uint32_t g_bridge_test_corrupt_guard = 0;

namespace {

// Nearest-rank percentile index: the ceil(p n)-th smallest, 0-based.
constexpr size_t kP99SmallTop = 8;  // bridge_p99_abs: a single pass when the rank is this close to the top

size_t rank_index(size_t n, double p) {
    size_t r = size_t(std::ceil(p * double(n)));
    return r == 0 ? 0 : r - 1;
}

}  // namespace

double round_half_away(double x) {
    // Below 2^52 a double's fraction is a multiple of its ulp u <= 1/2, so x + (1/2 - 2^-54)
    // rounds to the next integer up exactly when the fraction is >= 1/2, and truncation gives
    // std::round's integer; copysign keeps its -0.  Beyond, and NaN / inf: std::round itself.
    if (!(std::fabs(x) < 4503599627370496.0)) return std::round(x);
    return std::copysign(double(int64_t(x + std::copysign(0.49999999999999994, x))), x);
}

void guard_tuple_store(const GuardTuple &g, uint8_t out[kGuardTupleSize]) {
    store_le<uint16_t>(out, g.hub);
    store_le<uint16_t>(out + 2, g.flags);
    std::memcpy(out + 4, &g.m, 4);
    std::memcpy(out + 8, &g.c_h, 4);
    std::memcpy(out + 12, &g.u, 4);
    std::memcpy(out + 16, &g.v, 4);
    std::memcpy(out + 20, &g.z, 4);
}

GuardTuple guard_tuple_load(const uint8_t in[kGuardTupleSize]) {
    GuardTuple g;
    g.hub = load_le<uint16_t>(in);
    g.flags = load_le<uint16_t>(in + 2);
    std::memcpy(&g.m, in + 4, 4);
    std::memcpy(&g.c_h, in + 8, 4);
    std::memcpy(&g.u, in + 12, 4);
    std::memcpy(&g.v, in + 16, 4);
    std::memcpy(&g.z, in + 20, 4);
    return g;
}

double bridge_p99_abs(const float *x, size_t n, float *scratch) {
    if (n == 0) return 0;
    const size_t r = rank_index(n, 0.99), k = n - r;  // the value is the k-th largest |x|
    if (k <= kP99SmallTop) {
        // A row of the 128 hubs has k = 2: one pass keeping the k largest (the same order
        // statistic nth_element finds, so the same value); a NaN falls through to nth_element.
        float top[kP99SmallTop];
        size_t m = 0;
        bool nan = false;
        for (size_t i = 0; i < n; i++) {
            const float a = std::fabs(x[i]);
            nan |= a != a;
            if (m == k && !(a > top[k - 1])) continue;
            size_t j = m < k ? m++ : k - 1;
            for (; j > 0 && top[j - 1] < a; j--) top[j] = top[j - 1];
            top[j] = a;
        }
        if (!nan) return top[k - 1];
    }
    for (size_t i = 0; i < n; i++) scratch[i] = std::fabs(x[i]);
    std::nth_element(scratch, scratch + r, scratch + n);
    return scratch[r];
}

float bridge_row_scale(const float *x, size_t n, float *scratch) {
    double p = bridge_p99_abs(x, n, scratch);
    if (!(p > 0)) {
        p = 0;
        for (size_t i = 0; i < n; i++) p = std::max(p, double(std::fabs(x[i])));
    }
    if (!(p > 0)) return 1.0f;  // an all-zero row: any scale reproduces it
    return float(kBridgeP99Fraction * 32767.0 / p);
}

uint32_t bridge_quantize_row(const float *x, size_t n, float s, int16_t *q) {
    uint32_t clipped = 0;
    for (size_t i = 0; i < n; i++) {
        const double r = round_half_away(double(x[i]) * double(s));
        if (r > 32767) {
            q[i] = 32767;
            clipped++;
        } else if (r < -32768) {
            q[i] = -32768;
            clipped++;
        } else {
            q[i] = int16_t(r);
        }
    }
    return clipped;
}

void bridge_guard_row(const int16_t *qin, const int16_t *qout, float s_in, float s_out, uint32_t h, uint32_t k, double beta,
                      double *z, uint32_t *order, GuardTuple *out) {
    const double a = 1.0 / double(s_in), b = 1.0 / double(s_out);
    double mi = 0, mo = 0;
    bool nan = false;
    for (uint32_t i = 0; i < h; i++) {
        z[i] = double(qin[i]) * a + double(qout[i]) * b;
        nan |= std::isnan(z[i]);
        mi += double(qin[i]) * a;
        mo += double(qout[i]) * b;
        order[i] = i;
    }
    mi /= h;
    mo /= h;
    double vi = 0, vo = 0;
    for (uint32_t i = 0; i < h; i++) {
        const double di = double(qin[i]) * a - mi, dq = double(qout[i]) * b - mo;
        vi += di * di;
        vo += dq * dq;
    }
    const double sd_in = std::sqrt(vi / h), sd_out = std::sqrt(vo / h);
    const double eps_row = 0.5 * (a + b);
    // order[0..k]: the k + 1 largest z (larger first, ties by the lower hub), sorted.  A strict
    // total order, so inserting each hub into a sorted prefix gives what std::partial_sort does,
    // without its heap (k + 1 is a few of h = 128).  A NaN breaks the order: then partial_sort
    // itself, as before (the 12.6 scale check disables such a bridge anyway).
    const auto before = [&](uint32_t p, uint32_t q) { return z[p] != z[q] ? z[p] > z[q] : p < q; };
    if (nan) {
        std::partial_sort(order, order + k + 1, order + h, before);
    } else {
        uint32_t m = 0;
        for (uint32_t i = 0; i < h; i++) {
            if (m == k + 1 && !before(i, order[k])) continue;
            uint32_t p = m < k + 1 ? m++ : k;
            for (; p > 0 && before(i, order[p - 1]); p--) order[p] = order[p - 1];
            order[p] = i;
        }
    }
    const double competitor = z[order[k]];
    for (uint32_t j = 0; j < k; j++) {
        GuardTuple &g = out[j];
        g.hub = uint16_t(order[j]);
        g.z = float(z[order[j]]);
        g.m = float(z[order[j]] - competitor - 2 * eps_row);
        g.u = float(beta * sd_in);
        g.v = float(beta * sd_out);
        g.c_h = float(beta * sd_in + beta * sd_out);
        // Decided on the stored (f32) values, so the tuple is consistent as read back.
        g.flags = !(g.m > 0) ? kGuardNegativeMargin : (g.c_h < g.m ? kGuardPromoted : 0);
    }
}

BridgeStats bridge_build(const float *x_in, const float *x_out, uint64_t v, uint32_t h, uint32_t k, uint32_t w, uint32_t n_ctx,
                         double beta, const BridgeOut &out, const BridgeScratch &scratch, unsigned workers, ManifestDraft &m) {
    if (h < k + 1 || h != 64 * w || h > 65536 || k > 64 || v == 0 || n_ctx == 0 || (n_ctx & (n_ctx - 1)))
        throw_error(STK_E_INTERNAL, "bridge_build: h %u, k %u, w %u, v %llu, contexts %u", h, k, w, (unsigned long long)v, n_ctx);
    const unsigned n = workers ? workers : 1;
    WorkerPool pool(n);
    BridgeStats st;
    double err2 = 0, err2_abs = 0, x2 = 0;
    std::vector<uint64_t> clipped(n);
    // One leg, kBridgeQuantChunkRows rows at a time: the workers quantize their share of a chunk's
    // rows and leave each entry's squared errors and square in that chunk's half of `terms`;
    // worker 0 first adds the previous chunk's, in the order of the entries (the same doubles as
    // one pass over the rows), while the others quantize.
    const uint64_t half = 3 * kBridgeQuantChunkRows * h;
    auto add_terms = [&](const double *tb, uint64_t rows) {
        const double *te = tb, *ta = te + kBridgeQuantChunkRows * h, *tx = ta + kBridgeQuantChunkRows * h;
        for (uint64_t i = 0; i < rows * h; i++) {
            err2 += te[i];
            err2_abs += ta[i];
            x2 += tx[i];
        }
    };
    auto quantize_leg = [&](const float *x, int16_t *q, float *s) {
        const uint64_t chunks = (v + kBridgeQuantChunkRows - 1) / kBridgeQuantChunkRows;
        for (uint64_t r = 0; r <= chunks; r++) {  // round `chunks` only adds the last chunk's terms
            const uint64_t c0 = r * kBridgeQuantChunkRows, rows = r < chunks ? std::min(kBridgeQuantChunkRows, v - c0) : 0;
            const uint64_t prev_rows = r ? std::min(kBridgeQuantChunkRows, v - (r - 1) * kBridgeQuantChunkRows) : 0;
            double *te = scratch.terms + (r & 1) * half, *ta = te + kBridgeQuantChunkRows * h, *tx = ta + kBridgeQuantChunkRows * h;
            pool.run([&](unsigned wk) {
                if (wk == 0 && prev_rows) add_terms(scratch.terms + ((r + 1) & 1) * half, prev_rows);
                float *sf = scratch.f + uint64_t(wk) * h;
                for (uint64_t t = c0 + rows * wk / n, end = c0 + rows * (wk + 1) / n; t < end; t++) {
                    const float *row = x + t * h;
                    int16_t *qr = q + t * h;
                    s[t] = bridge_row_scale(row, h, sf);
                    clipped[wk] += bridge_quantize_row(row, h, s[t], qr);
                    double amax = 0;
                    for (uint32_t i = 0; i < h; i++) amax = std::max(amax, double(std::fabs(row[i])));
                    const double sa = amax > 0 ? 32767.0 / amax : 1.0;
                    const uint64_t o = (t - c0) * h;
                    for (uint32_t i = 0; i < h; i++) {
                        const double xv = row[i], e = xv - double(qr[i]) / double(s[t]);
                        const double ea = xv - round_half_away(xv * sa) / sa;
                        te[o + i] = e * e;
                        ta[o + i] = ea * ea;
                        tx[o + i] = xv * xv;
                    }
                }
            });
        }
        for (uint64_t &c : clipped) st.clipped += c, c = 0;
        st.entries += v * h;
    };
    quantize_leg(x_in, out.qin, out.s_in);
    if (x_out == x_in) {
        pool.run([&](unsigned wk) {
            const uint64_t t0 = v * wk / n, t1 = v * (wk + 1) / n;
            std::memcpy(out.qout + t0 * h, out.qin + t0 * h, size_t((t1 - t0) * h) * sizeof(int16_t));
            std::memcpy(out.s_out + t0, out.s_in + t0, size_t(t1 - t0) * sizeof(float));
        });
        st.entries *= 2;
        st.clipped *= 2;
        err2 *= 2;
        err2_abs *= 2;
        x2 *= 2;
    } else {
        quantize_leg(x_out, out.qout, out.s_out);
    }
    st.rms_err_p99 = x2 > 0 ? std::sqrt(err2 / x2) : 0;
    st.rms_err_absmax = x2 > 0 ? std::sqrt(err2_abs / x2) : 0;

    // Token rows and guard tuples, each worker its own rows.
    pool.run([&](unsigned wk) {
        double *z = scratch.d + uint64_t(wk) * h;
        uint32_t *order = scratch.u + uint64_t(wk) * h;
        GuardTuple row[64];
        for (uint64_t t = v * wk / n, end = v * (wk + 1) / n; t < end; t++) {
            bridge_token_row(uint32_t(t), w, out.hubs + t * w);
            bridge_guard_row(out.qin + t * h, out.qout + t * h, out.s_in[t], out.s_out[t], h, k, beta, z, order, row);
            for (uint32_t j = 0; j < k; j++) guard_tuple_store(row[j], out.guard + (t * k + j) * kGuardTupleSize);
        }
    });
    for (uint32_t c = 0; c < n_ctx; c++) bridge_context_row(c, w, out.hubs + (v + c) * w);

    if (g_bridge_test_corrupt_guard) {
        // Flag the first tuple as promoted whatever its margin, and give it a margin below its bound.
        GuardTuple g = guard_tuple_load(out.guard);
        g.flags = kGuardPromoted;
        g.m = g.c_h * 0.5f - 1.0f;
        guard_tuple_store(g, out.guard);
    }

    // ---- 12.6 checks -------------------------------------------------------------------------
    // Quant scales sane: finite and > 0.
    double s_min = INFINITY;
    uint64_t bad_scales = 0;
    for (uint64_t t = 0; t < v; t++)
        for (float s : {out.s_in[t], out.s_out[t]}) {
            if (!(std::isfinite(s) && s > 0)) bad_scales++;
            else s_min = std::min(s_min, double(s));
        }
    st.scales_ok = bad_scales == 0;
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, st.scales_ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureBridge,
                     st.scales_ok ? STK_OK : STK_E_NONFINITE, st.scales_ok ? s_min : double(bad_scales), 0,
                     "12.6 quant scales finite and > 0 (value: smallest scale, or the count of bad ones)");

    // hub_and_p99 <= K: the hubs a pair's composed bitset holds (token row | context row), p99
    // over kBridgeHubSamples pairs drawn from a fixed stream; every stored row holds 1 or 2 bits.
    uint64_t bad_rows = 0;
    for (uint64_t r = 0; r < v + n_ctx; r++) {
        uint32_t bits = 0;
        for (uint32_t i = 0; i < w; i++) bits += uint32_t(__builtin_popcountll(out.hubs[r * w + i]));
        bad_rows += bits < 1 || bits > 2;
    }
    uint64_t state = stream_seed(m.master_seed, kStreamBridgeCheck, 0);
    for (uint32_t i = 0; i < kBridgeHubSamples; i++) {
        const uint64_t x = splitmix64_next(&state);
        const uint64_t t = ((x >> 32) * v) >> 32, c = x & (n_ctx - 1);
        uint32_t bits = 0;
        for (uint32_t j = 0; j < w; j++) bits += uint32_t(__builtin_popcountll(out.hubs[t * w + j] | out.hubs[(v + c) * w + j]));
        scratch.u[i] = bits;
    }
    const size_t r99 = rank_index(kBridgeHubSamples, 0.99);
    std::nth_element(scratch.u, scratch.u + r99, scratch.u + kBridgeHubSamples);
    st.hub_p99 = scratch.u[r99];
    st.hubs_ok = bad_rows == 0 && st.hub_p99 <= k;
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, st.hubs_ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureBridge,
                     st.hubs_ok ? STK_OK : STK_E_CORRUPT, st.hub_p99, k,
                     "12.6 hub_and_p99 <= K over %u pairs (hubs of token|context row); %llu rows not 1-2 bits", kBridgeHubSamples,
                     (unsigned long long)bad_rows);

    // Guard tuples consistent: finite, U, V >= 0, hub < H; promoted => m > 0 and C_h < m;
    // m <= 0 => flagged negative, never promoted.
    struct TupleCounts {
        uint64_t bad = 0, pairs = 0, promoted = 0, negative = 0;
    };
    std::vector<TupleCounts> counts(n);  // counts: the same sums in any order
    pool.run([&](unsigned wk) {
        TupleCounts c;
        for (uint64_t i = v * k * wk / n, end = v * k * (wk + 1) / n; i < end; i++) {
            const GuardTuple g = guard_tuple_load(out.guard + i * kGuardTupleSize);
            const bool finite =
                std::isfinite(g.m) && std::isfinite(g.c_h) && std::isfinite(g.u) && std::isfinite(g.v) && std::isfinite(g.z);
            const bool promoted = g.flags & kGuardPromoted, negative = g.flags & kGuardNegativeMargin;
            bool ok = finite && g.u >= 0 && g.v >= 0 && g.hub < h && (g.flags & ~3u) == 0;
            if (promoted && !(g.m > 0 && g.c_h < g.m)) ok = false;
            if (!(g.m > 0) && (promoted || !negative)) ok = false;
            if (g.m > 0 && negative) ok = false;
            c.bad += !ok;
            c.pairs++;
            c.promoted += promoted;
            c.negative += !(g.m > 0);
        }
        counts[wk] = c;
    });
    uint64_t bad_tuples = 0;
    for (const TupleCounts &c : counts) {
        bad_tuples += c.bad;
        st.pairs += c.pairs;
        st.promoted += c.promoted;
        st.negative += c.negative;
    }
    st.guard_ok = bad_tuples == 0;
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, st.guard_ok ? kRecordInvariantPass : kRecordInvariantFail, kFeatureO0Route,
                     st.guard_ok ? STK_OK : STK_E_CORRUPT, double(bad_tuples), 0,
                     "12.6 guard tuples consistent (m > 0 implies C_h < m when promoted); value: bad tuples");

    draft_add_record(m, STK_STAGE_BRIDGE_INIT, kRecordNote, kFeatureBridge, STK_OK,
                     st.entries ? double(st.clipped) / double(st.entries) : 0, 0,
                     "9.3 Q8.8 p99 scaling: clipped share (value) of %llu; rms err p99 %.3g, absmax %.3g",
                     (unsigned long long)st.entries, st.rms_err_p99, st.rms_err_absmax);
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, kRecordNote, kFeatureO0Route, STK_OK, double(st.negative), double(st.pairs),
                     "18.4: %llu of %llu guard pairs have m <= 0: not promoted; the O(1) two-hop path stays",
                     (unsigned long long)st.negative, (unsigned long long)st.pairs);
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, kRecordNote, kFeatureO0Route, STK_OK, double(st.promoted), double(st.pairs),
                     "9.4: %llu of %llu guard pairs promoted (C_h < m) at slack beta %g", (unsigned long long)st.promoted,
                     (unsigned long long)st.pairs, beta);
    if (!st.scales_ok || !st.hubs_ok)
        draft_add_record(m, STK_STAGE_BRIDGE_INIT, kRecordFeatureDisabled, kFeatureBridge, STK_E_CORRUPT, 0, 0,
                         "bridge disabled: a consistency check of its scales or hubs failed; no bridge array written");
    else if (!st.guard_ok)
        draft_add_record(
            m, STK_STAGE_BRIDGE_INIT, kRecordFeatureDisabled, kFeatureO0Route, STK_E_CORRUPT, double(bad_tuples), 0,
            "guard shortcut disabled: the guard tuples failed their consistency check; bridge_guard.bin not written");
    return st;
}

void bridge_leg_scores(const LegRows &rows_of, uint64_t v, uint64_t d, const float *gt, uint64_t h, float *x, unsigned threads,
                       uint64_t row_block, float *bufs) {
    if (row_block == 0 || threads == 0)
        throw_error(STK_E_INTERNAL, "bridge_leg_scores: row_block %llu, threads %u", (unsigned long long)row_block, threads);
    const uint64_t blocks = (v + row_block - 1) / row_block;
    const unsigned n = unsigned(std::min<uint64_t>(threads, blocks ? blocks : 1));  // threads: normalize_params
    run_workers(n, [&](unsigned t) {  // once per leg
        float *buf = bufs ? bufs + uint64_t(t) * row_block * d : nullptr;
        for (uint64_t b = t; b < blocks; b += n) {
            const uint64_t r0 = b * row_block, m = std::min(row_block, v - r0);
            plain_sgemm(m, h, d, rows_of(r0, m, buf), d, gt, h, x + r0 * h, h, 1);
        }
    });
}

void bridge_leg_scores(const float *rows, uint64_t v, uint64_t d, const float *gt, uint64_t h, float *x, unsigned threads,
                       uint64_t row_block) {
    bridge_leg_scores([&](uint64_t r0, uint64_t, float *) { return rows + r0 * d; }, v, d, gt, h, x, threads, row_block, nullptr);
}

unsigned bridge_leg_workers(unsigned threads, uint64_t v, uint64_t row_block) {
    const uint64_t blocks = (v + row_block - 1) / row_block;
    return unsigned(std::max<uint64_t>(1, std::min<uint64_t>(threads, blocks)));  // threads: normalize_params
}

// ---- the stage --------------------------------------------------------------------------------

namespace {

struct BridgeSizes {
    uint64_t v = 0, d = 0, n_ctx = 0, layers = 0, experts = 0, row_floats = 1;
    bool head = false;     // an untied output embedding
    bool streamed = true;  // both embeddings read by row blocks (no [V, d] f32 copy)
    unsigned leg_workers = 1;
    unsigned workers = 1;  // bridge_build's
};

// A tensor whose rows are runs of its stored elements (no transpose, no fused-part gather): the
// legs read it block by block.
bool rows_in_place(const PlanTensor &t) { return !t.transpose && !t.composed && t.layout == QkvLayout::Separate; }

BridgeSizes bridge_sizes(const ModelPlan &plan) {
    BridgeSizes z;
    z.d = plan.config.d_model;
    z.layers = plan.config.n_layers;
    z.row_floats = plan.max_row_floats ? plan.max_row_floats : 1;
    for (uint32_t i = 0; i < plan.n_streamed; i++) {
        const PlanTensor &t = plan.tensors[i];
        if (t.role == Role::EMB && t.rank == 2 && t.layer == kNoLayer) z.v = t.dims[0], z.streamed &= rows_in_place(t);
        if (t.role == Role::LM_HEAD && !t.tied) z.head = true, z.streamed &= rows_in_place(t);
        if (t.role == Role::ROUTER_GATE && t.rank == 2 && t.layer >= 0 && t.expert == kNoExpert)
            z.experts = std::max(z.experts, t.dims[0]);
    }
    z.n_ctx = bridge_context_count(z.v);
    return z;
}
BridgeSizes bridge_sizes(const ModelPlan &plan, unsigned threads) {
    BridgeSizes z = bridge_sizes(plan);
    z.leg_workers = bridge_leg_workers(threads, z.v, kBridgeLegRowBlock);
    z.workers = unsigned(std::max<uint64_t>(1, std::min<uint64_t>(threads, z.v)));  // threads: normalize_params
    return z;
}

// The stage's buffers, declared once: sized in bridge_init_size, allocated in bridge_init_run.
struct BridgeBuffers {
    float *emb, *G, *GT, *x_in, *x_out, *router, *row_scratch;
    int16_t *peer;
    double *norms, *enorm, *scratch_d;
    uint32_t *pooled, *eorder;
    BridgeScratch build;
};
BridgeBuffers bridge_buffers(const BridgeSizes &z, Buffers &b, BridgeOut &out) {
    const uint64_t H = kBridgeHubs, vh = checked_mul(z.v, H, "bridge legs");
    BridgeBuffers o;
    // Streamed: one row block per leg worker; else the whole embedding in f32.
    // The embedding rows, legs and outputs are written whole before they are read (by the leg
    // GEMMs, which do not read C at beta 0, and by bridge_build's workers): left uninitialised.
    o.emb = b.uninit_array<float>(z.streamed ? checked_mul(uint64_t(z.leg_workers) * kBridgeLegRowBlock, z.d, "bridge rows")
                                             : checked_mul(z.v, z.d, "bridge embedding"));
    o.G = b.array<float>(H * z.d);                          // G
    o.GT = b.array<float>(H * z.d);                         // G^T
    o.x_in = b.uninit_array<float>(vh);                     // x_in
    o.x_out = z.head ? b.uninit_array<float>(vh) : o.x_in;  // x_out
    out.qin = b.uninit_array<int16_t>(vh);
    out.qout = b.uninit_array<int16_t>(vh);
    out.s_in = b.uninit_array<float>(z.v);
    out.s_out = b.uninit_array<float>(z.v);
    out.hubs = b.uninit_array<uint64_t>(checked_mul(z.v + z.n_ctx, kBridgeW, "bridge hubs"));
    out.guard = b.uninit_array<uint8_t>(checked_mul(z.v * kBridgeK, kGuardTupleSize, "bridge guard"));
    o.peer = b.array<int16_t>(H);
    o.router = b.array<float>(std::max<uint64_t>(z.experts * z.d, 1));             // one router
    const uint64_t pool = checked_mul(z.layers, z.experts, "bridge router rows");  // every layer, router or not
    o.norms = b.array<double>(std::max<uint64_t>(pool, 1));                        // pooled norms
    o.pooled = b.array<uint32_t>(std::max<uint64_t>(pool, 1));                     // pooled order
    o.enorm = b.array<double>(std::max<uint64_t>(z.experts, 1));
    o.eorder = b.array<uint32_t>(std::max<uint64_t>(z.experts, 1));
    o.row_scratch = b.array<float>(z.row_floats);
    o.scratch_d = b.array<double>(std::max<uint64_t>(H, z.d));
    const uint64_t wh = uint64_t(z.workers) * H;  // bridge_build's scratch (bridge_init.h)
    o.build.f = b.array<float>(wh);
    o.build.d = b.array<double>(wh);
    o.build.u = b.array<uint32_t>(std::max<uint64_t>(wh, kBridgeHubSamples));
    o.build.terms = b.uninit_array<double>(2 * 3 * kBridgeQuantChunkRows * H);
    return o;
}

// The arrays the stage publishes, in write order (the writer and the planner use these dims).
struct BridgeArrays {
    ArraySpec hubs, qin, s_in, qout, s_out, guard, peer;
};
BridgeArrays bridge_arrays(const BridgeSizes &z) {
    const uint64_t v = z.v, H = kBridgeHubs;
    return {{"bridge_hubs.bin", DType::U8, {v + z.n_ctx, kBridgeW, 8}},
            {"bridge_qDin.bin", DType::I16, {v, H}},
            {"bridge_qDin_scale.bin", DType::F32, {v}},
            {"bridge_qDout.bin", DType::I16, {v, H}},
            {"bridge_qDout_scale.bin", DType::F32, {v}},
            {"bridge_guard.bin", DType::U8, {v, kBridgeK, kGuardTupleSize}},
            {"peer_scores.bin", DType::Q8_8, {H}}};
}

// The stage writes nothing for a model without a token embedding.
bool bridge_unsupported(const BridgeSizes &z) { return z.v == 0 || z.d == 0; }

void disable(Job &job, stk_status status, const char *why) {
    static const char kDisabled[] = "stk.bridge_init.disabled";
    StageDigest digest;
    digest.add(kDisabled, sizeof kDisabled);
    draft_add_record(job.manifest, STK_STAGE_BRIDGE_INIT, kRecordFeatureDisabled, kFeatureBridge, status, 0, 0,
                     "bridge disabled: %s", why);
    digest.finish(job.stages[STK_STAGE_BRIDGE_INIT]);
}

}  // namespace

void bridge_init_size(const JobInputs &in, ArenaSizer &s) {
    if (!in.model) return;
    Buffers b(s);
    BridgeOut unused;
    bridge_buffers(bridge_sizes(in.model->plan, in.params.threads), b, unused);
}

void bridge_init_plan(const JobInputs &in, ArrayPlan &plan) {
    const BridgeSizes z = bridge_sizes(in.model->plan);
    const BridgeArrays a = bridge_arrays(z);
    for (const ArraySpec *x : {&a.hubs, &a.qin, &a.s_in, &a.qout, &a.s_out}) plan.add(STK_STAGE_BRIDGE_INIT, *x);
    plan.add(STK_STAGE_BRIDGE_INIT, a.guard).presence = PlanPresence::Optional;
    plan.arrays.back().reason =
        "written only if every guard tuple passes its consistency check (else the guard shortcut is disabled)";
    plan.add(STK_STAGE_BRIDGE_INIT, a.peer);
    if (bridge_unsupported(z))
        plan.disable_stage(STK_STAGE_BRIDGE_INIT, "bridge disabled: the model has no token embedding [vocab, d_model]");
}

void bridge_init_run(Job &job) {
    if (!job.model) throw_error(STK_E_STAGE_ORDER, "bridge_init needs parse_tensors' plan");
    const ModelPlan &plan = *job.model;
    const BridgeSizes z = bridge_sizes(plan, job.params.threads);
    const uint64_t H = kBridgeHubs, d = z.d, v = z.v;
    const unsigned threads = job.params.threads;
    if (bridge_unsupported(z)) return disable(job, STK_E_UNSUPPORTED, "the model has no token embedding [vocab, d_model]");
    if (v > 0xFFFFFFFFull)
        throw_error(STK_E_UNSUPPORTED, "bridge_init: vocabulary of %llu ids; token ids are u32", (unsigned long long)v);

    Arena &arena = job.arena;
    const size_t mark = arena.mark();
    Buffers alloc(arena);
    BridgeOut out;
    const BridgeBuffers bb = bridge_buffers(z, alloc, out);
    float *emb = bb.emb, *G = bb.G, *GT = bb.GT, *x_in = bb.x_in, *x_out = bb.x_out, *router = bb.router;
    float *row_scratch = bb.row_scratch;
    int16_t *peer = bb.peer;
    double *norms = bb.norms, *enorm = bb.enorm, *scratch_d = bb.scratch_d;
    uint32_t *pooled = bb.pooled, *eorder = bb.eorder;

    WeightReader reader(*job.source->checkpoint, plan);
    ManifestDraft &m = job.manifest;

    // ---- 9.1 hubs: pooled router rows by norm, then pseudo-experts ----------------------------
    const uint32_t E = uint32_t(z.experts), L = plan.config.n_layers;
    uint64_t n_rows = 0;                                           // pooled (layer, expert) rows: index = layer * E + expert
    std::vector<const PlanTensor *> routers_by_layer(L, nullptr);  // L pointers, before the stage's loops
    for (uint32_t i = 0; i < plan.n_streamed; i++) {
        const PlanTensor &t = plan.tensors[i];
        if (t.role != Role::ROUTER_GATE || t.rank != 2 || t.layer < 0 || t.expert != kNoExpert) continue;
        if (uint32_t(t.layer) >= L || t.dims[0] != E || t.dims[1] != d)
            throw_error(STK_E_PARAM_COUNT, "bridge_init: router '%s' (layer %d) has shape [%llu, %llu]; expected [%u, %llu]",
                        t.name, t.layer, (unsigned long long)t.dims[0], (unsigned long long)t.dims[1], E, (unsigned long long)d);
        routers_by_layer[t.layer] = &t;
    }
    for (uint32_t l = 0; l < L && E; l++) {
        const PlanTensor *t = routers_by_layer[l];
        for (uint32_t e = 0; e < E; e++) norms[uint64_t(l) * E + e] = -1;  // a layer without a router offers no rows
        if (!t) continue;
        reader.read(*t, router, row_scratch);
        order_experts_by_router_norm(router, E, d, enorm, eorder);
        for (uint32_t e = 0; e < E; e++) norms[uint64_t(l) * E + e] = std::isfinite(enorm[e]) ? enorm[e] : -1;
    }
    const uint64_t pool = uint64_t(L) * E;
    for (uint64_t i = 0; i < pool; i++) pooled[i] = uint32_t(i);
    std::sort(pooled, pooled + pool, [&](uint32_t a, uint32_t b) { return norms[a] != norms[b] ? norms[a] > norms[b] : a < b; });
    double norm_sum = 0;
    for (uint64_t i = 0; i < pool && n_rows < H && norms[pooled[i]] >= 0; i++) n_rows++;
    for (uint64_t i = 0; i < n_rows; i++) norm_sum += norms[pooled[i]];
    // Copy the chosen rows, one layer's router at a time (hub order = rank order).
    for (uint32_t l = 0; l < L && n_rows; l++) {
        bool wanted = false;
        for (uint64_t i = 0; i < n_rows; i++) wanted |= pooled[i] / E == l;
        if (!wanted) continue;
        reader.read(*routers_by_layer[l], router, row_scratch);
        for (uint64_t i = 0; i < n_rows; i++)
            if (pooled[i] / E == l) std::memcpy(G + i * d, router + uint64_t(pooled[i] % E) * d, size_t(d) * 4);
    }
    // Pseudo-experts: Gaussian directions, scaled to the mean router norm (1 for a dense model).
    const double pseudo_norm = n_rows ? norm_sum / double(n_rows) : 1.0;
    for (uint64_t hub = n_rows; hub < H; hub++) {
        kernels::gaussians(stream_seed(m.master_seed, kStreamBridgeHub, uint32_t(hub)), 0, size_t(d), scratch_d);
        const double sc = pseudo_norm / std::sqrt(double(d));
        for (uint64_t j = 0; j < d; j++) G[hub * d + j] = float(scratch_d[j] * sc);
    }
    for (uint64_t hub = 0; hub < H; hub++)
        for (uint64_t j = 0; j < d; j++) GT[j * H + hub] = G[hub * d + j];

    // ---- legs: x_in = E G^T, x_out = U G^T ----------------------------------------------------
    const PlanTensor *emb_t = reader.find(Role::EMB, kNoLayer);
    if (!emb_t || emb_t->rank != 2 || emb_t->dims[1] != d)
        throw_error(STK_E_PARAM_COUNT, "bridge_init: the token embedding is missing or not [vocab, %llu]", (unsigned long long)d);
    // One leg: the tensor's rows block by block from its stored bytes (each worker converts its
    // own block), or, for a tensor stored transposed or fused, the whole of it in f32 first.
    auto leg = [&](const PlanTensor &t, float *x) {
        if (!z.streamed) {
            reader.read(t, emb, row_scratch);
            return bridge_leg_scores(emb, v, d, GT, H, x, threads, kBridgeLegRowBlock);
        }
        const uint8_t *bytes = reader.stored_bytes(t);
        const TensorRef &src = job.source->checkpoint->tensors()[t.source];
        bridge_leg_scores(
            [&](uint64_t r0, uint64_t rows, float *buf) {
                convert_to_f32(src, bytes, r0 * d, rows * d, buf);
                return static_cast<const float *>(buf);
            },
            v, d, GT, H, x, z.leg_workers, kBridgeLegRowBlock, emb);
        reader.release(t);
    };
    leg(*emb_t, x_in);
    if (z.head) {
        const PlanTensor *head = reader.find(Role::LM_HEAD, kNoLayer);
        if (!head || head->rank != 2 || head->dims[0] != v || head->dims[1] != d)
            throw_error(STK_E_PARAM_COUNT, "bridge_init: the output embedding is missing or not [%llu, %llu]",
                        (unsigned long long)v, (unsigned long long)d);
        leg(*head, x_out);
    }
    std::vector<uint8_t> nonfinite(z.workers, 0);  // each worker its share of both legs
    run_workers(z.workers, [&](unsigned wk) {
        const uint64_t a = v * H * wk / z.workers, e = v * H * (wk + 1) / z.workers;
        for (const float *x : {x_in, x_out}) nonfinite[wk] |= kernels::first_nonfinite_f32(x + a, size_t(e - a)) < e - a;
    });
    if (std::find(nonfinite.begin(), nonfinite.end(), 1) != nonfinite.end()) {
        arena.reset(mark);
        return disable(job, STK_E_NONFINITE, "a leg score is not finite (NaN/Inf in the embedding or router)");
    }
    draft_add_record(m, STK_STAGE_BRIDGE_INIT, kRecordNote, kFeatureBridge, STK_OK, double(n_rows), double(H),
                     "9.1 hubs: %llu router rows of %u layers x %u experts (value), %llu pseudo-experts; out leg %s",
                     (unsigned long long)n_rows, E ? L : 0, E, (unsigned long long)(H - n_rows), z.head ? "lm_head" : "tied");

    const BridgeStats st = bridge_build(x_in, x_out, v, uint32_t(H), kBridgeK, kBridgeW, uint32_t(z.n_ctx), kBridgeGuardSlack,
                                        out, bb.build, z.workers, m);
    if (!st.scales_ok || !st.hubs_ok) {
        arena.reset(mark);
        static const char kDisabled[] = "stk.bridge_init.disabled";
        StageDigest digest;
        digest.add(kDisabled, sizeof kDisabled);
        digest.finish(job.stages[STK_STAGE_BRIDGE_INIT]);
        return;
    }

    // ---- 9.5 peer scores: Q8.8 0.5 (128) with jitter in [-2, 2] -------------------------------
    uint64_t ps = stream_seed(m.master_seed, kStreamBridgePeer, 0);
    int16_t pmin = 32767, pmax = -32768;
    for (uint64_t i = 0; i < H; i++) {
        peer[i] = int16_t(128 + int(splitmix64_next(&ps) % 5) - 2);
        pmin = std::min(pmin, peer[i]);
        pmax = std::max(pmax, peer[i]);
    }

    StageDigest digest;
    const BridgeArrays arr = bridge_arrays(z);
    auto write = [&](const ArraySpec &a, const void *payload) {
        job_write_array(job, STK_STAGE_BRIDGE_INIT, digest, a, payload);
    };
    write(arr.hubs, out.hubs);
    write(arr.qin, out.qin);
    write(arr.s_in, out.s_in);
    write(arr.qout, out.qout);
    write(arr.s_out, out.s_out);
    if (st.guard_ok) write(arr.guard, out.guard);
    write(arr.peer, peer);
    digest.finish(job.stages[STK_STAGE_BRIDGE_INIT]);

    ManifestFields &f = m.fields;
    f.bridge.k = kBridgeK;
    f.bridge.w = kBridgeW;
    f.bridge.proj_rows = uint32_t(H);
    f.bridge.proj_cols = uint32_t(d);
    Sha256 sha;
    sha.update(G, size_t(H * d) * 4);  // f32 little-endian, row-major [H, d_model]
    Sha256Digest pd = sha.finish();
    std::memcpy(f.bridge.proj_digest, pd.bytes, 32);
    f.bridge.beta_min = double(pmin) / 256.0;
    f.bridge.beta_max = double(pmax) / 256.0;
    f.bridge.guard_margin_policy = 1;   // m = z_k - z_{K+1} - 2 eps_row; promoted iff m > 0 and C_h < m
    f.bridge.guard_eps_row_policy = 1;  // eps_row = 0.5 (1/s_in + 1/s_out) per token row
    f.bridge.store_load_max = st.pairs ? double(st.promoted) / double(st.pairs) : 0;
    f.bridge.store_stash_max = 0;  // the guard table is dense and direct-indexed: no stash,
    f.bridge.store_kick_max = 0;   // no kicks
    f.capacity.slack = kBridgeGuardSlack;
    arena.reset(mark);
}

}  // namespace stk

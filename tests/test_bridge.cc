// bridge_init (seed 9, 12.6, 18.4) and STK_LOOKUP_HUB: the bitset bits against the hash written
// out plainly, Q8.8 values of a crafted row, the guard tuples of crafted rows (18.4 included), the
// stage on the tiny models (legs against a plain double product of the embedding and the router,
// guard tuples recomputed plainly from the stored legs, manifest fields), HUB lookups through
// stk_lookup, the 12.6 failure path (test hook), attach_bridge on hostile payloads, and the
// stage digest at threads 1 and 2.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "acceptance/runner.h"
#include "core/bytes.h"
#include "core/mapped_file.h"
#include "core/prng.h"
#include "format/array.h"
#include "format/manifest.h"
#include "ingest/model.h"
#include "linear_job.h"
#include "runtime/generation.h"
#include "stages/attn_common.h"
#include "stages/bridge_init.h"

using namespace stk;
using namespace stk::test;

namespace {

uint32_t plain_bit(uint64_t id, uint64_t salt, uint32_t w) {
    uint64_t hi = mix64(id, salt) >> 32;
    return uint32_t((hi * (64 * w)) >> 32);
}

const ManifestRecord *find_record(const std::vector<ManifestRecord> &rs, const char *prefix) {
    for (const ManifestRecord &r : rs)
        if (r.stage == STK_STAGE_BRIDGE_INIT && std::strncmp(r.text, prefix, std::strlen(prefix)) == 0) return &r;
    return nullptr;
}

const ManifestRecord *find_draft_record(const ManifestDraft &d, const char *prefix) {
    std::vector<ManifestRecord> rs(d.records, d.records + d.n_records);
    static ManifestRecord keep;
    const ManifestRecord *r = find_record(rs, prefix);
    if (!r) return nullptr;
    keep = *r;
    return &keep;
}

std::vector<uint8_t> payload(const std::string &out, const char *name) {
    ArrayReader r(out + "/arrays/" + name);
    return std::vector<uint8_t>(r.payload(), r.payload() + r.payload_size());
}

}  // namespace

// 9.2: each row holds the bits of its two salted hashes, nothing else; contexts are buckets.
static void bitset_bits_for_given_ids(void **) {
    for (uint32_t w : {2u, 3u})
        for (uint32_t id : {0u, 1u, 7u, 50256u, 0xFFFFFFFEu}) {
            uint64_t row[3], ref[3] = {0, 0, 0};
            bridge_token_row(id, w, row);
            for (uint64_t salt : {kSaltTokA, kSaltTokB}) {
                uint32_t b = plain_bit(id, salt, w);
                assert_true(b < 64 * w);
                ref[b / 64] |= uint64_t(1) << (b % 64);
            }
            for (uint32_t i = 0; i < w; i++) assert_true(row[i] == ref[i]);
            bridge_context_row(id, w, row);
            uint64_t cref[3] = {0, 0, 0};
            for (uint64_t salt : {kSaltCtxA, kSaltCtxB}) {
                uint32_t b = plain_bit(id, salt, w);
                cref[b / 64] |= uint64_t(1) << (b % 64);
            }
            for (uint32_t i = 0; i < w; i++) assert_true(row[i] == cref[i]);
        }
    // Token 0's row at W = 2, pinned (a change of salt or mixer changes every generation).
    uint64_t row[2];
    bridge_token_row(0, 2, row);
    assert_true(row[0] == 0 && row[1] == 0x0000000102000000ull);
    // Contexts: a power of two in [64, 65536]; the id is mix64 of (prev1 << 32 | prev2) masked.
    assert_int_equal(bridge_context_count(1), 64);
    assert_int_equal(bridge_context_count(64), 64);
    assert_int_equal(bridge_context_count(65), 128);
    assert_int_equal(bridge_context_count(50257), 65536);
    assert_int_equal(bridge_context_count(32000), 32768);
    assert_int_equal(bridge_context_count(128256), 65536);
    assert_int_equal(bridge_context_id(5, 9, 1024), uint32_t(mix64((uint64_t(5) << 32) | 9, kSaltCtxId) & 1023));
    assert_int_equal(bridge_context_id(kBridgeNoToken, kBridgeNoToken, 64), uint32_t(mix64(~uint64_t(0), kSaltCtxId) & 63));
}

// 9.3 with spec-notes 16: s = 0.8 * 32767 / p99(|x|), nearest rank; one outlier clipped.
static void q88_crafted_row(void **) {
    float x[128], scratch[128];
    for (int i = 0; i < 127; i++) x[i] = float(i + 1) * (i % 2 ? -1.0f : 1.0f);
    x[127] = 1000.0f;
    // sorted |x| = 1..127, 1000: the ceil(0.99 * 128) = 127th smallest is 127.
    assert_true(bridge_p99_abs(x, 128, scratch) == 127.0);
    const float s = bridge_row_scale(x, 128, scratch);
    assert_true(s == float(0.8 * 32767.0 / 127.0));
    int16_t q[128];
    assert_int_equal(bridge_quantize_row(x, 128, s, q), 1);  // only the outlier
    assert_int_equal(q[127], 32767);
    for (int i = 0; i < 127; i++) {
        double ref = std::round(double(x[i]) * double(s));
        assert_int_equal(q[i], int(ref));
        // eps of one entry: half a step
        assert_true(std::fabs(double(q[i]) / s - x[i]) <= 0.5 / s + 1e-12);
    }
    assert_int_equal(q[0], 206);      // round(1 * 206.4) (s = 206.4063)
    assert_int_equal(q[126], 26214);  // the p99 lands at 0.8 * 32767 = 26213.6
    assert_int_equal(q[1], -413);     // round(-2 * 206.4063) = -412.81 -> -413
    // Half away from zero, and the clip at both ends.
    float h[3] = {0.5f, -0.5f, -1e9f};
    int16_t qh[3];
    assert_int_equal(bridge_quantize_row(h, 3, 1.0f, qh), 1);
    assert_int_equal(qh[0], 1);
    assert_int_equal(qh[1], -1);
    assert_int_equal(qh[2], -32768);
    // p99 = 0 (one nonzero of 128): absmax; all zero: 1.
    float z[128] = {};
    assert_true(bridge_row_scale(z, 128, scratch) == 1.0f);
    z[5] = 2.0f;
    assert_true(bridge_row_scale(z, 128, scratch) == float(0.8 * 32767.0 / 2.0));
}

// The p99 of 9.3 against its definition (the ceil(0.99 n)-th smallest |x|, from a full sort) on
// rows of every length up to 300 (the single-pass top-k path where ceil(0.99 n) is within 8 of n,
// nth_element beyond), with ties, signed zeros and repeated maxima.
// round_half_away is std::round bit for bit: halfway cases, the neighbours of 1/2 and of the
// halfway points, signed zeros, the 2^52 boundary, inf and NaN, and random doubles of every scale.
static void round_matches_std_round(void **) {
    std::vector<double> xs = {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                              std::nextafter(0.5, 1.0), std::nextafter(1.5, 1.0), 4503599627370495.5, -4503599627370495.5,
                              4503599627370496.0, 4503599627370497.0, 9007199254740993.0, 1e300, -1e300, 5e-324,
                              INFINITY, -INFINITY, 32766.5, -32768.5, 32767.49999999999};
    uint64_t st = 5;
    for (int i = 0; i < 200000; i++) {
        const uint64_t r = splitmix64_next(&st);
        double x = double(int64_t(r >> 11) - (int64_t(1) << 52)) / double(uint64_t(1) << (r & 63));
        xs.push_back(x);
        xs.push_back(std::floor(x) + 0.5);
        xs.push_back(std::nextafter(std::floor(x) + 0.5, 0.0));
    }
    for (double x : xs) {
        const double a = round_half_away(x), b = std::round(x);
        assert_memory_equal(&a, &b, sizeof a);
    }
    assert_true(std::isnan(round_half_away(NAN)));
}

static void p99_matches_nearest_rank(void **) {
    std::vector<float> x(300), scratch(300), sorted(300);
    uint64_t st = 7;
    for (size_t n = 1; n <= 300; n++)
        for (int rep = 0; rep < 4; rep++) {
            for (size_t i = 0; i < n; i++) {
                st = mix64(st + 1);
                const int v = int(st % 9) - 4;  // few distinct values: ties everywhere
                x[i] = rep == 0 ? float(v) : rep == 1 ? float(v) * 0.25f + float(st >> 40) * 1e-9f : rep == 2 ? -0.0f : 3.0f;
            }
            if (rep == 2 && n > 2) x[n / 2] = -7.5f;  // one nonzero among negative zeros
            for (size_t i = 0; i < n; i++) sorted[i] = std::fabs(x[i]);
            std::sort(sorted.begin(), sorted.begin() + ptrdiff_t(n));
            const size_t r = size_t(std::ceil(0.99 * double(n)));
            assert_true(bridge_p99_abs(x.data(), n, scratch.data()) == double(sorted[r - 1]));
        }
}

// 9.4 / 18.4 on a crafted row: z = {10, 7, 3, 2, 0, ...} with s = 1 (eps_row = 1).
static void guard_row_crafted(void **) {
    const uint32_t h = 8, k = 2;
    int16_t qin[h] = {10, 7, 3, 2, 0, 0, 0, 0}, qout[h] = {};
    double z[h];
    uint32_t order[h];
    GuardTuple g[2];
    bridge_guard_row(qin, qout, 1.0f, 1.0f, h, k, 1.0, z, order, g);
    double mean = 22.0 / 8, var = 0;
    for (int16_t v : qin) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / 8);  // 3.6314...
    assert_int_equal(g[0].hub, 0);
    assert_int_equal(g[1].hub, 1);
    assert_true(g[0].z == 10.0f && g[1].z == 7.0f);
    assert_true(g[0].m == 5.0f);  // 10 - 3 (competitor) - 2 eps_row
    assert_true(g[1].m == 2.0f);
    assert_true(g[0].u == float(sd) && g[0].v == 0.0f && g[0].c_h == float(sd));
    assert_int_equal(g[0].flags, kGuardPromoted);  // 3.63 < 5
    assert_int_equal(g[1].flags, 0);               // 3.63 >= 2: guarded, not promoted
    // 18.4: the second pair's gap (4 - 3) is inside the quantization error: m = -1.
    int16_t qneg[h] = {10, 4, 3, 2, 0, 0, 0, 0};
    bridge_guard_row(qneg, qout, 1.0f, 1.0f, h, k, 0.0, z, order, g);
    assert_true(g[1].m == -1.0f);
    assert_int_equal(g[1].flags, kGuardNegativeMargin);
    assert_int_equal(g[0].flags, kGuardPromoted);  // beta 0: C_h = 0 < m = 5
    // Ties: the smaller hub first.
    int16_t qtie[h] = {0, 5, 0, 5, 0, 0, 0, 0};
    bridge_guard_row(qtie, qout, 1.0f, 1.0f, h, k, 0.0, z, order, g);
    assert_int_equal(g[0].hub, 1);
    assert_int_equal(g[1].hub, 3);
    assert_true(g[1].m == 3.0f);  // 5 - 0 - 2
    // The tuple's bytes.
    uint8_t b[kGuardTupleSize];
    guard_tuple_store(g[1], b);
    assert_int_equal(load_le<uint16_t>(b), 3);
    assert_int_equal(load_le<uint16_t>(b + 2), kGuardPromoted);
    float m;
    std::memcpy(&m, b + 4, 4);
    assert_true(m == 3.0f);
    GuardTuple back = guard_tuple_load(b);
    assert_true(back.hub == g[1].hub && back.flags == g[1].flags && back.m == g[1].m && back.z == g[1].z);
}

// The hubs a guard row picks against a full sort by the definition (z descending, ties by the
// lower hub): rows of 128 with many ties (legs of a few distinct values), k from 0 to 64.
static void guard_row_top_matches_sort(void **) {
    const uint32_t h = 128;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&] { return x = x * 6364136223846793005ull + 1442695040888963407ull, uint32_t(x >> 33); };
    std::vector<double> z(h), zz(h);
    std::vector<uint32_t> order(h), sorted(h);
    std::vector<GuardTuple> g(65);
    size_t rows = 0;
    for (uint32_t k : {0u, 1u, 2u, 3u, 8u, 31u, 64u})
        for (uint32_t distinct : {2u, 5u, 300u, 65536u})
            for (int rep = 0; rep < 20; rep++, rows++) {
                int16_t qin[h], qout[h];
                for (uint32_t i = 0; i < h; i++) {
                    qin[i] = int16_t(int32_t(next() % distinct) - int32_t(distinct / 2));
                    qout[i] = int16_t(int32_t(next() % distinct) - int32_t(distinct / 2));
                }
                const float s_in = 1.0f + float(next() % 7), s_out = 0.5f + float(next() % 5);
                bridge_guard_row(qin, qout, s_in, s_out, h, k, 0.5, z.data(), order.data(), g.data());
                for (uint32_t i = 0; i < h; i++) {
                    zz[i] = double(qin[i]) * (1.0 / double(s_in)) + double(qout[i]) * (1.0 / double(s_out));
                    sorted[i] = i;
                }
                std::sort(sorted.begin(), sorted.end(),
                          [&](uint32_t p, uint32_t q) { return zz[p] != zz[q] ? zz[p] > zz[q] : p < q; });
                for (uint32_t j = 0; j < k; j++) {
                    assert_int_equal(g[j].hub, sorted[j]);
                    assert_true(g[j].z == float(zz[sorted[j]]));
                }
                if (k > 0)  // the competitor is the (k+1)-th
                    assert_true(g[0].m == float(zz[sorted[0]] - zz[sorted[k]] - 2 * (0.5 * (1.0 / double(s_in) + 1.0 / double(s_out)))));
            }
    assert_int_equal(rows, 7 * 4 * 20);
}

// The leg product: the same bytes at 1, 2 and 3 threads over a grid of 16-row blocks, and the
// plain double product within f32 rounding.
static void leg_scores_threads(void **) {
    const uint64_t v = 100, d = 48, h = 128;
    std::vector<float> rows(v * d), gt(d * h), x1(v * h), x2(v * h), x3(v * h);
    uint64_t st = 7;
    for (float &f : rows) f = float(int64_t(splitmix64_next(&st) % 2001) - 1000) / 1000.0f;
    for (float &f : gt) f = float(int64_t(splitmix64_next(&st) % 2001) - 1000) / 1000.0f;
    bridge_leg_scores(rows.data(), v, d, gt.data(), h, x1.data(), 1, 16);
    bridge_leg_scores(rows.data(), v, d, gt.data(), h, x2.data(), 2, 16);
    bridge_leg_scores(rows.data(), v, d, gt.data(), h, x3.data(), 3, 16);
    assert_memory_equal(x1.data(), x2.data(), x1.size() * 4);
    assert_memory_equal(x1.data(), x3.data(), x1.size() * 4);
    for (uint64_t t = 0; t < v; t++)
        for (uint64_t j = 0; j < h; j++) {
            double ref = 0, mag = 0;
            for (uint64_t k = 0; k < d; k++) {
                ref += double(rows[t * d + k]) * gt[k * h + j];
                mag += std::fabs(double(rows[t * d + k]) * gt[k * h + j]);
            }
            assert_true(std::fabs(x1[t * h + j] - ref) <= 1e-6 * mag + 1e-7);
        }
}

// bridge_build's scratch for `workers` workers (bridge_init.h).
struct BuildScratch {
    std::vector<float> f;
    std::vector<double> d, terms;
    std::vector<uint32_t> u;
    BuildScratch(uint32_t h, unsigned workers)
        : f(size_t(workers) * h), d(size_t(workers) * h), terms(2 * 3 * kBridgeQuantChunkRows * h),
          u(std::max<size_t>(size_t(workers) * h, kBridgeHubSamples)) {}
    BridgeScratch view() { return BridgeScratch{f.data(), d.data(), terms.data(), u.data()}; }
};

// bridge_build on crafted legs: row 1 has a five-way tie and row 2 is all zeros, so 8 of the 12
// pairs have m <= 0: never promoted, said in the 18.4 record; the checks pass.
static void build_records_negative_margins(void **) {
    const uint64_t v = 3;
    const uint32_t h = 128, k = 4, w = 2, nctx = 64;
    std::vector<float> x(v * h, 0.0f);
    for (uint32_t i = 0; i < h; i++) x[i] = float(i);    // distinct, gaps of 1
    for (uint32_t i = 0; i < 5; i++) x[h + i] = 100.0f;  // tie
    std::vector<int16_t> qin(v * h), qout(v * h);
    std::vector<float> sin(v), sout(v);
    std::vector<uint64_t> hubs((v + nctx) * w);
    std::vector<uint8_t> guard(v * k * kGuardTupleSize);
    BridgeOut out{qin.data(), qout.data(), sin.data(), sout.data(), hubs.data(), guard.data()};
    BuildScratch sc(h, 1);
    auto draft = std::make_unique<ManifestDraft>();
    BridgeStats st = bridge_build(x.data(), x.data(), v, h, k, w, nctx, 0.01, out, sc.view(), 1, *draft);
    assert_true(st.scales_ok && st.hubs_ok && st.guard_ok);
    assert_int_equal(st.pairs, 12);
    assert_int_equal(st.negative, 8);
    assert_true(qin == qout && sin == sout);  // tied legs
    for (uint64_t i = 4; i < 12; i++) {
        GuardTuple g = guard_tuple_load(guard.data() + i * kGuardTupleSize);
        assert_true(g.m <= 0);
        assert_int_equal(g.flags, kGuardNegativeMargin);
    }
    const ManifestRecord *r = find_draft_record(*draft, "18.4:");
    assert_non_null(r);
    assert_true(r->value == 8 && r->bound == 12);
    assert_int_equal(r->kind, kRecordNote);
    assert_int_equal(r->feature, kFeatureO0Route);
    r = find_draft_record(*draft, "12.6 guard tuples consistent");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordInvariantPass);
    r = find_draft_record(*draft, "12.6 hub_and_p99");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordInvariantPass);
    assert_true(r->value <= 4 && r->bound == 4);
    // Row 0: s = 0.8 * 32767 / 126 (the 127th smallest |x| of 0..127), pairs 127, 126, 125, 124.
    assert_true(sin[0] == float(0.8 * 32767.0 / 126.0));
    for (uint32_t j = 0; j < 4; j++) assert_int_equal(guard_tuple_load(guard.data() + j * kGuardTupleSize).hub, 127 - j);
    // Token rows and context rows are the functions' rows.
    uint64_t row[2];
    bridge_token_row(2, w, row);
    assert_true(hubs[2 * w] == row[0] && hubs[2 * w + 1] == row[1]);
    bridge_context_row(63, w, row);
    assert_true(hubs[(v + 63) * w] == row[0] && hubs[(v + 63) * w + 1] == row[1]);
    // A scale that is not finite fails its check and disables the bridge.
    x[2 * h + 7] = 1e-42f;  // p99 0, absmax subnormal: s overflows to +inf
    auto d2 = std::make_unique<ManifestDraft>();
    st = bridge_build(x.data(), x.data(), v, h, k, w, nctx, 0.01, out, sc.view(), 1, *d2);
    assert_false(st.scales_ok);
    r = find_draft_record(*d2, "12.6 quant scales");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordInvariantFail);
    r = find_draft_record(*d2, "bridge disabled");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordFeatureDisabled);
}

// The stage on the tiny Mixtral: legs against E R^T in double, guard tuples recomputed plainly
// from the stored legs, manifest fields, HUB lookups, threads 1 vs 2.
// bridge_build over 1, 2, 3 and 8 workers: the same bytes and the same statistics, on untied legs
// of 2,500 rows (three quantization chunks, the last one partial).  The RMS errors are the 9.3
// definition, sqrt(sum e^2 / sum x^2) over both legs' entries in order, written out here.
static void build_same_at_any_workers(void **) {
    const uint64_t v = 2 * kBridgeQuantChunkRows + 452;
    const uint32_t h = 128, k = 4, w = 2, nctx = 64;
    std::vector<float> xin(v * h), xout(v * h);
    uint64_t seed = 11;
    for (float &f : xin) f = float(int64_t(splitmix64_next(&seed) % 20001) - 10000) / 997.0f;
    for (float &f : xout) f = float(int64_t(splitmix64_next(&seed) % 20001) - 10000) / 31.0f;
    struct Run {
        std::vector<int16_t> qin, qout;
        std::vector<float> sin, sout;
        std::vector<uint64_t> hubs;
        std::vector<uint8_t> guard;
        BridgeStats st;
    };
    auto run = [&](unsigned workers) {
        Run r{std::vector<int16_t>(v * h), std::vector<int16_t>(v * h), std::vector<float>(v), std::vector<float>(v),
              std::vector<uint64_t>((v + nctx) * w), std::vector<uint8_t>(v * k * kGuardTupleSize), {}};
        BridgeOut out{r.qin.data(), r.qout.data(), r.sin.data(), r.sout.data(), r.hubs.data(), r.guard.data()};
        BuildScratch sc(h, workers);
        auto draft = std::make_unique<ManifestDraft>();
        r.st = bridge_build(xin.data(), xout.data(), v, h, k, w, nctx, 0.01, out, sc.view(), workers, *draft);
        return r;
    };
    const Run one = run(1);
    assert_true(one.st.scales_ok && one.st.hubs_ok && one.st.guard_ok);
    double err2 = 0, x2 = 0;
    for (const auto &[x, q, s] : {std::tuple{&xin, &one.qin, &one.sin}, std::tuple{&xout, &one.qout, &one.sout}})
        for (uint64_t i = 0; i < v * h; i++) {
            const double xv = (*x)[i], e = xv - double((*q)[i]) / double((*s)[i / h]);
            err2 += e * e;
            x2 += xv * xv;
        }
    assert_true(one.st.rms_err_p99 == std::sqrt(err2 / x2));
    assert_int_equal(one.st.entries, 2 * v * h);
    for (unsigned workers : {2u, 3u, 8u}) {
        const Run r = run(workers);
        assert_true(r.qin == one.qin && r.qout == one.qout && r.sin == one.sin && r.sout == one.sout);
        assert_true(r.hubs == one.hubs && r.guard == one.guard);
        assert_true(r.st.rms_err_p99 == one.st.rms_err_p99 && r.st.rms_err_absmax == one.st.rms_err_absmax);
        assert_true(r.st.clipped == one.st.clipped && r.st.pairs == one.st.pairs && r.st.promoted == one.st.promoted &&
                    r.st.negative == one.st.negative && r.st.hub_p99 == one.st.hub_p99);
    }
}

static void stage_on_mixtral(void **) {
    Converted c1 = convert_model("mixtral", 1, 0, "br1");
    Converted c2 = convert_model("mixtral", 2, 0, "br2");
    assert_int_equal(c1.crc[STK_STAGE_BRIDGE_INIT], c2.crc[STK_STAGE_BRIDGE_INIT]);
    assert_true(c1.sha[STK_STAGE_BRIDGE_INIT] == c2.sha[STK_STAGE_BRIDGE_INIT]);
    const std::string &out = c1.out;
    for (const char *n : {"bridge_hubs.bin", "bridge_qDin.bin", "bridge_qDout.bin", "bridge_guard.bin", "peer_scores.bin"})
        assert_true(payload(out, n) == payload(c2.out, n));

    auto desc = describe_model(test_data("models/mixtral"));
    const ModelPlan &plan = desc->plan;
    const uint64_t d = plan.config.d_model, E = plan.config.n_experts, L = plan.config.n_layers;
    WeightReader rd(*desc->checkpoint, plan);
    std::vector<float> scratch(plan.max_row_floats + 1);
    const PlanTensor *et = rd.find(Role::EMB, kNoLayer);
    const uint64_t V = et->dims[0];
    std::vector<float> emb(V * d);
    rd.read(*et, emb.data(), scratch.data());
    // Pooled router rows ranked by norm (ties: layer, expert).
    std::vector<std::vector<float>> R(L, std::vector<float>(E * d));
    std::vector<std::pair<double, uint64_t>> rank;
    for (uint64_t l = 0; l < L; l++) {
        rd.read(*rd.find(Role::ROUTER_GATE, int32_t(l)), R[l].data(), scratch.data());
        for (uint64_t e = 0; e < E; e++) {
            double s = 0;
            for (uint64_t j = 0; j < d; j++) s += double(R[l][e * d + j]) * R[l][e * d + j];
            rank.push_back({-std::sqrt(s), l * E + e});
        }
    }
    std::sort(rank.begin(), rank.end());
    ArrayReader qin(out + "/arrays/bridge_qDin.bin"), sin(out + "/arrays/bridge_qDin_scale.bin");
    assert_int_equal(qin.header().dims[0], V);
    assert_int_equal(qin.header().dims[1], 128);
    const uint8_t *q = qin.payload();
    uint64_t checked = 0;
    for (uint64_t t = 0; t < V; t++) {
        float s;
        std::memcpy(&s, sin.payload() + 4 * t, 4);
        for (uint64_t hub = 0; hub < rank.size(); hub++) {
            const uint64_t l = rank[hub].second / E, e = rank[hub].second % E;
            double x = 0, mag = 0;
            for (uint64_t j = 0; j < d; j++) {
                x += double(emb[t * d + j]) * R[l][e * d + j];
                mag += std::fabs(double(emb[t * d + j]) * R[l][e * d + j]);
            }
            const int16_t qv = int16_t(load_le<uint16_t>(q + 2 * (t * 128 + hub)));
            if (std::fabs(x * s) >= 32767) continue;  // clipped: its error is the clip's
            assert_true(std::fabs(double(qv) / s - x) <= 0.5 / s + 1e-5 * mag + 1e-9);
            checked++;
        }
    }
    assert_true(checked >= V * rank.size() * 9 / 10);

    // Guard tuples: the plain reference from the stored legs, beta = kBridgeGuardSlack.
    ArrayReader qout(out + "/arrays/bridge_qDout.bin"), sout(out + "/arrays/bridge_qDout_scale.bin"),
        gd(out + "/arrays/bridge_guard.bin");
    assert_int_equal(gd.header().rank, 3);
    assert_int_equal(gd.header().dims[1], kBridgeK);
    assert_int_equal(gd.header().dims[2], kGuardTupleSize);
    uint64_t promoted = 0;
    for (uint64_t t = 0; t < V; t++) {
        float si, so;
        std::memcpy(&si, sin.payload() + 4 * t, 4);
        std::memcpy(&so, sout.payload() + 4 * t, 4);
        std::vector<double> zi(128), zo(128), z(128);
        for (int h = 0; h < 128; h++) {
            zi[h] = double(int16_t(load_le<uint16_t>(qin.payload() + 2 * (t * 128 + h)))) / si;
            zo[h] = double(int16_t(load_le<uint16_t>(qout.payload() + 2 * (t * 128 + h)))) / so;
            z[h] = zi[h] + zo[h];
        }
        std::vector<int> idx(128);
        std::iota(idx.begin(), idx.end(), 0);
        std::sort(idx.begin(), idx.end(), [&](int a, int b) { return z[a] != z[b] ? z[a] > z[b] : a < b; });
        auto sd = [](const std::vector<double> &a) {
            double m = 0, v = 0;
            for (double x : a) m += x;
            m /= a.size();
            for (double x : a) v += (x - m) * (x - m);
            return std::sqrt(v / a.size());
        };
        const double eps = 0.5 / si + 0.5 / so, U = kBridgeGuardSlack * sd(zi), Vb = kBridgeGuardSlack * sd(zo);
        for (int j = 0; j < 4; j++) {
            GuardTuple g = guard_tuple_load(gd.payload() + (t * 4 + j) * kGuardTupleSize);
            const double m = z[idx[j]] - z[idx[4]] - 2 * eps;
            assert_int_equal(g.hub, idx[j]);
            assert_true(std::fabs(g.m - m) <= 1e-5 * (1 + std::fabs(m)));
            assert_true(std::fabs(g.u - U) <= 1e-5 * (1 + U) && std::fabs(g.v - Vb) <= 1e-5 * (1 + Vb));
            const bool pro = g.m > 0 && g.c_h < g.m;
            assert_int_equal(g.flags, !(g.m > 0) ? kGuardNegativeMargin : pro ? kGuardPromoted : 0);
            promoted += pro;
        }
    }
    // Manifest: the bridge record and the checks.
    Manifest man = read_manifest(out + "/sera_manifest.bin");
    assert_int_equal(man.fields.bridge.k, 4);
    assert_int_equal(man.fields.bridge.w, 2);
    assert_int_equal(man.fields.bridge.proj_rows, 128);
    assert_int_equal(man.fields.bridge.proj_cols, d);
    assert_int_equal(man.fields.bridge.guard_margin_policy, 1);
    assert_int_equal(man.fields.bridge.guard_eps_row_policy, 1);
    assert_true(man.fields.bridge.beta_min >= 126.0 / 256 && man.fields.bridge.beta_max <= 130.0 / 256);
    assert_true(man.fields.bridge.beta_min <= man.fields.bridge.beta_max);
    assert_true(man.fields.bridge.store_load_max == double(promoted) / double(V * 4));
    assert_true(man.fields.capacity.slack == kBridgeGuardSlack);
    for (const char *p : {"12.6 quant scales", "12.6 hub_and_p99", "12.6 guard tuples consistent"}) {
        const ManifestRecord *r = find_record(man.records, p);
        assert_non_null(r);
        assert_int_equal(r->kind, kRecordInvariantPass);
    }
    const ManifestRecord *hubs = find_record(man.records, "9.1 hubs:");
    assert_non_null(hubs);
    assert_true(hubs->value == double(L * E));  // 8 router rows, 120 pseudo-experts
    // Peer scores: Q8.8 128 +- 2.
    ArrayReader ps(out + "/arrays/peer_scores.bin");
    assert_int_equal(ps.header().dtype, uint16_t(DType::Q8_8));
    for (int i = 0; i < 128; i++) {
        int v = int16_t(load_le<uint16_t>(ps.payload() + 2 * i));
        assert_true(v >= 126 && v <= 130);
    }

    // HUB lookups: token row | context row; out of range: KEY_NOT_FOUND.
    stk_generation *g = nullptr;
    assert_int_equal(stk_generation_open(out.c_str(), &g), STK_OK);
    const uint32_t nctx = bridge_context_count(V);
    for (uint32_t t : {0u, 1u, uint32_t(V - 1)})
        for (uint32_t cx : {0u, 5u, nctx - 1}) {
            uint8_t key[8], val[24];
            store_le<uint32_t>(key, t);
            store_le<uint32_t>(key + 4, cx);
            size_t len = 0;
            assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 8, val, sizeof val, &len), STK_OK);
            assert_int_equal(len, 16);
            uint64_t tr[2], cr[2];
            bridge_token_row(t, 2, tr);
            bridge_context_row(cx, 2, cr);
            assert_true(load_le<uint64_t>(val) == (tr[0] | cr[0]) && load_le<uint64_t>(val + 8) == (tr[1] | cr[1]));
            assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 8, val, 8, &len), STK_E_INVALID_ARGUMENT);
            assert_int_equal(len, 16);
        }
    uint8_t key[8], val[16];
    size_t len;
    store_le<uint32_t>(key, uint32_t(V));
    store_le<uint32_t>(key + 4, 0);
    assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 8, val, 16, &len), STK_E_KEY_NOT_FOUND);
    store_le<uint32_t>(key, 0);
    store_le<uint32_t>(key + 4, nctx);
    assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 8, val, 16, &len), STK_E_KEY_NOT_FOUND);
    assert_contains(stk_last_error(), "contexts");
    assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 4, val, 16, &len), STK_E_INVALID_ARGUMENT);
    stk_generation_close(g);
}

// Dense, tied (GPT-2): every hub a pseudo-expert, the out leg is the in leg; threads 1 vs 2.
static void stage_on_dense_models(void **) {
    for (const char *model : {"gpt2", "llama"}) {
        Converted a = convert_model(model, 1, 0, "brd1");
        Converted b = convert_model(model, 2, 0, "brd2");
        assert_int_equal(a.crc[STK_STAGE_BRIDGE_INIT], b.crc[STK_STAGE_BRIDGE_INIT]);
        assert_true(a.sha[STK_STAGE_BRIDGE_INIT] == b.sha[STK_STAGE_BRIDGE_INIT]);
        Manifest man = read_manifest(a.out + "/sera_manifest.bin");
        const ManifestRecord *hubs = find_record(man.records, "9.1 hubs:");
        assert_non_null(hubs);
        assert_true(hubs->value == 0);  // no router: 128 pseudo-experts
        const bool tied = std::string(model) == "gpt2";
        assert_int_equal(payload(a.out, "bridge_qDin.bin") == payload(a.out, "bridge_qDout.bin"), tied);
        assert_true(std::strstr(hubs->text, tied ? "out leg tied" : "out leg lm_head") != nullptr);
        for (const char *p : {"12.6 quant scales", "12.6 hub_and_p99", "12.6 guard tuples consistent"})
            assert_int_equal(find_record(man.records, p)->kind, kRecordInvariantPass);
    }
}

// 12.6 failing (test hook): the O(0) route is disabled, bridge_guard.bin is not written, the
// conversion completes and verifies; HUB lookups still work.
static void guard_check_failure_disables_o0(void **) {
    g_bridge_test_corrupt_guard = 1;
    Converted c = convert_model("qwen2_moe", 1, 0, "brf");
    g_bridge_test_corrupt_guard = 0;
    assert_false(stk::file_exists(c.out + "/arrays/bridge_guard.bin"));
    assert_true(stk::file_exists(c.out + "/arrays/bridge_hubs.bin"));
    Manifest man = read_manifest(c.out + "/sera_manifest.bin");
    const ManifestRecord *r = find_record(man.records, "12.6 guard tuples consistent");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordInvariantFail);
    assert_int_equal(r->feature, kFeatureO0Route);
    assert_true(r->value == 1);
    r = find_record(man.records, "guard shortcut disabled");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordFeatureDisabled);
    assert_int_equal(r->feature, kFeatureO0Route);
    assert_int_equal(stk_verify(c.out.c_str(), nullptr), STK_OK);
    stk_generation *g = nullptr;
    assert_int_equal(stk_generation_open(c.out.c_str(), &g), STK_OK);
    uint8_t key[8] = {}, val[16];
    size_t len;
    assert_int_equal(stk_lookup(g, STK_LOOKUP_HUB, key, 8, val, 16, &len), STK_OK);
    stk_generation_close(g);
}

// attach_bridge refuses what a hostile writer could put behind valid headers.
static void attach_refuses_hostile_payloads(void **) {
    const uint64_t tokens = 3, ctx = 4, w = 2, rows = tokens + ctx;
    std::vector<uint8_t> p(rows * w * 8);
    for (uint64_t r = 0; r < rows; r++) {
        uint64_t row[2];
        if (r < tokens) bridge_token_row(uint32_t(r), 2, row);
        else bridge_context_row(uint32_t(r - tokens), 2, row);
        store_le<uint64_t>(p.data() + r * 16, row[0]);
        store_le<uint64_t>(p.data() + r * 16 + 8, row[1]);
    }
    stk_generation g;
    attach_bridge(g, p.data(), p.size(), rows, 2, tokens);
    assert_true(g.has_bridge);
    assert_int_equal(g.bridge_contexts, 4);
    uint64_t out[3];
    assert_true(bridge_hub_bitset(g, 2, 3, out));
    assert_false(bridge_hub_bitset(g, 3, 0, out));
    assert_false(bridge_hub_bitset(g, 0, 4, out));
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, p.data(), p.size(), rows, 4, tokens); }), "W = 4");
    assert_false(g.has_bridge);
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, p.data(), p.size() - 1, rows, 2, tokens); }),
                    "need 112 bytes");
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, p.data(), p.size(), rows, 2, rows); }), "token rows");
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, p.data(), p.size(), rows, 2, 4); }), "power of two");
    std::vector<uint8_t> bad = p;
    bad[5 * 16 + 3] = 0xFF;  // row 5: 8 more bits
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, bad.data(), bad.size(), rows, 2, tokens); }),
                    "offset 80: row 5 has");
    std::memset(bad.data(), 0, 16);  // row 0: no bit
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, bad.data(), bad.size(), rows, 2, tokens); }),
                    "row 0 has 0 bits");
    assert_contains(expect_error(STK_E_CORRUPT, [&] { attach_bridge(g, p.data(), p.size(), uint64_t(1) << 62, 2, tokens); }),
                    "rows of 2 words");
}

// 16.4: the gating row passes at the published slack and fails where the slack is too large
// (the part that can fail can fail); the slack limit is where 0.9 stops holding.
static void acceptance_guard_precheck(void **) {
    Converted c = convert_model("qwen2_moe", 1, 0, "bra");
    AcceptanceContext ctx;
    ctx.out_dir = c.out;
    std::vector<AcceptanceRow> rows;
    acceptance_bridge(ctx, rows);
    assert_true(rows.size() == 6);
    assert_string_equal(rows[0].test.c_str(), "16.4 bridge-guard-pass-rate");
    assert_true(rows[0].gating && rows[0].pass && rows[0].value >= 0.9 && rows[0].threshold == 0.9);
    assert_string_equal(rows[1].test.c_str(), "16.4 bridge-guard-slack");
    assert_false(rows[1].gating);
    assert_true(rows[1].value == kBridgeGuardSlack && rows[1].threshold > kBridgeGuardSlack);
    const double limit = rows[1].threshold;

    ArrayReader qi(c.out + "/arrays/bridge_qDin.bin"), qo(c.out + "/arrays/bridge_qDout.bin"),
        si(c.out + "/arrays/bridge_qDin_scale.bin"), so(c.out + "/arrays/bridge_qDout_scale.bin");
    const uint64_t v = qi.header().dims[0];
    BridgePrecheck pc = bridge_guard_precheck(
        reinterpret_cast<const int16_t *>(qi.payload()), reinterpret_cast<const int16_t *>(qo.payload()),
        reinterpret_cast<const float *>(si.payload()), reinterpret_cast<const float *>(so.payload()), v, 128, 4, 0x16'04);
    assert_int_equal(pc.rows, v);
    assert_int_equal(pc.ratios.size(), v * 4);
    assert_true(pc.slack_limit == limit);
    assert_true(pc.pass_rate(kBridgeGuardSlack) == rows[0].value);
    assert_true(pc.pass_rate(std::nextafter(limit, 0.0)) >= 0.9);
    assert_true(pc.pass_rate(limit) < 0.9);
    // Counted plainly: pass iff ratio > slack.
    for (double sl : {0.0, kBridgeGuardSlack, limit, 4 * limit}) {
        size_t n = 0;
        for (double r : pc.ratios) n += r > sl;
        assert_true(pc.pass_rate(sl) == double(n) / double(pc.ratios.size()));
    }
    AcceptanceRow fail = acceptance_row("16.4 bridge-guard-pass-rate", "", pc.pass_rate(4 * limit), 0.9, ">=", true);
    assert_false(fail.pass);
    assert_false(acceptance_passed({fail}));
    // The synthetic draw is fixed: a second run gives the same ratios.
    BridgePrecheck again = bridge_guard_precheck(
        reinterpret_cast<const int16_t *>(qi.payload()), reinterpret_cast<const int16_t *>(qo.payload()),
        reinterpret_cast<const float *>(si.payload()), reinterpret_cast<const float *>(so.payload()), v, 128, 4, 0x16'04);
    assert_true(again.ratios == pc.ratios);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bitset_bits_for_given_ids),
        cmocka_unit_test(q88_crafted_row),
        cmocka_unit_test(round_matches_std_round),
        cmocka_unit_test(p99_matches_nearest_rank),
        cmocka_unit_test(guard_row_crafted),
        cmocka_unit_test(guard_row_top_matches_sort),
        cmocka_unit_test(leg_scores_threads),
        cmocka_unit_test(build_records_negative_margins),
        cmocka_unit_test(build_same_at_any_workers),
        cmocka_unit_test(stage_on_mixtral),
        cmocka_unit_test(stage_on_dense_models),
        cmocka_unit_test(guard_check_failure_disables_o0),
        cmocka_unit_test(attach_refuses_hostile_payloads),
        cmocka_unit_test(acceptance_guard_precheck),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

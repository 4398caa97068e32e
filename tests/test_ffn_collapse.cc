// ffn_collapse against a plain reference (double, naive loops) on the tiny gpt2 (plain GELU),
// llama (gated), mixtral (experts) and qwen2_moe (experts + shared expert) models; the blocked
// transform-while-packing GEMM against the same reference and across thread counts; identical
// bytes across threads and runs; the manifest's linear record; seed 18.1 forced.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/mapped_file.h"
#include "core/prng.h"
#include "format/manifest.h"
#include "ingest/model.h"
#include "kernels/abs_gemm.h"
#include "kernels/blis_pinned.h"
#include "linear_job.h"
#include "stages/ffn_select.h"

using namespace stk;
using namespace stk::test;

// Heavy-tailed values (a Student-t-like ratio), some exact zeros: shaped like trained weights.
static std::vector<float> heavy(uint64_t n, uint64_t seed) {
    std::vector<float> v(n);
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) {
        double u = to_unit(splitmix64_next(&s)) - 0.5, w = to_unit(splitmix64_next(&s)) + 0.05;
        v[i] = (i % 97 == 0) ? 0.0f : float(u / w * 0.1);
    }
    return v;
}

// abs_gemm shares a product of at least 512 rows among its threads by even column ranges over
// its full 512-column blocks, one BLIS call per block a range meets; the bits must be each whole
// block call's.  BLIS directly, in the pinned context, over the collapse's row counts (m = d: 512
// and more), every split of a full block at a multiple of 8, depth blocks down to 1, beta 0 and
// 1.  (The last, narrower block is never cut: at 201 columns a piece takes BLIS's small-matrix
// path and sums apart, caught by abs_gemm_same_bytes_at_any_threads' 1225-column shape; with
// fewer rows that path can sum any piece apart, m = 96 here: abs_gemm keeps such blocks whole.)
static void blis_sgemm(cntx_t *cntx, dim_t m, dim_t n, dim_t k, const float *A, const float *B, dim_t ldb, float beta, float *C,
                       dim_t ldc) {
    float alpha = 1.0f;
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(1, &rntm);
    bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, const_cast<float *>(A), k, 1, const_cast<float *>(B), ldb,
                 1, &beta, C, ldc, 1, cntx, &rntm);
}

static void blis_column_pieces_match_whole(void **) {
    cntx_t *cntx = kernels::pinned_blis_context();
    size_t cases = 0;
    for (dim_t n : {512})
        for (dim_t m : {512, 576, 640, 2048})
            for (dim_t k : {256, 150, 37, 1})
                for (float beta : {0.0f, 1.0f}) {
                    std::vector<float> A = heavy(uint64_t(m * k), 21), B = heavy(uint64_t(k * n), 22), C0 = heavy(uint64_t(m * n), 23);
                    std::vector<float> whole = C0;
                    blis_sgemm(cntx, m, n, k, A.data(), B.data(), n, beta, whole.data(), n);
                    for (dim_t split = 8; split < n; split += 8) {
                        std::vector<float> pieces = C0;
                        for (dim_t j0 : {dim_t(0), split}) {
                            const dim_t w = j0 ? n - split : split;
                            std::vector<float> Bw(size_t(k * w));  // packed with its own row stride, as abs_gemm's pack_b
                            for (dim_t q = 0; q < k; q++)
                                for (dim_t j = 0; j < w; j++) Bw[size_t(q * w + j)] = B[size_t(q * n + j0 + j)];
                            blis_sgemm(cntx, m, w, k, A.data(), Bw.data(), w, beta, pieces.data() + j0, n);
                        }
                        if (std::memcmp(whole.data(), pieces.data(), whole.size() * 4) != 0)
                            fail_msg("n %ld m %ld k %ld beta %g: columns [0, %ld) and [%ld, n) differ from one call", long(n), long(m),
                                     long(k), double(beta), long(split), long(split));
                        cases++;
                    }
                }
    assert_int_equal(cases, 2 * 4 * 4 * 63);
}

// The collapse's own shapes (two column blocks of unequal width, d = 576 and 640) and others, at
// 1 to 4 threads: the same bytes.
static void abs_gemm_same_bytes_at_any_threads(void **) {
    struct Shape {
        uint64_t m, n, k;
    };
    // 1225 = 2 x 512 + 201: at 7 threads an even edge falls inside the last block, whose call
    // (201 >= BLIS's small-matrix threshold) must stay whole: a piece of it sums apart.
    for (Shape sh : {Shape{576, 576, 600}, Shape{640, 640, 300}, Shape{512, 1100, 40}, Shape{520, 1225, 300}, Shape{600, 40, 20},
                      Shape{70, 2100, 257}, Shape{5, 530, 40}}) {
        const uint64_t m = sh.m, n = sh.n, k = sh.k;
        std::vector<float> A = heavy(m * k, 11), B = heavy(k * n, 12), B2 = heavy(k * n, 13);
        std::vector<float> scratch(abs_gemm_scratch_floats(m) * 7);
        std::vector<float> C1(m * n), Ct(m * n);
        abs_gemm(m, n, k, PackA::Abs, A.data(), k, PackB::Pos, B.data(), B2.data(), n, C1.data(), n, scratch.data(), 1);
        for (unsigned t : {2u, 3u, 4u, 7u}) {
            std::fill(Ct.begin(), Ct.end(), -1.0f);
            abs_gemm(m, n, k, PackA::Abs, A.data(), k, PackB::Pos, B.data(), B2.data(), n, Ct.data(), n, scratch.data(), t);
            assert_memory_equal(C1.data(), Ct.data(), m * n * 4);
        }
    }
}

static void abs_gemm_matches_reference_and_threads(void **) {
    const uint64_t m = 96, n = 1100, k = 600;  // 3 column blocks, 3 depth blocks (edges included)
    std::vector<float> A = heavy(m * k, 1), B = heavy(k * n, 2), B2 = heavy(k * n, 3);
    std::vector<float> scratch(abs_gemm_scratch_floats(m) * 3);
    for (int gated = 0; gated < 2; gated++)
        for (int op = 0; op < 4; op++) {  // 0: S (abs, abs); 1: +; 2: -; 3: copy A, abs B
            PackA pa = op == 0 ? PackA::Abs : PackA::Copy;
            PackB pb = op == 1 ? PackB::Pos : op == 2 ? PackB::Neg : PackB::Abs;
            const float *b2 = gated ? B2.data() : nullptr;
            std::vector<float> C1(m * n, -1.0f), C2(m * n, -2.0f), C3(m * n, -3.0f);
            abs_gemm(m, n, k, pa, A.data(), k, pb, B.data(), b2, n, C1.data(), n, scratch.data(), 1);
            abs_gemm(m, n, k, pa, A.data(), k, pb, B.data(), b2, n, C2.data(), n, scratch.data(), 2);
            abs_gemm(m, n, k, pa, A.data(), k, pb, B.data(), b2, n, C3.data(), n, scratch.data(), 3);
            assert_memory_equal(C1.data(), C2.data(), m * n * 4);
            assert_memory_equal(C1.data(), C3.data(), m * n * 4);
            double worst = 0;
            for (uint64_t i = 0; i < m; i += 5)
                for (uint64_t j = 0; j < n; j += 3) {
                    double ref = 0, bound = 0;
                    for (uint64_t q = 0; q < k; q++) {
                        double a = A[i * k + q], g = B[q * n + j], u = gated ? B2[q * n + j] : 1.0;
                        if (pa == PackA::Abs) a = std::fabs(a);
                        // Neg: the response to -e_j: relu(-g), times -u when gated.
                        double b = pb == PackB::Abs   ? std::fabs(g) * std::fabs(u)
                                   : pb == PackB::Pos ? (g > 0 ? g * u : 0)
                                                      : (g < 0 ? -g * (gated ? -u : 1.0) : 0);
                        ref += a * b;
                        bound += std::fabs(a * b);
                    }
                    worst = std::max(worst, std::fabs(double(C1[i * n + j]) - ref) / (bound > 0 ? bound : 1));
                }
            // f32 accumulation over k = 600: error far below 1e-5 of the absolute bound; a wrong
            // transform (a sign, a missing abs) is off by O(1) of it.
            if (worst >= 1e-5) print_error("gated %d op %d: worst %g\n", gated, op, worst);
            assert_true(worst < 1e-5);
        }
}

// Exact maps of one unit in double: S, M+ and M- (ffn_collapse.h), from the checkpoint.
struct UnitRef {
    uint64_t d;
    std::vector<double> S, Mp, Mm;
};

static std::vector<float> load_t(const Checkpoint &ck, const ModelPlan &plan, uint32_t ti) {
    if (ti == kNoTensor) return {};
    const PlanTensor &t = plan.tensors[ti];
    const TensorRef &src = ck.tensors()[t.source];
    std::vector<uint8_t> scratch;
    std::vector<float> out(t.n_elements), row(plan.max_row_floats ? plan.max_row_floats : 1);
    materialize_f32(t, src, ck.tensor_bytes(src, scratch), out.data(), row.data());
    return out;
}

static UnitRef reference(const Checkpoint &ck, const ModelPlan &plan, const FfnUnit &u) {
    UnitRef r;
    const uint64_t d = plan.config.d_model, H = u.hidden;
    r.d = d;
    std::vector<float> w1 = load_t(ck, plan, u.w1), w3 = load_t(ck, plan, u.w3), w2 = load_t(ck, plan, u.w2);
    r.S.assign(d * d, 0);
    r.Mp.assign(d * d, 0);
    r.Mm.assign(d * d, 0);
    for (uint64_t i = 0; i < d; i++)
        for (uint64_t j = 0; j < d; j++) {
            double s = 0, p = 0, m = 0;
            for (uint64_t h = 0; h < H; h++) {
                double a = w2[i * H + h], g = w1[h * d + j], up = u.gated() ? double(w3[h * d + j]) : 1.0;
                s += std::fabs(a) * std::fabs(g) * std::fabs(up);
                if (g > 0) p += a * g * up;
                if (g < 0) m += a * -g * (u.gated() ? -up : 1.0);
            }
            r.S[i * d + j] = s;
            r.Mp[i * d + j] = p;
            r.Mm[i * d + j] = m;
        }
    return r;
}

// The job's plan (expert order filled by parse_tensors) is gone after close: recompute the units
// from a fresh description with the order taken from the keys' own layout is not possible, so
// this test reads the plan through a second conversion-free description and the router rows.
static std::vector<uint32_t> router_order(const Checkpoint &ck, const ModelPlan &plan) {
    const uint32_t E = plan.config.n_experts;
    std::vector<uint32_t> order(size_t(plan.config.n_layers) * E);
    for (size_t i = 0; i < order.size(); i++) order[i] = uint32_t(i % E);
    for (uint32_t ti = 0; ti < plan.n_streamed; ti++) {
        const PlanTensor &t = plan.tensors[ti];
        if (t.role != Role::ROUTER_GATE || t.layer < 0) continue;
        std::vector<float> r = load_t(ck, plan, ti);
        std::vector<double> nrm(E);
        for (uint32_t e = 0; e < E; e++) {
            double s = 0;
            for (uint64_t j = 0; j < t.dims[1]; j++) s += double(r[e * t.dims[1] + j]) * r[e * t.dims[1] + j];
            nrm[e] = std::sqrt(s);
        }
        std::sort(order.begin() + t.layer * E, order.begin() + (t.layer + 1) * E,
                  [&](uint32_t a, uint32_t b) { return nrm[a] != nrm[b] ? nrm[a] > nrm[b] : a < b; });
    }
    return order;
}

// The transforms applied while packing B are exactly the collapse's definitions (ffn_collapse.h:
// |g|, relu(g), relu(-g), times |u|, u, -u when gated), element for element: with one depth
// block (k <= kGemmKB) abs_gemm must give the bits of plain_sgemm over B transformed here first.
// Widths 1100 (two full column blocks and a tail of 76: the packing's eight-wide steps and its
// scalar rest) and 13; signed zeros and exact zeros in B.
static void abs_gemm_packs_the_transforms_exactly(void **) {
    for (uint64_t n : {1100ull, 13ull}) {
        const uint64_t m = 37, k = 200;
        std::vector<float> A = heavy(m * k, 4), B = heavy(k * n, 5), B2 = heavy(k * n, 6);
        for (uint64_t i = 0; i < B.size(); i += 89) B[i] = -0.0f;
        std::vector<float> scratch(abs_gemm_scratch_floats(m));
        for (int gated = 0; gated < 2; gated++)
            for (PackB op : {PackB::Abs, PackB::Pos, PackB::Neg}) {
                std::vector<float> Bt(k * n), C1(m * n, -1.0f), C2(m * n, -2.0f);
                for (uint64_t q = 0; q < k * n; q++) {
                    const float g = B[q], u = B2[q];
                    const float act = op == PackB::Abs ? std::fabs(g) : op == PackB::Pos ? (g > 0 ? g : 0.0f) : (-g > 0 ? -g : 0.0f);
                    const float gate = op == PackB::Abs ? std::fabs(u) : op == PackB::Pos ? u : -u;
                    Bt[q] = gated ? act * gate : act;
                }
                abs_gemm(m, n, k, PackA::Copy, A.data(), k, op, B.data(), gated ? B2.data() : nullptr, n, C1.data(), n,
                         scratch.data(), 1);
                plain_sgemm(m, n, k, A.data(), k, Bt.data(), n, C2.data(), n, 1);
                assert_memory_equal(C1.data(), C2.data(), m * n * 4);
            }
    }
}

static void collapse_matches_double_reference(void **) {
    for (const char *model : kLinearModels) {
        Converted c = convert_model(model, 2);
        auto desc = describe_model(test_data(std::string("models/") + model));
        ModelPlan plan = desc->plan;
        std::vector<uint32_t> order;
        if (plan.config.n_experts) {
            order = router_order(*desc->checkpoint, plan);
            plan.expert_order = order.data();
        }
        std::vector<FfnUnit> units(ffn_units_max(plan));
        const uint32_t n_units = ffn_units(plan, units.data());
        const uint64_t d = plan.config.d_model, L = std::min<uint64_t>(12, d);
        // Unit counts: dense = layers; mixtral 2 x 4 experts; qwen2_moe 2 x (4 + shared).
        const uint32_t want_units = std::string(model) == "mixtral" ? 8 : std::string(model) == "qwen2_moe" ? 10 : 2;
        assert_int_equal(n_units, want_units);
        assert_int_equal(c.h.n_units, n_units);
        assert_int_equal(c.base_keys.size(), uint64_t(n_units) * d * 2 * L);
        std::vector<UnitRef> refs;
        for (uint32_t u = 0; u < n_units; u++) refs.push_back(reference(*desc->checkpoint, plan, units[u]));
        // Every stored value equals the exact entry to f32 GEMM accuracy (relative to S's bound).
        std::vector<std::vector<double>> stored(n_units * 2, std::vector<double>(d * d, 0.0));
        std::vector<std::vector<uint8_t>> has(n_units * 2, std::vector<uint8_t>(d * d, 0));
        auto check = [&](uint64_t key, float v, bool base) {
            const uint32_t s = linear_key_sign(key), u = linear_key_unit(key);
            const uint64_t i = linear_key_out(key), j = linear_key_in(key);
            assert_true(u < n_units && i < d && j < d);
            const UnitRef &r = refs[u];
            double ref = (s ? r.Mm : r.Mp)[i * d + j];
            if (!(std::fabs(double(v) - ref) <= 1e-5 * r.S[i * d + j] + 1e-12))
                print_error("%s key %016llx v %.9g ref %.9g S %.9g\n", model, (unsigned long long)key, v, ref, r.S[i * d + j]);
            assert_true(std::fabs(double(v) - ref) <= 1e-5 * r.S[i * d + j] + 1e-12);
            assert_int_equal(has[u * 2 + s][i * d + j], 0);  // every key once
            has[u * 2 + s][i * d + j] = base ? 1 : 2;
            stored[u * 2 + s][i * d + j] = v;
        };
        for (size_t e = 0; e < c.base_keys.size(); e++) check(c.base_keys[e], c.base_vals[e], true);
        for (size_t e = 0; e < c.delta_keys.size(); e++) {
            float v;
            std::memcpy(&v, &c.delta_vals[e], 4);
            check(c.delta_keys[e], v, false);
            assert_true(std::fabs(v) >= c.h.tau_low && std::fabs(v) <= c.h.tau_high);
        }
        // Base = the top-L of S's column (ties within f32 rounding of the bound tolerated); the
        // columns are reconstructed within the recorded truncation.
        double worst = 0;
        for (uint32_t u = 0; u < n_units; u++)
            for (uint32_t s = 0; s < 2; s++)
                for (uint64_t j = 0; j < d; j++) {
                    std::vector<double> col(d);
                    for (uint64_t i = 0; i < d; i++) col[i] = refs[u].S[i * d + j];
                    std::vector<double> sorted = col;
                    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
                    const double cut = sorted[L - 1];
                    uint32_t nb = 0;
                    double num = 0, den = 0;
                    for (uint64_t i = 0; i < d; i++) {
                        if (has[u * 2 + s][i * d + j] == 1) {
                            nb++;
                            assert_true(col[i] >= cut * (1 - 1e-5));
                        } else {
                            assert_true(col[i] <= cut * (1 + 1e-5));
                        }
                        double ex = (s ? refs[u].Mm : refs[u].Mp)[i * d + j];
                        num += (stored[u * 2 + s][i * d + j] - ex) * (stored[u * 2 + s][i * d + j] - ex);
                        den += ex * ex;
                    }
                    assert_int_equal(nb, L);
                    if (den > 0) worst = std::max(worst, std::sqrt(num / den));
                }
        assert_true(c.h.trunc_col_max <= std::sqrt(kLinearEps) + 1e-12);
        assert_true(worst <= c.h.trunc_col_max + 1e-5);
        // Gated and plain models both have deltas; d = 32 or 64 keeps every column under the cap.
        assert_true(c.h.n_delta > 0);
        assert_int_equal(c.h.capped_columns, 0);
    }
}

static std::vector<uint8_t> file(const std::string &p) { return read_bytes(p); }

static void identical_across_threads_and_runs(void **) {
    for (const char *model : {"llama", "mixtral", "gpt2"}) {
        Converted a = convert_model(model, 1), b = convert_model(model, 2), c = convert_model(model, 2);
        for (int s : {STK_STAGE_FFN_COLLAPSE, STK_STAGE_MPHF_CUCKOO}) {
            assert_int_equal(a.sha[s], b.sha[s]);
            assert_int_equal(a.sha[s], c.sha[s]);
            assert_int_equal(a.crc[s], b.crc[s]);
        }
        for (const char *arr : {"linear_mphf.bin", "linear_keys.bin", "linear_weights.bin", "cuckoo_delta.bin"}) {
            std::vector<uint8_t> x = file(a.out + "/arrays/" + arr), y = file(b.out + "/arrays/" + arr);
            assert_true(!x.empty());
            assert_true(x == y);
        }
        assert_true(file(a.out + "/sera_manifest.bin").size() == file(b.out + "/sera_manifest.bin").size());
    }
}

static const ManifestRecord *find_record(const Manifest &m, uint16_t stage, const char *prefix) {
    for (const ManifestRecord &r : m.records)
        if (r.stage == stage && std::strncmp(r.text, prefix, std::strlen(prefix)) == 0) return &r;
    return nullptr;
}

static void manifest_linear_record(void **) {
    Converted c = convert_model("gpt2", 1);
    Manifest m = read_manifest(c.out + "/sera_manifest.bin");
    const auto &lin = m.fields.linear;
    assert_int_equal(lin.c, c.h.n_base);
    assert_int_equal(lin.c, 2ull * 32 * 2 * 12);  // 2 layers x d 32 x 2 signs x top-12
    assert_int_equal(lin.d, 2);
    assert_int_equal(lin.b, 4);
    assert_int_equal(lin.s, 4);
    assert_int_equal(lin.l_cuckoo, 8);
    assert_true(lin.q >= 1);
    assert_true(lin.tau_low == double(c.h.tau_low) && lin.tau_high == double(c.h.tau_high) && lin.tau_low <= lin.tau_high);
    const ManifestRecord *t = find_record(m, STK_STAGE_FFN_COLLAPSE, "truncation: worst column");
    assert_non_null(t);
    assert_true(t->value == c.h.trunc_col_max);
    const ManifestRecord *inv = find_record(m, STK_STAGE_MPHF_CUCKOO, "12.4: base+delta");
    assert_non_null(inv);
    assert_int_equal(inv->kind, kRecordInvariantPass);
    // gpt2 has FFN biases: linear_bias.bin (7.6) = sum over layers of W2 relu(b1) + b2.
    assert_non_null(find_record(m, STK_STAGE_FFN_COLLAPSE, "7.6 bias"));
    bool listed = false;
    for (const ManifestArray &a : m.arrays) listed |= std::strcmp(a.name, "linear_bias.bin") == 0 && a.dims[0] == 32;
    assert_true(listed);
    // llama has no FFN biases: no bias array.
    Converted l = convert_model("llama", 1);
    assert_false(file_exists(l.out + "/arrays/linear_bias.bin"));
}

static void bias_matches_reference(void **) {
    Converted c = convert_model("gpt2", 1);
    auto desc = describe_model(test_data("models/gpt2"));
    const ModelPlan &plan = desc->plan;
    std::vector<FfnUnit> units(ffn_units_max(plan));
    uint32_t n = ffn_units(plan, units.data());
    const uint64_t d = plan.config.d_model;
    std::vector<double> ref(d, 0.0);
    for (uint32_t u = 0; u < n; u++) {
        std::vector<float> w2 = load_t(*desc->checkpoint, plan, units[u].w2), b1 = load_t(*desc->checkpoint, plan, units[u].b1),
                           b2 = load_t(*desc->checkpoint, plan, units[u].b2);
        for (uint64_t i = 0; i < d; i++) {
            for (uint64_t h = 0; h < units[u].hidden; h++) ref[i] += double(w2[i * units[u].hidden + h]) * std::max(0.0f, b1[h]);
            ref[i] += b2[i];
        }
    }
    std::vector<uint8_t> bytes = file(c.out + "/arrays/linear_bias.bin");
    assert_int_equal(bytes.size(), 128 + 4 * d);
    for (uint64_t i = 0; i < d; i++) {
        float v;
        std::memcpy(&v, bytes.data() + 128 + 4 * i, 4);
        assert_true(std::fabs(double(v) - ref[i]) <= 1e-6 * (1 + std::fabs(ref[i])));
    }
}

static void mphf_exhaustion_grows_m_and_keeps_other_arrays(void **) {
    Converted plain = convert_model("llama", 1);
    g_linear_test_pilot_cap = 1;  // pilot 0 only: some bucket of two or more keys must collide
    g_linear_test_pilot_cap_attempts = 2;
    Converted forced = convert_model("llama", 1);
    g_linear_test_pilot_cap = 0;
    g_linear_test_pilot_cap_attempts = 0;
    Manifest m = read_manifest(forced.out + "/sera_manifest.bin");
    const ManifestRecord *r = find_record(m, STK_STAGE_MPHF_CUCKOO, "18.1");
    assert_non_null(r);
    assert_int_equal(r->status, STK_E_MPHF_EXHAUSTED);
    assert_true(r->value == 2.0);
    assert_null(find_record(read_manifest(plain.out + "/sera_manifest.bin"), STK_STAGE_MPHF_CUCKOO, "18.1"));
    // Only the MPHF (and the arrays placed by it) changed; the delta table and every other
    // stage's output are byte-identical.
    assert_false(file(plain.out + "/arrays/linear_mphf.bin") == file(forced.out + "/arrays/linear_mphf.bin"));
    assert_true(file(plain.out + "/arrays/cuckoo_delta.bin") == file(forced.out + "/arrays/cuckoo_delta.bin"));
    for (int s = 1; s < STK_STAGE_MPHF_CUCKOO; s++) assert_int_equal(plain.sha[s], forced.sha[s]);
    Manifest pm = read_manifest(plain.out + "/sera_manifest.bin");
    for (const ManifestArray &a : pm.arrays)
        if (a.stage != STK_STAGE_MPHF_CUCKOO || std::strcmp(a.name, "cuckoo_delta.bin") == 0)
            assert_true(file(plain.out + "/arrays/" + a.name) == file(forced.out + "/arrays/" + a.name));
    // Same entries, placed by a larger function.
    assert_int_equal(m.fields.linear.c, pm.fields.linear.c);
}

// Seed 1.4: weights with NaN/Inf let through by the policy disable the linear feature (records,
// no arrays) and the conversion completes.
static void nonfinite_weights_disable_the_feature(void **) {
    // Layer 1's down_proj [16, 32] holds a NaN at (3, 4) and an Inf at (5, 6): at 4 threads the
    // tensor is converted in 4 row ranges, the two in different ones; the lowest (element 100) is
    // the breach's value at any thread count.
    for (unsigned threads : {1u, 4u}) {
    Converted c = convert_model("nonfinite", threads, 0, "linnf", STK_JOB_ALLOW_NONFINITE);
    Manifest m = read_manifest(c.out + "/sera_manifest.bin");
    assert_int_equal(m.stages[STK_STAGE_FFN_COLLAPSE - 1].state, kStageDisabled);
    assert_int_equal(m.stages[STK_STAGE_MPHF_CUCKOO - 1].state, kStageDisabled);
    const ManifestRecord *r = find_record(m, STK_STAGE_FFN_COLLAPSE, "ffn_collapse disabled");
    assert_non_null(r);
    assert_int_equal(r->kind, kRecordFeatureDisabled);
    assert_int_equal(r->status, STK_E_NONFINITE);
    assert_true(r->value == 100.0);  // the element the breach names (value: its index)
    for (const char *a : {"linear_mphf.bin", "linear_keys.bin", "linear_weights.bin", "cuckoo_delta.bin", "linear_bias.bin"})
        assert_false(file_exists(c.out + "/arrays/" + a));
    assert_int_equal(stk_verify(c.out.c_str(), nullptr), STK_OK);
    }
}

// The column selections on packed keys (stages/ffn_select.h) against their definition -- all
// indices sorted by value (or |value|) descending, ties by smaller index, by a stable sort -- and
// against the comparator versions the stage ran before, whose whole permutation (nth_element's
// order past `take` included: the dropped energy is summed in it) the key version must reproduce.
// Columns: heavy-tailed, all equal, a few repeated values with -0/+0, ascending, descending, organ
// pipe, +-Inf and subnormals, alternating signs; L and take at 0, 1, small, the insertion run's
// edge (32, 33), d - 1 and d.
static std::vector<float> selection_column(int kind, uint32_t d, uint64_t seed) {
    std::vector<float> x = heavy(d, seed);
    uint64_t s = seed * 7919 + 1;
    for (uint32_t i = 0; i < d; i++) {
        const float r = x[i];
        switch (kind) {
        case 1: x[i] = 0.5f; break;
        case 2: {
            static const float few[] = {-1.0f, -0.0f, 0.0f, 1.0f, 2.0f};
            x[i] = few[splitmix64_next(&s) % 5];
            break;
        }
        case 3: x[i] = float(i) * 0.25f - 3.0f; break;
        case 4: x[i] = float(d - i) * 0.25f - 3.0f; break;
        case 5: x[i] = float(i < d / 2 ? i : d - i); break;
        case 6: {
            static const float odd[] = {INFINITY, -INFINITY, 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 3.0f};
            x[i] = splitmix64_next(&s) % 3 ? odd[splitmix64_next(&s) % 8] : r;
            break;
        }
        case 7: x[i] = (i & 1) ? -std::fabs(r) : std::fabs(r); break;
        default: break;
        }
    }
    return x;
}

static std::vector<uint32_t> stable_order(const float *x, const std::vector<uint32_t> &idx, bool magnitude) {
    std::vector<uint32_t> o = idx;
    std::stable_sort(o.begin(), o.end(), [&](uint32_t a, uint32_t b) {
        return magnitude ? std::fabs(x[a]) > std::fabs(x[b]) : x[a] > x[b];
    });
    return o;
}

static void selection_keys_match_the_definition_and_the_comparators(void **) {
    uint64_t cases = 0;
    for (uint32_t d : {1u, 2u, 3u, 4u, 5u, 17u, 33u, 64u, 100u, 576u, 640u})
        for (int kind = 0; kind < 8; kind++)
            for (uint64_t seed = 1; seed <= 3; seed++) {
                const std::vector<float> x = selection_column(kind, d, seed * 31 + d);
                std::vector<uint32_t> all(d);
                for (uint32_t i = 0; i < d; i++) all[i] = i;
                const std::vector<uint32_t> def = stable_order(x.data(), all, false);
                std::vector<uint32_t> a(d + 1), b(d + 1);
                std::vector<uint64_t> keys(d + 1);
                for (uint32_t L : {0u, 1u, 2u, 12u, 32u, 33u, 64u, d - 1, d}) {
                    if (L > d) continue;
                    assert_true(select_top_keys(x.data(), d, L, keys.data(), a.data()));
                    select_top_ref(x.data(), d, L, b.data());
                    for (uint32_t r = 0; r < L; r++) {
                        assert_int_equal(a[r], def[r]);
                        assert_int_equal(b[r], def[r]);
                    }
                    // The delta's candidates: the indices outside the top-L, ascending.
                    std::vector<uint8_t> in_top(d, 0);
                    for (uint32_t r = 0; r < L; r++) in_top[a[r]] = 1;
                    std::vector<uint32_t> rest;
                    for (uint32_t i = 0; i < d; i++)
                        if (!in_top[i]) rest.push_back(i);
                    const uint32_t nr = uint32_t(rest.size());
                    const std::vector<uint32_t> mdef = stable_order(x.data(), rest, true);
                    for (uint32_t take : {0u, 1u, 3u, 64u, nr / 2, nr - 1, nr}) {
                        if (take > nr) continue;
                        std::vector<uint32_t> r1 = rest, r2 = rest;
                        assert_true(select_magnitude_keys(x.data(), r1.data(), nr, take, keys.data()));
                        select_magnitude_ref(x.data(), r2.data(), nr, take);
                        assert_true(r1 == r2);
                        for (uint32_t q = 0; q < take; q++) assert_int_equal(r1[q], mdef[q]);
                        std::vector<uint32_t> s1 = r1;  // a permutation of rest
                        std::sort(s1.begin(), s1.end());
                        assert_true(s1 == rest);
                        cases++;
                    }
                }
            }
    assert_true(cases > 3000);
}

// A column with a NaN is refused by the key versions (the stage then runs the comparators), the
// delta's candidates left as they were.
static void selection_keys_refuse_nan(void **) {
    for (uint32_t d : {1u, 5u, 576u})
        for (uint32_t at : {0u, d / 2, d - 1}) {
            std::vector<float> x = heavy(d, d + at);
            x[at] = (at & 1) ? -NAN : NAN;
            std::vector<uint32_t> order(d + 1), rest(d);
            std::vector<uint64_t> keys(d + 1);
            for (uint32_t i = 0; i < d; i++) rest[i] = i;
            const std::vector<uint32_t> before = rest;
            for (uint32_t L : {0u, 1u, d})
                if (L <= d) assert_false(select_top_keys(x.data(), d, L, keys.data(), order.data()));
            assert_false(select_magnitude_keys(x.data(), rest.data(), d, d < 2 ? d : 1, keys.data()));
            assert_true(rest == before);
        }
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(abs_gemm_matches_reference_and_threads),
        cmocka_unit_test(abs_gemm_same_bytes_at_any_threads),
        cmocka_unit_test(blis_column_pieces_match_whole),
        cmocka_unit_test(abs_gemm_packs_the_transforms_exactly),
        cmocka_unit_test(collapse_matches_double_reference),
        cmocka_unit_test(identical_across_threads_and_runs),
        cmocka_unit_test(manifest_linear_record),
        cmocka_unit_test(bias_matches_reference),
        cmocka_unit_test(mphf_exhaustion_grows_m_and_keeps_other_arrays),
        cmocka_unit_test(nonfinite_weights_disable_the_feature),
        cmocka_unit_test(selection_keys_match_the_definition_and_the_comparators),
        cmocka_unit_test(selection_keys_refuse_nan),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// The reference runtime of the arrays (stk_refrun_get_info, stk_prf_*, stk_overlay_*,
// stk_ffn_*, stk_memory_*): sizes, the sequence form bit-identical to the per-token calls, the
// same bits from two threads at once, no heap allocation in any step, the FFN against
// stk_lookup entry by entry, the memory step against the bank's recurrence, and every refusal
// (status and message).  tests/python/test_refrun.py recomputes each step with numpy from
// docs/format.md.
#include <cmath>
#include <cstring>
#include <thread>

#include "alloc_counter.h"
#include "core/test_fault.h"
#include "linear_job.h"
#include "stk/stk.h"

using namespace stk;
using namespace stk::test;

namespace {

std::string tiny_gpt2() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

std::string g_dir, g_noprf;

std::string converted() {
    if (g_dir.empty()) g_dir = convert_model(tiny_gpt2(), 1, 0, "rr", STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER).out;
    return g_dir;
}

struct Gen {
    stk_generation *g = nullptr;
    stk_refrun_info info{};
    explicit Gen(const std::string &dir) {
        assert_int_equal(stk_generation_open(dir.c_str(), &g), STK_OK);
        info.struct_size = sizeof info;
        assert_int_equal(stk_refrun_get_info(g, &info), STK_OK);
    }
    ~Gen() { stk_generation_close(g); }
};

// Deterministic inputs: a small LCG mapped to [-1, 1).
std::vector<float> inputs(size_t n, uint64_t seed) {
    std::vector<float> v(n);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto &x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = float(int64_t(s >> 40) - (1ll << 23)) / float(1 << 23);
    }
    return v;
}

void expect(stk_status got, stk_status want, const char *needle) {
    if (got != want) print_error("expected %s, got %s: %s\n", stk_status_str(want), stk_status_str(got), stk_last_error());
    assert_int_equal(got, want);
    assert_contains(stk_last_error(), needle);
}

}  // namespace

// The shapes of tiny-gpt2 (d_model 16, 2 layers, r 512 by default) and the sizes' formulas.
static void info_and_sizes(void **) {
    Gen G(converted());
    const stk_refrun_info &i = G.info;
    assert_true(i.has_prf && i.has_overlays && i.has_linear && i.has_linear_bias && i.has_memory);
    assert_int_equal(i.n_layers, 2);
    assert_int_equal(i.d_model, 16);
    assert_int_equal(i.d_v, 16);
    assert_int_equal(i.r, 512);
    assert_int_equal(i.n_ffn_units, 2);
    assert_true(i.memory_sections >= 1 && i.memory_sections <= 6);
    const size_t ch = size_t(i.r) * i.d_v + i.r;
    assert_int_equal(i.prf_state_bytes, 64 + 8 * ch);
    assert_int_equal(i.prf_state_bytes_memory, 64 + 8 * ch + 16 * ch * i.memory_sections);
    assert_int_equal(i.scratch_bytes, 8 * (2 * i.r + 16 + 2 * i.r_v));
    assert_int_equal(i.memory_state_bytes, 32 + 16 * i.memory_sections);
    size_t ib = 0;
    assert_int_equal(stk_ffn_index_bytes(G.g, &ib), STK_OK);
    assert_int_equal(ib, i.ffn_index_bytes);
    assert_int_equal(ib, 64 + 8 * (2 * 2 * 16 + 1) + 8 * i.ffn_entries);
    assert_true(i.tau > 0 && i.beta_floor >= 1e-3 && i.whitening_eps == 1e-8);
}

// stk_prf_run equals add_key + read per token, bit for bit, plain and memory-filtered; a second
// thread running the same sequence at the same time gets the same bits; no step allocates.
static void prf_sequence_threads_no_alloc(void **) {
    Gen G(converted());
    const stk_refrun_info &I = G.info;
    const size_t T = 9, d = I.d_model, dv = I.d_v;
    std::vector<float> X = inputs(T * d, 1), V = inputs(T * dv, 2);
    for (uint32_t flags : {0u, unsigned(STK_PRF_MEMORY)}) {
        const size_t sb = flags ? I.prf_state_bytes_memory : I.prf_state_bytes;
        for (uint32_t layer = 0; layer < I.n_layers; layer++) {
            std::vector<double> st(sb / 8), sc(I.scratch_bytes / 8);
            std::vector<float> seq(T * dv), tok(T * dv), parts(dv);
            double log_den = 0;
            assert_int_equal(stk_prf_reset(G.g, layer, flags, st.data(), sb), STK_OK);
            size_t before = g_news;
            assert_int_equal(
                stk_prf_run(G.g, layer, st.data(), sb, T, X.data(), V.data(), seq.data(), sc.data(), I.scratch_bytes), STK_OK);
            assert_int_equal(stk_prf_reset(G.g, layer, flags, st.data(), sb), STK_OK);
            for (size_t t = 0; t < T; t++) {
                assert_int_equal(stk_prf_add_key(G.g, layer, st.data(), sb, &X[t * d], &V[t * dv], sc.data(), I.scratch_bytes),
                                 STK_OK);
                assert_int_equal(stk_prf_read(G.g, layer, st.data(), sb, &X[t * d], &tok[t * dv], sc.data(), I.scratch_bytes),
                                 STK_OK);
            }
            assert_int_equal(stk_prf_read_parts(G.g, layer, st.data(), sb, &X[0], parts.data(), &log_den, sc.data(),
                                                I.scratch_bytes),
                             STK_OK);
            assert_int_equal(g_news, before);  // reset, run, add_key, read, read_parts: no heap allocation
            assert_true(std::isfinite(log_den));
            assert_memory_equal(seq.data(), tok.data(), 4 * seq.size());
            for (float f : seq) assert_true(std::isfinite(f));
            // The first token reads its own value back exactly when nothing else is in the state:
            // out = f v / f (the denominator is its own feature sum, above the floor here).
            for (size_t j = 0; j < dv && !flags; j++) assert_true(std::fabs(seq[j] - V[j]) <= 1e-6f * (1 + std::fabs(V[j])));
            // Two threads at once, each its own state and scratch.
            std::vector<float> a(T * dv), b(T * dv);
            auto job = [&](std::vector<float> *out) {
                std::vector<double> s2(sb / 8), c2(I.scratch_bytes / 8);
                stk_prf_reset(G.g, layer, flags, s2.data(), sb);
                stk_prf_run(G.g, layer, s2.data(), sb, T, X.data(), V.data(), out->data(), c2.data(), I.scratch_bytes);
            };
            std::thread t1(job, &a), t2(job, &b);
            t1.join();
            t2.join();
            assert_memory_equal(a.data(), seq.data(), 4 * seq.size());
            assert_memory_equal(b.data(), seq.data(), 4 * seq.size());
        }
    }
}

// deltaC: the sequence form equals the single calls, no allocation; the FFN against stk_lookup.
static void overlay_ffn_memory(void **) {
    Gen G(converted());
    const stk_refrun_info &I = G.info;
    const size_t T = 5, d = I.d_model, dv = I.d_v;
    std::vector<float> X = inputs(T * d, 3);
    std::vector<double> sc(I.scratch_bytes / 8);
    std::vector<float> seq(T * dv), one(T * dv);
    size_t before = g_news;
    assert_int_equal(stk_overlay_run(G.g, 1, T, X.data(), seq.data(), sc.data(), I.scratch_bytes), STK_OK);
    for (size_t t = 0; t < T; t++)
        assert_int_equal(stk_overlay_delta(G.g, 1, &X[t * d], &one[t * dv], sc.data(), I.scratch_bytes), STK_OK);
    assert_int_equal(g_news, before);
    assert_memory_equal(seq.data(), one.data(), 4 * seq.size());

    // FFN: x = 2.5 e_j (and -0.75 e_j) gives 2.5 M+[:, j] (0.75 M-[:, j]), M read by stk_lookup.
    std::vector<uint64_t> index(I.ffn_index_bytes / 8);
    assert_int_equal(stk_ffn_index_build(G.g, index.data(), I.ffn_index_bytes), STK_OK);
    std::vector<float> x(d), y(d), yb(T * d);
    for (uint32_t unit = 0; unit < I.n_ffn_units; unit++)
        for (uint32_t j = 0; j < d; j += 7)
            for (float a : {2.5f, -0.75f}) {
                std::fill(x.begin(), x.end(), 0.0f);
                x[j] = a;
                before = g_news;
                assert_int_equal(stk_ffn_apply(G.g, index.data(), I.ffn_index_bytes, unit, x.data(), y.data()), STK_OK);
                assert_int_equal(g_news, before);
                for (uint32_t i = 0; i < d; i++) {
                    uint64_t key = (uint64_t(a < 0) << 63) | (uint64_t(unit) << 48) | (uint64_t(i) << 24) | j;
                    float v = 0;
                    size_t len = 0;
                    stk_status st = stk_lookup(G.g, STK_LOOKUP_LINEAR, &key, 8, &v, 4, &len);
                    assert_true(st == STK_OK || st == STK_E_KEY_NOT_FOUND);
                    if (st != STK_OK) v = 0;
                    assert_true(y[i] == float(std::fabs(double(a)) * double(v)));
                }
            }
    // The batch equals the single calls.
    std::vector<float> Xf = inputs(T * d, 4);
    assert_int_equal(stk_ffn_apply_batch(G.g, index.data(), I.ffn_index_bytes, 1, T, Xf.data(), yb.data()), STK_OK);
    for (size_t t = 0; t < T; t++) {
        assert_int_equal(stk_ffn_apply(G.g, index.data(), I.ffn_index_bytes, 1, &Xf[t * d], y.data()), STK_OK);
        assert_memory_equal(y.data(), &yb[t * d], 4 * d);
    }
    std::vector<float> bias(d);
    assert_int_equal(stk_ffn_bias(G.g, bias.data(), d), STK_OK);
    stk_array_view view{};
    view.struct_size = sizeof view;
    assert_int_equal(stk_generation_array_find(G.g, "linear_bias.bin", &view), STK_OK);
    assert_memory_equal(bias.data(), view.data, 4 * d);

    // Memory: the impulse response equals the bank's recurrence from memory_coeff.bin.
    assert_int_equal(stk_generation_array_find(G.g, "memory_coeff.bin", &view), STK_OK);
    const double *c = static_cast<const double *>(view.data);
    const uint32_t K = I.memory_sections;
    std::vector<double> st(I.memory_state_bytes / 8), s1(K, 0.0), s2(K, 0.0);
    assert_int_equal(stk_memory_reset(G.g, st.data(), I.memory_state_bytes), STK_OK);
    before = g_news;
    for (int t = 0; t < 40; t++) {
        float u = t == 0 ? 1.0f : (t == 20 ? -0.5f : 0.0f), y1 = 0;
        assert_int_equal(stk_memory_step(G.g, st.data(), I.memory_state_bytes, u, &y1), STK_OK);
        double sum = 0, comp = 0;
        for (uint32_t k = 0; k < K; k++) {
            const double *q = c + 4 * k;
            double yk = q[0] * u + s1[k];
            s1[k] = q[1] * u + q[2] * yk + s2[k];
            s2[k] = q[3] * yk;
            double tt = yk - comp, nx = sum + tt;
            comp = (nx - sum) - tt;
            sum = nx;
        }
        assert_true(y1 == float(sum));
    }
    assert_int_equal(g_news, before);
}

// Refusals: status and what the message names.
static void refusals(void **) {
    Gen G(converted());
    const stk_refrun_info &I = G.info;
    std::vector<double> st(I.prf_state_bytes / 8), sc(I.scratch_bytes / 8);
    std::vector<float> x(I.d_model), v(I.d_v), out(I.d_v);
    expect(stk_prf_reset(G.g, 2, 0, st.data(), I.prf_state_bytes), STK_E_INVALID_ARGUMENT, "layer 2, the generation has 2");
    expect(stk_prf_reset(G.g, 0, 0, st.data(), I.prf_state_bytes - 8), STK_E_INVALID_ARGUMENT, "state has");
    expect(stk_prf_reset(G.g, 0, 0x4, st.data(), I.prf_state_bytes), STK_E_INVALID_ARGUMENT, "unknown flags");
    expect(stk_prf_reset(G.g, 0, STK_PRF_MEMORY, st.data(), I.prf_state_bytes), STK_E_INVALID_ARGUMENT, "it needs");
    expect(stk_prf_reset(nullptr, 0, 0, st.data(), I.prf_state_bytes), STK_E_INVALID_ARGUMENT, "gen is NULL");
    std::memset(st.data(), 0, I.prf_state_bytes);
    expect(stk_prf_read(G.g, 0, st.data(), I.prf_state_bytes, x.data(), out.data(), sc.data(), I.scratch_bytes),
           STK_E_INVALID_ARGUMENT, "not set by stk_prf_reset");
    assert_int_equal(stk_prf_reset(G.g, 0, 0, st.data(), I.prf_state_bytes), STK_OK);
    expect(stk_prf_add_key(G.g, 1, st.data(), I.prf_state_bytes, x.data(), v.data(), sc.data(), I.scratch_bytes),
           STK_E_INVALID_ARGUMENT, "state belongs to layer 0, not 1");
    expect(stk_prf_add_key(G.g, 0, st.data(), I.prf_state_bytes, nullptr, v.data(), sc.data(), I.scratch_bytes),
           STK_E_INVALID_ARGUMENT, "x_key is NULL");
    expect(stk_prf_add_key(G.g, 0, st.data(), I.prf_state_bytes, x.data(), v.data(), sc.data(), I.scratch_bytes - 1),
           STK_E_INVALID_ARGUMENT, "scratch has");
    expect(stk_prf_read(G.g, 0, st.data(), I.prf_state_bytes, x.data(), out.data(), reinterpret_cast<char *>(sc.data()) + 4,
                        I.scratch_bytes),
           STK_E_INVALID_ARGUMENT, "not 8-byte aligned");
    expect(stk_overlay_delta(G.g, 7, x.data(), out.data(), sc.data(), I.scratch_bytes), STK_E_INVALID_ARGUMENT, "layer 7");
    std::vector<uint64_t> index(I.ffn_index_bytes / 8, 0);
    expect(stk_ffn_apply(G.g, index.data(), I.ffn_index_bytes, 0, x.data(), out.data()), STK_E_INVALID_ARGUMENT,
           "not built by stk_ffn_index_build");
    assert_int_equal(stk_ffn_index_build(G.g, index.data(), I.ffn_index_bytes), STK_OK);
    expect(stk_ffn_apply(G.g, index.data(), I.ffn_index_bytes, 2, x.data(), out.data()), STK_E_INVALID_ARGUMENT,
           "unit 2, the dictionary has 2 FFN units");
    expect(stk_ffn_index_build(G.g, index.data(), I.ffn_index_bytes - 8), STK_E_INVALID_ARGUMENT, "index has");
    expect(stk_ffn_bias(G.g, out.data(), 3), STK_E_INVALID_ARGUMENT, "n is 3, d_model is 16");
    std::vector<double> ms(I.memory_state_bytes / 8, 0.0);
    float y = 0;
    expect(stk_memory_step(G.g, ms.data(), I.memory_state_bytes, 1, &y), STK_E_INVALID_ARGUMENT, "not set by stk_memory_reset");
    stk_refrun_info small{};
    small.struct_size = 8;
    expect(stk_refrun_get_info(G.g, &small), STK_E_STRUCT_SIZE, "stk_refrun_info");

    // A generation whose prf_build was disabled: PRF and overlays refused with the manifest's reason.
    set_test_fault("breach:prf_build");
    const std::string noprf = convert_model(tiny_gpt2(), 1, 0, "rr-noprf", STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER).out;
    set_test_fault("");
    Gen P(noprf);
    assert_false(P.info.has_prf || P.info.has_overlays);
    assert_true(P.info.has_linear && P.info.has_memory);
    assert_int_equal(P.info.d_model, 16);
    expect(stk_prf_reset(P.g, 0, 0, st.data(), I.prf_state_bytes), STK_E_MISSING_ARRAY, "prf_build disabled: test fault");
    expect(stk_overlay_delta(P.g, 0, x.data(), out.data(), sc.data(), I.scratch_bytes), STK_E_MISSING_ARRAY,
           "overlays read the PRF features");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(info_and_sizes),
        cmocka_unit_test(prf_sequence_threads_no_alloc),
        cmocka_unit_test(overlay_ffn_memory),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

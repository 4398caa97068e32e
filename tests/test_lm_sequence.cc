// The LM runtime's sequences through the C ABI (stk_lm_open / stk_seq_*), run in the unit suite so
// the forward and every retention policy also run under ASan + UBSan (the transformers and numpy
// references, tests/lm_forward_reference.py and lm_policy_reference.py, load libstk.so into
// Python and so run only in the plain build).  Asserted per fixture and policy, with a state of
// 2 sinks + 5 positions over 16 tokens (evictions from token 8 on):
//   - a prompt fed at once (split into chunks of max_batch 4) gives every token the logits the
//     same tokens fed one at a time give (within 1e-4: the GEMMs' row blocking differs);
//   - 1 and 2 threads give the same bytes; reset and the same tokens again give the same bytes;
//   - the held positions: 7, the sinks 0 and 1 and the newest 15 among them, the window policy's
//     the last five;
//   - with the state as long as the context, every policy equals the window's logits (nothing
//     is evicted; within 1e-5);
//   - refusals: a token outside the vocabulary (nothing fed), an arena one byte short, a policy
//     number past the last, H2O's recent part as long as its window.
// The probe (stk_seq_set_probe, on the Llama fixture: 4 heads, 2 key/value heads of 16, RoPE base
// 10000), 16 tokens in chunks of 4 at full attention:
//   - every point of every layer of every chunk, in order, with its position, rows and width;
//   - Q and K are Q_PRE and K_PRE rotated by rotate_half's pairs at angle position x 10000^(-2f/16)
//     (recomputed in double, within 1e-5); ATTN_OUT is the causal softmax of Q K^T / 4 times V,
//     GQA heads shared, over every key so far (recomputed from the probed Q, K, V, within 1e-5);
//     ATTN_PROJ is stk_seq_attn_project of ATTN_OUT (called inside the probe: the same bytes);
//   - an identity overwrite (each writable point's data saved, the buffer scribbled with NaN, then
//     written back) leaves every logit bit-equal to a sequence without a probe; zeroing the last
//     layer's FFN output changes them; a probe returning nonzero stops the feed with
//     STK_E_CANCELLED, and after a reset the sequence gives the unprobed bytes again.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "stk/stk.h"
#include "test_util.h"

using namespace stk::test;

namespace {

constexpr size_t kTokens = 16;

struct Lm {
    stk_lm *lm = nullptr;
    uint64_t vocab = 0;
    uint32_t layers = 0;
    explicit Lm(const std::string &path) {
        assert_int_equal(stk_lm_open(path.c_str(), STK_LM_WEIGHTS_F32, &lm), STK_OK);
        stk_lm_info info = {};
        info.struct_size = sizeof info;
        assert_int_equal(stk_lm_get_info(lm, &info), STK_OK);
        vocab = info.vocab_size, layers = info.n_layers;
    }
    ~Lm() { stk_lm_close(lm); }
};

stk_seq_params params(uint32_t policy, uint32_t sinks, uint32_t window, uint32_t threads) {
    stk_seq_params p = {};
    p.struct_size = sizeof p;
    p.sinks = sinks, p.window = window, p.threads = threads, p.max_batch = 4, p.policy = policy;
    return p;
}

// A sequence with its own arena (freed after the sequence).
struct Seq {
    void *arena = nullptr;
    stk_seq *seq = nullptr;
    Seq(const Lm &m, const stk_seq_params &p) {
        size_t bytes = 0;
        assert_int_equal(stk_seq_arena_size(m.lm, &p, &bytes), STK_OK);
        arena = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        assert_non_null(arena);
        assert_int_equal(stk_seq_open(m.lm, &p, arena, bytes, &seq), STK_OK);
    }
    ~Seq() {
        stk_seq_close(seq);
        std::free(arena);
    }
};

std::vector<int32_t> tokens(uint64_t vocab) {
    std::vector<int32_t> t(kTokens);
    for (size_t i = 0; i < kTokens; i++) t[i] = int32_t((i * 7919 + 13) % vocab);
    return t;
}

std::vector<float> feed_all(stk_seq *s, const std::vector<int32_t> &t, uint64_t vocab) {
    std::vector<float> out(t.size() * vocab);
    assert_int_equal(stk_seq_feed(s, t.data(), t.size(), out.data()), STK_OK);
    return out;
}

std::vector<float> feed_each(stk_seq *s, const std::vector<int32_t> &t, uint64_t vocab) {
    std::vector<float> out;
    for (int32_t tok : t) {
        assert_int_equal(stk_seq_feed(s, &tok, 1, nullptr), STK_OK);
        const float *lg = nullptr;
        size_t v = 0;
        uint64_t pos = 0;
        assert_int_equal(stk_seq_logits(s, &lg, &v, &pos), STK_OK);
        assert_int_equal(v, vocab);
        out.insert(out.end(), lg, lg + v);
    }
    return out;
}

double max_delta(const std::vector<float> &a, const std::vector<float> &b) {
    assert_int_equal(a.size(), b.size());
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        assert_true(std::isfinite(a[i]) && std::isfinite(b[i]));
        m = std::max(m, double(std::fabs(a[i] - b[i])));
    }
    return m;
}

void run_fixture(const char *rel) {
    const std::string path = test_data(rel);
    Lm m(path);
    const std::vector<int32_t> t = tokens(m.vocab);
    std::vector<float> full_window;
    for (uint32_t policy = 0; policy < 4; policy++) {
        Seq a(m, params(policy, 2, 5, 1)), b(m, params(policy, 2, 5, 2));
        const std::vector<float> at_once = feed_all(a.seq, t, m.vocab);
        const std::vector<float> one_by_one = feed_each(b.seq, t, m.vocab);
        const double chunked = max_delta(at_once, one_by_one);
        print_message("%s policy %u: prompt vs token by token max |delta logit| %.3g\n", rel, policy, chunked);
        assert_true(chunked <= 1e-4);

        // Threads: the same bytes.
        Seq c(m, params(policy, 2, 5, 2));
        assert_memory_equal(feed_all(c.seq, t, m.vocab).data(), at_once.data(), at_once.size() * sizeof(float));
        // Reset: the same bytes again.
        assert_int_equal(stk_seq_reset(c.seq), STK_OK);
        assert_memory_equal(feed_all(c.seq, t, m.vocab).data(), at_once.data(), at_once.size() * sizeof(float));

        // What the state holds: 2 sinks + 5 (per key/value head under TOVA_HEAD: head 0's).
        uint64_t kept[16] = {};
        size_t n = 0;
        assert_int_equal(stk_seq_kept(a.seq, m.layers - 1, 0, kept, 16, &n), STK_OK);
        assert_int_equal(n, 7);
        assert_int_equal(kept[0], 0);
        assert_int_equal(kept[1], 1);
        assert_int_equal(kept[6], kTokens - 1);
        for (size_t i = 1; i < n; i++) assert_true(kept[i] > kept[i - 1]);
        if (policy == STK_SEQ_POLICY_WINDOW)
            for (size_t i = 2; i < n; i++) assert_int_equal(kept[i], kTokens - 7 + i);

        // A state as long as the context evicts nothing: every policy is the window's forward.
        Seq whole(m, params(policy, 0, kTokens, 1));
        const std::vector<float> w = feed_all(whole.seq, t, m.vocab);
        if (policy == STK_SEQ_POLICY_WINDOW) {
            full_window = w;
        } else {
            const double d = max_delta(w, full_window);
            print_message("%s policy %u, state >= context: vs window max |delta logit| %.3g\n", rel, policy, d);
            assert_true(d <= 1e-5);
        }
    }

    // Refusals.
    Seq s(m, params(STK_SEQ_POLICY_TOVA, 2, 5, 1));
    const int32_t bad = int32_t(m.vocab);
    assert_int_equal(stk_seq_feed(s.seq, &bad, 1, nullptr), STK_E_INVALID_ARGUMENT);
    const float *lg = nullptr;
    size_t v = 0;
    uint64_t pos = 7;
    assert_int_equal(stk_seq_logits(s.seq, &lg, &v, &pos), STK_OK);
    assert_int_equal(pos, 0);  // nothing fed

    stk_seq_params p = params(STK_SEQ_POLICY_WINDOW, 2, 5, 1);
    size_t bytes = 0;
    assert_int_equal(stk_seq_arena_size(m.lm, &p, &bytes), STK_OK);
    std::vector<uint8_t> small(bytes);
    stk_seq *none = nullptr;
    assert_int_not_equal(stk_seq_open(m.lm, &p, small.data(), bytes - 1, &none), STK_OK);
    assert_null(none);
    p.policy = 4;
    assert_int_equal(stk_seq_arena_size(m.lm, &p, &bytes), STK_E_INVALID_ARGUMENT);
    p.policy = STK_SEQ_POLICY_H2O, p.recent = 5;
    assert_int_equal(stk_seq_arena_size(m.lm, &p, &bytes), STK_E_INVALID_ARGUMENT);
}

// ---- the probe ----------------------------------------------------------------------------------

struct Rec {
    uint32_t layer, point;
    uint64_t position, n, width;
    uint32_t heads, head_width, rot_pairs, writable;
    std::vector<float> data;
    std::vector<float> projected;  // ATTN_OUT: stk_seq_attn_project of its data
};

struct Recorder {
    stk_seq *seq = nullptr;
    std::vector<Rec> recs;
};

int record(void *user, const stk_probe_data *d) {
    Recorder *r = static_cast<Recorder *>(user);
    assert_true(d->struct_size >= sizeof(stk_probe_data));
    Rec e{d->layer, d->point, d->position, d->n_tokens, d->width, d->heads, d->head_width, d->rot_pairs, d->writable,
          std::vector<float>(d->data, d->data + d->n_tokens * d->width), {}};
    if (d->point == STK_PROBE_ATTN_OUT) {
        e.projected.resize(d->n_tokens * 64);
        assert_int_equal(stk_seq_attn_project(r->seq, d->layer, d->data, d->n_tokens, e.projected.data()), STK_OK);
    }
    r->recs.push_back(std::move(e));
    return 0;
}

// The writable points' data saved, the buffer scribbled, the data written back.
int identity(void *, const stk_probe_data *d) {
    if (!d->writable) return 0;
    const size_t n = d->n_tokens * d->width;
    std::vector<float> keep(d->data, d->data + n);
    for (size_t i = 0; i < n; i++) d->data[i] = NAN;
    std::copy(keep.begin(), keep.end(), d->data);
    return 0;
}

int zero_last_ffn(void *, const stk_probe_data *d) {
    if (d->point == STK_PROBE_FFN_OUT && d->layer == 1) std::fill(d->data, d->data + d->n_tokens * d->width, 0.0f);
    return 0;
}

int stop(void *, const stk_probe_data *d) { return d->layer == 1 && d->point == STK_PROBE_V ? 1 : 0; }

void test_probe(void **) {
    Lm m(test_data("models/llama"));
    const std::vector<int32_t> t = tokens(m.vocab);
    Seq plain(m, params(STK_SEQ_POLICY_WINDOW, 0, kTokens, 2));
    const std::vector<float> want = feed_all(plain.seq, t, m.vocab);

    Seq s(m, params(STK_SEQ_POLICY_WINDOW, 0, kTokens, 2));
    Recorder r;
    r.seq = s.seq;
    assert_int_equal(stk_seq_set_probe(s.seq, STK_PROBE_ALL, record, &r), STK_OK);
    assert_memory_equal(feed_all(s.seq, t, m.vocab).data(), want.data(), want.size() * sizeof(float));
    // 4 chunks x 2 layers x 10 points, in order.
    const uint32_t H = 4, KV = 2, HD = 16, D = 64;
    assert_int_equal(r.recs.size(), 4 * 2 * STK_PROBE_POINTS);
    const uint64_t widths[STK_PROBE_POINTS] = {D, H * HD, KV * HD, H * HD, KV * HD, KV * HD, H * HD, D, D, D};
    size_t i = 0;
    for (uint64_t c = 0; c < 4; c++)
        for (uint32_t l = 0; l < 2; l++)
            for (uint32_t pt = 0; pt < STK_PROBE_POINTS; pt++, i++) {
                const Rec &e = r.recs[i];
                assert_int_equal(e.layer, l);
                assert_int_equal(e.point, pt);
                assert_int_equal(e.position, 4 * c);
                assert_int_equal(e.n, 4);
                assert_int_equal(e.width, widths[pt]);
                assert_int_equal(e.head_width * e.heads, e.width);
                assert_int_equal(e.writable, pt == STK_PROBE_ATTN_OUT || pt == STK_PROBE_ATTN_PROJ || pt == STK_PROBE_FFN_OUT);
            }
    // Per layer, the whole sequence's rows of each point.
    auto rows = [&](uint32_t l, uint32_t pt) {
        std::vector<float> all;
        for (const Rec &e : r.recs)
            if (e.layer == l && e.point == pt) all.insert(all.end(), e.data.begin(), e.data.end());
        return all;
    };
    double worst_rope = 0, worst_attn = 0;
    for (uint32_t l = 0; l < 2; l++) {
        // RoPE: rotate_half pairs (f, f + 8) at angle p * 10000^(-2f/16).
        for (uint32_t which = 0; which < 2; which++) {
            const uint32_t heads = which ? KV : H;
            const std::vector<float> pre = rows(l, which ? STK_PROBE_K_PRE : STK_PROBE_Q_PRE);
            const std::vector<float> post = rows(l, which ? STK_PROBE_K : STK_PROBE_Q);
            for (uint64_t p = 0; p < kTokens; p++)
                for (uint32_t h = 0; h < heads; h++)
                    for (uint32_t f = 0; f < HD / 2; f++) {
                        const size_t a = p * heads * HD + h * HD + f, b = a + HD / 2;
                        const double ang = double(p) * std::pow(10000.0, -2.0 * f / HD);
                        const double ra = pre[a] * std::cos(ang) - pre[b] * std::sin(ang);
                        const double rb = pre[b] * std::cos(ang) + pre[a] * std::sin(ang);
                        worst_rope = std::max({worst_rope, std::fabs(ra - post[a]), std::fabs(rb - post[b])});
                    }
        }
        // Attention: softmax(q.k / sqrt(16)) v over keys 0..p, key/value head h / 2.
        const std::vector<float> q = rows(l, STK_PROBE_Q), k = rows(l, STK_PROBE_K), v = rows(l, STK_PROBE_V);
        const std::vector<float> out = rows(l, STK_PROBE_ATTN_OUT);
        for (uint64_t p = 0; p < kTokens; p++)
            for (uint32_t h = 0; h < H; h++) {
                const uint32_t kh = h / (H / KV);
                std::vector<double> w(p + 1);
                double mx = -INFINITY, sum = 0;
                for (uint64_t s2 = 0; s2 <= p; s2++) {
                    double dot = 0;
                    for (uint32_t j = 0; j < HD; j++) dot += double(q[p * H * HD + h * HD + j]) * k[s2 * KV * HD + kh * HD + j];
                    w[s2] = dot / 4.0;
                    mx = std::max(mx, w[s2]);
                }
                for (double &x : w) sum += (x = std::exp(x - mx));
                for (uint32_t j = 0; j < HD; j++) {
                    double o = 0;
                    for (uint64_t s2 = 0; s2 <= p; s2++) o += w[s2] / sum * v[s2 * KV * HD + kh * HD + j];
                    worst_attn = std::max(worst_attn, std::fabs(o - out[p * H * HD + h * HD + j]));
                }
            }
    }
    // ATTN_PROJ: stk_seq_attn_project of ATTN_OUT, the same bytes.
    for (size_t j = 0; j + 1 < r.recs.size(); j++)
        if (r.recs[j].point == STK_PROBE_ATTN_OUT) {
            assert_int_equal(r.recs[j + 1].point, STK_PROBE_ATTN_PROJ);
            assert_memory_equal(r.recs[j].projected.data(), r.recs[j + 1].data.data(), r.recs[j + 1].data.size() * sizeof(float));
        }
    print_message("probe: RoPE recomputed max |delta| %.3g, attention recomputed max |delta| %.3g\n", worst_rope, worst_attn);
    assert_true(worst_rope <= 1e-5);
    assert_true(worst_attn <= 1e-5);

    // Overwrites.
    Seq o(m, params(STK_SEQ_POLICY_WINDOW, 0, kTokens, 2));
    assert_int_equal(stk_seq_set_probe(o.seq, STK_PROBE_ALL, identity, nullptr), STK_OK);
    assert_memory_equal(feed_all(o.seq, t, m.vocab).data(), want.data(), want.size() * sizeof(float));
    assert_int_equal(stk_seq_reset(o.seq), STK_OK);
    assert_int_equal(stk_seq_set_probe(o.seq, 1u << STK_PROBE_FFN_OUT, zero_last_ffn, nullptr), STK_OK);
    assert_true(max_delta(feed_all(o.seq, t, m.vocab), want) > 1e-3);
    // Stopped, then reset: the unprobed bytes.
    assert_int_equal(stk_seq_reset(o.seq), STK_OK);
    assert_int_equal(stk_seq_set_probe(o.seq, STK_PROBE_ALL, stop, nullptr), STK_OK);
    std::vector<float> lg(t.size() * m.vocab);
    assert_int_equal(stk_seq_feed(o.seq, t.data(), t.size(), lg.data()), STK_E_CANCELLED);
    assert_int_equal(stk_seq_set_probe(o.seq, 0, nullptr, nullptr), STK_OK);
    assert_int_equal(stk_seq_reset(o.seq), STK_OK);
    assert_memory_equal(feed_all(o.seq, t, m.vocab).data(), want.data(), want.size() * sizeof(float));
    // Refusals.
    assert_int_equal(stk_seq_set_probe(o.seq, STK_PROBE_ALL + 1, record, &r), STK_E_INVALID_ARGUMENT);
    float y[64];
    assert_int_equal(stk_seq_attn_project(o.seq, 2, lg.data(), 1, y), STK_E_INVALID_ARGUMENT);
}

void test_llama(void **) { run_fixture("models/llama"); }
void test_gpt2(void **) { run_fixture("models/gpt2"); }
void test_bloom_alibi(void **) { run_fixture("models/bloom"); }
void test_mixtral_moe(void **) { run_fixture("models/mixtral"); }

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_bloom_alibi),
        cmocka_unit_test(test_mixtral_moe),
        cmocka_unit_test(test_probe),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

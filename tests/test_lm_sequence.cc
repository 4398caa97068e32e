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
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

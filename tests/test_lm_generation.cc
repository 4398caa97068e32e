// lm/from_generation.h: the runtime's loader of a faithful generation (stk convert --profile
// faithful) against the checkpoint it was converted from.  For each fixture, every tensor the
// forward reads (lm/weights.h's open_model_weights over the model directory: the checkpoint's
// tensors in the HF layout) is found in the generation under the same key with the same shape,
// and its values are the checkpoint's: f32 arrays bit for bit, bf16 ones the checkpoint's f32
// rounded to nearest even, int8 ones within half a step of the per-matrix absmax / 127 scale the
// view carries.  The ModelConfig rebuilt from the runtime block equals the model's on the fields
// the forward reads.  A flipped payload bit, a default-profile generation and a missing int8
// scale are refused naming the file.
#include <sys/stat.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>

#include "core/float16.h"
#include "ingest/model.h"
#include "lm/from_generation.h"
#include "lm/weights.h"
#include "stk/stk.h"
#include "test_util.h"

using namespace stk;
using namespace stk::test;

namespace {

std::string source_root() {
    const char *s = std::getenv("STK_SOURCE_ROOT");
    return s ? s : ".";
}

// `stk convert` into a fresh root; returns the generation directory CURRENT names.
std::string convert(const std::string &model, const std::vector<std::string> &extra, const char *tag) {
    const std::string root = make_temp_dir(tag) + "/root";
    std::vector<std::string> args = {"convert", "--in", model, "--out", root};
    args.insert(args.end(), extra.begin(), extra.end());
    StkRun r = run_stk(args);
    if (r.exit_code != 0) fail_msg("stk convert %s: exit %d: %s", model.c_str(), r.exit_code, r.err.c_str());
    std::vector<uint8_t> cur = read_bytes(root + "/CURRENT");
    std::string name(cur.begin(), cur.end());
    name = name.substr(0, name.find_first_of(" \n"));
    return root + "/generations/" + name;
}

void flip_byte(const std::string &path, uint64_t at) {
    std::vector<uint8_t> b = read_bytes(path);
    assert_true(at < b.size());
    b[at] ^= 0x10;
    chmod(path.c_str(), 0644);
    write_bytes(path, b);
}

void same_config(const ModelConfig &a, const ModelConfig &b) {
    assert_string_equal(a.model_type, b.model_type);
    assert_int_equal(a.n_layers, b.n_layers);
    assert_int_equal(a.d_model, b.d_model);
    assert_int_equal(a.n_heads, b.n_heads);
    assert_int_equal(a.n_kv_heads, b.n_kv_heads);
    assert_int_equal(a.head_dim, b.head_dim);
    assert_int_equal(a.vocab_size, b.vocab_size);
    assert_int_equal(a.ffn_dim, b.ffn_dim);
    assert_int_equal(int(a.ffn_kind), int(b.ffn_kind));
    assert_string_equal(a.activation, b.activation);
    assert_int_equal(int(a.norm), int(b.norm));
    assert_true(a.norm_eps == b.norm_eps);
    assert_true(a.norm_offset == b.norm_offset);
    assert_int_equal(a.post_norms, b.post_norms);
    assert_int_equal(int(a.qk_norm), int(b.qk_norm));
    assert_int_equal(int(a.positions), int(b.positions));
    assert_true(a.rope_theta == b.rope_theta);
    assert_true(a.rope_local_theta == b.rope_local_theta);
    assert_int_equal(a.sliding_window, b.sliding_window);
    for (uint32_t l = 0; l < a.n_layers; l++) {
        assert_int_equal(a.sliding_window && a.layer_is_sliding(l), b.sliding_window && b.layer_is_sliding(l));
        assert_int_equal(a.n_experts && a.layer_is_moe(l), b.n_experts && b.layer_is_moe(l));
    }
    assert_true(a.attn_softcap == b.attn_softcap);
    assert_true(a.final_softcap == b.final_softcap);
    assert_true(a.emb_multiplier == b.emb_multiplier);
    assert_int_equal(a.tied_embeddings, b.tied_embeddings);
    assert_int_equal(a.parallel_attn, b.parallel_attn);
    assert_int_equal(a.n_experts, b.n_experts);
    assert_int_equal(a.top_k, b.top_k);
    assert_int_equal(a.qkv_bias, b.qkv_bias);
    assert_int_equal(a.pos_offset, b.pos_offset);
}

// Every weight of the model directory found in the generation with the checkpoint's values.
// Returns the number of views compared.
size_t compare(const std::string &model, const std::string &gen, bool int8_ffn) {
    std::unique_ptr<lm::WeightSource> want = lm::open_model_weights(model, lm::WDType::F32);
    std::unique_ptr<lm::WeightSource> got = lm::open_generation_weights(gen);
    same_config(want->config(), got->config());
    assert_contains(got->describe(), gen);
    std::unique_ptr<ModelDescription> d = describe_model(model);
    size_t n = 0, n_bf16 = 0, n_f32 = 0, n_i8 = 0;
    for (const PlanTensor &t : d->layout.tensors) {
        if (!t.streamed || t.buffer || t.tied || t.composed || t.role == Role::NONE) continue;
        const NormSlot slot = (t.role == Role::LN_G || t.role == Role::LN_B) ? t.slot : NormSlot::None;
        const lm::WeightKey key{t.role, slot, t.layer, t.expert};
        const lm::TensorView w = want->find(key), g = got->find(key);
        if (!w || !g) fail_msg("%s: %s missing (model %d, generation %d)", gen.c_str(), t.name, bool(w), bool(g));
        assert_int_equal(w.rows, g.rows);
        assert_int_equal(w.cols, g.cols);
        const float *ref = static_cast<const float *>(w.data);
        const uint64_t m = w.n_elements();
        if (g.dtype == lm::WDType::F32) {
            assert_memory_equal(g.data, w.data, m * 4);
            n_f32++;
        } else if (g.dtype == lm::WDType::BF16) {
            const auto *h = static_cast<const uint8_t *>(g.data);
            for (uint64_t i = 0; i < m; i++) {
                const uint16_t v = uint16_t(h[2 * i] | h[2 * i + 1] << 8);
                if (v != f32_to_bf16_rne(ref[i]))
                    fail_msg("%s element %llu: bf16 0x%04x, the checkpoint's %.9g rounds to 0x%04x", t.name, (unsigned long long)i, v,
                             double(ref[i]), f32_to_bf16_rne(ref[i]));
            }
            n_bf16++;
        } else {
            assert_true(int8_ffn);
            assert_non_null(g.row_scale);
            float amax = 0;
            for (uint64_t i = 0; i < m; i++) amax = std::max(amax, std::fabs(ref[i]));
            const float s = amax / 127.0f;  // docs/spec/lowbit-packing.txt: int8 absmax / 127
            const auto *q = static_cast<const int8_t *>(g.data);
            for (uint64_t r = 0; r < g.rows; r++) {
                assert_true(g.row_scale[r] == s);
                for (uint64_t c = 0; c < g.cols; c++) {
                    const float x = ref[r * g.cols + c], y = float(q[r * g.cols + c]) * g.row_scale[r];
                    if (!(std::fabs(x - y) <= 0.5001f * s)) fail_msg("%s [%llu, %llu]: %g dequantised as %g", t.name,
                                                                      (unsigned long long)r, (unsigned long long)c, double(x), double(y));
                }
            }
            n_i8++;
        }
        n++;
    }
    print_message("%s: %zu views equal the checkpoint's (%zu bf16, %zu f32, %zu int8)\n", model.c_str(), n, n_bf16, n_f32, n_i8);
    assert_true(n_bf16 > 0 && n_f32 > 0);
    assert_true(int8_ffn == (n_i8 > 0));
    return n;
}

void test_llama(void **) {
    const std::string model = test_data("models/llama");
    const std::string gen = convert(model, {"--profile", "faithful", "--ffn", "bf16"}, "lm-llama");
    assert_int_equal(compare(model, gen, false), 21);  // 2 layers x (4 attention, 3 FFN, 2 norms) + embedding, head, final norm
}

void test_gemma3_sliding_tied(void **) {
    const std::string model = source_root() + "/tests/fixtures/families/gemma3";
    const std::string gen = convert(model, {"--profile", "faithful", "--ffn", "bf16"}, "lm-gemma3");
    compare(model, gen, false);
    std::unique_ptr<lm::WeightSource> g = lm::open_generation_weights(gen);
    assert_true(g->config().tied_embeddings);
    assert_null(g->find(Role::LM_HEAD).data);  // tied: the forward reads EMB
}

void test_gpt2_fused_qkv(void **) {
    const std::string model = test_data("models/gpt2");
    compare(model, convert(model, {"--profile", "faithful", "--ffn", "bf16"}, "lm-gpt2"), false);
}

void test_mixtral_int8(void **) {
    const std::string model = test_data("models/mixtral");
    compare(model, convert(model, {"--profile", "faithful", "--ffn", "int8"}, "lm-mixtral"), true);
}

void test_flipped_bit_refused(void **) {
    const std::string gen = convert(test_data("models/llama"), {"--profile", "faithful", "--ffn", "bf16"}, "lm-flip");
    const std::string file = gen + "/arrays/L0001.attn_v.bin";
    flip_byte(file, 128 + 100);
    std::string msg = expect_error(STK_E_CHECKSUM, [&] { lm::open_generation_weights(gen); });
    assert_contains(msg, "L0001.attn_v.bin");
}

void test_flipped_scale_refused(void **) {
    const std::string gen = convert(test_data("models/mixtral"), {"--profile", "faithful", "--ffn", "int8"}, "lm-flip-scale");
    flip_byte(gen + "/arrays/L0000.experts_w2.scale.bin", 128 + 5);
    std::string msg = expect_error(STK_E_CHECKSUM, [&] { lm::open_generation_weights(gen); });
    assert_contains(msg, "L0000.experts_w2.scale.bin");
}

// The runtime block's retention policy (issue 37) through the C ABI: stk_lm_get_info reports what
// stk convert wrote, a sequence opened with STK_SEQ_POLICY_DEFAULT (or a stk_seq_params that ends
// before `policy`) keeps it, bit for bit the sequence that names it; a checkpoint has none.
std::vector<float> run_seq(stk_lm *lm, const stk_seq_params &p, const std::vector<int32_t> &ids, size_t vocab) {
    size_t bytes = 0;
    assert_int_equal(stk_seq_arena_size(lm, &p, &bytes), STK_OK);
    std::vector<uint64_t> arena(bytes / 8 + 1);
    stk_seq *seq = nullptr;
    assert_int_equal(stk_seq_open(lm, &p, arena.data(), arena.size() * 8, &seq), STK_OK);
    std::vector<float> out(ids.size() * vocab);
    assert_int_equal(stk_seq_feed(seq, ids.data(), ids.size(), out.data()), STK_OK);
    stk_seq_close(seq);
    return out;
}

void test_policy_default_and_info(void **) {
    const std::string gen = convert(test_data("models/llama"),
                                    {"--profile", "faithful", "--sinks", "2", "--window", "8", "--policy", "h2o", "--recent", "3"},
                                    "lm-policy");
    stk_lm *lm = nullptr;
    assert_int_equal(stk_lm_open(gen.c_str(), STK_LM_WEIGHTS_F32, &lm), STK_OK);
    stk_lm_info info = {};
    info.struct_size = sizeof info;
    assert_int_equal(stk_lm_get_info(lm, &info), STK_OK);
    assert_int_equal(info.generation, 1);
    assert_int_equal(info.sinks, 2);
    assert_int_equal(info.window, 8);
    assert_int_equal(info.policy, STK_SEQ_POLICY_H2O);
    assert_int_equal(info.recent, 3);
    assert_int_equal(info.ffn_dtype, 11);  // q8_0: the profile's default
    std::vector<int32_t> ids(30);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = int32_t(i * 7 % 96);  // the fixture's vocabulary: 96
    stk_seq_params p = {};
    p.struct_size = sizeof p;
    p.sinks = 2, p.window = 8, p.threads = 1;
    p.policy = STK_SEQ_POLICY_H2O, p.recent = 3;
    const std::vector<float> want = run_seq(lm, p, ids, info.vocab_size);
    p.policy = STK_SEQ_POLICY_DEFAULT, p.recent = 0;
    const std::vector<float> dflt = run_seq(lm, p, ids, info.vocab_size);
    assert_memory_equal(dflt.data(), want.data(), want.size() * 4);
    p.struct_size = offsetof(stk_seq_params, policy);  // an older caller: no policy field
    const std::vector<float> old = run_seq(lm, p, ids, info.vocab_size);
    assert_memory_equal(old.data(), want.data(), want.size() * 4);
    p.struct_size = sizeof p;
    p.policy = STK_SEQ_POLICY_WINDOW;
    const std::vector<float> win = run_seq(lm, p, ids, info.vocab_size);
    assert_true(std::memcmp(win.data(), want.data(), want.size() * 4) != 0);  // an explicit policy wins
    // An older caller's info struct stops before the appended fields: they are not written.
    stk_lm_info short_info;
    std::memset(&short_info, 0xab, sizeof short_info);
    short_info.struct_size = offsetof(stk_lm_info, generation);
    assert_int_equal(stk_lm_get_info(lm, &short_info), STK_OK);
    assert_int_equal(short_info.generation, 0xabababab);
    stk_lm_close(lm);
    assert_int_equal(stk_lm_open(test_data("models/llama").c_str(), STK_LM_WEIGHTS_BF16, &lm), STK_OK);
    info = {};
    info.struct_size = sizeof info;
    assert_int_equal(stk_lm_get_info(lm, &info), STK_OK);
    assert_int_equal(info.generation, 0);
    assert_int_equal(info.policy, 0);
    assert_int_equal(info.ffn_dtype, 9);  // bf16 as opened
    stk_lm_close(lm);
}

void test_default_profile_refused(void **) {
    const std::string gen = convert(test_data("models/llama"), {}, "lm-default");
    std::string msg = expect_error(STK_E_INVALID_ARGUMENT, [&] { lm::open_generation_weights(gen); });
    assert_contains(msg, gen);
    assert_contains(msg, "--profile faithful");
}

}  // namespace

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama),
        cmocka_unit_test(test_gemma3_sliding_tied),
        cmocka_unit_test(test_gpt2_fused_qkv),
        cmocka_unit_test(test_mixtral_int8),
        cmocka_unit_test(test_flipped_bit_refused),
        cmocka_unit_test(test_flipped_scale_refused),
        cmocka_unit_test(test_policy_default_and_info),
        cmocka_unit_test(test_default_profile_refused),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

// GGUF models as HF models (ingest/gguf_model.*, tokenizer/vocab_gguf.cc): which file a path
// names, refusals by name (architecture, unmapped tensor, several models in a directory), the
// config a GGUF gives against its HF directory's, and the tokenizer of a llama.cpp-converted GGUF
// against the vocab.json + merges.txt it was made from.  Tensor values against gguf-py:
// tests/gguf_model_reference.py; the real models: tests/real/real_models.sh.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>

#include "ingest/family.h"
#include "ingest/gguf.h"
#include "ingest/gguf_family.h"
#include "ingest/gguf_model.h"
#include "ingest/model.h"
#include "test_util.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocab_io.h"

using namespace stk;

namespace {

std::string g_tmp;

// A minimal GGUF v3 writer: string / u32 / string-array keys, F32 tensors.
struct Writer {
    std::vector<uint8_t> kv, info, data;
    uint64_t n_kv = 0, n_tensors = 0;
    static void u32(std::vector<uint8_t> &b, uint32_t v) {
        for (int i = 0; i < 4; i++) b.push_back(uint8_t(v >> (8 * i)));
    }
    static void u64(std::vector<uint8_t> &b, uint64_t v) {
        for (int i = 0; i < 8; i++) b.push_back(uint8_t(v >> (8 * i)));
    }
    static void str(std::vector<uint8_t> &b, const std::string &s) {
        u64(b, s.size());
        b.insert(b.end(), s.begin(), s.end());
    }
    void key_str(const std::string &k, const std::string &v) {
        str(kv, k);
        u32(kv, 8);
        str(kv, v);
        n_kv++;
    }
    void key_u32(const std::string &k, uint32_t v) {
        str(kv, k);
        u32(kv, 4);
        u32(kv, v);
        n_kv++;
    }
    void key_strs(const std::string &k, const std::vector<std::string> &v) {
        str(kv, k);
        u32(kv, 9);
        u32(kv, 8);
        u64(kv, v.size());
        for (const auto &s : v) str(kv, s);
        n_kv++;
    }
    void tensor(const std::string &name, std::vector<uint64_t> ne) {  // ggml order, F32, zeros
        str(info, name);
        u32(info, uint32_t(ne.size()));
        uint64_t n = 1;
        for (uint64_t d : ne) u64(info, d), n *= d;
        u32(info, 0);
        u64(info, data.size());
        data.resize(data.size() + (n * 4 + 31) / 32 * 32, 0);
        n_tensors++;
    }
    void write(const std::string &path) {
        std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
        u32(b, 3);
        u64(b, n_tensors);
        u64(b, n_kv);
        b.insert(b.end(), kv.begin(), kv.end());
        b.insert(b.end(), info.begin(), info.end());
        b.resize((b.size() + 31) / 32 * 32, 0);
        b.insert(b.end(), data.begin(), data.end());
        test::write_bytes(path, b);
    }
};

Writer llama_like(const std::string &arch) {
    Writer w;
    w.key_str("general.architecture", arch);
    w.key_u32(arch + ".embedding_length", 8);
    w.key_u32(arch + ".block_count", 1);
    w.key_u32(arch + ".attention.head_count", 2);
    w.key_u32(arch + ".feed_forward_length", 16);
    w.tensor("token_embd.weight", {8, 4});
    return w;
}

void unknown_architecture_refused_by_name(void **) {
    std::string p = g_tmp + "/mamba.gguf";
    llama_like("mamba").write(p);
    std::string msg = test::expect_error(STK_E_UNKNOWN_MODEL, [&] { describe_model(p); });
    assert_true(msg.find("'mamba'") != std::string::npos);
    assert_true(msg.find("llama") != std::string::npos && msg.find("gemma3") != std::string::npos);
}

void unmapped_tensor_refused_by_name(void **) {
    std::string p = g_tmp + "/odd.gguf";
    Writer w = llama_like("llama");
    w.tensor("blk.0.attn_mystery.weight", {8, 8});
    w.write(p);
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { describe_model(p); });
    assert_true(msg.find("'blk.0.attn_mystery.weight'") != std::string::npos);
    assert_true(msg.find("no HF name") != std::string::npos);
}

void which_file(void **) {
    const std::string fix = test::test_data("gguf/tiny-llama-f32.gguf");
    assert_string_equal(gguf_model_file(fix).c_str(), fix.c_str());
    assert_true(gguf_model_file(test::test_data("models/llama_f32")).empty());  // config.json: HF
    assert_true(gguf_model_file(test::test_data("models/llama_f32/config.json")).empty());
    // A directory holding one GGUF is that model; the same parameters as the file.
    std::string dir = g_tmp + "/one";
    mkdir(dir.c_str(), 0755);
    test::write_bytes(dir + "/tiny.gguf", test::read_bytes(fix));
    assert_string_equal(gguf_model_file(dir).c_str(), (dir + "/tiny.gguf").c_str());
    assert_int_equal(describe_model(dir)->plan.n_params, describe_model(fix)->plan.n_params);
    assert_int_equal(describe_model(dir)->plan.n_params, 86336);
    // Two models: refused, naming both.
    test::write_bytes(dir + "/other.gguf", test::read_bytes(fix));
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { gguf_model_file(dir); });
    assert_true(msg.find("other.gguf") != std::string::npos && msg.find("tiny.gguf") != std::string::npos);
}

// The config a GGUF gives is the HF directory's, field by field.
void config_equals_hf(void **) {
    struct {
        const char *gguf, *hf;
    } cases[] = {{"gguf/tiny-llama-bf16.gguf", "models/llama_f32"},
                 {"gguf/tiny-gpt2-q8_0.gguf", "../../bindings/testdata/tiny-gpt2"}};
    for (auto &c : cases) {
        auto g = describe_model(test::test_data(c.gguf));
        auto h = describe_model(test::test_data(c.hf));
        const ModelConfig &a = g->plan.config, &b = h->plan.config;
        assert_string_equal(a.model_type, b.model_type);
        assert_int_equal(a.family, b.family);
        assert_int_equal(a.d_model, b.d_model);
        assert_int_equal(a.n_layers, b.n_layers);
        assert_int_equal(a.n_heads, b.n_heads);
        assert_int_equal(a.n_kv_heads, b.n_kv_heads);
        assert_int_equal(a.head_dim, b.head_dim);
        assert_int_equal(a.vocab_size, b.vocab_size);
        assert_int_equal(a.ffn_dim, b.ffn_dim);
        assert_true(a.norm_eps == b.norm_eps);
        assert_true(a.rope_theta == b.rope_theta);
        assert_int_equal(a.tied_embeddings, b.tied_embeddings);
        assert_int_equal(a.qkv_bias, b.qkv_bias);
        assert_int_equal(g->plan.n_params, h->plan.n_params);
    }
}

// tiny-gpt2's GGUF (llama.cpp wrote its tokens, types and merges) tokenizes real text as the
// vocab.json + merges.txt it came from.
void tokenizer_equals_hf_files(void **) {
    Vocab hf = load_vocab_dir(test::test_data("../../bindings/testdata/tiny-gpt2"));
    Vocab gg = load_vocab_dir(test::test_data("gguf/tiny-gpt2-f32.gguf"));
    assert_int_equal(gg.size(), hf.size());
    assert_true(gg.pieces == hf.pieces);
    assert_true(gg.merges == hf.merges);
    std::vector<uint8_t> raw = test::read_bytes(test::test_data("tokenizer/hf_text.txt"));
    std::string text(raw.begin(), raw.end());
    Tokenizer th(hf), tg(gg);
    std::vector<uint32_t> a, b;
    th.encode(text, a);
    tg.encode(text, b);
    assert_true(a.size() > 100);
    assert_true(a == b);
    // A weights-only GGUF has no tokenizer: said as such.
    std::string msg = test::expect_error(STK_E_NOT_FOUND, [&] { load_vocab_dir(test::test_data("gguf/tiny-llama-f32.gguf")); });
    assert_true(msg.find("tokenizer.ggml") != std::string::npos);
}

// tokenizer.ggml.pre picks the split the reference uses (Qwen2's for qwen2, Llama 3's for
// llama-bpe; GPT-2's for names it does not list); an unknown tokenizer model is refused by name.
void tokenizer_refusals(void **) {
    auto with = [&](const std::string &model, const std::string &pre) {
        Writer w = llama_like("qwen2");
        w.key_str("tokenizer.ggml.model", model);
        w.key_str("tokenizer.ggml.pre", pre);
        w.key_strs("tokenizer.ggml.tokens", {"a", "b", "ab"});
        w.key_strs("tokenizer.ggml.merges", {"a b"});
        std::string p = g_tmp + "/tok-" + model + "-" + pre + ".gguf";
        w.write(p);
        return p;
    };
    Vocab v = load_gguf_vocab(with("gpt2", "qwen2"));
    assert_int_equal(v.size(), 3);
    assert_true(v.pipeline.unsupported.empty());
    assert_true(v.pipeline.byte_level_split == tok::Split::QWEN2);
    assert_true(load_gguf_vocab(with("gpt2", "llama-bpe")).pipeline.byte_level_split == tok::Split::LLAMA3);
    {
        std::vector<uint32_t> ids;
        Tokenizer t(v);
        t.encode("abba", ids);
        assert_int_equal(ids.size(), 3);  // ab, b, a
    }
    Vocab ok = load_gguf_vocab(with("gpt2", "smollm"));
    assert_true(ok.pipeline.unsupported.empty());
    assert_true(ok.pipeline.byte_level_split == tok::Split::GPT2);
    std::vector<uint32_t> ids;
    Tokenizer t(ok);
    t.encode("ab", ids);
    assert_int_equal(ids.size(), 1);
    assert_int_equal(ids[0], 2);
    std::string msg = test::expect_error(STK_E_UNSUPPORTED, [&] { load_gguf_vocab(with("bert", "default")); });
    assert_true(msg.find("'bert'") != std::string::npos);
}

// A SentencePiece GGUF without merges (Gemma: ranked by position) gets transformers'
// generate_merges: every split of every token into two tokens, ranked by the result's score
// (higher first), then the longer left part, then the longer right part, splits of one token in
// (left id, right id) order before that stable sort: written out here over the 9,840 tokens of
// 1-8 letters of {a, b, c}, and the same merges read with 1, 2 and 3 workers.
void derived_merges_match_the_rule(void **) {
    std::vector<std::string> tokens;
    for (size_t len = 1, total = 3; len <= 8; len++, total *= 3)
        for (size_t k = 0; k < total; k++) {
            std::string t;
            for (size_t j = 0, x = k; j < len; j++, x /= 3) t += char('a' + x % 3);
            tokens.push_back(t);
        }
    Writer w = llama_like("gemma3");
    w.key_str("tokenizer.ggml.model", "llama");
    w.key_strs("tokenizer.ggml.tokens", tokens);
    const std::string path = g_tmp + "/tok-gemma-derived.gguf";
    w.write(path);
    std::map<std::string, uint32_t> id_of;
    for (uint32_t id = 0; id < tokens.size(); id++) id_of[tokens[id]] = id;
    struct M {
        uint32_t result, llen, rlen, left, right;
    };
    std::vector<M> want;
    for (uint32_t id = 0; id < tokens.size(); id++) {
        std::vector<M> mine;
        for (size_t i = 1; i < tokens[id].size(); i++) {
            auto l = id_of.find(tokens[id].substr(0, i)), r = id_of.find(tokens[id].substr(i));
            if (l != id_of.end() && r != id_of.end())
                mine.push_back({id, uint32_t(i), uint32_t(tokens[id].size() - i), l->second, r->second});
        }
        std::sort(mine.begin(), mine.end(), [](const M &a, const M &c) { return std::pair(a.left, a.right) < std::pair(c.left, c.right); });
        want.insert(want.end(), mine.begin(), mine.end());
    }
    std::stable_sort(want.begin(), want.end(), [](const M &a, const M &c) {
        if (a.result != c.result) return a.result < c.result;  // score -id: the earlier token first
        if (a.llen != c.llen) return a.llen > c.llen;
        return a.rlen > c.rlen;
    });
    assert_true(want.size() > 30000);  // every token of 2+ letters splits at each position
    for (unsigned threads : {1u, 2u, 3u}) {
        const Vocab v = load_gguf_vocab(path, VocabRead::WHOLE, threads);
        assert_int_equal(v.merges.size(), want.size());
        for (size_t i = 0; i < want.size(); i++) {
            assert_int_equal(v.merges[i].first, want[i].left);
            assert_int_equal(v.merges[i].second, want[i].right);
            assert_int_equal(v.merge_results[i], want[i].result);
        }
    }
    // The pieces alone: the same pieces, no merges.
    const Vocab p = load_gguf_vocab(path, VocabRead::PIECES);
    assert_true(p.pieces == load_gguf_vocab(path).pieces && p.merges.empty());
}

// A family's GGUF part cannot be listed without its renames.  At compile time: GgufRenames has no
// default and takes a non-empty array only, so a GgufFamily that names its architectures but no
// layer renames does not compile.  At run time: every family the table gives a GGUF part lists at
// least one architecture, each of which finds that family, and maps token_embd and output_norm;
// every rename names both sides; a family without a part lists no architecture.
template <class F>
constexpr bool listable_without_renames = requires { F{.archs = nullptr}; };
struct DefaultableRenames {  // the control: a part whose renames could be left out
    const char *const *archs;
    const GgufRename *layer;
};
static_assert(!std::is_default_constructible_v<GgufRenames>, "renames must be given");
static_assert(!listable_without_renames<GgufFamily>, "a GGUF part must name its layer renames");
static_assert(listable_without_renames<DefaultableRenames>, "the check above tests what it claims");

void gguf_parts_have_renames(void **) {
    uint32_t parts = 0;
    std::vector<std::string> archs;
    for (uint32_t i = 0; i < kFamilyCount; i++) {
        const FamilyDef &f = *kFamilyDefs[i];
        if (!f.gguf) {
            assert_null(family_gguf_archs(f));
            continue;
        }
        parts++;
        const GgufFamily &g = *f.gguf;
        assert_non_null(g.archs);
        assert_non_null(g.archs[0]);
        for (const char *const *a = g.archs; *a; a++) {
            assert_true(family_def(family_by_gguf_arch(*a)).gguf == &g);
            if (std::find(archs.begin(), archs.end(), *a) == archs.end()) archs.push_back(*a);
        }
        assert_true(g.layer.n > 0);
        for (size_t k = 0; k < g.layer.n; k++) assert_true(*g.layer.p[k].gguf && *g.layer.p[k].hf);
        for (size_t k = 0; g.moe && k < g.moe->n; k++) assert_true(*g.moe->p[k].gguf && *g.moe->p[k].hf);
        assert_true(g.globals.emb && *g.globals.emb && g.globals.final_norm && *g.globals.final_norm);
        for (const GgufGather *const *x = g.gathers; x && *x; x++) {
            assert_true((*x)->n_parts >= 1 && (*x)->n_parts <= 3 && (*x)->plan);
            assert_true((*x)->row || (*x)->element);
            for (uint32_t k = 0; k < (*x)->n_parts; k++) assert_true(*(*x)->parts[k]);
        }
    }
    assert_int_equal(parts, 29);         // families with a GGUF part (deepseek_v2 and _v3 share one)
    assert_int_equal(archs.size(), 28);  // the architectures they list
}

}  // namespace

int main() {
    g_tmp = test::make_temp_dir("gguf_model");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_architecture_refused_by_name),
        cmocka_unit_test(unmapped_tensor_refused_by_name),
        cmocka_unit_test(which_file),
        cmocka_unit_test(config_equals_hf),
        cmocka_unit_test(tokenizer_equals_hf_files),
        cmocka_unit_test(tokenizer_refusals),
        cmocka_unit_test(derived_merges_match_the_rule),
        cmocka_unit_test(gguf_parts_have_renames),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

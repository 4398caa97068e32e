// The public calls behind stk inspect / tokenize / replay / export / --list-models (issue 21):
// each against what the library computes internally or a reference (HF tokenizers' ids, the
// manifest decoder, replay_snapshot, config.json), and each refusal (NULL, struct_size, index).
#include <sys/stat.h>

#include <fstream>
#include <set>

// Before cmocka (test_util.h), whose skip() macro breaks simdjson.h.
#include "ingest/family.h"

#include "test_util.h"

#include "format/manifest.h"
#include "linear_job.h"
#include "runtime/replay.h"
#include "stk/stk.h"

using namespace stk;
using namespace stk::test;

namespace {

std::string source_root() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return root ? root : ".";
}
std::string tiny_gpt2() { return source_root() + "/bindings/testdata/tiny-gpt2"; }

template <class T>
T sized() {
    T v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    return v;
}

// One tiny-gpt2 conversion with greedy tables, shared by the tests below.
const std::string &generation() {
    static const std::string out = convert_model(tiny_gpt2(), 1, 0, "inspect-api", STK_JOB_ALLOW_UNCERTIFIED_TOKENIZER).out;
    return out;
}

}  // namespace

static void tokenizer_matches_hf(void **) {
    // The ids HF tokenizers gives for hf_text.txt (tests/data/tokenizer/hf_gpt2_reference.json).
    std::ifstream ref_file(test_data("tokenizer/hf_gpt2_reference.json"));
    std::string ref((std::istreambuf_iterator<char>(ref_file)), std::istreambuf_iterator<char>());
    std::vector<uint32_t> want;
    const size_t at = ref.find("\"token_ids\":[");
    assert_true(at != std::string::npos);
    for (const char *p = ref.c_str() + at + 13; *p && *p != ']';) {
        want.push_back(uint32_t(std::strtoul(p, const_cast<char **>(&p), 10)));
        if (*p == ',') p++;
    }
    std::ifstream text_file(test_data("tokenizer/hf_text.txt"), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(text_file)), std::istreambuf_iterator<char>());
    const std::string dir = test_data("third_party/gpt2/hf-dir");
    auto p = sized<stk_tokenizer_params>();
    p.path = dir.c_str();
    stk_tokenizer *tok = nullptr;
    if (stk_tokenizer_open(&p, &tok) != STK_OK) fail_msg("%s", stk_last_error());
    auto info = sized<stk_tokenizer_info>();
    assert_int_equal(stk_tokenizer_get_info(tok, &info), STK_OK);
    assert_string_equal(info.source, (dir + "/tokenizer.json").c_str());
    assert_int_equal(info.kind, STK_TOKENIZE_BPE);
    assert_int_equal(info.vocab_size, 50257);
    assert_int_equal(info.l_tok, 0);
    const uint32_t *ids = nullptr;
    size_t n = 0;
    assert_int_equal(stk_tokenizer_encode(tok, text.data(), text.size(), STK_TOKENIZE_ADD_SPECIAL, &ids, &n), STK_OK);
    assert_int_equal(n, want.size());
    assert_memory_equal(ids, want.data(), n * 4);
    const char *dec = nullptr;
    size_t dec_len = 0;
    assert_int_equal(stk_tokenizer_decode(tok, ids, n, &dec, &dec_len), STK_OK);
    assert_int_equal(dec_len, text.size());
    assert_memory_equal(dec, text.data(), dec_len);
    const char *piece = nullptr;
    size_t piece_len = 0;
    assert_int_equal(stk_tokenizer_piece(tok, 464, &piece, &piece_len), STK_OK);  // "The"
    assert_int_equal(piece_len, 3);
    assert_memory_equal(piece, "The", 3);
    // Refusals
    assert_int_equal(stk_tokenizer_piece(tok, 50257, &piece, &piece_len), STK_E_INVALID_ARGUMENT);
    assert_contains(std::string(stk_last_error()), "id 50257 is outside the vocabulary");
    const uint32_t bad[2] = {464, 99999};
    assert_int_equal(stk_tokenizer_decode(tok, bad, 2, &dec, &dec_len), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_tokenizer_encode(tok, "x", 1, 0x2, &ids, &n), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_tokenizer_encode(tok, nullptr, 1, 0, &ids, &n), STK_E_INVALID_ARGUMENT);
    info.struct_size = 8;
    assert_int_equal(stk_tokenizer_get_info(tok, &info), STK_E_STRUCT_SIZE);
    stk_tokenizer_close(tok);
    stk_tokenizer_close(nullptr);
    p.kind = 7;
    assert_int_equal(stk_tokenizer_open(&p, &tok), STK_E_INVALID_ARGUMENT);
    assert_null(tok);
    p.kind = STK_TOKENIZE_GREEDY;
    p.l_tok = 65;
    assert_int_equal(stk_tokenizer_open(&p, &tok), STK_E_INVALID_ARGUMENT);
    p.l_tok = 0;
    p.struct_size = 8;
    assert_int_equal(stk_tokenizer_open(&p, &tok), STK_E_STRUCT_SIZE);
    assert_int_equal(stk_tokenizer_open(nullptr, &tok), STK_E_INVALID_ARGUMENT);
    p.struct_size = sizeof p;
    const std::string llama = test_data("models/llama");  // no tokenizer files
    p.path = llama.c_str();
    assert_int_equal(stk_tokenizer_open(&p, &tok), STK_E_NOT_FOUND);
}

static void greedy_pieces_concatenate_to_the_text(void **) {
    const std::string dir = test_data("third_party/gpt2/hf-dir");
    auto p = sized<stk_tokenizer_params>();
    p.path = dir.c_str();
    p.kind = STK_TOKENIZE_GREEDY;
    stk_tokenizer *tok = nullptr;
    if (stk_tokenizer_open(&p, &tok) != STK_OK) fail_msg("%s", stk_last_error());
    auto info = sized<stk_tokenizer_info>();
    assert_int_equal(stk_tokenizer_get_info(tok, &info), STK_OK);
    assert_int_equal(info.kind, STK_TOKENIZE_GREEDY);
    assert_int_equal(info.l_tok, 8);
    const std::string text = "Hello, world: greedy longest match \xc3\xbc\xe2\x9c\x93 1234567";
    const uint32_t *ids = nullptr;
    size_t n = 0;
    assert_int_equal(stk_tokenizer_encode(tok, text.data(), text.size(), 0, &ids, &n), STK_OK);
    assert_true(n > 0 && n <= text.size());
    std::string joined;  // the byte offsets: each piece starts where the previous ended
    for (size_t i = 0; i < n; i++) {
        const char *b = nullptr;
        size_t len = 0;
        assert_int_equal(stk_tokenizer_piece(tok, ids[i], &b, &len), STK_OK);
        assert_true(len >= 1 && len <= 8);
        joined.append(b, len);
    }
    assert_true(joined == text);
    const char *dec = nullptr;
    size_t dec_len = 0;
    assert_int_equal(stk_tokenizer_decode(tok, ids, n, &dec, &dec_len), STK_OK);
    assert_true(std::string(dec, dec_len) == text);
    stk_tokenizer_close(tok);
}

static void model_description(void **) {
    const std::string dir = test_data("models/llama");
    stk_model *m = nullptr;
    if (stk_model_open(dir.c_str(), &m) != STK_OK) fail_msg("%s", stk_last_error());
    auto c = sized<stk_model_info>();
    assert_int_equal(stk_model_get_info(m, &c), STK_OK);
    // config.json of tests/data/models/llama
    assert_string_equal(c.model_type, "llama");
    assert_string_equal(c.family, "llama");
    assert_int_equal(c.n_layers, 2);
    assert_int_equal(c.d_model, 64);
    assert_int_equal(c.n_heads, 4);
    assert_int_equal(c.n_kv_heads, 2);
    assert_int_equal(c.head_dim, 16);
    assert_int_equal(c.vocab_size, 96);
    assert_int_equal(c.ffn_dim, 128);
    assert_int_equal(c.max_positions, 128);
    assert_string_equal(c.activation, "silu");
    assert_string_equal(c.positions, "rope");
    assert_int_equal(c.rope, 1);
    assert_true(c.rope_theta == 10000.0);
    assert_true(c.norm_eps == 1e-5);
    assert_int_equal(c.tied_embeddings, 0);
    assert_int_equal(c.n_experts, 0);
    assert_string_equal(c.router, "");
    // Parameters: embed + head + 2 x (4 attention + 3 FFN + 2 norms) + final norm.
    const uint64_t d = 64, kv = 32, f = 128, v = 96;
    const uint64_t want = 2 * v * d + 2 * (2 * d * d + 2 * kv * d + 3 * d * f + 2 * d) + d;
    assert_int_equal(c.n_params, want);
    assert_int_equal(c.n_params_expected, want);
    uint64_t counted = 0;
    bool saw_k = false;
    for (uint32_t i = 0; i < c.n_tensors; i++) {
        auto t = sized<stk_model_tensor>();
        assert_int_equal(stk_model_tensor_at(m, i, &t), STK_OK);
        uint64_t n = 1;
        for (uint32_t k = 0; k < t.rank; k++) n *= t.shape[k];
        if (t.parameter) counted += n;
        if (t.role && std::strcmp(t.role, "K") == 0 && t.layer == 1) {
            saw_k = true;
            assert_int_equal(t.rank, 2);
            assert_int_equal(t.shape[0], kv);
            assert_int_equal(t.shape[1], d);
            assert_int_equal(t.expert, STK_NO_EXPERT);
            assert_null(t.fused);
        }
    }
    assert_int_equal(counted, want);
    assert_true(saw_k);
    auto t = sized<stk_model_tensor>();
    assert_int_equal(stk_model_tensor_at(m, c.n_tensors, &t), STK_E_INVALID_ARGUMENT);
    t.struct_size = 4;
    assert_int_equal(stk_model_tensor_at(m, 0, &t), STK_E_STRUCT_SIZE);
    c.struct_size = offsetof(stk_model_info, max_layer_f32_bytes);  // below the first version
    assert_int_equal(stk_model_get_info(m, &c), STK_E_STRUCT_SIZE);
    stk_model_close(m);
    stk_model_close(nullptr);
    assert_int_equal(stk_model_open(nullptr, &m), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_model_open("/nonexistent-stk-model", &m), STK_E_NOT_FOUND);
    assert_null(m);
}

static void family_table(void **) {
    const uint32_t n = stk_family_count();
    assert_int_equal(n, kFamilyCount - 1);  // the table less "custom" (user role patterns only)
    std::set<std::string> names;
    bool llama = false;
    for (uint32_t i = 0; i < n; i++) {
        auto f = sized<stk_family_info>();
        assert_int_equal(stk_family_at(i, &f), STK_OK);
        assert_true(names.insert(f.name).second);
        assert_non_null(f.model_types[0]);
        assert_non_null(f.roles[0]);
        for (const char *const *r = f.roles; r[1]; r++) assert_true(std::strcmp(r[0], r[1]) < 0);  // sorted, unique
        if (std::strcmp(f.name, "llama") == 0) {
            llama = true;
            assert_string_equal(f.model_types[0], "llama");
            std::set<std::string> roles;
            for (const char *const *r = f.roles; *r; r++) roles.insert(*r);
            assert_true(roles.count("Q") && roles.count("K") && roles.count("FFN_W1") && roles.count("FFN_W3"));
        }
    }
    assert_true(llama);
    auto f = sized<stk_family_info>();
    assert_int_equal(stk_family_at(n, &f), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_family_at(0, nullptr), STK_E_INVALID_ARGUMENT);
}

static void names_and_path_kinds(void **) {
    assert_string_equal(stk_dtype_name(2), "f32");
    assert_string_equal(stk_dtype_name(9), "bf16");
    assert_string_equal(stk_dtype_name(0), "unknown");
    assert_string_equal(stk_dtype_name(10), "q4_0");  // block-scaled (issue 37)
    assert_string_equal(stk_dtype_name(11), "q8_0");
    assert_string_equal(stk_dtype_name(12), "unknown");
    assert_string_equal(stk_lwt_dtype_name(STK_LWT_BF16), "bfloat16");
    assert_null(stk_lwt_dtype_name(0));
    assert_string_equal(stk_lwt_dtype_name(STK_LWT_Q4_0), "q4_0");
    assert_string_equal(stk_lwt_dtype_name(STK_LWT_Q8_0), "q8_0");
    assert_null(stk_lwt_dtype_name(15));
    assert_int_equal(stk_lwt_dtype_is_float(STK_LWT_Q8_0), 0);
    assert_int_equal(stk_lwt_dtype_is_float(STK_LWT_F16), 1);
    assert_int_equal(stk_lwt_dtype_is_float(STK_LWT_I4), 0);
    assert_int_equal(stk_lwt_dtype_is_float(99), 0);
    uint32_t dt = 0;
    assert_int_equal(stk_lwt_dtype_parse("BFloat16", &dt), STK_OK);
    assert_int_equal(dt, STK_LWT_BF16);
    assert_int_equal(stk_lwt_dtype_parse("bf16", &dt), STK_E_INVALID_ARGUMENT);  // short names are the CLI's
    assert_int_equal(stk_lwt_dtype_parse(nullptr, &dt), STK_E_INVALID_ARGUMENT);

    uint32_t kind = 99;
    assert_int_equal(stk_path_kind_of(generation().c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_GENERATION);
    assert_int_equal(stk_path_kind_of((generation() + "/arrays/prf_W.bin").c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_ARRAY);
    assert_int_equal(stk_path_kind_of(test_data("gguf/tiny-llama-f32.gguf").c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_GGUF);
    assert_int_equal(stk_path_kind_of(tiny_gpt2().c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_OTHER);
    assert_int_equal(stk_path_kind_of("/nonexistent-stk-path", &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_OTHER);
    const std::string root = make_temp_dir("inspect-api-root");
    assert_int_equal(mkdir((root + "/generations").c_str(), 0755), 0);
    assert_int_equal(stk_path_kind_of(root.c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_ROOT);
    assert_int_equal(stk_path_kind_of(nullptr, &kind), STK_E_INVALID_ARGUMENT);
}

static void manifest_and_array_files(void **) {
    const std::string &out = generation();
    const Manifest ref = read_manifest(out + "/" + kManifestFileName);
    stk_manifest *mf = nullptr;
    if (stk_manifest_open(out.c_str(), &mf) != STK_OK) fail_msg("%s", stk_last_error());
    auto m = sized<stk_manifest_info>();
    assert_int_equal(stk_manifest_get_info(mf, &m), STK_OK);
    assert_string_equal(m.dir, out.c_str());
    assert_int_equal(m.published, 0);
    assert_int_equal(m.first, 1);
    assert_memory_equal(m.curr_hash, ref.curr_hash, 32);
    assert_int_equal(m.array_count, ref.arrays.size());
    assert_int_equal(m.record_count, ref.records.size());
    assert_int_equal(m.pgen_count, ref.p_gen.size());
    assert_int_equal(m.tokenizer_mode, ref.fields.tokenizer.mode);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < m.array_count; i++) {
        auto a = sized<stk_manifest_array>();
        assert_int_equal(stk_manifest_array_at(mf, i, &a), STK_OK);
        assert_string_equal(a.name, ref.arrays[i].name);
        assert_int_equal(a.crc32c, ref.arrays[i].crc32c);
        assert_int_equal(a.sha256_low64, ref.arrays[i].sha256_low64);
        bytes += a.byte_len;
        // The file's own header says the same, and its payload hashes to it.
        auto h = sized<stk_array_file_info>();
        if (stk_array_file_verify((out + "/arrays/" + a.name).c_str(), &h) != STK_OK) fail_msg("%s", stk_last_error());
        assert_int_equal(h.crc32c, a.crc32c);
        assert_int_equal(h.sha256_low64, a.sha256_low64);
        assert_int_equal(h.byte_len, a.byte_len);
        assert_int_equal(h.dtype, a.dtype);
        assert_int_equal(h.rank, a.rank);
        assert_int_equal(h.header_bytes, 128);
    }
    assert_int_equal(m.payload_bytes, bytes);
    for (int s = 1; s <= STK_STAGE_COUNT; s++) {
        auto st = sized<stk_manifest_stage>();
        assert_int_equal(stk_manifest_stage_at(mf, stk_stage(s), &st), STK_OK);
        assert_int_equal(st.state, ref.stages[s - 1].state);
        assert_int_equal(st.crc32c, ref.stages[s - 1].crc32c);
    }
    for (uint32_t i = 0; i < m.record_count; i++) {
        auto r = sized<stk_manifest_record>();
        assert_int_equal(stk_manifest_record_at(mf, i, &r), STK_OK);
        assert_string_equal(r.text, ref.records[i].text);
        assert_int_equal(r.kind, ref.records[i].kind);
    }
    auto st = sized<stk_manifest_stage>();
    assert_int_equal(stk_manifest_stage_at(mf, stk_stage(0), &st), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_manifest_stage_at(mf, stk_stage(11), &st), STK_E_INVALID_ARGUMENT);
    auto a = sized<stk_manifest_array>();
    assert_int_equal(stk_manifest_array_at(mf, m.array_count, &a), STK_E_KEY_NOT_FOUND);
    auto r = sized<stk_manifest_record>();
    assert_int_equal(stk_manifest_record_at(mf, m.record_count, &r), STK_E_KEY_NOT_FOUND);
    m.struct_size = 4;
    assert_int_equal(stk_manifest_get_info(mf, &m), STK_E_STRUCT_SIZE);
    stk_manifest_close(mf);
    stk_manifest_close(nullptr);
    assert_int_equal(stk_manifest_open("/nonexistent-stk-manifest", &mf), STK_E_NOT_FOUND);

    // A doctored payload byte: refused, naming the file.
    const std::string copy = make_temp_dir("inspect-api-array") + "/prf_W.bin";
    {
        std::ifstream in(out + "/arrays/prf_W.bin", std::ios::binary);
        std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        assert_true(b.size() > 200);
        b[200] ^= 1;
        write_bytes(copy, b);
    }
    auto h = sized<stk_array_file_info>();
    assert_int_equal(stk_array_file_verify(copy.c_str(), &h), STK_E_CHECKSUM);
    assert_contains(std::string(stk_last_error()), "prf_W.bin");
    assert_int_equal(stk_array_file_verify(nullptr, &h), STK_E_INVALID_ARGUMENT);
}

static void replay_matches_the_snapshot(void **) {
    const std::string &out = generation();
    const std::string prompt = "hello world, hello";
    stk_generation *gen = nullptr;
    if (stk_generation_open(out.c_str(), &gen) != STK_OK) fail_msg("%s", stk_last_error());
    auto p = sized<stk_replay_params>();
    p.prompt = prompt.data();
    p.prompt_len = prompt.size();
    stk_replay *rp = nullptr;
    if (stk_replay_run(gen, &p, &rp) != STK_OK) fail_msg("%s", stk_last_error());
    auto info = sized<stk_replay_info>();
    assert_int_equal(stk_replay_get_info(rp, &info), STK_OK);
    assert_string_equal(info.mode, "greedy");
    assert_int_equal(info.n_modules, 6);
    assert_int_equal(info.lookup_mismatches, 0);
    // replay_snapshot: the mode, one line per module, one per token, the digest.
    const std::string snap = replay_snapshot(out, prompt, "");
    std::string mine = std::string("mode ") + info.mode + "\n";
    static const char *const kNames[] = {"token", "linear", "prf", "overlays", "memory", "bridge"};
    for (uint32_t i = 0; i < info.n_modules; i++) {
        auto m = sized<stk_replay_module>();
        assert_int_equal(stk_replay_module_at(rp, i, &m), STK_OK);
        assert_string_equal(m.name, kNames[i]);
    }
    // The greedy ids the tokenizer call gives over the same vocabulary (l_tok 8, as converted).
    auto tp = sized<stk_tokenizer_params>();
    const std::string dir = tiny_gpt2();
    tp.path = dir.c_str();
    tp.kind = STK_TOKENIZE_GREEDY;
    stk_tokenizer *tok = nullptr;
    if (stk_tokenizer_open(&tp, &tok) != STK_OK) fail_msg("%s", stk_last_error());
    const uint32_t *ids = nullptr;
    size_t n = 0;
    assert_int_equal(stk_tokenizer_encode(tok, prompt.data(), prompt.size(), 0, &ids, &n), STK_OK);
    assert_int_equal(info.n_tokens, n);
    std::string text;
    for (uint64_t i = 0; i < info.n_tokens; i++) {
        auto t = sized<stk_replay_token>();
        assert_int_equal(stk_replay_token_at(rp, i, &t), STK_OK);
        assert_int_equal(t.id, ids[i]);
        assert_int_equal(t.round_trip, 1);
        assert_contains(snap, std::string(t.line));
        text.append(t.bytes, t.bytes_len);
    }
    assert_true(text == prompt);
    assert_contains(snap, std::string(info.state_digest));
    stk_tokenizer_close(tok);
    auto t = sized<stk_replay_token>();
    assert_int_equal(stk_replay_token_at(rp, info.n_tokens, &t), STK_E_INVALID_ARGUMENT);
    auto m = sized<stk_replay_module>();
    assert_int_equal(stk_replay_module_at(rp, 6, &m), STK_E_INVALID_ARGUMENT);
    t.struct_size = 4;
    assert_int_equal(stk_replay_token_at(rp, 0, &t), STK_E_STRUCT_SIZE);
    stk_replay_close(rp);
    stk_replay_close(nullptr);
    p.struct_size = 4;
    assert_int_equal(stk_replay_run(gen, &p, &rp), STK_E_STRUCT_SIZE);
    assert_int_equal(stk_replay_run(nullptr, &p, &rp), STK_E_INVALID_ARGUMENT);
    stk_generation_close(gen);
}

static void lwt_header_and_offsets(void **) {
    const std::string path = make_temp_dir("inspect-api-lwt") + "/t.lwt";
    const std::string dir = tiny_gpt2();
    auto ep = sized<stk_export_params>();
    ep.in_dir = dir.c_str();
    ep.out_path = path.c_str();
    ep.dtype = STK_LWT_I8;
    auto rep = sized<stk_export_report>();
    if (stk_export_lwt(&ep, &rep) != STK_OK) fail_msg("%s", stk_last_error());
    uint32_t kind = 0;
    assert_int_equal(stk_path_kind_of(path.c_str(), &kind), STK_OK);
    assert_int_equal(kind, STK_PATH_LWT);
    stk_lwt *lwt = nullptr;
    assert_int_equal(stk_lwt_open_flags(path.c_str(), STK_LWT_OPEN_NO_CRC, &lwt), STK_OK);
    auto h = sized<stk_lwt_header>();
    assert_int_equal(stk_lwt_get_header(lwt, &h), STK_OK);
    assert_int_equal(h.version, 2);
    assert_int_equal(h.old_layout, 0);
    assert_string_equal(h.dtype, "int8");
    assert_string_equal(h.model_type, "gpt2");
    assert_int_equal(h.parameter_count, rep.parameters);
    assert_int_equal(h.tensor_count, rep.tensors);
    assert_int_equal(h.file_bytes, rep.file_bytes);
    assert_int_equal(h.data_crc32, rep.data_crc32);
    assert_int_equal(h.crc32_computed, rep.data_crc32);
    assert_int_equal(h.tied_lm_head, rep.tied_lm_head);
    assert_true(h.n_config > 0);
    const char *key = nullptr;
    uint64_t value = 0;
    assert_int_equal(stk_lwt_config_at(lwt, 0, &key, &value), STK_OK);
    assert_true(key[0] != '\0');
    assert_int_equal(stk_lwt_config_at(lwt, h.n_config, &key, &value), STK_E_INVALID_ARGUMENT);
    // Offsets: the tensors tile the data section in index order.
    uint64_t next = 0;
    for (uint32_t i = 0; i < h.tensor_count; i++) {
        auto t = sized<stk_lwt_tensor>();
        assert_int_equal(stk_lwt_tensor_at(lwt, i, &t), STK_OK);
        assert_true(t.offset >= next);
        next = t.offset + t.size_bytes;
    }
    assert_true(next <= h.data_bytes);
    stk_lwt_close(lwt);
    assert_int_equal(stk_lwt_open_flags(path.c_str(), 0x4, &lwt), STK_E_INVALID_ARGUMENT);
    assert_null(lwt);
    // A flipped data byte: stk_lwt_open refuses, NO_CRC opens and reports both CRCs.
    {
        std::ifstream in(path, std::ios::binary);
        std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        b[b.size() - 1] ^= 0x55;
        write_bytes(path + ".bad.lwt", b);
    }
    assert_int_equal(stk_lwt_open((path + ".bad.lwt").c_str(), &lwt), STK_E_CHECKSUM);
    assert_int_equal(stk_lwt_open_flags((path + ".bad.lwt").c_str(), STK_LWT_OPEN_NO_CRC, &lwt), STK_OK);
    h = sized<stk_lwt_header>();
    assert_int_equal(stk_lwt_get_header(lwt, &h), STK_OK);
    assert_int_equal(h.data_crc32, rep.data_crc32);
    assert_true(h.crc32_computed != rep.data_crc32);
    h.struct_size = 4;
    assert_int_equal(stk_lwt_get_header(lwt, &h), STK_E_STRUCT_SIZE);
    stk_lwt_close(lwt);
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokenizer_matches_hf),        cmocka_unit_test(greedy_pieces_concatenate_to_the_text),
        cmocka_unit_test(model_description),           cmocka_unit_test(family_table),
        cmocka_unit_test(names_and_path_kinds),        cmocka_unit_test(manifest_and_array_files),
        cmocka_unit_test(replay_matches_the_snapshot), cmocka_unit_test(lwt_header_and_offsets),
    };
    return cmocka_run_group_tests_name("inspect_api", tests, nullptr, nullptr);
}

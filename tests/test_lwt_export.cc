// HF -> .lwt (seed 001) through the ingestion layer: GPT-2 names, transposition, tied head and
// parameter count, from pytorch_model.bin and from safetensors (same bytes); every family of the
// fixtures in every dtype, load -> save byte-identical; refusals; the C API; the stk CLI.
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "export/lwt_export.h"
#include "format/lowbit.h"
#include "format/lwt.h"
#include "ingest/checkpoint.h"
#include "ingest/config.h"
#include "ingest/model.h"
#include "stk/stk.h"
#include "test_util.h"

using namespace stk;
using namespace stk::test;

namespace {

const char *const kFamilies[] = {"gpt2", "llama", "llama_f32", "gpt_neox", "bloom", "mixtral", "qwen2_moe"};

// The fixtures with matrices whose rows are not whole 32-value blocks (mixtral's experts: 48 wide;
// qwen2_moe's shared expert: 40), which a block-scaled export refuses.
bool refused_blocks(const char *fam, LwtDType dt) {
    return lwt_dtype_is_blocked(dt) && (std::string(fam) == "mixtral" || std::string(fam) == "qwen2_moe");
}

uint32_t f_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

std::vector<float> source_f32(const Checkpoint &ck, const TensorRef &r) {
    std::vector<uint8_t> scratch;
    const uint8_t *b = ck.tensor_bytes(r, scratch);
    std::vector<float> v(size_t(r.n_elements));
    convert_to_f32(r, b, 0, r.n_elements, v.data());
    return v;
}

// A model directory's tensors rewritten as one safetensors file with the published layout (u64
// header length, JSON padded with spaces, sorted, contiguous), as F32 or as BF16 (round to
// nearest even; NaN stays NaN), beside a copy of its config.json.
std::string safetensors_copy(const std::string &src, const char *tag, bool bf16) {
    std::string dir = make_temp_dir(tag);
    auto ck = open_checkpoint(src);
    std::string json = "{";
    std::string data;
    for (const TensorRef &r : ck->tensors()) {
        std::vector<float> v = source_f32(*ck, r);
        std::string shape = "[";
        for (size_t i = 0; i < r.shape.size(); i++) shape += (i ? "," : "") + std::to_string(r.shape[i]);
        shape += "]";
        if (json.size() > 1) json += ",";
        const size_t at = data.size();
        if (bf16)
            for (float f : v) {
                const uint16_t h = f32_to_bf16_rne(f);
                data.append(reinterpret_cast<const char *>(&h), 2);
            }
        else data.append(reinterpret_cast<const char *>(v.data()), v.size() * 4);
        json += "\"" + r.name + "\":{\"dtype\":\"" + (bf16 ? "BF16" : "F32") + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
                std::to_string(at) + "," + std::to_string(data.size()) + "]}";
    }
    json += "}";
    while (json.size() % 8) json += ' ';
    std::vector<uint8_t> file(8);
    uint64_t n = json.size();
    std::memcpy(file.data(), &n, 8);
    file.insert(file.end(), json.begin(), json.end());
    file.insert(file.end(), data.begin(), data.end());
    write_bytes(dir + "/model.safetensors", file);
    write_bytes(dir + "/config.json", read_bytes(src + "/config.json"));
    return dir;
}

// A GPT-2 directory in safetensors (hub names, f32), written from the .bin fixture's tensors.
std::string gpt2_safetensors_dir() { return safetensors_copy(test_data("models/gpt2"), "lwt_gpt2_st", false); }

// export_lwt with the options the tests vary (0: the defaults).
LwtExportResult export_with(const std::string &in, const std::string &out, LwtDType dt, uint64_t chunk = 0,
                            uint32_t threads = 0) {
    LwtExportOptions o;
    o.in = in;
    o.out = out;
    o.dtype = dt;
    o.chunk_elements = chunk;
    o.threads = threads;
    return export_lwt(o);
}

std::string export_to(const std::string &in, const std::string &out, LwtDType dt = LwtDType::F32) {
    export_with(in, out, dt);
    return out;
}

struct Run {
    int exit_code;
    std::string out;
};
Run run_stk(const std::string &args) {
    const char *bin = std::getenv("STK_BIN");
    if (!bin) fail_msg("STK_BIN is not set");
    std::string cmd = std::string(bin) + " " + args + " 2>&1";
    FILE *p = popen(cmd.c_str(), "r");
    assert_non_null(p);
    Run r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

}  // namespace

// Seed 001 for the tiny GPT-2 (2 layers, d 32, vocab 64, 16 positions), from pytorch_model.bin.
static void test_gpt2_bin(void **) {
    std::string dir = make_temp_dir("lwt_gpt2");
    std::string out = export_to(test_data("models/gpt2"), dir + "/gpt2.lwt");
    LwtFile f(out);
    const LwtHeader &h = f.header();
    assert_string_equal(h.model_type.c_str(), "gpt2");
    assert_string_equal(h.dtype.c_str(), "float32");
    assert_true(h.tied_lm_head);
    std::vector<std::pair<std::string, uint64_t>> cfg = {
        {"n_layer", 2}, {"n_head", 4}, {"n_embd", 32}, {"vocab_size", 64}, {"block_size", 16}};
    assert_true(h.config == cfg);
    std::vector<LwtTensorSpec> layout = gpt2_lwt_layout(2, 32, 64, 16);
    assert_int_equal(f.tensors().size(), 28);
    assert_int_equal(layout.size(), 28);
    uint64_t count = 0;
    for (size_t i = 0; i < layout.size(); i++) {
        const LwtTensor &t = f.tensors()[i];
        assert_string_equal(t.name.c_str(), layout[i].name.c_str());
        assert_int_equal(t.ndim, layout[i].shape.size());
        for (uint32_t d = 0; d < t.ndim; d++) assert_int_equal(t.shape[d], layout[i].shape[d]);
        assert_int_equal(uint32_t(t.dtype), uint32_t(LwtDType::F32));
        count += t.n_elements;
    }
    auto desc = describe_model(test_data("models/gpt2"));
    assert_int_equal(count, h.parameter_count);
    assert_int_equal(count, desc->plan.n_params);
    assert_int_equal(count, expected_param_count(desc->plan.config));
    assert_null(f.find("lm_head.weight"));
    assert_null(f.find("transformer.h.0.attn.bias"));  // buffers are not written
    // Values: bit-exact copies, Conv1D weights transposed.
    for (const TensorRef &r : desc->checkpoint->tensors()) {
        const LwtTensor *t = f.find("transformer." + r.name);
        if (!t) {
            assert_true(r.name.find("attn.bias") != std::string::npos || r.name.find("masked_bias") != std::string::npos);
            continue;
        }
        std::vector<float> src = source_f32(*desc->checkpoint, r), got(size_t(t->n_elements));
        f.read_f32(*t, got.data());
        bool conv1d = r.name.find(".weight") != std::string::npos && r.shape.size() == 2 && r.name.find("h.") == 0;
        for (uint64_t i = 0; i < r.n_elements; i++) {
            uint64_t j = i;
            if (conv1d) {
                uint64_t row = i / r.shape[1], col = i % r.shape[1];
                j = col * r.shape[0] + row;  // stored [in, out] -> [out, in]
            }
            assert_int_equal(f_bits(got[size_t(j)]), f_bits(src[size_t(i)]));
        }
    }
    // The expected.json checks (written by scripts/make_model_fixtures.py from HF's own slicing):
    // Q[3][5] and K[7][30] of layer 1 are rows 3 and 32 + 7 of the fused [3D, D] c_attn.
    const LwtTensor *ca = f.find("transformer.h.1.attn.c_attn.weight");
    std::vector<float> v(size_t(ca->n_elements));
    f.read_f32(*ca, v.data());
    assert_true(std::fabs(double(v[3 * 32 + 5]) - 0.08623429387807846) < 1e-8);
    assert_true(std::fabs(double(v[39 * 32 + 30]) - 0.004585679154843092) < 1e-9);
}

// From model.safetensors: the same .lwt, byte for byte (the source format is not in the file).
static void test_gpt2_safetensors_same_bytes(void **) {
    std::string dir = make_temp_dir("lwt_gpt2_cmp");
    std::string st = gpt2_safetensors_dir();
    for (LwtDType dt : {LwtDType::F32, LwtDType::I4, LwtDType::BF16}) {
        std::string a = export_to(test_data("models/gpt2"), dir + "/bin." + lwt_dtype_name(dt) + ".lwt", dt);
        std::string b = export_to(st, dir + "/st." + lwt_dtype_name(dt) + ".lwt", dt);
        assert_true(read_bytes(a) == read_bytes(b));
    }
    auto d = describe_model(st);
    assert_string_equal(d->plan.format, "safetensors");
}

// GPT-2 small from its config alone: seed 001's 148 tensors and 124,439,808 parameters
// (spec-notes 5: the seed's 124,443,648 is an arithmetic slip).
static void test_gpt2_small_count(void **) {
    std::vector<LwtTensorSpec> l = gpt2_lwt_layout(12, 768, 50257, 1024);
    assert_int_equal(l.size(), 148);
    uint64_t n = 0;
    for (auto &t : l) {
        uint64_t e = 1;
        for (uint64_t d : t.shape) e *= d;
        n += e;
    }
    assert_int_equal(n, 124439808ull);
    assert_string_equal(l[4].name.c_str(), "transformer.h.0.attn.c_attn.weight");
    assert_int_equal(l[4].shape[0], 2304);
    assert_int_equal(l[4].shape[1], 768);
    ParsedConfig pc = parse_model_config(
        "{\"model_type\":\"gpt2\",\"n_layer\":12,\"n_head\":12,\"n_embd\":768,\"vocab_size\":50257,\"n_positions\":1024,"
        "\"n_ctx\":1024,\"activation_function\":\"gelu_new\",\"layer_norm_epsilon\":1e-05}",
        "config.json");
    assert_int_equal(expected_param_count(pc.config), 124439808ull);
}

// Every family of the fixtures in every dtype: parameters preserved, load -> save identical,
// names as stored (other families) and matrices in the requested dtype, vectors f32.
static void test_families_all_dtypes(void **) {
    std::string dir = make_temp_dir("lwt_families");
    for (const char *fam : kFamilies) {
        auto desc = describe_model(test_data(std::string("models/") + fam));
        for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
            LwtDType dt = LwtDType(c);
            if (refused_blocks(fam, dt)) {  // refused, naming the tensor; nothing written
                const std::string p = dir + "/" + fam + "." + lwt_dtype_name(dt) + ".lwt";
                std::string m = expect_error(STK_E_UNSUPPORTED, [&] { export_to(test_data(std::string("models/") + fam), p, dt); });
                assert_contains(m, std::string(fam) == "mixtral" ? "rows of 48 values" : "rows of 40 values");
                assert_false(file_exists(p));
                continue;
            }
            std::string a =
                export_to(test_data(std::string("models/") + fam), dir + "/" + fam + "." + lwt_dtype_name(dt) + ".lwt", dt);
            std::string b = dir + "/" + fam + "." + lwt_dtype_name(dt) + ".resaved.lwt";
            save_lwt(load_lwt(a), b);
            if (read_bytes(a) != read_bytes(b)) fail_msg("%s %s: load -> save differs", fam, lwt_dtype_name(dt));
            LwtFile f(a);
            assert_int_equal(f.header().parameter_count, desc->plan.n_params);
            assert_string_equal(f.header().model_type.c_str(), desc->plan.config.model_type);
            for (const LwtTensor &t : f.tensors()) {
                assert_int_equal(uint32_t(t.dtype), uint32_t(t.ndim >= 2 ? dt : LwtDType::F32));
                if (std::string(fam) != "gpt2") assert_non_null(desc->checkpoint->find(t.name));
            }
        }
    }
}

// An existing output is refused and untouched; NaN weights are refused and leave nothing.
static void test_export_refusals(void **) {
    std::string dir = make_temp_dir("lwt_refuse");
    std::string p = dir + "/x.lwt";
    write_bytes(p, {7});
    assert_contains(expect_error(STK_E_OUTPUT_EXISTS, [&] { export_to(test_data("models/gpt2"), p); }), "x.lwt");
    assert_int_equal(read_bytes(p).size(), 1);
    std::string q = dir + "/nan.lwt";
    std::string m = expect_error(STK_E_NONFINITE, [&] { export_to(test_data("models/nonfinite"), q); });
    assert_contains(m, "element");
    assert_false(file_exists(q));
    expect_error(STK_E_NOT_FOUND, [&] { export_to(dir + "/no-such-model", dir + "/y.lwt"); });
    std::string cmd = "test $(ls -A '" + dir + "' | wc -l) -eq 1";  // only x.lwt: no temporaries
    assert_int_equal(std::system(cmd.c_str()), 0);
}

static void test_c_api(void **) {
    std::string dir = make_temp_dir("lwt_capi");
    std::string out = dir + "/g.lwt";
    std::string in = test_data("models/gpt2");
    stk_export_params p = {};
    p.struct_size = sizeof p;
    p.in_dir = in.c_str();
    p.out_path = out.c_str();
    p.dtype = STK_LWT_I8;
    stk_export_report r = {};
    r.struct_size = sizeof r;
    assert_int_equal(stk_export_lwt(&p, &r), STK_OK);
    assert_int_equal(r.tensors, 28);
    assert_int_equal(r.file_bytes, read_bytes(out).size());
    assert_int_equal(r.tied_lm_head, 1);
    assert_int_equal(stk_export_lwt(&p, &r), STK_E_OUTPUT_EXISTS);
    p.struct_size = 8;
    assert_int_equal(stk_export_lwt(&p, nullptr), STK_E_STRUCT_SIZE);
    p.struct_size = sizeof p;
    p.dtype = 99;
    assert_int_equal(stk_export_lwt(&p, nullptr), STK_E_INVALID_ARGUMENT);
    p.dtype = STK_LWT_I8;
    p.threads = 65;  // more than kLwtExportMaxThreads
    assert_int_equal(stk_export_lwt(&p, nullptr), STK_E_INVALID_ARGUMENT);
    // Two threads, and a caller built before `threads` existed (its shorter struct_size: one
    // thread, whatever lies past it): the same bytes as the first export.
    std::string out2 = dir + "/g2.lwt", out_old = dir + "/g_old.lwt";
    p.threads = 2;
    p.out_path = out2.c_str();
    assert_int_equal(stk_export_lwt(&p, nullptr), STK_OK);
    p.struct_size = offsetof(stk_export_params, threads);  // 32: the first version's sizeof
    p.reserved = 0xdeadbeef;                               // its tail padding, uninitialised
    p.threads = 1000;
    p.out_path = out_old.c_str();
    assert_int_equal(stk_export_lwt(&p, nullptr), STK_OK);
    assert_true(read_bytes(out2) == read_bytes(out));
    assert_true(read_bytes(out_old) == read_bytes(out));
    p.struct_size = sizeof p;
    p.out_path = out.c_str();
    p.threads = 0;

    stk_lwt *h = nullptr;
    assert_int_equal(stk_lwt_open(out.c_str(), &h), STK_OK);
    uint32_t n = 0;
    const char *json = nullptr;
    size_t json_len = 0;
    assert_int_equal(stk_lwt_info(h, &n, &json, &json_len), STK_OK);
    assert_int_equal(n, 28);
    assert_true(json_len > 20 && std::strncmp(json, "{\"version\":2,\"model_type\":\"gpt2\"", 32) == 0);  // int8: version 2
    stk_lwt_tensor t = {};
    t.struct_size = sizeof t;
    assert_int_equal(stk_lwt_find(h, "transformer.h.0.mlp.c_fc.weight", &t), STK_OK);
    assert_int_equal(t.dtype, STK_LWT_I8);
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.shape[0], 128);
    assert_int_equal(t.shape[1], 32);
    assert_int_equal(t.size_bytes, 128 * 32);
    assert_true(t.scale > 0.0f);
    std::vector<float> v(size_t(t.n_elements));
    assert_int_equal(stk_lwt_read_f32(h, t.name, v.data(), v.size()), STK_OK);
    for (size_t i = 0; i < v.size(); i++)
        assert_int_equal(f_bits(v[i]), f_bits(float(int8_t(static_cast<const uint8_t *>(t.data)[i])) * t.scale));
    assert_int_equal(stk_lwt_read_f32(h, t.name, v.data(), v.size() - 1), STK_E_INVALID_ARGUMENT);
    assert_int_equal(stk_lwt_find(h, "lm_head.weight", &t), STK_E_KEY_NOT_FOUND);
    assert_int_equal(stk_lwt_tensor_at(h, 0, &t), STK_OK);
    assert_string_equal(t.name, "transformer.wte.weight");
    assert_int_equal(stk_lwt_tensor_at(h, 28, &t), STK_E_INVALID_ARGUMENT);
    t.struct_size = 16;
    assert_int_equal(stk_lwt_tensor_at(h, 0, &t), STK_E_STRUCT_SIZE);
    stk_lwt_close(h);
    stk_lwt_close(nullptr);

    std::vector<uint8_t> bytes = read_bytes(out);
    bytes[bytes.size() - 64 - 1] ^= 0xFF;  // a byte of the last tensors (or padding)
    std::string bad = dir + "/bad.lwt";
    write_bytes(bad, bytes);
    stk_status s = stk_lwt_open(bad.c_str(), &h);
    assert_true(s == STK_E_CHECKSUM || s == STK_E_BAD_HEADER);
    assert_contains(stk_last_error(), "bad.lwt");
    assert_null(h);
}

static void test_cli(void **) {
    std::string dir = make_temp_dir("lwt_cli");
    std::string out = dir + "/g.lwt";
    std::string in = test_data("models/gpt2");
    Run r = run_stk("export --in '" + in + "' --out '" + out + "' --dtype int4 --json");
    if (r.exit_code != 0) fail_msg("%s", r.out.c_str());
    assert_contains(r.out, "\"tensors\": 28");
    assert_contains(r.out, "\"dtype\": \"int4\"");
    assert_contains(r.out, "\"tied_lm_head\": true");
    r = run_stk("export --in '" + in + "' --out '" + out + "'");
    assert_int_equal(r.exit_code, 1);
    assert_contains(r.out, "STK_E_OUTPUT_EXISTS");
    r = run_stk("export --in '" + in + "' --out '" + dir + "/z.lwt' --dtype int3");
    assert_int_equal(r.exit_code, 2);
    r = run_stk("export --in '" + in + "' --out '" + dir + "/t2.lwt' --dtype int4 --threads 2");
    if (r.exit_code != 0) fail_msg("%s", r.out.c_str());
    assert_true(read_bytes(dir + "/t2.lwt") == read_bytes(out));
    r = run_stk("export --in '" + in + "' --out '" + dir + "/t65.lwt' --threads 65");
    assert_int_equal(r.exit_code, 2);
    assert_contains(r.out, "--threads takes 1..64, not '65'");
    assert_false(file_exists(dir + "/t65.lwt"));
    r = run_stk("inspect --in '" + out + "'");
    if (r.exit_code != 0) fail_msg("%s", r.out.c_str());
    assert_contains(r.out, "model type      gpt2");
    assert_contains(r.out, "OK (header says");
    assert_contains(r.out, "transformer.h.1.mlp.c_proj.weight");
    assert_contains(r.out, "int4");
    r = run_stk("inspect --json --in '" + out + "'");
    assert_int_equal(r.exit_code, 0);
    assert_contains(r.out, "\"crc_ok\": true");
    assert_contains(r.out, "\"tensor_count\":28");
    std::vector<uint8_t> b = read_bytes(out);
    LwtFile f(out);
    b[size_t(f.data_offset())] ^= 1;  // first byte of wte
    write_bytes(dir + "/bad.lwt", b);
    r = run_stk("inspect --in '" + dir + "/bad.lwt'");
    assert_int_equal(r.exit_code, 4);
    assert_contains(r.out, "MISMATCH");
    b[0] = 'X';
    write_bytes(dir + "/notlwt.lwt", b);
    r = run_stk("inspect --in '" + dir + "/notlwt.lwt'");
    assert_int_equal(r.exit_code, 1);
}

// Streaming export: the bytes do not depend on the chunk size (chunks of 8 values, of 24 with
// transposed tiles cut mid-tile, the default, and one chunk per tensor), and every tensor's
// packed bytes equal quantising the whole tensor at once (lwt_quantize_tensor over the source
// values in stored order); a NaN is reported at the same element whatever the chunking.
static void test_streaming_chunks_same_bytes(void **) {
    std::string dir = make_temp_dir("lwt_chunks");
    for (const char *fam : kFamilies) {
        std::string in = test_data(std::string("models/") + fam);
        auto desc = describe_model(in);
        for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
            LwtDType dt = LwtDType(c);
            if (refused_blocks(fam, dt)) continue;
            std::string base = dir + "/" + fam + "." + lwt_dtype_name(dt);
            LwtExportResult r8 = export_with(in, base + ".8.lwt", dt, 8);
            // One chunk of 8 values (32 for the block-scaled dtypes: whole blocks), or 8 transposed
            // rows (gpt2's mlp.c_proj: 8 x 128 values).
            assert_int_equal(r8.peak_buffer_bytes,
                             std::string(fam) == "gpt2" ? 4 * 8 * 128 : lwt_dtype_is_blocked(dt) ? 4 * 32 : 4 * 8);
            std::vector<uint8_t> want = read_bytes(base + ".8.lwt");
            for (uint64_t chunk : {uint64_t(3), uint64_t(24), uint64_t(0), uint64_t(1) << 30}) {
                std::string p = base + "." + std::to_string(chunk) + ".lwt";
                export_with(in, p, dt, chunk);
                if (read_bytes(p) != want)
                    fail_msg("%s %s: chunk %llu gives other bytes than chunk 8", fam, lwt_dtype_name(dt),
                             (unsigned long long)chunk);
            }
            LwtFile f(base + ".8.lwt");
            for (const LwtTensor &t : f.tensors()) {
                std::string src_name = t.name;
                const TensorRef *r = desc->checkpoint->find(src_name);
                if (!r && src_name.rfind("transformer.", 0) == 0) r = desc->checkpoint->find(src_name.substr(12));
                assert_non_null(r);
                std::vector<float> v = source_f32(*desc->checkpoint, *r);
                bool conv1d =
                    std::string(fam) == "gpt2" && r->shape.size() == 2 && r->name.find("h.") == 0;  // hub Conv1D weights
                if (conv1d) {
                    std::vector<float> tr(v.size());  // stored [in, out] -> [out, in]
                    for (uint64_t a = 0; a < r->shape[0]; a++)
                        for (uint64_t b = 0; b < r->shape[1]; b++)
                            tr[size_t(b * r->shape[0] + a)] = v[size_t(a * r->shape[1] + b)];
                    v.swap(tr);
                }
                std::vector<uint8_t> packed(size_t(t.size_bytes));
                LwtQuant q = lwt_quantize_tensor(t.name, t.dtype, v.data(), t.n_elements, nullptr, packed.data());
                assert_int_equal(f_bits(q.scale), f_bits(t.quant.scale));
                assert_int_equal(q.zero_point, t.quant.zero_point);
                assert_memory_equal(packed.data(), f.tensor_data(t), packed.size());
            }
        }
    }
    for (LwtDType dt : {LwtDType::F32, LwtDType::I4, LwtDType::BINARY}) {  // binary: refused in its one pass
        std::string m0 =
            expect_error(STK_E_NONFINITE, [&] { export_with(test_data("models/nonfinite"), dir + "/nan.lwt", dt, 0); });
        std::string m8 =
            expect_error(STK_E_NONFINITE, [&] { export_with(test_data("models/nonfinite"), dir + "/nan.lwt", dt, 8); });
        assert_string_equal(m0.c_str(), m8.c_str());
        assert_contains(m0, "element");
        assert_false(file_exists(dir + "/nan.lwt"));
    }
}

// Threads: the same bytes at 1, 2 and 3 threads for every family and dtype, with small chunks
// (many rounds, pieces ending inside tensors and past their ends) and the default chunk; the
// same NaN refusal (message and element index) at any thread count.
static void test_threads_same_bytes(void **) {
    std::string dir = make_temp_dir("lwt_threads");
    for (const char *fam : kFamilies) {
        std::string in = test_data(std::string("models/") + fam);
        for (uint32_t c = kLwtDTypeFirst; c <= kLwtDTypeLast; c++) {
            LwtDType dt = LwtDType(c);
            if (refused_blocks(fam, dt)) continue;
            for (uint64_t chunk : {uint64_t(8), uint64_t(0)}) {
                std::string base = dir + "/" + fam + "." + lwt_dtype_name(dt) + "." + std::to_string(chunk);
                LwtExportResult r1 = export_with(in, base + ".t1.lwt", dt, chunk, 1);
                std::vector<uint8_t> want = read_bytes(base + ".t1.lwt");
                for (uint32_t threads : {2u, 3u}) {
                    std::string p = base + ".t" + std::to_string(threads) + ".lwt";
                    LwtExportResult rt = export_with(in, p, dt, chunk, threads);
                    assert_int_equal(rt.data_crc32, r1.data_crc32);
                    if (read_bytes(p) != want)
                        fail_msg("%s %s chunk %llu: %u threads give other bytes than 1", fam, lwt_dtype_name(dt),
                                 (unsigned long long)chunk, threads);
                    std::remove(p.c_str());
                }
                std::remove((base + ".t1.lwt").c_str());
            }
        }
    }
    for (LwtDType dt : {LwtDType::F32, LwtDType::I4, LwtDType::TERNARY, LwtDType::BINARY}) {
        std::string m1 =
            expect_error(STK_E_NONFINITE, [&] { export_with(test_data("models/nonfinite"), dir + "/nan.lwt", dt, 8, 1); });
        std::string m2 =
            expect_error(STK_E_NONFINITE, [&] { export_with(test_data("models/nonfinite"), dir + "/nan.lwt", dt, 8, 2); });
        assert_string_equal(m1.c_str(), m2.c_str());
        assert_false(file_exists(dir + "/nan.lwt"));
    }
    // The same model in bf16 (statistics and packing read the bits): the same tensor and element
    // named, at 1 and 2 threads, small and default chunks; in the statistics pass (i4, ternary)
    // and in binary's one pass.
    const std::string bf16_dir = safetensors_copy(test_data("models/nonfinite"), "lwt_nan_bf16", true);
    for (LwtDType dt : {LwtDType::F32, LwtDType::I4, LwtDType::TERNARY, LwtDType::BINARY}) {
        std::string want =
            expect_error(STK_E_NONFINITE, [&] { export_with(test_data("models/nonfinite"), dir + "/nan.lwt", dt, 8, 1); });
        want = want.substr(want.find(": tensor"));
        for (uint64_t chunk : {uint64_t(8), uint64_t(0)})
            for (uint32_t threads : {1u, 2u}) {
                std::string m =
                    expect_error(STK_E_NONFINITE, [&] { export_with(bf16_dir, dir + "/nan.lwt", dt, chunk, threads); });
                assert_string_equal(m.substr(m.find(": tensor")).c_str(), want.c_str());
                assert_false(file_exists(dir + "/nan.lwt"));
            }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpt2_bin),
        cmocka_unit_test(test_gpt2_safetensors_same_bytes),
        cmocka_unit_test(test_gpt2_small_count),
        cmocka_unit_test(test_families_all_dtypes),
        cmocka_unit_test(test_export_refusals),
        cmocka_unit_test(test_c_api),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_streaming_chunks_same_bytes),
        cmocka_unit_test(test_threads_same_bytes),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

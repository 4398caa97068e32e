// open_checkpoint: every real file in tests/data/third_party/tensors, the directory priority
// (model.safetensors, its index, pytorch_model.bin, its index), clear errors for what is not a
// checkpoint; the dtype conversions checked exhaustively against their definitions.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "ingest/config.h"
#include "ingest/dtype_convert.h"
#include "ingest/model_files.h"
#include "ingest_expect.h"
#include "test_util.h"

using namespace stk;

static std::string g_dir;

static void every_shared_tensor_file(void **) {
    std::string dir = test::third_party_data("tensors");
    std::vector<std::string> files;
    DIR *d = opendir(dir.c_str());
    assert_non_null(d);
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.') files.push_back(e->d_name);
    closedir(d);
    std::sort(files.begin(), files.end());
    assert_int_equal(files.size(), 16);
    size_t loaded = 0, lfs = 0;
    for (const std::string &f : files) {
        if (f.find("LFS_POINTER") != std::string::npos) {
            test::expect_error(STK_E_LFS_POINTER, [&] { open_checkpoint(dir + "/" + f); });
            lfs++;
            continue;
        }
        auto ck = open_checkpoint(dir + "/" + f);
        test::expect_checkpoint_matches(*ck, ("shared/" + f).c_str());
        assert_true(ck->file_bytes() == test::read_bytes(dir + "/" + f).size());
        loaded++;
    }
    assert_int_equal(loaded, 15);
    assert_int_equal(lfs, 1);
}

static void copy_file(const std::string &from, const std::string &to) { test::write_bytes(to, test::read_bytes(from)); }

static std::string fresh_dir(const char *tag) {
    std::string d = g_dir + "/" + tag;
    mkdir(d.c_str(), 0755);
    return d;
}

static void directory_priority(void **) {
    std::string st = test::test_data("ingest/safetensors/all_dtypes.safetensors");
    std::string bin = test::test_data("ingest/torch/basic.pt");
    std::string shards = test::test_data("ingest/safetensors/sharded");

    std::string d = fresh_dir("both");
    copy_file(st, d + "/model.safetensors");
    copy_file(bin, d + "/pytorch_model.bin");
    auto ck = open_checkpoint(d);
    assert_string_equal(ck->format(), "safetensors");
    assert_non_null(ck->find("f8_e4m3"));

    d = fresh_dir("index_and_bin");
    for (const char *f : {"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
        copy_file(shards + "/" + f, d + "/" + f);
    copy_file(bin, d + "/pytorch_model.bin");
    ck = open_checkpoint(d);
    assert_string_equal(ck->format(), "safetensors-sharded");

    d = fresh_dir("bin_only");
    copy_file(bin, d + "/pytorch_model.bin");
    ck = open_checkpoint(d);
    assert_string_equal(ck->format(), "pytorch-zip");
    assert_int_equal(ck->tensors().size(), 10);
    assert_string_equal(ck->files()[0].c_str(), (d + "/pytorch_model.bin").c_str());

    d = fresh_dir("empty");
    std::string m = test::expect_error(STK_E_NOT_FOUND, [&] { open_checkpoint(d); });
    assert_contains(m, d);
    assert_contains(m, "model.safetensors");
    assert_contains(m, "pytorch_model.bin.index.json");
    m = test::expect_error(STK_E_NOT_FOUND, [&] { open_checkpoint(g_dir + "/nope.safetensors"); });
    assert_contains(m, "nope.safetensors");
}

static void not_checkpoints(void **) {
    std::string p = g_dir + "/bare.pkl";
    test::write_bytes(p, {0x80, 0x04, 0x4b, 0x01, 0x2e});
    std::string m = test::expect_error(STK_E_UNSUPPORTED, [&] { open_checkpoint(p); });
    assert_contains(m, "bare Python pickle");
    p = g_dir + "/empty.bin";
    test::write_bytes(p, {});
    test::expect_error(STK_E_TRUNCATED, [&] { open_checkpoint(p); });
}

// ---- a model path resolved once (ingest/model_files.h) ---------------------------------

// The refusal a reader raises from the resolved files is the one the path-taking reader raised,
// status and message byte for byte.
static void same_refusal(stk_status status, const std::function<void()> &by_path, const std::function<void()> &by_files,
                         const char *contains) {
    std::string a = test::expect_error(status, by_path), b = test::expect_error(status, by_files);
    assert_string_equal(a.c_str(), b.c_str());
    assert_contains(b, contains);
}

static void model_files_resolved(void **) {
    std::string d = fresh_dir("mf_hf");
    copy_file(test::test_data("models/gpt2/config.json"), d + "/config.json");
    copy_file(test::test_data("ingest/torch/basic.pt"), d + "/pytorch_model.bin");
    test::write_bytes(d + "/merges.txt", {'#', '\n'});
    test::write_bytes(d + "/vocab.json", {'{', '}', '\n'});
    ModelFiles m = resolve_model_files(d);
    assert_true(m.kind == ModelKind::HfDirectory);
    assert_string_equal(m.config.c_str(), (d + "/config.json").c_str());
    assert_string_equal(m.checkpoint.c_str(), (d + "/pytorch_model.bin").c_str());
    assert_true(m.gguf.empty() && m.roles.empty() && !m.config_refusal && !m.checkpoint_refusal);
    assert_int_equal(m.tokenizer.size(), 2);
    assert_string_equal(m.tokenizer[0].c_str(), "vocab.json");  // kTokenizerFileNames order
    assert_string_equal(m.tokenizer[1].c_str(), "merges.txt");
    assert_int_equal(m.tokenizer_bytes, 5);
    assert_string_equal(open_checkpoint(m)->format(), "pytorch-zip");

    m = resolve_model_files(test::test_data("models/llama"));
    assert_true(m.kind == ModelKind::ShardedCheckpoint);
    assert_string_equal(m.checkpoint.c_str(), test::test_data("models/llama/model.safetensors.index.json").c_str());
    assert_string_equal(open_checkpoint(m)->format(), "safetensors-sharded");

    const std::string g = test::test_data("gguf/tiny-llama-bf16.gguf");
    m = resolve_model_files(g);
    assert_true(m.kind == ModelKind::GgufFile);
    assert_string_equal(m.gguf.c_str(), g.c_str());
    same_refusal(STK_E_NOT_FOUND, [&] { load_model_config(g); }, [&] { load_model_config(m); }, "not a directory");

    const std::string missing = g_dir + "/no-such-model";
    m = resolve_model_files(missing);
    assert_true(m.kind == ModelKind::NotAModel && m.gguf.empty());
    same_refusal(STK_E_NOT_FOUND, [&] { load_model_config(missing); }, [&] { load_model_config(m); }, "no such model directory");

    d = fresh_dir("mf_weights_only");
    copy_file(test::test_data("ingest/torch/basic.pt"), d + "/pytorch_model.bin");
    m = resolve_model_files(d);
    assert_true(m.kind == ModelKind::NotAModel);
    same_refusal(STK_E_NOT_FOUND, [&] { load_model_config(d); }, [&] { load_model_config(m); }, "/config.json: missing:");

    d = fresh_dir("mf_config_only");
    copy_file(test::test_data("models/gpt2/config.json"), d + "/config.json");
    m = resolve_model_files(d);
    assert_true(m.kind == ModelKind::HfDirectory && m.checkpoint.empty());
    same_refusal(STK_E_NOT_FOUND, [&] { open_checkpoint(d); }, [&] { open_checkpoint(m); }, "no checkpoint found");

    d = fresh_dir("mf_two_ggufs");
    copy_file(g, d + "/a.gguf");
    copy_file(g, d + "/b.gguf");
    std::string e = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { resolve_model_files(d); });
    assert_contains(e, "holds 2 GGUF models (a.gguf, b.gguf)");
}

// ---- conversions --------------------------------------------------------------------------

static double f16_reference(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void f16_bf16_exhaustive(void **) {
    for (uint32_t h = 0; h < 65536; h++) {
        float got = f16_to_f32(uint16_t(h));
        double want = f16_reference(uint16_t(h));
        if (std::isnan(want)) {
            assert_true(std::isnan(got));
            assert_int_equal(test::f32_bits(got) >> 31, h >> 15);
            assert_int_equal((test::f32_bits(got) >> 13) & 0x3FF, (h & 0x3FF) | 0x200);  // payload kept, quiet
        } else {
            assert_true(double(got) == want);
            assert_int_equal(std::signbit(got), h >> 15);
        }
        float b = bf16_to_f32(uint16_t(h));
        assert_int_equal(test::f32_bits(b), h << 16);
    }
    // The bulk loop equals the scalar definition.
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < 65536; i++) all[i] = uint16_t(i);
    std::vector<float> out(65536);
    convert_contiguous(SrcDType::F16, reinterpret_cast<const uint8_t *>(all.data()), 65536, out.data());
    for (uint32_t i = 0; i < 65536; i++) assert_int_equal(test::f32_bits(out[i]), test::f32_bits(f16_to_f32(uint16_t(i))));
    convert_contiguous(SrcDType::BF16, reinterpret_cast<const uint8_t *>(all.data()), 65536, out.data());
    for (uint32_t i = 0; i < 65536; i++) assert_int_equal(test::f32_bits(out[i]), i << 16);
}

static void f8_exhaustive(void **) {
    size_t nan4 = 0, nan5 = 0, inf5 = 0;
    for (uint32_t b = 0; b < 256; b++) {
        int s = b >> 7;
        // E4M3FN: bias 7, no inf, only S.1111.111 is NaN.
        int e = (b >> 3) & 15, m = b & 7;
        float got = f8e4m3_to_f32(uint8_t(b));
        if (e == 15 && m == 7) {
            assert_true(std::isnan(got));
            nan4++;
        } else {
            double want = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
            assert_true(double(got) == (s ? -want : want));
        }
        // E5M2: bias 15, IEEE-like.
        e = (b >> 2) & 31;
        m = b & 3;
        got = f8e5m2_to_f32(uint8_t(b));
        if (e == 31) {
            if (m) assert_true(std::isnan(got)), nan5++;
            else assert_true(std::isinf(got)), inf5++;
        } else {
            double want = e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17);
            assert_true(double(got) == (s ? -want : want));
        }
    }
    assert_int_equal(nan4, 2);
    assert_int_equal(nan5, 6);
    assert_int_equal(inf5, 2);
    assert_true(f8e4m3_to_f32(0x7E) == 448.0f);
    assert_true(f8e5m2_to_f32(0x7B) == 57344.0f);
}

static void dtype_table(void **) {
    const char *names[] = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "I64", "I32",
                           "I16", "I8",  "U64", "U32",  "U16",     "U8",      "BOOL"};
    const size_t sizes[] = {8, 4, 2, 2, 1, 1, 8, 4, 2, 1, 8, 4, 2, 1, 1};
    for (size_t i = 0; i < 15; i++) {
        SrcDType t;
        assert_true(parse_src_dtype(names[i], std::strlen(names[i]), &t));
        assert_int_equal(size_t(t), i);
        assert_string_equal(src_dtype_name(t), names[i]);
        assert_int_equal(src_dtype_size(t), sizes[i]);
    }
    SrcDType t;
    assert_false(parse_src_dtype("F8_E8M0", 7, &t));
    assert_false(parse_src_dtype("F3", 2, &t));
    assert_false(parse_src_dtype("F32 ", 4, &t));
}

static void convert_bounds_and_nonfinite(void **) {
    TensorRef t;
    t.name = "w";
    t.file = "x.safetensors";
    t.dtype = SrcDType::F32;
    t.shape = {3};
    t.n_elements = 3;
    const float v[3] = {1.0f, INFINITY, NAN};
    float out[3];
    std::string m =
        test::expect_error(STK_E_INVALID_ARGUMENT, [&] { convert_to_f32(t, reinterpret_cast<const uint8_t *>(v), 2, 2, out); });
    assert_contains(m, "'w'");
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { convert_to_f32(t, reinterpret_cast<const uint8_t *>(v), ~0ull, 2, out); });
    convert_to_f32(t, reinterpret_cast<const uint8_t *>(v), 0, 3, out);
    assert_int_equal(first_nonfinite(out, 3), 1);
    assert_int_equal(first_nonfinite(out, 1), 1);
    assert_int_equal(first_nonfinite(out + 2, 1), 0);
}

int main() {
    g_dir = test::make_temp_dir("checkpoint");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_shared_tensor_file),     cmocka_unit_test(directory_priority), cmocka_unit_test(not_checkpoints),
        cmocka_unit_test(f16_bf16_exhaustive),          cmocka_unit_test(f8_exhaustive),      cmocka_unit_test(dtype_table),
        cmocka_unit_test(convert_bounds_and_nonfinite), cmocka_unit_test(model_files_resolved),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, nullptr, nullptr);
}

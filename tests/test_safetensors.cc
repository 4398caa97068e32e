// safetensors reader: the real files of tests/data/third_party/tensors and our all-dtypes / sharded
// fixtures load with exact values; every malformed header is refused with its own status and a
// message naming the file, the tensor and the offset.
#include <dirent.h>
#include <sys/stat.h>

#include "ingest/safetensors.h"
#include "ingest_expect.h"
#include "test_util.h"

using namespace stk;

static std::string g_dir;

// A table: clang-format would put one value per line.
// clang-format off
static const char *kShared[] = {
    "st_sample_B.safetensors", "st_sample_H.safetensors", "st_sample_I.safetensors", "st_sample_b.safetensors",
    "st_sample_d.safetensors", "st_sample_e.safetensors", "st_sample_f.safetensors", "st_sample_h.safetensors",
    "st_sample_i.safetensors", "swift_tensor-1d-int32.safetensors", "swift_tensor-2d-float64.safetensors",
    "swift_tensor-3d-float32.safetensors", "swift_tensor-4d-float32.safetensors",
};
// clang-format on

static void shared_files_load_with_values(void **) {
    uint64_t total = 0;
    for (const char *f : kShared) {
        auto ck = open_checkpoint(test::third_party_data(std::string("tensors/") + f));
        assert_string_equal(ck->format(), "safetensors");
        total += test::expect_checkpoint_matches(*ck, (std::string("shared/") + f).c_str());
    }
    assert_int_equal(total, 9 * 6 + 3 + 6 + 12 + 18);
}

// Hand-checked values, independent of expected.json.
static void shared_values_by_hand(void **) {
    std::vector<uint8_t> scratch;
    auto ck = open_checkpoint(test::third_party_data("tensors/st_sample_I.safetensors"));
    const TensorRef *t = ck->find("I");
    assert_non_null(t);
    assert_int_equal(int(t->dtype), int(SrcDType::U32));
    assert_int_equal(t->file_offset, 8 + 83);
    float v[6];
    convert_to_f32(*t, ck->tensor_bytes(*t, scratch), 0, 6, v);
    assert_true(v[0] == 4294967296.0f && v[2] == 4294967296.0f && v[3] == 0.0f && v[5] == 2.0f);

    ck = open_checkpoint(test::third_party_data("tensors/swift_tensor-4d-float32.safetensors"));
    t = ck->find("embedding");
    assert_true((t->shape == std::vector<uint64_t>{2, 3, 1, 3}));
    float w[18];
    convert_to_f32(*t, ck->tensor_bytes(*t, scratch), 0, 18, w);
    assert_true(w[0] == 11.0f && w[8] == 6.0f && w[17] == 19.0f);
    assert_int_equal(ck->file_bytes(), 152);

    auto mf = MappedFile(test::third_party_data("tensors/st_sample_e.safetensors"));
    SafetensorsHeader h = parse_safetensors(mf.data(), mf.size(), mf.path());
    assert_int_equal(h.metadata.size(), 1);
    assert_string_equal(h.metadata[0].first.c_str(), "test");
    assert_string_equal(h.metadata[0].second.c_str(), "a");
    assert_int_equal(h.data_start, 8 + 83);
}

static void all_dtypes_exact(void **) {
    auto ck = open_checkpoint(test::test_data("ingest/safetensors/all_dtypes.safetensors"));
    test::expect_checkpoint_matches(*ck, "safetensors/all_dtypes.safetensors");
    // A few by hand: subnormals exact, F8 extremes, BOOL, integer rounding.
    std::vector<uint8_t> s;
    float v[8];
    const TensorRef *t = ck->find("f16");
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 8, v);
    assert_true(v[0] == 0x1.0p-24f && v[1] == 1023 * 0x1.0p-24f && v[2] == 0x1.0p-14f && v[3] == 65504.0f);
    assert_true(std::isinf(v[4]) && v[4] < 0 && std::isnan(v[5]) && std::signbit(v[6]) && v[7] == 1.0f);
    t = ck->find("f8_e4m3");
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 8, v);
    assert_true(v[0] == 0x1.0p-9f && v[1] == 7 * 0x1.0p-9f && v[2] == 0x1.0p-6f && v[3] == 448.0f && std::isnan(v[4]) &&
                v[5] == -448.0f && v[6] == 1.0f);
    t = ck->find("f8_e5m2");
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 6, v);
    assert_true(v[0] == 0x1.0p-16f && v[2] == 57344.0f && std::isinf(v[3]) && std::isnan(v[5]));
    t = ck->find("bf16");
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 6, v);
    assert_true(v[0] == 1.0f && v[1] == -3.140625f && v[2] == 0x1.0p-133f);
    t = ck->find("scalar");
    assert_int_equal(t->shape.size(), 0);
    assert_int_equal(t->n_elements, 1);
    t = ck->find("empty");
    assert_int_equal(t->n_elements, 0);
    assert_int_equal(t->n_bytes, 0);
    t = ck->find("u64");
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 2, v);
    assert_true(v[0] == 18446744073709551616.0f && v[1] == 12345.0f);
    // Tensors sorted by name.
    for (size_t i = 1; i < ck->tensors().size(); i++) assert_true(ck->tensors()[i - 1].name < ck->tensors()[i].name);
}

static void sharded_values(void **) {
    std::string dir = test::test_data("ingest/safetensors/sharded");
    auto ck = open_checkpoint(dir);
    assert_string_equal(ck->format(), "safetensors-sharded");
    test::expect_checkpoint_matches(*ck, "safetensors/sharded");
    assert_int_equal(ck->find("lm_head.weight")->source_index, 1);
    assert_int_equal(ck->find("model.embed.weight")->source_index, 0);
    assert_contains(ck->find("lm_head.weight")->file, "model-00002-of-00002.safetensors");
    uint64_t sum = test::read_bytes(dir + "/model-00001-of-00002.safetensors").size() +
                   test::read_bytes(dir + "/model-00002-of-00002.safetensors").size();
    assert_int_equal(ck->file_bytes(), sum);
    assert_int_equal(ck->files().size(), 3);
    // Opening the index file directly is the same checkpoint.
    auto ck2 = open_checkpoint(dir + "/model.safetensors.index.json");
    assert_int_equal(ck2->tensors().size(), 4);
}

// ---- bad input ----------------------------------------------------------------------------

static std::vector<uint8_t> st_bytes(const std::string &header, size_t data_len, uint64_t declared_len = ~0ull) {
    std::vector<uint8_t> b(8);
    uint64_t n = declared_len == ~0ull ? header.size() : declared_len;
    std::memcpy(b.data(), &n, 8);
    b.insert(b.end(), header.begin(), header.end());
    for (size_t i = 0; i < data_len; i++) b.push_back(uint8_t(i));
    return b;
}

static std::string write_st(const char *name, const std::vector<uint8_t> &bytes) {
    std::string p = g_dir + "/" + name;
    test::write_bytes(p, bytes);
    return p;
}

static std::string open_fails(stk_status st, const std::string &path) {
    return test::expect_error(st, [&] { open_checkpoint(path); });
}

static size_t count_files(const std::string &dir) {
    size_t n = 0;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d)) n += e->d_name[0] != '.';
        closedir(d);
    }
    return n;
}

static void bad_truncated(void **) {
    auto good = test::read_bytes(test::test_data("ingest/safetensors/all_dtypes.safetensors"));
    auto cut = good;
    cut.pop_back();
    std::string p = write_st("truncated.safetensors", cut);
    size_t before = count_files(g_dir);
    std::string m = open_fails(STK_E_TRUNCATED, p);
    assert_contains(m, p);
    assert_contains(m, "'u8'");  // the last tensor in data order
    assert_contains(m, "run past the end");
    assert_int_equal(count_files(g_dir), before);  // nothing written

    cut.resize(40);  // inside the header
    m = open_fails(STK_E_TRUNCATED, write_st("truncated_header.safetensors", cut));
    assert_contains(m, "offset 8");
    cut.resize(5);
    open_fails(STK_E_TRUNCATED, write_st("tiny.safetensors", cut));
}

static void bad_header_cap(void **) {
    std::string p = write_st("cap.safetensors", st_bytes("{}", 0, 100'000'001));
    std::string m = open_fails(STK_E_CORRUPT, p);
    assert_contains(m, "100000001");
    assert_contains(m, "cap");
    assert_contains(m, p);
}

static void bad_overlap_and_hole(void **) {
    std::string m = open_fails(
        STK_E_CORRUPT,
        write_st(
            "overlap.safetensors",
            st_bytes(
                R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                12)));
    assert_contains(m, "tensor 'b'");
    assert_contains(m, "overlap");
    assert_contains(m, "overlap.safetensors");
    std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
    m = open_fails(STK_E_CORRUPT, write_st("hole.safetensors", st_bytes(h, 20)));
    assert_contains(m, "tensor 'b'");
    assert_contains(m, "hole of 4");
    assert_contains(m, "file offset " + std::to_string(8 + h.size() + 8));
    m = open_fails(STK_E_CORRUPT,
                   write_st("hole_start.safetensors", st_bytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4)));
    assert_contains(m, "hole");
    m = open_fails(STK_E_CORRUPT,
                   write_st("reversed.safetensors", st_bytes(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4)));
    assert_contains(m, "end before they begin");
}

static void bad_shape_mismatch(void **) {
    std::string m =
        open_fails(STK_E_SIZE_MISMATCH,
                   write_st("mismatch.safetensors", st_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)));
    assert_contains(m, "tensor 'w'");
    assert_contains(m, "12 bytes");
    m = open_fails(STK_E_SIZE_MISMATCH,
                   write_st("trailing.safetensors", st_bytes(R"({"w":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", 5)));
    assert_contains(m, "2 trailing");
}

static void bad_dims_overflow(void **) {
    std::string m =
        open_fails(STK_E_DIMS_OVERFLOW,
                   write_st("overflow.safetensors",
                            st_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}})", 0)));
    assert_contains(m, "tensor 'w'");
    m = open_fails(STK_E_DIMS_OVERFLOW,
                   write_st("overflow2.safetensors",
                            st_bytes(R"({"w":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0)));
    assert_contains(m, "overflows");
    open_fails(STK_E_BAD_JSON,
               write_st("negative.safetensors", st_bytes(R"({"w":{"dtype":"F64","shape":[-1],"data_offsets":[0,0]}})", 0)));
}

static void bad_dtype(void **) {
    std::string m =
        open_fails(STK_E_UNSUPPORTED,
                   write_st("dtype.safetensors", st_bytes(R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", 4)));
    assert_contains(m, "\"F17\"");
    assert_contains(m, "tensor 'w'");
}

static void bad_duplicates(void **) {
    std::string m = open_fails(
        STK_E_CORRUPT,
        write_st(
            "dup.safetensors",
            st_bytes(
                R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                2)));
    assert_contains(m, "duplicate tensor name 'w'");
    open_fails(STK_E_CORRUPT, write_st("dupkey.safetensors",
                                       st_bytes(R"({"w":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1)));
}

static void bad_json(void **) {
    open_fails(STK_E_BAD_JSON, write_st("meta.safetensors", st_bytes(R"({"__metadata__":{"a":1}})", 0)));
    open_fails(STK_E_BAD_JSON, write_st("notjson.safetensors", st_bytes("{nope", 0)));
    open_fails(STK_E_BAD_JSON, write_st("array.safetensors", st_bytes("[1]", 0)));
    open_fails(STK_E_BAD_JSON, write_st("utf8.safetensors", st_bytes("{\"\xff\xfe\":{}}", 0)));
    open_fails(STK_E_BAD_JSON,
               write_st("extra.safetensors", st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}})", 1)));
    open_fails(STK_E_BAD_JSON, write_st("missing.safetensors", st_bytes(R"({"w":{"dtype":"U8","shape":[1]}})", 0)));
    // Padding with spaces after the JSON (what writers do for 8-byte alignment) is fine.
    auto ck = open_checkpoint(
        write_st("padded.safetensors", st_bytes(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}   )", 1)));
    assert_int_equal(ck->tensors().size(), 1);
}

static void copy_file(const std::string &from, const std::string &to) { test::write_bytes(to, test::read_bytes(from)); }

static std::string sharded_copy(const char *tag, bool with_second) {
    std::string src = test::test_data("ingest/safetensors/sharded");
    std::string d = g_dir + "/" + tag;
    mkdir(d.c_str(), 0755);
    copy_file(src + "/model-00001-of-00002.safetensors", d + "/model-00001-of-00002.safetensors");
    if (with_second) copy_file(src + "/model-00002-of-00002.safetensors", d + "/model-00002-of-00002.safetensors");
    return d;
}

static void write_text(const std::string &p, const std::string &s) {
    test::write_bytes(p, std::vector<uint8_t>(s.begin(), s.end()));
}

static void bad_shards(void **) {
    std::string d = sharded_copy("missing", false);
    copy_file(test::test_data("ingest/safetensors/sharded/model.safetensors.index.json"), d + "/model.safetensors.index.json");
    std::string m = open_fails(STK_E_NOT_FOUND, d);
    assert_contains(m, "model-00002-of-00002.safetensors");
    assert_contains(m, "missing");

    d = sharded_copy("extra_name", true);
    write_text(
        d + "/model.safetensors.index.json",
        R"({"weight_map":{"lm_head.weight":"model-00002-of-00002.safetensors","model.embed.weight":"model-00001-of-00002.safetensors",
               "model.layers.0.w":"model-00001-of-00002.safetensors","model.layers.1.w":"model-00002-of-00002.safetensors",
               "model.layers.9.w":"model-00002-of-00002.safetensors"}})");
    m = open_fails(STK_E_CORRUPT, d);
    assert_contains(m, "'model.layers.9.w'");
    assert_contains(m, "no such tensor");

    d = sharded_copy("unlisted", true);
    write_text(
        d + "/model.safetensors.index.json",
        R"({"weight_map":{"lm_head.weight":"model-00002-of-00002.safetensors","model.embed.weight":"model-00001-of-00002.safetensors",
               "model.layers.0.w":"model-00001-of-00002.safetensors"}})");
    m = open_fails(STK_E_CORRUPT, d);
    assert_contains(m, "'model.layers.1.w'");
    assert_contains(m, "does not list");

    d = sharded_copy("wrong_shard", true);
    write_text(
        d + "/model.safetensors.index.json",
        R"({"weight_map":{"lm_head.weight":"model-00001-of-00002.safetensors","model.embed.weight":"model-00001-of-00002.safetensors",
               "model.layers.0.w":"model-00001-of-00002.safetensors","model.layers.1.w":"model-00002-of-00002.safetensors"}})");
    m = open_fails(STK_E_CORRUPT, d);
    assert_contains(m, "'lm_head.weight'");

    d = sharded_copy("traversal", true);
    write_text(d + "/model.safetensors.index.json", R"({"weight_map":{"w":"../model-00001-of-00002.safetensors"}})");
    m = open_fails(STK_E_CORRUPT, d);
    assert_contains(m, "not a plain file name");

    d = sharded_copy("dupindex", true);
    write_text(d + "/model.safetensors.index.json",
               R"({"weight_map":{"w":"model-00001-of-00002.safetensors","w":"model-00002-of-00002.safetensors"}})");
    m = open_fails(STK_E_CORRUPT, d);
    assert_contains(m, "'w' appears twice");
}

// F8 block-scaled weights (quantization_config quant_method "fp8") against transformers' own
// dequantisation (tests/fixtures/fp8/generate.py): bytes exact, whole and from mid-tensor offsets.
static void fp8_block_scaled_exact(void **) {
    const std::string dir = test::test_data("../fixtures/fp8/");
    auto ck = open_checkpoint(dir + "good/model.safetensors");
    auto ref = open_checkpoint(dir + "good/reference.safetensors");
    attach_fp8_scales(*ck, 128, 128);
    std::vector<uint8_t> s1, s2;
    int n = 0;
    for (const TensorRef &r : ref->tensors()) {
        const TensorRef *t = ck->find(r.name);
        assert_non_null(t);
        assert_non_null(t->block_scale.get());
        std::vector<float> got(t->n_elements), want(r.n_elements);
        assert_int_equal(t->n_elements, r.n_elements);
        convert_to_f32(*t, ck->tensor_bytes(*t, s1), 0, t->n_elements, got.data());
        convert_to_f32(r, ref->tensor_bytes(r, s2), 0, r.n_elements, want.data());
        assert_memory_equal(got.data(), want.data(), got.size() * 4);
        // A chunk that starts mid-row and mid-block (parse_tensors converts 64 Ki-element chunks).
        const uint64_t first = t->n_elements / 3 + 5, count = t->n_elements / 2;
        std::vector<float> part(count);
        convert_to_f32(*t, ck->tensor_bytes(*t, s1), first, count, part.data());
        assert_memory_equal(part.data(), want.data() + first, count * 4);
        n++;
    }
    assert_int_equal(n, 3);
    const TensorRef *plain = ck->find("n.weight");
    assert_non_null(plain);
    assert_null(plain->block_scale.get());

    std::string msg = test::expect_error(STK_E_CORRUPT, [&] {
        auto bad = open_checkpoint(dir + "bad_shape/model.safetensors");
        attach_fp8_scales(*bad, 128, 128);
    });
    assert_contains(msg, "bad_shape/model.safetensors");
    assert_contains(msg, "a.weight_scale_inv");
    assert_contains(msg, "[2, 3]");
    assert_contains(msg, "F32 [2, 2]");
    msg = test::expect_error(STK_E_CORRUPT, [&] {
        auto bad = open_checkpoint(dir + "missing/model.safetensors");
        attach_fp8_scales(*bad, 128, 128);
    });
    assert_contains(msg, "missing/model.safetensors");
    assert_contains(msg, "'a.weight'");
    assert_contains(msg, "a.weight_scale_inv");
    // The block size the config names must give the scale grid: 64 x 128 blocks need [4, 2].
    msg = test::expect_error(STK_E_CORRUPT, [&] {
        auto bad = open_checkpoint(dir + "good/model.safetensors");
        attach_fp8_scales(*bad, 64, 128);
    });
    assert_contains(msg, "a.weight_scale_inv");
    assert_contains(msg, "F32 [4, 2]");
}

static void lfs_pointer(void **) {
    std::string p = test::third_party_data("tensors/pythia_model.safetensors.LFS_POINTER");
    std::string m = open_fails(STK_E_LFS_POINTER, p);
    assert_contains(m, p);
    assert_contains(m, "Git LFS pointer");
    assert_contains(m, "git lfs pull");
    assert_contains(m, "1415337224 bytes");
    // Also as a directory's model.safetensors.
    std::string d = g_dir + "/lfsdir";
    mkdir(d.c_str(), 0755);
    copy_file(p, d + "/model.safetensors");
    m = open_fails(STK_E_LFS_POINTER, d);
    assert_contains(m, "model.safetensors");
}

int main() {
    g_dir = test::make_temp_dir("safetensors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shared_files_load_with_values),
        cmocka_unit_test(shared_values_by_hand),
        cmocka_unit_test(all_dtypes_exact),
        cmocka_unit_test(fp8_block_scaled_exact),
        cmocka_unit_test(sharded_values),
        cmocka_unit_test(bad_truncated),
        cmocka_unit_test(bad_header_cap),
        cmocka_unit_test(bad_overlap_and_hole),
        cmocka_unit_test(bad_shape_mismatch),
        cmocka_unit_test(bad_dims_overflow),
        cmocka_unit_test(bad_dtype),
        cmocka_unit_test(bad_duplicates),
        cmocka_unit_test(bad_json),
        cmocka_unit_test(bad_shards),
        cmocka_unit_test(lfs_pointer),
    };
    return cmocka_run_group_tests_name("safetensors", tests, nullptr, nullptr);
}

// PyTorch zip checkpoints: real files written by torch.save (candle's and ours) load with exact
// values - views, shared storages, DEFLATED entries, shards - and hostile archives are refused
// with their own status: pickles that would run code (and provably did not), ../ and absolute
// entry names, storages missing or too small, the legacy format.
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/pickle.h"
#include "ingest/torch_zip.h"
#include "ingest_expect.h"
#include "test_util.h"

using namespace stk;

static const char *kMarker = "/tmp/stk-unsafe-pickle-marker";  // what the malicious pickles would create

static std::string torch_file(const char *name) { return test::test_data(std::string("ingest/torch/") + name); }

static std::string open_fails(stk_status st, const std::string &path) {
    return test::expect_error(st, [&] { open_checkpoint(path); });
}

static void candle_files(void **) {
    auto ck = open_checkpoint(test::third_party_data("tensors/candle_test.pt"));
    assert_string_equal(ck->format(), "pytorch-zip");
    test::expect_checkpoint_matches(*ck, "shared/candle_test.pt");
    const TensorRef *t = ck->find("test");
    assert_non_null(t);
    assert_int_equal(int(t->dtype), int(SrcDType::I64));
    assert_true((t->shape == std::vector<uint64_t>{2, 4}));
    assert_true(t->strides.empty());
    assert_int_equal(t->n_bytes, 64);
    assert_int_equal(t->file_offset, 342 + 30 + 11 + 65);  // local header, name "test/data/0", padding extra field
    assert_int_equal(t->file_offset % 64, 0);
    std::vector<uint8_t> s;
    float v[8];
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 8, v);
    for (int i = 0; i < 8; i++) assert_true(v[i] == float(i + 1));
    assert_int_equal(ck->file_bytes(), 1165);

    ck = open_checkpoint(test::third_party_data("tensors/candle_test_with_key.pt"));
    test::expect_checkpoint_matches(*ck, "shared/candle_test_with_key.pt");
    assert_non_null(ck->find("model_state_dict.test"));
}

static void basic_values(void **) {
    auto ck = open_checkpoint(torch_file("basic.pt"));
    test::expect_checkpoint_matches(*ck, "torch/basic.pt");
    std::vector<uint8_t> s;
    const TensorRef *t = ck->find("f32");
    float v[12];
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 12, v);
    for (int i = 0; i < 12; i++) assert_true(v[i] == float(i) / 4 - 1);
    t = ck->find("param");  // an nn.Parameter: _rebuild_parameter around _rebuild_tensor_v2
    assert_true((t->shape == std::vector<uint64_t>{1, 2}));
    t = ck->find("scalar");
    assert_int_equal(t->shape.size(), 0);
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 1, v);
    assert_true(v[0] == 3.5f);
    assert_int_equal(int(ck->find("bf16")->dtype), int(SrcDType::BF16));
    assert_int_equal(int(ck->find("bool")->dtype), int(SrcDType::BOOL));
    assert_int_equal(ck->tensors().size(), 10);
}

static void views_and_shared_storage(void **) {
    auto ck = open_checkpoint(torch_file("views.pt"));
    test::expect_checkpoint_matches(*ck, "torch/views.pt");
    const TensorRef *base = ck->find("base"), *t = ck->find("t"), *row = ck->find("row"), *col = ck->find("col"),
                    *other = ck->find("other");
    assert_int_equal(base->storage_index, t->storage_index);
    assert_int_equal(base->storage_index, col->storage_index);
    assert_true(base->storage_index != other->storage_index);
    assert_true(base->strides.empty());
    assert_true((t->strides == std::vector<uint64_t>{1, 4}));
    assert_int_equal(t->span_bytes, 48);
    assert_true(row->strides.empty());
    assert_int_equal(row->storage_byte_offset, 16);
    assert_int_equal(row->file_offset, base->file_offset + 16);
    assert_true((col->strides == std::vector<uint64_t>{4}));
    assert_int_equal(col->span_bytes, 36);  // elements 2, 6, 10
    std::vector<uint8_t> s;
    float v[12];
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 0, 12, v);
    const float want[12] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    for (int i = 0; i < 12; i++) assert_true(v[i] == want[i]);
    convert_to_f32(*t, ck->tensor_bytes(*t, s), 4, 5, v);  // mid-row start
    for (int i = 0; i < 5; i++) assert_true(v[i] == want[4 + i]);
    convert_to_f32(*col, ck->tensor_bytes(*col, s), 0, 3, v);
    assert_true(v[0] == 2 && v[1] == 6 && v[2] == 10);
}

static void module_state_dict(void **) {
    auto ck = open_checkpoint(torch_file("module_state_dict.pt"));
    test::expect_checkpoint_matches(*ck, "torch/module_state_dict.pt");
    assert_non_null(ck->find("0.weight"));
    assert_non_null(ck->find("2.num_batches_tracked"));  // an int64 scalar buffer
    assert_int_equal(ck->tensors().size(), 9);
}

static void nested_dicts(void **) {
    auto ck = open_checkpoint(torch_file("nested.pt"));
    test::expect_checkpoint_matches(*ck, "torch/nested.pt");
    assert_non_null(ck->find("model_state_dict.w"));
    assert_non_null(ck->find("epoch_w"));
}

static void deflated_entries(void **) {
    auto ck = open_checkpoint(torch_file("deflated.pt"));
    assert_string_equal(ck->format(), "pytorch-zip");
    test::expect_checkpoint_matches(*ck, "torch/deflated.pt");
    // The directory really holds DEFLATED entries.
    MappedFile mf(torch_file("deflated.pt"));
    size_t deflated = 0;
    for (const ZipEntry &e : parse_zip_directory(mf.data(), mf.size(), mf.path())) deflated += e.method == 8;
    assert_true(deflated >= 10);
}

static void sharded_bin(void **) {
    std::string dir = torch_file("sharded");
    auto ck = open_checkpoint(dir);
    assert_string_equal(ck->format(), "pytorch-zip-sharded");
    test::expect_checkpoint_matches(*ck, "torch/sharded");
    assert_int_equal(ck->find("c.weight")->source_index, 1);
    assert_int_equal(ck->files().size(), 3);
}

static void legacy_format(void **) {
    auto ck = open_checkpoint(torch_file("legacy.pt"));
    assert_string_equal(ck->format(), "pytorch-legacy");
    test::expect_checkpoint_matches(*ck, "torch/legacy.pt");
    const TensorRef *t = ck->find("t"), *base = ck->find("base");
    assert_true((t->strides == std::vector<uint64_t>{1, 4}));
    assert_int_equal(t->storage_index, base->storage_index);
    assert_int_equal(ck->tensors().size(), 13);

    // Damaged: cut inside the last storage, a trailing byte, a storage count that disagrees.
    std::string dir = test::make_temp_dir("legacy");
    auto good = test::read_bytes(torch_file("legacy.pt"));
    auto cut = good;
    cut.pop_back();
    test::write_bytes(dir + "/cut.pt", cut);
    std::string m = open_fails(STK_E_TRUNCATED, dir + "/cut.pt");
    assert_contains(m, "run past the end");
    assert_contains(m, "cut.pt");
    auto longer = good;
    longer.push_back(0);
    test::write_bytes(dir + "/long.pt", longer);
    m = open_fails(STK_E_SIZE_MISMATCH, dir + "/long.pt");
    assert_contains(m, "1 trailing bytes");
    // The first storage record's element count (right after the key-list pickle) plus one.
    auto bad = good;
    LegacyLayout lay = unpickle_legacy(good.data(), good.size(), "legacy.pt");
    bad[size_t(lay.data_start)] ^= 1;
    test::write_bytes(dir + "/count.pt", bad);
    m = open_fails(STK_E_SIZE_MISMATCH, dir + "/count.pt");
    assert_contains(m, "offset " + std::to_string(lay.data_start));
}

static void malicious_pickles(void **) {
    unlink(kMarker);
    std::string m = open_fails(STK_E_UNSAFE_PICKLE, torch_file("malicious.pt"));
    assert_contains(m, "'posix.system'");
    assert_contains(m, "malicious.pt");
    assert_contains(m, "data.pkl");
    assert_contains(m, "offset");
    m = open_fails(STK_E_UNSAFE_PICKLE, torch_file("malicious_proto4.pt"));
    assert_contains(m, "'posix.system'");
    struct stat st;
    assert_int_equal(stat(kMarker, &st), -1);  // nothing ran
}

static std::vector<uint8_t> bytes_of(const char *s, size_t n) { return std::vector<uint8_t>(s, s + n); }

static std::string unpickle_fails(stk_status st, const std::vector<uint8_t> &p) {
    return test::expect_error(st, [&] { unpickle_state_dict(p.data(), p.size(), "crafted.pkl"); });
}

static void crafted_pickles(void **) {
    // builtins.eval via GLOBAL, refused at the GLOBAL (offset 2).
    std::string m = unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x02"
                                                                 "cbuiltins\neval\n"
                                                                 "X\x01\x00\x00\x00"
                                                                 "1"
                                                                 "\x85R.",
                                                                 27));
    assert_contains(m, "'builtins.eval'");
    assert_contains(m, "offset 2");
    m = unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x02"
                                                     "cos\nsystem\n"
                                                     ")R.",
                                                     16));
    assert_contains(m, "'os.system'");
    // STACK_GLOBAL form.
    m = unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x04"
                                                     "\x8c\x08"
                                                     "builtins"
                                                     "\x8c\x04"
                                                     "exec"
                                                     "\x93"
                                                     ")R.",
                                                     22));
    assert_contains(m, "'builtins.exec'");
    // INST / OBJ opcodes are refused as opcodes.
    m = unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x02(io\nsystem\n.", 15));
    assert_contains(m, "opcode 0x69");
    // REDUCE on a non-callable (a storage type), APPEND on a dict.
    unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x02"
                                                 "ctorch\nFloatStorage\n"
                                                 ")R.",
                                                 25));
    unpickle_fails(STK_E_UNSAFE_PICKLE, bytes_of("\x80\x02}K\x01"
                                                 "a.",
                                                 6));
    // Truncated, unbalanced, memo misuse.
    unpickle_fails(STK_E_TRUNCATED, bytes_of("\x80\x02}", 3));
    unpickle_fails(STK_E_TRUNCATED, bytes_of("\x80\x02X\xff\xff\xff\x7f", 7));
    unpickle_fails(STK_E_CORRUPT, bytes_of("\x80\x02h\x05.", 5));
    unpickle_fails(STK_E_CORRUPT, bytes_of("\x80\x02"
                                           "0.",
                                           4));
    unpickle_fails(STK_E_CORRUPT, bytes_of("\x80\x02"
                                           "K\x01.",
                                           5));  // root is not a dict
    // A dict containing itself is refused, not followed forever.
    m = unpickle_fails(STK_E_CORRUPT, bytes_of("\x80\x02}q\x00X\x01\x00\x00\x00"
                                               "ah\x00s.",
                                               15));
    assert_contains(m, "reachable twice");
    // An empty dict is a valid (empty) state dict; non-tensor values are skipped.
    PickleResult r = unpickle_state_dict(reinterpret_cast<const uint8_t *>("\x80\x02}X\x01\x00\x00\x00"
                                                                           "aK\x05s."),
                                         13, "x");
    assert_int_equal(r.tensors.size(), 0);
}

// Fuzz finding (fuzz/regressions/pickle): a legacy file whose storage-key pickle names a storage
// of the state dict again used to look it up in the state dict's storage table after that table
// had been moved into the result (a reference bound to a null pointer).  Each pickle of a legacy
// file now starts with empty tables, so the key list holds a storage, not a string: refused.
static std::vector<uint8_t> legacy_with_key_pickle(const std::string &key_pickle) {
    std::string pid = std::string(
        "(X\x07\x00\x00\x00storage"
        "ctorch\nFloatStorage\n"
        "X\x01\x00\x00\x00k"
        "X\x03\x00\x00\x00"
        "cpu"
        "K\x04"
        "Nt"
        "Q",
        52);
    std::string s;
    s += std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);  // magic 0x1950a86a20f9469cfc6c
    s += std::string("\x80\x02M\xe9\x03.", 6);                                          // protocol version 1001
    s += std::string("\x80\x02}(X\x0d\x00\x00\x00little_endian\x88u.", 25);             // sys_info
    s += std::string(
             "\x80\x02}(X\x01\x00\x00\x00"
             "a",
             10) +
         pid + "u.";  // state dict {'a': storage k}
    s += key_pickle;
    return std::vector<uint8_t>(s.begin(), s.end());
}

static void legacy_storage_tables_per_pickle(void **) {
    std::string pid = std::string(
        "(X\x07\x00\x00\x00storage"
        "ctorch\nFloatStorage\n"
        "X\x01\x00\x00\x00k"
        "X\x03\x00\x00\x00"
        "cpu"
        "K\x04"
        "Nt"
        "Q",
        52);
    // The well-formed file: key list ['k'].
    auto good =
        legacy_with_key_pickle(std::string("\x80\x02]X\x01\x00\x00\x00"
                                           "ka.",
                                           11));
    LegacyLayout lay = unpickle_legacy(good.data(), good.size(), "crafted.pt");
    assert_int_equal(lay.result.storages.size(), 1);
    assert_string_equal(lay.result.storages[0].key.c_str(), "k");
    assert_int_equal(lay.result.storages[0].numel, 4);
    assert_int_equal(lay.storage_order.size(), 1);
    assert_int_equal(lay.data_start, good.size());
    // The key list names storage 'k' through a persistent id instead of as a string.
    auto bad = legacy_with_key_pickle(std::string("\x80\x02]", 3) + pid + "a.");
    std::string m = test::expect_error(STK_E_CORRUPT, [&] { unpickle_legacy(bad.data(), bad.size(), "crafted.pt"); });
    assert_string_equal(m.c_str(), "crafted.pt: legacy storage key is not a string (pickle opcode at offset 166)");
}

static void hostile_archives(void **) {
    std::string m = open_fails(STK_E_CORRUPT, torch_file("traversal.pt"));
    assert_contains(m, "'basic/../../version'");
    assert_contains(m, "'..' component");
    assert_contains(m, "traversal.pt");
    m = open_fails(STK_E_CORRUPT, torch_file("absolute.pt"));
    assert_contains(m, "'/etc/version'");
    assert_contains(m, "absolute path");
    m = open_fails(STK_E_CORRUPT, torch_file("missing_storage.pt"));
    assert_contains(m, "storage '0'");
    assert_contains(m, "basic/data/0");
    m = open_fails(STK_E_CORRUPT, torch_file("unknown_storage_key.pt"));
    assert_contains(m, "storage '7'");
    assert_contains(m, "test/data/7");
    m = open_fails(STK_E_SIZE_MISMATCH, torch_file("storage_size_mismatch.pt"));
    assert_contains(m, "storage '0'");
    assert_contains(m, "72 bytes");
    assert_contains(m, "holds 64");
    m = open_fails(STK_E_UNSUPPORTED, torch_file("expanded.pt"));
    assert_contains(m, "tensor 'e'");
    assert_contains(m, "self-overlapping view (stride 0");
    m = open_fails(STK_E_SIZE_MISMATCH, torch_file("view_out_of_storage.pt"));
    assert_contains(m, "tensor 'test'");
    assert_contains(m, "does not fit");
}

static void damaged_zips(void **) {
    std::string dir = test::make_temp_dir("torch");
    auto good = test::read_bytes(torch_file("basic.pt"));
    // Cut: no end record.
    auto cut = good;
    cut.resize(good.size() - 10);
    test::write_bytes(dir + "/cut.pt", cut);
    std::string m = open_fails(STK_E_CORRUPT, dir + "/cut.pt");
    assert_contains(m, "end-of-central-directory");
    // A central-directory crc that disagrees with the local header.
    auto bad = test::read_bytes(torch_file("deflated.pt"));
    MappedFile mf(torch_file("deflated.pt"));
    auto entries = parse_zip_directory(mf.data(), mf.size(), mf.path());
    // Find the central directory record of the first entry and flip a crc bit.
    size_t cd = 0;
    for (size_t i = bad.size() - 22; i-- > 0;)
        if (bad[i] == 'P' && bad[i + 1] == 'K' && bad[i + 2] == 1 && bad[i + 3] == 2) cd = i;
    assert_true(cd > 0);
    bad[cd + 16] ^= 1;
    test::write_bytes(dir + "/crc.pt", bad);
    m = open_fails(STK_E_CORRUPT, dir + "/crc.pt");
    assert_contains(m, "'" + entries[0].name + "'");
    assert_contains(m, "disagrees");
    // Inflated bytes whose crc is wrong in both headers: STK_E_CHECKSUM on first use.
    bad = test::read_bytes(torch_file("deflated.pt"));
    size_t lh = size_t(entries[0].local_header_offset);
    bad[lh + 14] ^= 1;
    bad[cd + 16] ^= 1;
    test::write_bytes(dir + "/crc2.pt", bad);
    m = open_fails(STK_E_CHECKSUM, dir + "/crc2.pt");
    assert_contains(m, entries[0].name);
}

static void lfs_pointer_bin(void **) {
    std::string dir = test::make_temp_dir("torch-lfs");
    test::write_bytes(dir + "/pytorch_model.bin",
                      test::read_bytes(test::third_party_data("tensors/pythia_model.safetensors.LFS_POINTER")));
    std::string m = open_fails(STK_E_LFS_POINTER, dir);
    assert_contains(m, "pytorch_model.bin");
    assert_contains(m, "git lfs pull");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(candle_files),
        cmocka_unit_test(basic_values),
        cmocka_unit_test(views_and_shared_storage),
        cmocka_unit_test(module_state_dict),
        cmocka_unit_test(nested_dicts),
        cmocka_unit_test(deflated_entries),
        cmocka_unit_test(sharded_bin),
        cmocka_unit_test(legacy_format),
        cmocka_unit_test(malicious_pickles),
        cmocka_unit_test(crafted_pickles),
        cmocka_unit_test(legacy_storage_tables_per_pickle),
        cmocka_unit_test(hostile_archives),
        cmocka_unit_test(damaged_zips),
        cmocka_unit_test(lfs_pointer_bin),
    };
    return cmocka_run_group_tests_name("torch", tests, nullptr, nullptr);
}

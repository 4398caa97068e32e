// Sera arrays: exact bytes of a small array (the docs/format.md test vector), round trips of
// every dtype, and each kind of corruption refused with its own status.
#include "test_util.h"

#include <dirent.h>
#include <unistd.h>

#include <cstring>

#include "core/bytes.h"
#include "format/array.h"

using namespace stk;

static std::string g_dir;

static std::vector<uint8_t> small_array_bytes() {
    std::string p = g_dir + "/vector.bin";
    const float v[6] = {1.0f, -2.0f, 0.5f, 0.0f, 3.25f, -0.125f};
    uint64_t dims[2] = {2, 3};
    write_array(p, DType::F32, 2, dims, v);
    return test::read_bytes(p);
}

static void test_vector_bytes(void **) {
    std::vector<uint8_t> b = small_array_bytes();
    assert_int_equal(b.size(), 128 + 24);
    assert_int_equal(load_u32(&b[0]), 0x53455241u);
    assert_memory_equal(&b[0], "ARES", 4);  // the LE bytes of 0x53455241
    assert_int_equal(load_u16(&b[4]), 2);
    assert_int_equal(load_u16(&b[6]), 2);
    assert_int_equal(load_u64(&b[8]), 2);
    assert_int_equal(load_u64(&b[16]), 3);
    assert_int_equal(load_u64(&b[24]), 1);
    assert_int_equal(load_u64(&b[48]), 24);
    assert_int_equal(load_u64(&b[56]), crc32c(&b[128], 24));
    assert_true(load_u64(&b[64]) == sha256(&b[128], 24).low64());
    assert_int_equal(load_u32(&b[72]), 3);
    for (int i = 76; i < 120; i++) assert_int_equal(b[i], 0);
    assert_int_equal(load_u64(&b[120]), crc32c(&b[0], 120));
    // Pinned values (docs/format.md): any change to the encoding breaks this test.
    assert_int_equal(load_u64(&b[56]), 0x0bd5ab40u);
    assert_true(load_u64(&b[64]) == 0xe352c2b2a05b2a7cull);
}

static void round_trip_every_dtype(void **) {
    for (uint16_t dt = 1; dt <= 9; dt++) {
        size_t es = dtype_size(dt);
        uint64_t dims[3] = {2, 3, 5};
        std::vector<uint8_t> payload(30 * es);
        for (size_t i = 0; i < payload.size(); i++) payload[i] = uint8_t(i * 7 + dt);
        std::string p = g_dir + "/rt" + std::to_string(dt) + ".bin";
        ArrayHeader w = write_array(p, DType(dt), 3, dims, payload.data());
        ArrayReader r(p);
        assert_int_equal(r.header().dtype, dt);
        assert_int_equal(r.header().rank, 3);
        assert_int_equal(r.header().dims[2], 5);
        assert_int_equal(r.header().dims[3], 1);
        assert_int_equal(r.payload_size(), payload.size());
        assert_int_equal(r.header().crc32c, w.crc32c);
        assert_memory_equal(r.payload(), payload.data(), payload.size());
        assert_int_equal(reinterpret_cast<uintptr_t>(r.payload()) % 64, 0);
    }
}

// append_zeros (the file grows by a hole): the same file bytes and header as writing the zeros,
// between ordinary appends, over more than one 64 KiB zero block; and never past byte_len.
static void zeros_as_a_hole(void **) {
    const uint64_t n = 3 + 40000 + 5;  // f32 elements: 3 values, 40000 zeros (160000 bytes), 5 values
    std::vector<float> v(n, 0.0f);
    for (uint64_t i = 0; i < 3; i++) v[i] = float(i + 1);
    for (uint64_t i = n - 5; i < n; i++) v[i] = -float(i);
    const uint64_t dims[1] = {n};
    const std::string a = g_dir + "/dense.bin", b = g_dir + "/holes.bin";
    ArrayHeader ha = write_array(a, DType::F32, 1, dims, v.data());
    ArrayWriter w(b, DType::F32, 1, dims);
    w.append(v.data(), 12);
    w.append_zeros(160000);
    w.append(v.data() + n - 5, 20);
    ArrayHeader hb = w.finish();
    assert_int_equal(ha.crc32c, hb.crc32c);
    assert_true(ha.sha256_low64 == hb.sha256_low64);
    std::vector<uint8_t> da = test::read_bytes(a), db = test::read_bytes(b);
    assert_int_equal(da.size(), 128 + n * 4);
    assert_true(da == db);
    ArrayReader r(b);  // verifies both payload checksums
    assert_int_equal(r.payload_size(), n * 4);
    ArrayWriter over(g_dir + "/over.bin", DType::F32, 1, dims);
    over.append(v.data(), 12);
    test::expect_error(STK_E_SIZE_MISMATCH, [&] { over.append_zeros(n * 4); });
}

// Arrays committed on a CommitQueue's thread (a job writing into a staging directory): after
// drain() every file is under its name with the bytes write_array gives, no temporary is left,
// and handed_over() lists them in order.  A failure (a name that exists: write-once) stops the
// queue: drain() throws it naming the file, every later file is discarded (no name, no
// temporary), and the files before it stay.  close() commits what is queued.
static void commit_queue_commits_in_order(void **) {
    const std::string dir = test::make_temp_dir("array-queue");
    const uint64_t dims[1] = {1 << 16};
    std::vector<float> v(dims[0]);
    for (size_t i = 0; i < v.size(); i++) v[i] = float(i) * 0.25f;
    const std::string ref = dir + "/ref.bin";
    write_array(ref, DType::F32, 1, dims, v.data());
    const std::vector<uint8_t> want = test::read_bytes(ref);
    auto names = [&](const char *tag, int n) {
        std::vector<std::string> p;
        for (int i = 0; i < n; i++) p.push_back(dir + "/" + tag + std::to_string(i) + ".bin");
        return p;
    };
    auto temporaries = [&] {  // ".<name>.tmp.<pid>" files left in dir
        int n = 0;
        if (DIR *d = opendir(dir.c_str())) {
            while (dirent *e = readdir(d)) n += std::strstr(e->d_name, ".tmp.") != nullptr;
            closedir(d);
        }
        return n;
    };
    {
        CommitQueue q;
        const std::vector<std::string> ok = names("ok", 12);
        for (const std::string &p : ok) write_array(p, DType::F32, 1, dims, v.data(), kFlagRowMajor | kFlagAligned64, 1, &q);
        q.drain();
        for (const std::string &p : ok) assert_true(test::read_bytes(p) == want);
        assert_true(q.handed_over() == ok);
        assert_int_equal(temporaries(), 0);
        q.drain();  // nothing left: returns at once
    }
    {
        CommitQueue q;
        const std::vector<std::string> before = names("before", 3), after = names("after", 4);
        for (const std::string &p : before) write_array(p, DType::F32, 1, dims, v.data(), kFlagRowMajor | kFlagAligned64, 1, &q);
        write_array(ref, DType::F32, 1, dims, v.data(), kFlagRowMajor | kFlagAligned64, 1, &q);  // exists
        for (const std::string &p : after) write_array(p, DType::F32, 1, dims, v.data(), kFlagRowMajor | kFlagAligned64, 1, &q);
        const std::string msg = test::expect_error(STK_E_OUTPUT_EXISTS, [&] { q.drain(); });
        assert_non_null(std::strstr(msg.c_str(), "ref.bin"));
        test::expect_error(STK_E_OUTPUT_EXISTS, [&] { q.drain(); });  // it stays failed
        for (const std::string &p : before) assert_true(test::read_bytes(p) == want);
        for (const std::string &p : after) assert_int_not_equal(access(p.c_str(), F_OK), 0);
        assert_true(test::read_bytes(ref) == want);  // the existing file untouched
        assert_int_equal(temporaries(), 0);
        assert_int_equal(q.handed_over().size(), before.size() + 1 + after.size());
    }
    {
        const std::vector<std::string> late = names("late", 5);
        {
            CommitQueue q;
            for (const std::string &p : late) write_array(p, DType::F32, 1, dims, v.data(), kFlagRowMajor | kFlagAligned64, 1, &q);
        }  // destroyed without drain(): close() commits them
        for (const std::string &p : late) assert_true(test::read_bytes(p) == want);
        assert_int_equal(temporaries(), 0);
    }
}

int main() {
    g_dir = test::make_temp_dir("array");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_bytes),
        cmocka_unit_test(round_trip_every_dtype),
        cmocka_unit_test(zeros_as_a_hole),
        cmocka_unit_test(commit_queue_commits_in_order),
    };
    return cmocka_run_group_tests_name("array", tests, nullptr, nullptr);
}

// Generations roots (src/publish, src/stages/publish_job.cc): a job with STK_JOB_PUBLISH_ROOT
// builds in a staging directory, the check stage publishes (rename + CURRENT swap), readers on
// the root pin the generation they opened, one writer at a time, gc/remove rules.
// The crash states (kill -9 and power loss at every durability operation) are
// scripts/crash_states.py (meson test crash_states runs 50 points of it).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/bytes.h"
#include "format/manifest.h"
#include "publish/generations.h"
#include "stages/job.h"
#include "stk/stk.h"
#include "test_util.h"

using namespace stk;

namespace {

std::string model() {
    const char *root = std::getenv("STK_SOURCE_ROOT");
    return std::string(root ? root : ".") + "/bindings/testdata/tiny-gpt2";
}

struct OpenJob {
    std::string in, out;
    std::vector<uint8_t> arena;
    stk_job *job = nullptr;
};

// Opens a job publishing into root (top_l varies the bytes of the linear arrays).
stk_status open_root_job(OpenJob &j, const std::string &root, uint32_t top_l = 0) {
    j.in = model();
    j.out = root;
    stk_job_params p;
    std::memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.in_dir = j.in.c_str();
    p.out_dir = j.out.c_str();
    p.top_l = top_l;
    p.flags = STK_JOB_PUBLISH_ROOT;
    size_t need = 0;
    if (stk_job_arena_size(&p, &need) != STK_OK) fail_msg("%s", stk_last_error());
    j.arena.resize(need);
    return stk_open(&p, j.arena.data(), need, &j.job);
}

// Runs stages first..last (a not-implemented stage is recorded and skipped, as --partial).
void run_stages(stk_job *job, int first, int last) {
    for (int i = first; i <= last; i++) {
        stk_status s = stk_stage_run(job, stk_stage(i));
        if (s != STK_OK && s != STK_E_NOT_IMPLEMENTED) fail_msg("stage %d: %s", i, stk_last_error());
    }
}

// One whole conversion into root; returns the published generation's directory.
std::string publish(const std::string &root, uint32_t top_l = 0) {
    OpenJob j;
    if (open_root_job(j, root, top_l) != STK_OK) fail_msg("stk_open: %s", stk_last_error());
    run_stages(j.job, 1, STK_STAGE_COUNT);
    const char *dir = nullptr;
    assert_int_equal(stk_job_generation_dir(j.job, &dir), STK_OK);
    std::string d = dir;
    stk_close(j.job);
    return d;
}

std::string text_of(const std::string &path) {
    std::vector<uint8_t> b = test::read_bytes(path);
    return std::string(b.begin(), b.end());
}

std::vector<std::string> names_in(const std::string &dir) {
    std::vector<std::string> out;
    if (DIR *d = opendir(dir.c_str())) {
        while (dirent *e = readdir(d))
            if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) out.push_back(e->d_name);
        closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool exists(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0;
}

}  // namespace

// Two conversions: two generations, CURRENT's exact bytes, the chain, nothing visible before check.
static void publish_chains_generations(void **) {
    std::string root = test::make_temp_dir("pub-chain") + "/root";
    std::string g1 = publish(root);
    Manifest m1 = read_manifest(g1 + "/" + kManifestFileName);
    const uint8_t zero[32] = {};
    assert_memory_equal(m1.prev_hash, zero, 32);
    std::string name1 = "000001-" + hex32(m1.curr_hash).substr(0, 16);
    assert_string_equal(g1.c_str(), (root + "/generations/" + name1).c_str());
    assert_string_equal(text_of(root + "/CURRENT").c_str(), (name1 + " " + hex32(m1.curr_hash) + "\n").c_str());

    // The second job: until its check stage the root still says generation 1.
    OpenJob j;
    assert_int_equal(open_root_job(j, root), STK_OK);
    const char *dir = nullptr;
    assert_int_equal(stk_job_generation_dir(j.job, &dir), STK_E_STAGE_ORDER);
    run_stages(j.job, 1, STK_STAGE_MANIFEST_EMIT);
    std::vector<std::string> top = names_in(root);
    assert_int_equal(top.size(), 4);  // CURRENT, LOCK, generations, .staging-<pid>-<n>
    assert_true(top[0].rfind(".staging-", 0) == 0);
    assert_int_equal(names_in(root + "/generations").size(), 1);
    assert_int_equal(list_generations(root).size(), 1);
    stk_verify_report rep;
    std::memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    assert_int_equal(stk_verify(root.c_str(), &rep), STK_OK);
    assert_int_equal(rep.arrays_checked, m1.arrays.size());
    run_stages(j.job, STK_STAGE_CHECK, STK_STAGE_CHECK);
    assert_int_equal(stk_job_generation_dir(j.job, &dir), STK_OK);
    std::string g2 = dir;
    stk_close(j.job);
    assert_int_equal(names_in(root).size(), 3);  // the staging directory became generation 2

    Manifest m2 = read_manifest(g2 + "/" + kManifestFileName);
    assert_memory_equal(m2.prev_hash, m1.curr_hash, 32);
    assert_true(g2.find("/generations/000002-" + hex32(m2.curr_hash).substr(0, 16)) != std::string::npos);
    std::vector<GenerationInfo> chain = check_root_chain(root);
    assert_int_equal(chain.size(), 2);
    assert_string_equal(chain[0].name.c_str(), g2.substr(g2.rfind('/') + 1).c_str());
    assert_string_equal(chain[1].name.c_str(), name1.c_str());
    // Same inputs, so the arrays are the same bytes; the manifests differ by prev_hash only.
    assert_int_equal(m2.arrays.size(), m1.arrays.size());
    for (size_t i = 0; i < m1.arrays.size(); i++) assert_int_equal(m1.arrays[i].sha256_low64, m2.arrays[i].sha256_low64);
    // stk_verify on the root verifies generation 2.
    assert_int_equal(stk_verify(root.c_str(), &rep), STK_OK);
}

// A second writer is refused while the first holds the root; after stk_close it may write.
static void one_writer_at_a_time(void **) {
    std::string root = test::make_temp_dir("pub-lock") + "/root";
    OpenJob a, b;
    assert_int_equal(open_root_job(a, root), STK_OK);
    assert_int_equal(open_root_job(b, root), STK_E_IO);
    assert_contains(stk_last_error(), "is being written by another process");
    assert_int_equal(stk_generation_remove(root.c_str(), "000001-0000000000000000"), STK_E_IO);
    stk_close(a.job);
    assert_false(exists(root + "/generations/000001"));
    assert_int_equal(names_in(root).size(), 2);  // LOCK, generations: a job that did not publish left no staging dir
    assert_int_equal(open_root_job(b, root), STK_OK);
    stk_close(b.job);
}

// A check stage that fails publishes nothing: CURRENT unchanged, the staging dir removed.
static void failed_check_publishes_nothing(void **) {
    std::string root = test::make_temp_dir("pub-fail") + "/root";
    std::string g1 = publish(root);
    std::string current = text_of(root + "/CURRENT");
    OpenJob j;
    assert_int_equal(open_root_job(j, root), STK_OK);
    run_stages(j.job, 1, STK_STAGE_MANIFEST_EMIT);
    const Job &jb = *reinterpret_cast<const Job *>(j.job);
    std::string arr = std::string(jb.out_dir) + "/arrays/" + jb.arrays[0].name;
    std::vector<uint8_t> bytes = test::read_bytes(arr);
    bytes[200] ^= 1;
    ::chmod(arr.c_str(), 0644);
    test::write_bytes(arr, bytes);
    assert_int_equal(stk_stage_run(j.job, STK_STAGE_CHECK), STK_E_CHECKSUM);
    const char *dir = nullptr;
    assert_int_equal(stk_job_generation_dir(j.job, &dir), STK_E_STAGE_ORDER);
    std::string staging = jb.out_dir;
    stk_close(j.job);
    assert_false(exists(staging));
    assert_string_equal(text_of(root + "/CURRENT").c_str(), current.c_str());
    assert_int_equal(names_in(root + "/generations").size(), 1);
}

// A reader that opened the root keeps its generation's bytes while a newer one is published and
// the old one removed; a reader opened afterwards sees the new one.
static void reader_pins_its_generation(void **) {
    std::string root = test::make_temp_dir("pub-pin") + "/root";
    std::string g1 = publish(root, 12);
    stk_generation *old_gen = nullptr;
    assert_int_equal(stk_generation_open(root.c_str(), &old_gen), STK_OK);
    // Every (key, value) of generation 1's linear dictionary.
    std::vector<uint8_t> keys = test::read_bytes(g1 + "/arrays/linear_keys.bin");
    std::vector<uint8_t> weights = test::read_bytes(g1 + "/arrays/linear_weights.bin");
    size_t c = (keys.size() - 128) / 8;
    assert_true(c > 10);
    auto lookup_all = [&](const stk_generation *g, size_t *found) {
        *found = 0;
        for (size_t i = 0; i < c; i++) {
            float v = 0;
            size_t len = 0;
            if (stk_lookup(g, STK_LOOKUP_LINEAR, keys.data() + 128 + 8 * i, 8, &v, sizeof v, &len) != STK_OK) continue;
            if (std::memcmp(&v, weights.data() + 128 + 4 * i, 4) == 0) (*found)++;
        }
    };
    size_t found = 0;
    lookup_all(old_gen, &found);
    assert_int_equal(found, c);

    std::string g2 = publish(root, 3);  // a different top-L: a different linear dictionary
    assert_int_equal(stk_generation_remove(root.c_str(), g2.substr(g2.rfind('/') + 1).c_str()), STK_E_INVALID_ARGUMENT);
    assert_contains(stk_last_error(), "is the current generation");
    assert_int_equal(stk_generation_remove(root.c_str(), g1.substr(g1.rfind('/') + 1).c_str()), STK_OK);
    assert_false(exists(g1));
    lookup_all(old_gen, &found);  // the removed generation, still mapped: the same answers
    assert_int_equal(found, c);
    stk_generation *new_gen = nullptr;
    assert_int_equal(stk_generation_open(root.c_str(), &new_gen), STK_OK);
    lookup_all(new_gen, &found);
    assert_true(found < c);  // top-L 3 keeps fewer entries than top-L 12
    stk_generation_close(new_gen);
    stk_generation_close(old_gen);
    // The chain now starts at generation 2 (its predecessor was removed): still checks.
    assert_int_equal(check_root_chain(root).size(), 1);
}

// gc keeps the newest chain members and the current one; --remove refuses to cut the chain.
static void gc_and_remove_rules(void **) {
    std::string root = test::make_temp_dir("pub-gc") + "/root";
    std::vector<std::string> names;
    for (int i = 0; i < 4; i++) {
        std::string d = publish(root);
        names.push_back(d.substr(d.rfind('/') + 1));
    }
    assert_int_equal(check_root_chain(root).size(), 4);
    int fd = lock_root(root);
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { remove_generation(root, names[3], true); });
    std::string msg = test::expect_error(STK_E_INVALID_ARGUMENT, [&] { remove_generation(root, names[1], false); });
    assert_contains(msg, "cuts the chain");
    assert_true(msg.find("--") == std::string::npos);  // the library's words; the CLI names its --force
    test::expect_error(STK_E_NOT_FOUND, [&] { remove_generation(root, "000009-0123456789abcdef", false); });
    test::expect_error(STK_E_INVALID_ARGUMENT, [&] { remove_generation(root, "../x", false); });
    // An orphan (a generation never made current: a crash between rename and swap) and
    // leftovers of crashed writers.
    make_dirs(root + "/generations/000007-00000000000000ff/arrays");
    make_dirs(root + "/.staging-1-0/arrays");
    test::write_bytes(root + "/CURRENT.tmp", {'x'});
    std::vector<GenerationInfo> all = list_generations(root);
    assert_int_equal(all.size(), 5);
    assert_false(all[4].readable);
    assert_false(all[4].on_chain);
    assert_int_equal(clean_leftovers(root), 2);
    std::vector<std::string> removed = gc_generations(root, 2);
    unlock_root(fd);
    assert_int_equal(removed.size(), 3);  // the orphan, then names[1], names[0]
    assert_string_equal(removed[0].c_str(), "000007-00000000000000ff");
    std::vector<std::string> left = names_in(root + "/generations");
    assert_int_equal(left.size(), 2);
    assert_string_equal(left[0].c_str(), names[2].c_str());
    assert_string_equal(left[1].c_str(), names[3].c_str());
    assert_int_equal(check_root_chain(root).size(), 2);
    // The next convert after all that: 000005, after the highest seq present, chained to names[3].
    std::string d5 = publish(root);
    assert_true(d5.find("/000005-") != std::string::npos);
    Manifest m5 = read_manifest(d5 + "/" + kManifestFileName);
    assert_string_equal(hex32(m5.prev_hash).substr(0, 16).c_str(), names[3].substr(7).c_str());
}

// A reader's pin (stk_verify holds one while it reads a root's current generation) keeps gc and
// --remove off that generation; released, the next gc removes it.
static void gc_skips_a_pinned_generation(void **) {
    std::string root = test::make_temp_dir("pub-pin-gc") + "/root";
    std::string g1 = publish(root), g2 = publish(root), g3 = publish(root);
    const std::string n1 = g1.substr(g1.rfind('/') + 1), n2 = g2.substr(g2.rfind('/') + 1);
    {
        GenerationPin pin;
        assert_true(pin.pin(g1));
        int fd = lock_root(root);
        std::string msg = test::expect_error(STK_E_IO, [&] { remove_generation(root, n1, true); });
        assert_contains(msg, "is being read by another process");
        std::vector<std::string> busy;
        std::vector<std::string> removed = gc_generations(root, 1, &busy);
        unlock_root(fd);
        assert_int_equal(removed.size(), 1);
        assert_string_equal(removed[0].c_str(), n2.c_str());
        assert_int_equal(busy.size(), 1);
        assert_string_equal(busy[0].c_str(), n1.c_str());
        assert_true(exists(g1));
        // The reader's files are all still there while it holds the pin.
        stk_verify_report r{};
        r.struct_size = sizeof r;
        assert_int_equal(stk_verify(g1.c_str(), &r), STK_OK);
    }
    int fd = lock_root(root);
    std::vector<std::string> removed = gc_generations(root, 1);
    unlock_root(fd);
    assert_int_equal(removed.size(), 1);
    assert_string_equal(removed[0].c_str(), n1.c_str());
    assert_false(exists(g1));
    // A pin on a removed generation fails (the reader reads CURRENT again).
    GenerationPin gone;
    assert_false(gone.pin(g1));
    assert_true(gone.pin(g3));
}

// CURRENT is validated: malformed bytes, or a hash that is not its generation's.
static void current_pointer_validated(void **) {
    std::string root = test::make_temp_dir("pub-cur") + "/root";
    std::string g1 = publish(root);
    std::string good = text_of(root + "/CURRENT");
    stk_verify_report rep;
    std::memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    auto put = [&](const std::string &t) {
        ::unlink((root + "/CURRENT").c_str());
        test::write_bytes(root + "/CURRENT", std::vector<uint8_t>(t.begin(), t.end()));
    };
    put(good.substr(0, good.size() - 1));  // no newline
    assert_int_equal(stk_verify(root.c_str(), &rep), STK_E_CORRUPT);
    assert_string_equal(rep.failed_file, "CURRENT");
    std::string bad = good;
    bad[good.size() - 2] = bad[good.size() - 2] == '0' ? '1' : '0';  // last hex digit of the hash
    put(bad);
    assert_int_equal(stk_verify(root.c_str(), &rep), STK_E_CHECKSUM);
    assert_string_equal(rep.failed_file, "CURRENT");
    stk_generation *g = nullptr;
    assert_int_equal(stk_generation_open(root.c_str(), &g), STK_E_CHECKSUM);
    put(good);
    // A corrupted array of the current generation is reported relative to the root.
    std::string arr = g1 + "/arrays/linear_weights.bin";
    std::vector<uint8_t> b = test::read_bytes(arr);
    b[130] ^= 0x40;
    ::unlink(arr.c_str());
    test::write_bytes(arr, b);
    assert_int_equal(stk_verify(root.c_str(), &rep), STK_E_CHECKSUM);
    std::string want = "generations/" + g1.substr(g1.rfind('/') + 1) + "/arrays/linear_weights.bin";
    assert_string_equal(rep.failed_file, want.c_str());
    // A root with no CURRENT yet: nothing to verify.
    std::string empty = test::make_temp_dir("pub-empty");
    make_dirs(empty + "/generations");
    assert_int_equal(stk_verify(empty.c_str(), &rep), STK_E_NOT_FOUND);
}

namespace {

using Run = test::StkRun;
using test::run_stk;

}  // namespace

// The command line: convert into a root twice, check follows the chain, generations lists and
// removes, a locked root is refused with exit 5, inspect and replay accept the root.
static void cli_generations(void **) {
    std::string root = test::make_temp_dir("pub-cli") + "/root";
    Run c1 = run_stk({"convert", model(), root, "--partial", "--json"});
    assert_int_equal(c1.exit_code, 0);
    Run c2 = run_stk({"convert", model(), root, "--partial", "--json"});
    assert_int_equal(c2.exit_code, 0);
    assert_contains(c2.err, "previous    ");
    simdjson::dom::parser p1, p2;
    simdjson::dom::element j1 = p1.parse(c1.out), j2 = p2.parse(c2.out);
    std::string name1 = std::string(std::string_view(j1["generation_name"]));
    std::string name2 = std::string(std::string_view(j2["generation_name"]));
    assert_true(name1.rfind("000001-", 0) == 0);
    assert_true(name2.rfind("000002-", 0) == 0);
    assert_true(j1["previous"].is_null());
    assert_true(std::string_view(j2["previous"]) == std::string_view(j1["generation"]));
    assert_true(std::string_view(j2["root"]) == root);
    assert_true(std::string_view(j2["generation_dir"]) == root + "/generations/" + name2);

    Run ck = run_stk({"check", root, "--json"});
    assert_int_equal(ck.exit_code, 0);
    simdjson::dom::parser p3;
    simdjson::dom::element jc = p3.parse(ck.out);
    assert_true(bool(jc["root"]));
    assert_true(std::string_view(jc["generation"]) == name2);
    assert_int_equal(jc["chain"].get_array().size(), 2);
    assert_true(std::string_view(jc["chain"].at(1)) == name1);
    assert_int_equal(run_stk({"check", root + "/generations/" + name1}).exit_code, 0);  // one generation directory

    Run ls = run_stk({"generations", root, "--json"});
    assert_int_equal(ls.exit_code, 0);
    simdjson::dom::parser p4;
    simdjson::dom::element jl = p4.parse(ls.out);
    assert_true(std::string_view(jl["current"]) == name2);
    assert_int_equal(jl["generations"].get_array().size(), 2);
    assert_true(std::string_view(jl["generations"].at(0)["prev_hash"]) == std::string(64, '0'));
    assert_int_equal(uint64_t(jl["generations"].at(1)["arrays"]),
                     22);  // EXT mode: 15 arrays of the numeric stages + 7 of the bridge
    assert_true(bool(jl["generations"].at(1)["current"]));
    Run txt = run_stk({"generations", root});
    assert_contains(txt.out, name1 + "  -       yes");
    assert_contains(txt.out, "(first)");

    Run rm = run_stk({"generations", root, "--remove", name2});
    assert_int_equal(rm.exit_code, 1);  // refused: the current one
    assert_contains(rm.err, "is the current generation");
    assert_int_equal(run_stk({"generations", root, "--keep", "1"}).exit_code, 2);  // --keep without --gc

    // A writer holds the root: convert and gc are refused, exit 5, nothing changes.
    int fd = lock_root(root);
    Run busy = run_stk({"convert", model(), root, "--partial"});
    assert_int_equal(busy.exit_code, 5);
    assert_contains(busy.err, "is being written by another process");
    assert_int_equal(run_stk({"generations", root, "--gc"}).exit_code, 5);
    unlock_root(fd);

    Run ins = run_stk({"inspect", root, "--json"});
    assert_int_equal(ins.exit_code, 0);
    simdjson::dom::parser p5;
    simdjson::dom::element ji = p5.parse(ins.out);
    assert_true(std::string_view(ji["generation"]) == std::string_view(j2["generation"]));
    assert_true(std::string_view(ji["root"]) == root);
    Run rp = run_stk({"replay", root, "--prompt", "the end", "--in", model()});
    assert_int_equal(rp.exit_code, 0);
    assert_contains(rp.out, "state digest");

    Run gc = run_stk({"generations", root, "--gc", "--keep", "1", "--json"});
    assert_int_equal(gc.exit_code, 0);
    simdjson::dom::parser p6;
    simdjson::dom::element jg = p6.parse(gc.out);
    assert_int_equal(jg["removed"].get_array().size(), 1);
    assert_true(std::string_view(jg["removed"].at(0)) == name1);
    assert_false(exists(root + "/generations/" + name1));
    Run ck2 = run_stk({"check", root});
    assert_int_equal(ck2.exit_code, 0);
    assert_contains(ck2.out, "the oldest names a removed predecessor");
}

int main() {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(publish_chains_generations),
        cmocka_unit_test(one_writer_at_a_time),
        cmocka_unit_test(failed_check_publishes_nothing),
        cmocka_unit_test(reader_pins_its_generation),
        cmocka_unit_test(gc_and_remove_rules),
        cmocka_unit_test(current_pointer_validated),
        cmocka_unit_test(cli_generations),
        cmocka_unit_test(gc_skips_a_pinned_generation),
    };
    return cmocka_run_group_tests(tests, nullptr, nullptr);
}

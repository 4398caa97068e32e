// MPHF benchmark: build ns/key, query ns (random order; 10^7 keys are far out of cache) and
// bits/key, for stk's MPHF and CMPH's CHD (Debian libcmph-dev, linked only here) on the same keys
// in the same run, plus a floor (one random 2-byte read per query in an array the size of our
// pilot table, same order).  CHD runs twice: with its defaults and tuned for space (load 0.99,
// 5 keys per bucket, the setting of the CHD paper's 2.07 bits/key).  docs/benchmarks.md "## MPHF"
// has numbers.
//
// Equal conditions for both sides:
//   - the same keys in the same memory: one contiguous array (u64 keys) or blob + offsets (byte
//     keys); CHD reads them through an io adapter that hands out pointers into that memory (no
//     per-key copy, no per-key pointer to chase), its queries get the same (pointer, length);
//   - allocation and first touch inside the timed build for both: stk's arena is malloc'ed fresh
//     per build (its pages are first touched by the build), as CHD mallocs inside cmph_new;
//     freeing is outside the timing for both;
//   - the same clock around the same work: this thread's CPU time (CLOCK_THREAD_CPUTIME_ID, user
//     + system: page faults count), or steady_clock with --wall; stk and both CHD settings
//     alternate run by run, so a change of the machine's load hits all alike; medians.
//
//   mphf_bench [--runs N] [--big] [--lambda L] [--alpha A] [--only-stk] [--wall]
//     --big adds the 10^7-key set; --lambda / --alpha set stk's parameters; --only-stk skips CHD
//     and prints the search work (64-pilot windows tested per key, largest pilot).
#include <cmph.h>
#include <time.h>

#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/prng.h"
#include "hash/mphf.h"
#include "tokenizer/vocab_io.h"

using namespace stk;
// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time: on a shared machine the time a
// run spends descheduled would otherwise land on whichever side was running.  --wall switches
// to steady_clock.  Either way the same clock times both sides.
static bool g_wall = false;
struct Clock {
    using time_point = double;
    static double now() {
        if (g_wall) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
    }
};

static double secs(double a, double b) { return b - a; }
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Keys {
    std::string name;
    bool bytes = false;
    std::vector<uint64_t> u64;  // u64 keys
    std::vector<uint8_t> blob;  // byte keys: blob + offsets
    std::vector<uint64_t> off{0};
    std::vector<uint32_t> order;  // query order (a permutation)
    size_t size() const { return bytes ? off.size() - 1 : u64.size(); }
};

struct Result {
    double build_ns, query_ns, bits;
    double windows_per_key = 0;  // stk: 64-pilot windows tested per key (build work)
    uint32_t max_pilot = 0;
    double escaped = 0;  // stk: fraction of buckets whose pilot is escaped (>= 255)
};

static volatile uint64_t g_sink;

static MphfParams g_params;

static Result run_stk(const Keys &k, int runs) {
    MphfParams p = g_params;
    size_t n = k.size();
    size_t arena_bytes = mphf_build_arena_size(n, p);
    std::vector<double> b, q;
    double bits = 0, windows = 0;
    uint32_t max_pilot = 0;
    double escaped = 0;
    for (int r = 0; r < runs; r++) {
        // The arena is allocated inside the timed build and first touched by it, as CHD's
        // mallocs are inside cmph_new.
        auto t0 = Clock::now();
        auto *mem = static_cast<uint8_t *>(std::malloc(arena_bytes));
        if (!mem) std::abort();
        Arena a(mem, arena_bytes);
        Mphf f = k.bytes ? mphf_build_bytes(k.blob.data(), k.off.data(), n, p, a) : mphf_build_u64(k.u64.data(), n, p, a);
        auto t1 = Clock::now();
        b.push_back(secs(t0, t1) * 1e9 / double(n));
        uint64_t sum = 0;
        t0 = Clock::now();
        if (k.bytes)
            for (uint32_t i : k.order) sum += f.index_bytes(k.blob.data() + k.off[i], size_t(k.off[i + 1] - k.off[i]));
        else
            for (uint32_t i : k.order) sum += f.index_u64(k.u64[i]);
        t1 = Clock::now();
        g_sink = sum;
        q.push_back(secs(t0, t1) * 1e9 / double(n));
        bits = 8.0 * double(f.serialized_size()) / double(n);
        windows = double(f.stats.window_trials) / double(n);
        max_pilot = f.stats.max_pilot;
        escaped = double(f.n_escapes) / double(f.n_buckets);
        std::free(mem);
    }
    return {median(b), median(q), bits, windows, max_pilot, escaped};
}

// CMPH io adapter over the benchmark's own key memory: read() hands out a pointer into it and
// dispose() does nothing, so CHD sees the keys where stk sees them, with no per-key copy.
struct KeyCursor {
    const Keys *k;
    size_t pos;
};
static int cursor_read(void *data, char **key, cmph_uint32 *len) {
    auto *c = static_cast<KeyCursor *>(data);
    const Keys &k = *c->k;
    size_t i = c->pos++;
    if (k.bytes) {
        *key = reinterpret_cast<char *>(const_cast<uint8_t *>(k.blob.data() + k.off[i]));
        *len = cmph_uint32(k.off[i + 1] - k.off[i]);
    } else {
        *key = reinterpret_cast<char *>(const_cast<uint64_t *>(&k.u64[i]));
        *len = 8;
    }
    return int(*len);
}
static void cursor_dispose(void *, char *, cmph_uint32) {}
static void cursor_rewind(void *data) { static_cast<KeyCursor *>(data)->pos = 0; }

enum class Chd { Defaults, SpaceTuned };

static Result run_chd(const Keys &k, int runs, Chd setting) {
    size_t n = k.size();
    std::vector<double> b, q;
    double bits = 0;
    for (int r = 0; r < runs; r++) {
        KeyCursor cur{&k, 0};
        cmph_io_adapter_t src{&cur, cmph_uint32(n), cursor_read, cursor_dispose, cursor_rewind};
        auto t0 = Clock::now();
        cmph_config_t *cfg = cmph_config_new(&src);
        cmph_config_set_algo(cfg, CMPH_CHD);
        if (setting == Chd::SpaceTuned) {
            cmph_config_set_graphsize(cfg, 0.99);  // load factor
            cmph_config_set_b(cfg, 5);             // keys per bucket
        }
        cmph_t *h = cmph_new(cfg);
        cmph_config_destroy(cfg);
        auto t1 = Clock::now();
        if (!h) {
            std::fprintf(stderr, "CHD build failed on %s\n", k.name.c_str());
            std::exit(1);
        }
        b.push_back(secs(t0, t1) * 1e9 / double(n));
        std::vector<uint8_t> packed(cmph_packed_size(h));
        cmph_pack(h, packed.data());
        cmph_destroy(h);
        bits = 8.0 * double(packed.size()) / double(n);
        uint64_t sum = 0;
        t0 = Clock::now();
        if (k.bytes)
            for (uint32_t i : k.order)
                sum += cmph_search_packed(packed.data(), reinterpret_cast<const char *>(k.blob.data() + k.off[i]),
                                          cmph_uint32(k.off[i + 1] - k.off[i]));
        else
            for (uint32_t i : k.order) sum += cmph_search_packed(packed.data(), reinterpret_cast<const char *>(&k.u64[i]), 8);
        t1 = Clock::now();
        g_sink = sum;
        q.push_back(secs(t0, t1) * 1e9 / double(n));
    }
    return {median(b), median(q), bits};
}

// One random 2-byte read per query from an array of ceil(K/4) u16 (our pilot table's size).
static double run_floor(const Keys &k, int runs) {
    size_t n = k.size(), m = n / 4 + 2;
    std::vector<uint16_t> arr(m, 1);
    std::vector<uint64_t> h(n);
    for (size_t i = 0; i < n; i++) h[i] = mix64(i * 0x9E3779B97F4A7C15ull);
    std::vector<double> q;
    for (int r = 0; r < runs; r++) {
        uint64_t sum = 0;
        auto t0 = Clock::now();
        for (uint32_t i : k.order) sum += arr[hash::fastrange(h[i], m)];
        auto t1 = Clock::now();
        g_sink = sum;
        q.push_back(secs(t0, t1) * 1e9 / double(n));
    }
    return median(q);
}

static void shuffle_order(Keys &k) {
    k.order.resize(k.size());
    for (uint32_t i = 0; i < k.order.size(); i++) k.order[i] = i;
    std::mt19937_64 rng(12345);
    std::shuffle(k.order.begin(), k.order.end(), rng);
}

static Keys random_u64(size_t n) {
    Keys k;
    k.name = std::to_string(n) + " random u64";
    k.u64.resize(n);
    uint64_t s = 0xC0FFEE;
    for (auto &x : k.u64) x = splitmix64_next(&s);
    std::sort(k.u64.begin(), k.u64.end());
    k.u64.erase(std::unique(k.u64.begin(), k.u64.end()), k.u64.end());
    std::mt19937_64 rng(7);
    std::shuffle(k.u64.begin(), k.u64.end(), rng);
    shuffle_order(k);
    return k;
}

// GPT-2's 50,257 pieces, then synthetic strings (2..12 bytes of a-z and space) up to n.
static Keys vocab(const std::vector<std::string> &gpt2, size_t n) {
    Keys k;
    k.bytes = true;
    k.name = std::to_string(n / 1000) + "k tokens";
    std::vector<std::string> all(gpt2.begin(), gpt2.end());
    uint64_t s = 99;
    std::unordered_set<std::string> seen(all.begin(), all.end());
    while (all.size() < n) {
        uint64_t x = splitmix64_next(&s);
        size_t len = 2 + x % 11;
        std::string t;
        for (size_t i = 0; i < len; i++) t.push_back(" abcdefghijklmnopqrstuvwxyz"[splitmix64_next(&s) % 27]);
        if (seen.insert(t).second) all.push_back(t);
    }
    all.resize(n);
    for (const std::string &t : all) {
        k.blob.insert(k.blob.end(), t.begin(), t.end());
        k.off.push_back(k.blob.size());
    }
    shuffle_order(k);
    return k;
}

int main(int argc, char **argv) {
    int runs = 5;
    bool big = false, only_stk = false;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--runs") && i + 1 < argc) runs = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--big")) big = true;
        else if (!std::strcmp(argv[i], "--lambda") && i + 1 < argc) g_params.lambda = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--alpha") && i + 1 < argc) g_params.alpha = std::atof(argv[++i]);
        else if (!std::strcmp(argv[i], "--only-stk")) only_stk = true;
        else if (!std::strcmp(argv[i], "--wall")) g_wall = true;
    }
    const char *data = std::getenv("STK_THIRD_PARTY_DATA");
    std::string dir = std::string(data ? data : "tests/data/third_party") + "/gpt2/hf-dir";
    Vocab v = load_vocab_dir(dir);
    std::vector<Keys> sets;
    sets.push_back(random_u64(1000000));
    if (big) sets.push_back(random_u64(10000000));
    sets.push_back(vocab(v.pieces, v.size()));
    sets.push_back(vocab(v.pieces, 100000));
    sets.push_back(vocab(v.pieces, 250000));
    std::printf(
        "| keys | stk build ns/key | CHD build ns/key (defaults / space-tuned) | build speed-up (defaults / space-tuned) "
        "| stk query ns | CHD query ns (defaults / space-tuned) | query speed-up (defaults / space-tuned) | floor ns "
        "| stk bits/key | CHD bits/key (defaults / space-tuned) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
    for (const Keys &k : sets) {
        // Small sets build in milliseconds: more runs.  stk and the two CHD settings alternate
        // run by run, so a change in the machine's load hits all alike; medians over the runs.
        int r = k.size() <= 300000 ? 3 * runs : runs;
        if (only_stk) {
            Result s = run_stk(k, r);
            std::printf(
                "| %s | %.1f | - | - | %.1f | - | - | - | %.2f | - | (lambda %g alpha %g: %.2f windows/key, max pilot %u, %.2f "
                "%% of buckets escaped)\n",
                k.name.c_str(), s.build_ns, s.query_ns, s.bits, g_params.lambda, g_params.alpha, s.windows_per_key, s.max_pilot,
                100.0 * s.escaped);
            std::fflush(stdout);
            continue;
        }
        std::vector<Result> ss, cd, cs;
        for (int i = 0; i < r; i++) {
            ss.push_back(run_stk(k, 1));
            cd.push_back(run_chd(k, 1, Chd::Defaults));
            cs.push_back(run_chd(k, 1, Chd::SpaceTuned));
        }
        auto med = [](const std::vector<Result> &v) {
            std::vector<double> b, q;
            for (const Result &x : v) {
                b.push_back(x.build_ns);
                q.push_back(x.query_ns);
            }
            return Result{median(b), median(q), v[0].bits, v[0].windows_per_key, v[0].max_pilot};
        };
        Result s = med(ss), c = med(cd), t = med(cs);
        double fl = run_floor(k, r);
        std::printf(
            "| %s | %.1f | %.1f / %.1f | %.1fx / %.1fx | %.1f | %.1f / %.1f | %.1fx / %.1fx | %.1f | %.2f | %.2f / %.2f |\n",
            k.name.c_str(), s.build_ns, c.build_ns, t.build_ns, c.build_ns / s.build_ns, t.build_ns / s.build_ns, s.query_ns,
            c.query_ns, t.query_ns, c.query_ns / s.query_ns, t.query_ns / s.query_ns, fl, s.bits, c.bits, t.bits);
        std::fflush(stdout);
    }
    return 0;
}

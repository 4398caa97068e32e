// Tokenizer encode benchmark: MB/s single-threaded on real English text (scripts/
// make_english_corpus.py) for the real byte-level BPE (tokenizer/bpe.h) and the greedy encoder
// (tokenizer/greedy.h, seed 4.5), against a floor (one pass reading every byte) and the peers
// tiktoken and HF tokenizers (bench/node/tokenize_peers.js, same text, same run, ids written to
// PEER_DIR).  Checks our BPE ids are identical to each peer's; reports the share of BPE tokens
// that greedy reproduces exactly (same byte span, same id).  docs/benchmarks.md, "Tokenizer
// encode", has the numbers and bench/tokenize_bench.sh runs everything.  Greedy runs three ways:
// with the in-memory accelerator (attach_greedy_accel, as GreedyTables sets it up), without it,
// and the plain reference loop; all three must give the same ids (exit 1 otherwise).
//
//   tokenize_bench TEXT MODEL_DIR [PEER_DIR] [RUNS] [LTOK]     (LTOK 0: real BPE only)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/bpe.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/greedy.h"
#include "tokenizer/vocab_greedy.h"
#include "tokenizer/vocab_io.h"

using namespace stk;
using Clock = std::chrono::steady_clock;

static double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
// Process CPU time: on a loaded machine the CPU-time rate is the steadier of the two.
static double cpu_now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
struct Timer {
    Clock::time_point w = Clock::now();
    double c = cpu_now();
};
struct Times {
    std::vector<double> wall, cpu;
    void add(const Timer &t) {
        wall.push_back(secs(t.w, Clock::now()));
        cpu.push_back(cpu_now() - t.c);
    }
};

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static std::vector<uint32_t> read_ids(const std::string &path, bool *ok) {
    std::vector<uint32_t> ids;
    *ok = file_exists(path);
    if (!*ok) return ids;
    MappedFile f(path);
    ids.resize(size_t(f.size() / 4));
    if (!ids.empty()) std::memcpy(ids.data(), f.data(), ids.size() * 4);
    return ids;
}

// Tokens of `a` that `b` also has: same start and end byte offsets and the same id.
static size_t agreeing(const Vocab &v, const std::vector<uint32_t> &a, const std::vector<uint32_t> &b) {
    size_t i = 0, j = 0, pa = 0, pb = 0, same = 0;
    while (i < a.size() && j < b.size()) {
        size_t ea = pa + v.pieces[a[i]].size(), eb = pb + v.pieces[b[j]].size();
        if (pa == pb && ea == eb && a[i] == b[j]) same++;
        if (ea <= eb) {
            pa = ea;
            i++;
        }  // advance whichever token ends first (both if together)
        if (eb <= ea) {
            pb = eb;
            j++;
        }
    }
    return same;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: tokenize_bench TEXT MODEL_DIR [PEER_DIR] [RUNS] [LTOK]\n");
        return 2;
    }
    std::string text_path = argv[1], model_dir = argv[2], peer_dir = argc > 3 ? argv[3] : "";
    int runs = argc > 4 ? std::atoi(argv[4]) : 5;
    uint32_t ltok = argc > 5 ? uint32_t(std::atoi(argv[5])) : 8;
    try {
        MappedFile mf(text_path);
        std::string text(reinterpret_cast<const char *>(mf.data()), size_t(mf.size()));
        const double mb = double(text.size()) / 1e6;
        Vocab v = load_vocab_dir(model_dir);
        std::printf("text: %s, %zu bytes; tokenizer: %s; %d runs, median\n", text_path.c_str(), text.size(), v.source.c_str(),
                    runs);

        // floor: read every byte once (the least any encoder must do)
        Times t_floor;
        uint64_t sink = 0;
        for (int r = 0; r < runs; r++) {
            Timer t0;
            uint64_t s = 0;
            for (unsigned char c : text) s += c;
            sink += s;
            t_floor.add(t0);
        }

        // real BPE: a fresh Tokenizer (cold word cache) each run; construction not timed
        Times t_bpe;
        std::vector<uint32_t> bpe_ids;
        uint64_t hits = 0, misses = 0;
        for (int r = 0; r < runs; r++) {
            Tokenizer t(v);
            std::vector<uint32_t> ids;
            Timer t0;
            t.encode(text, ids, false);
            t_bpe.add(t0);
            hits = t.cache_hits();
            misses = t.cache_misses();
            bpe_ids.swap(ids);
        }
        auto c0 = Clock::now();
        Tokenizer tk(v);
        double t_construct = secs(c0, Clock::now());

        // greedy
        double t_tables = 0;
        Times t_greedy, t_greedy_ref, t_greedy_bare;
        GreedyStats greedy_stats, ref_stats;
        bool greedy_same = false;
        std::vector<uint32_t> greedy_ids;
        bool greedy_ok = false;
        if (ltok == 0) std::printf("greedy: not run (LTOK 0)\n");
        else try {
                auto g0 = Clock::now();
                GreedyTables g(v, ltok);
                t_tables = secs(g0, Clock::now());
                const uint8_t *tx = reinterpret_cast<const uint8_t *>(text.data());
                // Every encoder's output is allocated inside its timed run and first touched by it,
                // as the BPE's vector and the peers' arrays are (a buffer allocated and touched once
                // outside the timing and reused would hide page faults that the others pay).
                size_t n = 0;
                auto timed_greedy = [&](const FstTables &tables, Times &times, std::vector<uint32_t> &keep, GreedyStats *stats,
                                        bool reference) {
                    for (int r = 0; r < runs; r++) {
                        Timer t0;
                        std::unique_ptr<uint32_t[]> out(new uint32_t[text.size() + 1]);
                        n = reference ? greedy_encode_reference(tables, tx, text.size(), out.get(), r == 0 ? stats : nullptr)
                                      : greedy_encode(tables, tx, text.size(), out.get(), r == 0 ? stats : nullptr);
                        times.add(t0);
                        if (r == runs - 1) keep.assign(out.get(), out.get() + n);
                    }
                };
                timed_greedy(*g.tables, t_greedy, greedy_ids, &greedy_stats, false);
                // the same encoder over tables without the in-memory accelerator (as a mapped
                // generation is used): same ids or exit 1
                FstTables bare = *g.tables;
                bare.filter = nullptr;
                for (uint32_t n = 1; n <= ltok && n <= hash::kMaxRollingLen; n++) bare.t[n].words = nullptr;
                std::vector<uint32_t> bare_ids, ref_ids;
                timed_greedy(bare, t_greedy_bare, bare_ids, nullptr, false);
                // the plain encoder (greedy_encode_reference) as the in-run peer: same ids or exit 1
                timed_greedy(*g.tables, t_greedy_ref, ref_ids, &ref_stats, true);
                greedy_same = ref_ids == greedy_ids && bare_ids == greedy_ids;
                greedy_ok = true;
            } catch (const Error &e) {
                std::printf("greedy: not run: %s\n", e.what());
            }

        struct Peer {
            const char *name;
            double mbs, cpu_mbs;
            std::vector<uint32_t> ids;
            bool have;
        };
        std::vector<Peer> peers;
        double tiktoken_cpu = 0;
        if (!peer_dir.empty()) {
            for (const char *name : {"tiktoken", "tiktoken_whole", "hf_tokenizers"}) {
                Peer p{name, 0, 0, {}, false};
                p.ids = read_ids(peer_dir + "/" + name + ".ids", &p.have);
                std::string js = peer_dir + "/" + name + ".json";
                if (file_exists(js)) {
                    std::string s = read_small_file(js, 1 << 20);
                    size_t at = s.find("\"median_mb_s\":");
                    if (at != std::string::npos) p.mbs = std::atof(s.c_str() + at + 14);
                    at = s.find("\"median_cpu_mb_s\":");
                    if (at != std::string::npos) p.cpu_mbs = std::atof(s.c_str() + at + 18);
                }
                if (!std::strcmp(name, "tiktoken")) tiktoken_cpu = p.cpu_mbs;
                peers.push_back(std::move(p));
            }
        }
        auto ratio = [&](double x) { return tiktoken_cpu > 0 ? x / tiktoken_cpu : 0.0; };
        auto row = [&](const char *name, const Times &t, size_t tokens, const std::string &note) {
            double w = mb / median(t.wall), c = mb / median(t.cpu);
            std::printf("| %s | %.1f | %.1f | %zu | %.1fx | %s |\n", name, w, c, tokens, ratio(c), note.c_str());
        };
        std::printf(
            "\n| encoder | MB/s wall | MB/s CPU | tokens | CPU MB/s vs tiktoken | ids |\n|---|---:|---:|---:|---:|---|\n");
        row("floor (read every byte once)", t_floor, 0, "-");
        std::string ident;
        for (const Peer &p : peers) {
            if (!p.have) continue;
            bool same = p.ids == bpe_ids;
            size_t first = 0;
            while (first < std::min(p.ids.size(), bpe_ids.size()) && p.ids[first] == bpe_ids[first]) first++;
            ident += std::string(same ? "identical to " : "DIFFERENT from ") + p.name +
                     (same ? "" : " (first difference at token " + std::to_string(first) + ")") + "; ";
        }
        row("stk real BPE", t_bpe, bpe_ids.size(), ident);
        if (greedy_ok) {
            char note[128];
            std::snprintf(note, sizeof note, "%.2f %% of BPE tokens reproduced (same bytes, same id)",
                          bpe_ids.empty() ? 0.0 : 100.0 * double(agreeing(v, bpe_ids, greedy_ids)) / double(bpe_ids.size()));
            std::string name = "stk greedy (Ltok " + std::to_string(ltok) + ", uncertified)";
            row(name.c_str(), t_greedy, greedy_ids.size(), note);
            row("stk greedy without the accelerator", t_greedy_bare, greedy_ids.size(),
                greedy_same ? "identical to stk greedy" : "DIFFERENT from stk greedy");
            row("stk greedy, plain reference loop", t_greedy_ref, greedy_ids.size(),
                greedy_same ? "identical to stk greedy" : "DIFFERENT from stk greedy");
        }
        for (const Peer &p : peers)
            if (p.have)
                std::printf("| %s (Node, %s) | %.1f | %.1f | %zu | %.1fx | - |\n", p.name,
                            std::strcmp(p.name, "tiktoken_whole") ? "64 KiB chunks" : "whole text in one call", p.mbs, p.cpu_mbs,
                            p.ids.size(), ratio(p.cpu_mbs));
        std::printf(
            "\nBPE word cache: %llu hits, %llu misses; Tokenizer construction %.1f ms; greedy tables %.1f ms; (sink %llu)\n",
            (unsigned long long)hits, (unsigned long long)misses, t_construct * 1e3, t_tables * 1e3,
            (unsigned long long)(sink & 1));
        if (greedy_ok)
            std::printf("greedy probes per token: %.2f (plain loop %.2f); most at one position %u (%u)\n",
                        double(greedy_stats.probes) / double(std::max<size_t>(greedy_ids.size(), 1)),
                        double(ref_stats.probes) / double(std::max<size_t>(greedy_ids.size(), 1)), greedy_stats.max_probes_at,
                        ref_stats.max_probes_at);
        for (const Peer &p : peers)
            if (p.have && p.ids != bpe_ids) return 1;
        if (greedy_ok && !greedy_same) return 1;
    } catch (const Error &e) {
        std::fprintf(stderr, "tokenize_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}

#include "tokenizer/proposals.h"

#include <algorithm>

#include "core/prng.h"
#include "hash/hash64.h"

namespace stk {

size_t proposals_arena_size(uint32_t vocab_size, uint32_t p_gen) {
    ArenaSizer z;
    z.add_array<uint32_t>(p_gen);
    z.add_array<uint64_t>(size_t(vocab_size) / 64 + 1);
    z.add_array<uint32_t>(vocab_size);
    return z.total();
}

Proposals build_proposals(const Vocab &v, uint32_t p_gen, Arena &arena) {
    const uint32_t V = v.size();
    uint32_t proposable = 0;
    for (uint32_t id = 0; id < V; id++) proposable += !v.special(id);
    Proposals p;
    uint32_t want = std::min(p_gen, proposable);
    uint32_t *out = arena.alloc_array<uint32_t>(std::max<uint32_t>(want, 1));
    p.ids = out;
    size_t mark = arena.mark();
    uint64_t *used = arena.alloc_array<uint64_t>(size_t(V) / 64 + 1);
    auto take = [&](uint32_t id) {
        if (p.count >= want || id >= V || v.special(id) || (used[id >> 6] >> (id & 63) & 1)) return;
        used[id >> 6] |= uint64_t(1) << (id & 63);
        out[p.count++] = id;
    };
    if (!v.merges.empty() && v.merge_results.size() == v.merges.size() && !v.merges_from_scores) {
        p.source = ProposalSource::MERGES;
        for (uint32_t r : v.merge_results) take(r);
    } else if (v.scores.size() == V && V > 0) {
        p.source = ProposalSource::SCORES;
        uint32_t *order = arena.alloc_array<uint32_t>(V);
        for (uint32_t i = 0; i < V; i++) order[i] = i;
        std::sort(order, order + V,
                  [&](uint32_t a, uint32_t b) { return v.scores[a] != v.scores[b] ? v.scores[a] > v.scores[b] : a < b; });
        for (uint32_t i = 0; i < V && p.count < want; i++) take(order[i]);
    } else {
        p.source = ProposalSource::SPLITMIX64;
    }
    // Fill (or, without ranks, build) from splitmix64 over the id space: a fixed stream
    // (module 2 = the tokenizer stage, seed 10.4), ids drawn with fastrange, repeats skipped.
    // Terminates: want <= proposable, and after 64 * V draws a linear sweep finishes the set.
    uint64_t state = stream_seed(0x53544B5F54534B31ull, 2, 0);
    for (uint64_t draws = 0; p.count < want && draws < 64ull * V; draws++)
        take(uint32_t(hash::fastrange(splitmix64_next(&state), V)));
    for (uint32_t id = 0; id < V && p.count < want; id++) take(id);
    arena.reset(mark);
    return p;
}

}  // namespace stk

#include "tokenizer/sardinas_patterson.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "hash/hash64.h"

namespace stk {

namespace {

constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr uint32_t kInf = 0xFFFFFFFFu;
constexpr uint32_t kWitnessCap = 65536;  // bytes of the witness kept (the digest covers all of it)
constexpr uint32_t kParseCap = 16384;    // codewords per parse kept

enum Kind : uint8_t { INIT = 0, SHORT = 1, LONG = 2, FINAL = 3, INIT_DUP = 4 };

uint64_t pow2_at_least(uint64_t x) {
    uint64_t p = 1;
    while (p < x) p <<= 1;
    return p;
}

struct Search {
    const uint8_t *blob;
    const uint64_t *off;
    uint32_t n;
    uint32_t *sorted;
    // states: distinct dangling suffixes, each a (codeword, offset) view
    uint32_t max_states, n_states = 0;
    uint32_t *st_code, *st_off, *st_len, *dist, *parent, *via;
    uint8_t *kind, *done;
    uint32_t *table;
    uint64_t mask;
    uint64_t *heap;
    uint64_t heap_n = 0, heap_cap;
    uint64_t work = 0, work_cap;
    bool capped = false;
    // the best way found to reach epsilon
    uint32_t eps_cost = kInf, eps_parent = kNone, eps_via = kNone;
    uint8_t eps_kind = FINAL;

    const uint8_t *cw(uint32_t c) const { return blob + off[c]; }
    uint32_t cw_len(uint32_t c) const { return uint32_t(off[c + 1] - off[c]); }
    const uint8_t *st_bytes(uint32_t s) const { return cw(st_code[s]) + st_off[s]; }

    static int cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
        int c = std::memcmp(a, b, std::min(al, bl));
        return c ? c : (al < bl ? -1 : al > bl ? 1 : 0);
    }
    // First sorted position whose codeword is >= s.
    uint32_t lower_bound(const uint8_t *s, uint32_t len) const {
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (cmp(cw(sorted[mid]), cw_len(sorted[mid]), s, len) < 0) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    uint32_t find(const uint8_t *s, uint32_t len) const {
        uint32_t i = lower_bound(s, len);
        return i < n && cmp(cw(sorted[i]), cw_len(sorted[i]), s, len) == 0 ? sorted[i] : kNone;
    }
    uint32_t intern(uint32_t code, uint32_t o, uint32_t len) {
        const uint8_t *s = cw(code) + o;
        uint64_t h = hash::hash_bytes(s, len, 0);
        for (uint64_t i = h & mask;; i = (i + 1) & mask) {
            uint32_t e = table[i];
            if (e == 0) {
                if (n_states == max_states) throw_error(STK_E_INTERNAL, "Sardinas-Patterson: more dangling suffixes than bytes");
                uint32_t id = n_states++;
                st_code[id] = code;
                st_off[id] = o;
                st_len[id] = len;
                dist[id] = kInf;
                table[i] = id + 1;
                return id;
            }
            uint32_t id = e - 1;
            if (st_len[id] == len && std::memcmp(st_bytes(id), s, len) == 0) return id;
        }
    }
    void push(uint64_t entry) {
        if (heap_n == heap_cap) {
            capped = true;
            return;
        }
        uint64_t i = heap_n++;
        while (i > 0) {
            uint64_t p = (i - 1) / 2;
            if (heap[p] <= entry) break;
            heap[i] = heap[p];
            i = p;
        }
        heap[i] = entry;
    }
    uint64_t pop() {
        uint64_t top = heap[0], last = heap[--heap_n];
        uint64_t i = 0;
        for (;;) {
            uint64_t c = 2 * i + 1;
            if (c >= heap_n) break;
            if (c + 1 < heap_n && heap[c + 1] < heap[c]) c++;
            if (last <= heap[c]) break;
            heap[i] = heap[c];
            i = c;
        }
        if (heap_n) heap[i] = last;
        return top;
    }
    void relax(uint32_t s, uint64_t cost, uint32_t par, uint32_t v, uint8_t k) {
        if (cost >= kInf) {
            capped = true;
            return;
        }
        if (cost < dist[s]) {
            dist[s] = uint32_t(cost);
            parent[s] = par;
            via[s] = v;
            kind[s] = k;
            push((cost << 32) | s);
        }
    }
    void reach_eps(uint64_t cost, uint32_t par, uint32_t v, uint8_t k) {
        if (cost < eps_cost) {
            eps_cost = uint32_t(cost);
            eps_parent = par;
            eps_via = v;
            eps_kind = k;
        }
    }
    bool over_cap() {
        if (++work > work_cap) capped = true;
        return capped;
    }

    void run() {
        // S_1: a codeword u that is a proper prefix of a codeword v leaves v's tail dangling.
        for (uint32_t i = 0; i < n && !capped; i++) {
            uint32_t v = sorted[i], vl = cw_len(v);
            if (i + 1 < n && cmp(cw(v), vl, cw(sorted[i + 1]), cw_len(sorted[i + 1])) == 0)
                reach_eps(vl, v, sorted[i + 1], INIT_DUP);
            for (uint32_t l = 1; l < vl; l++) {
                if (over_cap()) break;
                uint32_t u = find(cw(v), l);
                if (u != kNone) relax(intern(v, l, vl - l), vl, u, v, INIT);
            }
        }
        // S_{k+1} from S_k, cheapest (shortest parsed text) first.
        while (heap_n && !capped) {
            uint64_t e = pop();
            uint32_t s = uint32_t(e), cost = uint32_t(e >> 32);
            if (done[s] || cost != dist[s]) continue;
            if (cost >= eps_cost) break;  // nothing cheaper can reach epsilon any more
            done[s] = 1;
            const uint8_t *d = st_bytes(s);
            uint32_t m = st_len[s];
            // a codeword c that is a prefix of d (or d itself) consumes it on the lagging side
            for (uint32_t l = 1; l <= m && !capped; l++) {
                if (over_cap()) break;
                uint32_t c = find(d, l);
                if (c == kNone) continue;
                if (l == m) reach_eps(cost, s, c, FINAL);
                else relax(intern(st_code[s], st_off[s] + l, m - l), cost, s, c, SHORT);
            }
            // a codeword that extends d overtakes: its tail dangles on the other side
            for (uint32_t i = lower_bound(d, m); i < n && !capped; i++) {
                uint32_t c = sorted[i], cl = cw_len(c);
                if (cl < m || std::memcmp(cw(c), d, m) != 0) break;
                if (cl == m) continue;
                if (over_cap()) break;
                relax(intern(c, m, cl - m), uint64_t(cost) + (cl - m), s, c, LONG);
            }
        }
    }
};

}  // namespace

size_t sp_arena_size(uint64_t n, uint64_t total_bytes, uint64_t work_cap) {
    uint64_t states = total_bytes + 1;
    ArenaSizer z;
    z.add(kWitnessCap + 8ull * kParseCap + 64);  // outputs (moved down after the search)
    z.add_array<uint32_t>(n);
    z.add_array<uint32_t>(pow2_at_least(2 * states + 2));
    for (int i = 0; i < 6; i++) z.add_array<uint32_t>(states);
    z.add_array<uint8_t>(states);
    z.add_array<uint8_t>(states);
    z.add_array<uint64_t>(states + work_cap + 1);
    z.add_array<uint32_t>(states + 2);            // path
    z.add_array<uint32_t>(2 * (states + 2) + 2);  // replayed parses
    return z.total();
}

SpResult sardinas_patterson(const uint8_t *blob, const uint64_t *offsets, uint32_t n, Arena &arena, uint64_t work_cap) {
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (offsets[i + 1] <= offsets[i]) throw_error(STK_E_INVALID_ARGUMENT, "Sardinas-Patterson: codeword %u is empty", i);
        total += offsets[i + 1] - offsets[i];
    }
    if (total > 0xFFFFFFF0ull)
        throw_error(STK_E_INVALID_ARGUMENT, "Sardinas-Patterson: %llu bytes of codewords", (unsigned long long)total);
    size_t mark = arena.mark();
    Search S{};
    S.blob = blob;
    S.off = offsets;
    S.n = n;
    S.work_cap = work_cap;
    S.max_states = uint32_t(total + 1);
    S.sorted = arena.alloc_array<uint32_t>(n);
    for (uint32_t i = 0; i < n; i++) S.sorted[i] = i;
    std::sort(S.sorted, S.sorted + n, [&](uint32_t a, uint32_t b) {
        int c = Search::cmp(S.cw(a), S.cw_len(a), S.cw(b), S.cw_len(b));
        return c ? c < 0 : a < b;
    });
    uint64_t tsize = pow2_at_least(2 * uint64_t(S.max_states) + 2);
    S.table = arena.alloc_array<uint32_t>(tsize);
    S.mask = tsize - 1;
    uint32_t **arrs[6] = {&S.st_code, &S.st_off, &S.st_len, &S.dist, &S.parent, &S.via};
    for (uint32_t **a : arrs) *a = arena.alloc_array<uint32_t>(S.max_states);
    S.kind = arena.alloc_array<uint8_t>(S.max_states);
    S.done = arena.alloc_array<uint8_t>(S.max_states);
    S.heap_cap = S.max_states + work_cap + 1;
    S.heap = static_cast<uint64_t *>(arena.alloc(S.heap_cap * 8));
    S.run();

    SpResult r;
    r.work = S.work;
    r.states = S.n_states;
    if (S.eps_cost == kInf) {
        r.verdict = S.capped ? SpResult::UNDECIDED : SpResult::UNIQUELY_DECODABLE;
        uint8_t v = r.verdict;
        r.digest = sha256(&v, 1);
        arena.reset(mark);
        return r;
    }
    // An epsilon was reached.  (With the cap hit first it may not be the shortest one: still a
    // valid ambiguity, so the verdict is AMBIGUOUS either way.)
    r.verdict = SpResult::AMBIGUOUS;
    // Walk back to the initial pair, then replay forwards on two sides.
    uint32_t *path = arena.alloc_array<uint32_t>(size_t(S.max_states) + 2);
    uint32_t np = 0, u0, v0;
    if (S.eps_kind == INIT_DUP) {
        u0 = S.eps_parent;
        v0 = S.eps_via;
    } else {
        uint32_t s = S.eps_parent;
        while (S.kind[s] != INIT) {
            path[np++] = s;
            s = S.parent[s];
        }
        u0 = S.parent[s];
        v0 = S.via[s];
    }
    uint32_t *side[2];
    uint32_t cnt[2] = {0, 0};
    side[0] = arena.alloc_array<uint32_t>(size_t(np) + 2);
    side[1] = arena.alloc_array<uint32_t>(size_t(np) + 2);
    side[0][cnt[0]++] = v0;  // side 0 leads
    side[1][cnt[1]++] = u0;
    int behind = 1;  // the side that has parsed less text appends the next codeword
    for (uint32_t k = np; k-- > 0;) {
        uint32_t s = path[k];
        side[behind][cnt[behind]++] = S.via[s];
        if (S.kind[s] == LONG) behind ^= 1;
    }
    if (S.eps_kind == FINAL) side[behind][cnt[behind]++] = S.eps_via;
    // The digest covers the whole witness; the result keeps at most kWitnessCap bytes of it.
    Sha256 sha;
    uint8_t v = SpResult::AMBIGUOUS;
    sha.update(&v, 1);
    uint64_t wlen = 0, wlen_b = 0;
    for (uint32_t i = 0; i < cnt[0]; i++) {
        sha.update(S.cw(side[0][i]), S.cw_len(side[0][i]));
        wlen += S.cw_len(side[0][i]);
    }
    for (uint32_t i = 0; i < cnt[1]; i++) wlen_b += S.cw_len(side[1][i]);
    if (wlen != wlen_b)
        throw_error(STK_E_INTERNAL, "Sardinas-Patterson: witness parses differ in length (%llu, %llu)", (unsigned long long)wlen,
                    (unsigned long long)wlen_b);
    r.digest = sha.finish();
    uint32_t keep_w = uint32_t(std::min<uint64_t>(wlen, kWitnessCap));
    uint32_t keep_a = std::min(cnt[0], kParseCap), keep_b = std::min(cnt[1], kParseCap);
    size_t out_bytes = size_t(keep_a + keep_b) * 4 + keep_w;
    uint8_t *tmp = static_cast<uint8_t *>(arena.alloc(out_bytes + 1, 4));
    std::memcpy(tmp, side[0], size_t(keep_a) * 4);
    std::memcpy(tmp + size_t(keep_a) * 4, side[1], size_t(keep_b) * 4);
    uint8_t *w = tmp + size_t(keep_a + keep_b) * 4;
    uint32_t at = 0;
    for (uint32_t i = 0; i < cnt[0] && at < keep_w; i++) {
        uint32_t len = std::min(S.cw_len(side[0][i]), keep_w - at);
        std::memcpy(w + at, S.cw(side[0][i]), len);
        at += len;
    }
    // Keep only the result: move it down to where the scratch began.
    arena.reset(mark);
    uint8_t *out = static_cast<uint8_t *>(arena.alloc(out_bytes + 1, 4));
    std::memmove(out, tmp, out_bytes);
    r.parse_a = reinterpret_cast<const uint32_t *>(out);
    r.parse_b = r.parse_a + keep_a;
    r.n_a = keep_a;
    r.n_b = keep_b;
    r.witness = out + size_t(keep_a + keep_b) * 4;
    r.witness_len = keep_w;
    return r;
}

}  // namespace stk

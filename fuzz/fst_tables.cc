// Fuzz the tokenizer tables.  Input: byte 0 = a piece length n (1..64), u32 LE = the size of a
// Dec table (tokenizer_fst.bin payload) that follows, then one T_n payload.  Load both
// (validation), then look up and greedily encode slices of the input: every id found must decode
// to exactly the bytes looked up, greedy_encode must give the ids of greedy_encode_reference
// (without and with attach_greedy_accel), and greedy output must decode back to the input when
// no residual id was needed.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/bytes.h"
#include "core/error.h"
#include "tokenizer/fst_tables.h"
#include "tokenizer/greedy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 5) return 0;
    uint32_t n = data[0] % 64 + 1;
    uint32_t dec_len = stk::load_u32(data + 1);
    if (dec_len > size - 5) return 0;
    const uint8_t *dec = data + 5, *tab = dec + dec_len;
    size_t tab_len = size - 5 - dec_len;
    try {
        stk::FstTables t;
        t.dec = stk::DecTable::load(dec, dec_len, "fuzz.fst");
        t.t[n] = stk::TokenTable::load(tab, tab_len, n, t.dec, "fuzz.T_n");
        for (size_t i = 0; i + n <= size; i += 7) {
            int64_t id = t.find(data + i, n);
            if (id >= 0) {
                uint32_t len;
                const uint8_t *b = t.dec.piece(uint32_t(id), &len);
                if (len != n || std::memcmp(b, data + i, n) != 0) __builtin_trap();
            }
        }
        size_t m = size < 4096 ? size : 4096;
        std::vector<uint32_t> ids(m), plain(m), fast(m);
        stk::GreedyStats gs, gr;
        // the plain loop is the oracle: the fast encoder, without and with its accelerator (guard
        // words and filter), must give the same ids, or the same error
        bool threw = false;
        size_t kr = 0;
        try {
            kr = stk::greedy_encode_reference(t, data, m, plain.data(), &gr);
        } catch (const stk::Error &) {
            threw = true;
        }
        size_t k = 0;
        try {
            k = stk::greedy_encode(t, data, m, ids.data(), &gs);
            if (threw || k != kr || std::memcmp(ids.data(), plain.data(), 4 * k) != 0) __builtin_trap();
        } catch (const stk::Error &) {
            if (!threw) __builtin_trap();
        }
        std::vector<uint64_t> accel(stk::greedy_accel_words(t));
        stk::attach_greedy_accel(t, accel.data());
        try {
            size_t kf = stk::greedy_encode(t, data, m, fast.data(), &gs);
            if (threw || kf != kr || std::memcmp(fast.data(), plain.data(), 4 * kf) != 0) __builtin_trap();
        } catch (const stk::Error &) {
            if (!threw) __builtin_trap();
        }
        if (threw) return 0;
        if (gs.max_probes_at > t.dec.l_tok || gr.max_probes_at > t.dec.l_tok) __builtin_trap();
        if (gs.residual_bytes == 0) {
            std::vector<uint8_t> back(m);
            size_t got = stk::fst_decode(t, ids.data(), k, back.data(), back.size());
            if (got != m || std::memcmp(back.data(), data, m) != 0) __builtin_trap();
        }
    } catch (const stk::Error &) {
    }
    return 0;
}

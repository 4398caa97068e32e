// ffn_collapse's two per-column selections (ffn_collapse.h says what they select), on packed u64
// keys instead of an index array sorted through a comparator that loads and compares floats.
//
// The comparators "larger value first, ties by smaller index" and "larger |value| first, ties by
// smaller index" are strict total orders on the indices of a column without NaN (-0 and +0 compare
// equal, so their tie goes to the index, as here).  The key (desc(v) << 32 | i), desc(v) a u32 that
// is smaller for a larger v and equal for -0 and +0, orders a column exactly as they do, so:
//   - the top-L (sorted) is the same set in the same order, whatever exact selection finds it;
//   - std::nth_element and std::sort on the keys with operator< make exactly the comparisons'
//     outcomes, hence the moves, of the same calls on the indices with the comparator: the whole
//     permutation is the same, including the order nth_element leaves past the nth position (the
//     truncation's dropped energy is summed in that order, so its bits depend on it).
// A column with a NaN is not ordered by the comparators (NaN compares "not less" both ways); the
// *_keys functions refuse it (return false) and the stage runs the comparator versions (*_ref),
// kept here as the definition the tests hold the key versions to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace stk {

// A u32 that is smaller for a larger float; -0 and +0 map alike.  NaN: meaningless (callers check).
inline uint32_t float_desc_bits(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    if ((b & 0x7FFFFFFFu) == 0) b = 0;
    const uint32_t asc = (b >> 31) ? ~b : (b | 0x80000000u);
    return ~asc;
}
inline bool float_bits_nan(uint32_t abs_bits) { return abs_bits > 0x7F800000u; }

// Top-L of x[0, d) by value descending, ties by smaller index, into order[0, L) (L <= d) --
// the comparator version: order holds d indices of scratch.
inline void select_top_ref(const float *x, uint32_t d, uint32_t L, uint32_t *order) {
    for (uint32_t i = 0; i < d; i++) order[i] = i;
    auto by_value = [&](uint32_t a, uint32_t b) {
        const float va = x[a], vb = x[b];
        return va != vb ? va > vb : a < b;
    };
    if (L < d) std::nth_element(order, order + L, order + d, by_value);
    std::sort(order, order + L, by_value);
}

// The same on keys: order[0, L) as select_top_ref's when x[0, d) has no NaN (keys: d + 1 u64 of
// scratch); false, with order undefined, when it has one.  A small L keeps a sorted run of the L
// smallest keys seen (one compare per key once the run is full); a large L selects and sorts.
inline bool select_top_keys(const float *x, uint32_t d, uint32_t L, uint64_t *keys, uint32_t *order) {
    constexpr uint32_t kInsertMax = 32;
    bool nan = false;
    for (uint32_t i = 0; i < d; i++) nan |= x[i] != x[i];
    if (nan) return false;
    if (L == 0) return true;
    if (L <= kInsertMax) {
        // keys[0, m): the smallest keys so far, ascending.  Once full, a later key (its index is
        // larger than every kept one) enters only if its value is larger than the last kept one's.
        uint32_t m = 0;
        float last = 0;
        for (uint32_t i = 0; i < d; i++) {
            if (m == L && !(x[i] > last)) continue;
            const uint64_t k = uint64_t(float_desc_bits(x[i])) << 32 | i;
            uint32_t at = m < L ? m++ : L - 1;  // the slot the new key's run ends in
            while (at > 0 && keys[at - 1] > k) {
                keys[at] = keys[at - 1];
                at--;
            }
            keys[at] = k;
            if (m == L) last = x[uint32_t(keys[L - 1])];
        }
    } else {
        for (uint32_t i = 0; i < d; i++) keys[i] = uint64_t(float_desc_bits(x[i])) << 32 | i;
        if (L < d) std::nth_element(keys, keys + L, keys + d);
        std::sort(keys, keys + L);
    }
    for (uint32_t r = 0; r < L; r++) order[r] = uint32_t(keys[r]);
    return true;
}

// The delta's order: rest[0, nr) (indices into x) rearranged as std::nth_element at `take` then
// std::sort of rest[0, take) by |x| descending, ties by smaller index, leave it (take <= nr) --
// the comparator version.
inline void select_magnitude_ref(const float *x, uint32_t *rest, uint32_t nr, uint32_t take) {
    auto by_mag = [&](uint32_t a, uint32_t b) {
        const float va = std::fabs(x[a]), vb = std::fabs(x[b]);
        return va != vb ? va > vb : a < b;
    };
    if (take < nr) std::nth_element(rest, rest + take, rest + nr, by_mag);
    std::sort(rest, rest + take, by_mag);
}

// The same on keys (nr u64 of scratch): rest ends exactly as select_magnitude_ref leaves it, all
// nr positions, when no x[rest[q]] is NaN; false, with rest unchanged, when one is.
inline bool select_magnitude_keys(const float *x, uint32_t *rest, uint32_t nr, uint32_t take, uint64_t *keys) {
    uint32_t nan = 0;
    for (uint32_t q = 0; q < nr; q++) {
        uint32_t b;
        std::memcpy(&b, &x[rest[q]], 4);
        b &= 0x7FFFFFFFu;
        nan |= uint32_t(float_bits_nan(b));
        keys[q] = uint64_t(~b) << 32 | rest[q];
    }
    if (nan) return false;
    if (take < nr) std::nth_element(keys, keys + take, keys + nr);
    std::sort(keys, keys + take);
    for (uint32_t q = 0; q < nr; q++) rest[q] = uint32_t(keys[q]);
    return true;
}

}  // namespace stk

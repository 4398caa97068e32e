// Little-endian loads and stores at any alignment.  Every file format of ours is little-endian;
// these compile to plain moves on x86-64 and aarch64.
#pragma once

#include <cstdint>
#include <cstring>

namespace stk {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "stk assumes a little-endian host");

template <class T>
inline T load_le(const void *p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <class T>
inline void store_le(void *p, T v) {
    std::memcpy(p, &v, sizeof v);
}

inline uint16_t load_u16(const void *p) { return load_le<uint16_t>(p); }
inline uint32_t load_u32(const void *p) { return load_le<uint32_t>(p); }
inline uint64_t load_u64(const void *p) { return load_le<uint64_t>(p); }

}  // namespace stk

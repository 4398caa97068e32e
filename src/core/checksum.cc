#include "core/checksum.h"

#include <isa-l/crc.h>
// SHA256_Init/Update/Final are deprecated in OpenSSL 3 in favour of EVP, which allocates.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <climits>
#include <cstring>
#include <new>

#include "core/bytes.h"
#include "core/error.h"

namespace stk {

uint32_t crc32c(const void *data, size_t len, uint32_t crc) {
    // isa-l's crc32_iscsi takes an int length and does neither the initial nor the final inversion.
    uint32_t state = ~crc;
    auto *p = static_cast<unsigned char *>(const_cast<void *>(data));
    while (len > 0) {
        size_t chunk = len > (size_t(1) << 30) ? (size_t(1) << 30) : len;
        state = crc32_iscsi(p, int(chunk), state);
        p += chunk;
        len -= chunk;
    }
    return ~state;
}

uint64_t Sha256Digest::low64() const { return load_u64(bytes); }

static SHA256_CTX *ctx_of(unsigned char *p) { return reinterpret_cast<SHA256_CTX *>(p); }
static_assert(sizeof(SHA256_CTX) <= 128, "Sha256::ctx_ is too small for SHA256_CTX");

Sha256::Sha256() { reset(); }

Sha256::~Sha256() = default;

void Sha256::reset() { SHA256_Init(ctx_of(ctx_)); }

void Sha256::update(const void *data, size_t len) {
    if (len) SHA256_Update(ctx_of(ctx_), data, len);
}

Sha256Digest Sha256::finish() {
    Sha256Digest d;
    SHA256_Final(d.bytes, ctx_of(ctx_));
    return d;
}

Sha256Digest sha256(const void *data, size_t len) {
    Sha256 h;
    h.update(data, len);
    return h.finish();
}

PayloadSums payload_sums(const void *data, size_t len) { return payload_sums(data, len, len, {}); }

PayloadSums payload_sums(const void *data, size_t len, size_t window, const std::function<void(size_t, size_t)> &done) {
    // 256 KiB blocks: each block is CRC'd and hashed while it is still in L2.
    const size_t block = 256 * 1024;
    Sha256 h;
    uint32_t crc = 0;
    auto *p = static_cast<const uint8_t *>(data);
    size_t told = 0;
    for (size_t off = 0; off < len; off += block) {
        size_t n = len - off < block ? len - off : block;
        crc = crc32c(p + off, n, crc);
        h.update(p + off, n);
        if (done && (off + n - told >= window || off + n == len)) {
            done(told, off + n - told);
            told = off + n;
        }
    }
    return {crc, h.finish().low64()};
}

}  // namespace stk

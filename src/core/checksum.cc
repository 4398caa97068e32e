#include "core/checksum.h"

#include <isa-l/crc.h>
#include <openssl/evp.h>

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

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_) throw std::bad_alloc();
    if (EVP_DigestInit_ex(static_cast<EVP_MD_CTX *>(ctx_), EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_));
        throw_error(STK_E_INTERNAL, "OpenSSL: SHA-256 unavailable");
    }
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx_)); }

void Sha256::update(const void *data, size_t len) {
    if (len) EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx_), data, len);
}

Sha256Digest Sha256::finish() {
    Sha256Digest d;
    unsigned int n = 0;
    EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx_), d.bytes, &n);
    return d;
}

Sha256Digest sha256(const void *data, size_t len) {
    Sha256 h;
    h.update(data, len);
    return h.finish();
}

PayloadSums payload_sums(const void *data, size_t len) {
    // 256 KiB blocks: each block is CRC'd and hashed while it is still in L2.
    const size_t block = 256 * 1024;
    Sha256 h;
    uint32_t crc = 0;
    auto *p = static_cast<const uint8_t *>(data);
    for (size_t off = 0; off < len; off += block) {
        size_t n = len - off < block ? len - off : block;
        crc = crc32c(p + off, n, crc);
        h.update(p + off, n);
    }
    return {crc, h.finish().low64()};
}

}  // namespace stk

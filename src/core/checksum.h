// Checksums from well-kept implementations: CRC32C from isa-l (crc32_iscsi, SSE4.2/AVX-512
// folding with run-time dispatch), SHA-256 from OpenSSL's libcrypto (SHA-NI where present).
// SHA-256 uses libcrypto's SHA256_* calls rather than EVP: the same assembly (SHA-NI), and the
// context lives inside the object, so hashing never allocates (EVP_DigestInit allocates a
// provider context on every (re)initialisation in OpenSSL 3.0).
#pragma once

#include <cstddef>
#include <functional>
#include <cstdint>

namespace stk {

// Standard CRC32C (Castagnoli, reflected, init and final xor 0xFFFFFFFF): crc32c("123456789")
// == 0xE3069283.  Incremental: pass the previous result as `crc` (0 to start).
uint32_t crc32c(const void *data, size_t len, uint32_t crc = 0);

struct Sha256Digest {
    uint8_t bytes[32];
    // The spec's sha256_low64: the first 8 bytes of the digest read as a little-endian u64.
    uint64_t low64() const;
};

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256 &) = delete;
    Sha256 &operator=(const Sha256 &) = delete;
    void update(const void *data, size_t len);
    Sha256Digest finish();
    void reset();  // start a new digest in the same context (no allocation)

private:
    alignas(16) unsigned char ctx_[128];  // an OpenSSL SHA256_CTX, held in place: no allocation
};

Sha256Digest sha256(const void *data, size_t len);

// Both checksums of one buffer in a single pass over cache-sized blocks.
struct PayloadSums {
    uint32_t crc32c;
    uint64_t sha256_low64;
};
PayloadSums payload_sums(const void *data, size_t len);
// The same sums; after each `window` bytes (and at the end) done(offset, length) is told which
// bytes the sums no longer need (a verifier hands those pages of a mapping back).
PayloadSums payload_sums(const void *data, size_t len, size_t window, const std::function<void(size_t, size_t)> &done);

}  // namespace stk

// The calibration statistics file (`stk calibrate` writes it, `stk convert --calibration` reads
// it): per layer the activation moments the calibrated fits need.  Byte-by-byte layout:
// docs/format.md, "Calibration statistics".  Every number little-endian.
//
//   0    8   magic "STKCAL01"
//   8    4   u32 version = 2 (version 1, from an older `stk calibrate`, is refused: rerun it)
//   12   4   u32 flags = 0 (reserved; any other value is refused)
//   16   8   u64 the model's parse_tensors digest, sha256_low64
//   24   4   u32 the model's parse_tensors digest, crc32c
//   28   4   u32 n_layers   (1 .. 65536)
//   32   4   u32 d_model    (1 .. 65536)
//   36   4   u32 d_v        (n_heads * head_dim: W_O's input width; 1 .. 2^20)
//   40   4   u32 n_pairs    (rotary pairs per head, 0 .. 65536; 0 = the model has no RoPE)
//   44   4   u32 reserved = 0
//   48   8   u64 tokens     (calibration tokens the moments average over; >= 1)
//   56   8   u64 file_bytes (the whole file; must equal its size)
//   64   32  SHA-256 of bytes 128 .. file_bytes (the statistics' digest the manifest records)
//   96   28  reserved, zero
//   124  4   u32 crc32c of bytes 0 .. 123
//   128  16 * n_layers: the layer table, one entry per layer:
//            u32 sections (bit set of kCalib*), u32 crc32c of the layer's section bytes (all its
//            sections back to back, as laid out below; 0 for a layer without sections), u64 pairs
//            (PRF pairs sampled; 0 unless kCalibPrfPairs)
//   then, layer by layer, the present sections in bit order, each f64 (means, not sums):
//     kCalibPrfPairs  (1)  M = E[(x o y)(x o y)^T] packed upper triangle, d_model (d_model+1)/2;
//                          b = E[(x o y) l(x, y)], d_model; then E[l], E[l^2] (2 values).
//                          x the query token's attention input, y an earlier (or the same)
//                          token's, l the head-averaged attention logit q.k / sqrt(head_dim)
//     kCalibAttnOut   (2)  C = E[o o^T] packed upper, d_v (d_v+1)/2: o the attention's value-space
//                          output (W_O's input)
//     kCalibRopePairs (4)  e = E[sum_heads |q_f| |k_f|], n_pairs: rotary pair f of query and key
//                          at the same token, before the rotation
//     kCalibFfn       (8)  G = E[z z^T] packed upper, 2 d_model (2 d_model + 1)/2, z = [relu(x);
//                          relu(-x)], x the FFN input; X = E[z y^T], [2 d_model, d_model]
//                          row-major, y the FFN output; E[y_i^2], d_model
// Packed upper triangle: row i holds columns i .. n-1; element (i, j), i <= j, is at
// i * n - i * (i - 1) / 2 + (j - i).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/mapped_file.h"

namespace stk {

constexpr char kCalibMagic[8] = {'S', 'T', 'K', 'C', 'A', 'L', '0', '1'};
constexpr uint32_t kCalibVersion = 2;
constexpr uint64_t kCalibHeaderBytes = 128;
constexpr uint64_t kCalibLayerEntryBytes = 16;

enum CalibSection : uint32_t {
    kCalibPrfPairs = 1u << 0,
    kCalibAttnOut = 1u << 1,
    kCalibRopePairs = 1u << 2,
    kCalibFfn = 1u << 3,
    kCalibAllSections = 0xFu,
};

// Index of (i, j) in a packed upper triangle of order n (either order of i, j).
inline uint64_t calib_packed_index(uint64_t n, uint64_t i, uint64_t j) {
    if (i > j) {
        const uint64_t t = i;
        i = j;
        j = t;
    }
    return i * n - (i * (i - 1)) / 2 + (j - i);  // i = 0: the product is 0 before the wrap matters
}
inline uint64_t calib_packed_count(uint64_t n) { return n * (n + 1) / 2; }

// One layer's views into the file (null: the section is absent).  Every pointer is 8-aligned
// inside the mapping and valid while the CalibStats lives.
struct CalibLayer {
    uint32_t sections = 0;
    uint32_t crc32c = 0;  // of the layer's section bytes, as its table entry records (checked)
    uint64_t pairs = 0;
    const double *prf_m = nullptr;      // packed upper, d_model
    const double *prf_b = nullptr;      // [d_model]
    const double *prf_l = nullptr;      // [2]: E[l], E[l^2]
    const double *attn_out = nullptr;   // packed upper, d_v
    const double *rope_pairs = nullptr; // [n_pairs]
    const double *ffn_g = nullptr;      // packed upper, 2 d_model
    const double *ffn_x = nullptr;      // [2 d_model, d_model]
    const double *ffn_yy = nullptr;     // [d_model]
};

// A validated statistics file.  The constructors check every byte of structure (magic, version,
// reserved zeros, header crc32c, sizes with checked arithmetic, file_bytes and the layer table
// against the size), then layer by layer the crc32c of its sections (a changed byte is named by
// its layer, that layer's sections and their byte range), then the SHA-256 of bytes 128 .. end,
// then every value finite, and throw stk::Error (STK_E_BAD_MAGIC, STK_E_CORRUPT, STK_E_CHECKSUM,
// ...) naming the file, the layer and section, and the offset.  The file is opened without blocking (a FIFO is refused, never waited on).
class CalibStats {
public:
    // `before_digest` (may be empty): the caller's checks of the header's dimensions, run after
    // the structure checks and before the payload is hashed (it throws to refuse).
    explicit CalibStats(const std::string &path, const std::function<void(const CalibStats &)> &before_digest = {});
    // Bytes in memory, kept by the caller (the fuzz target); `name` names them in messages.
    CalibStats(const uint8_t *data, uint64_t size, const std::string &name);

    const std::string &name() const { return name_; }
    uint64_t model_sha256_low64() const { return model_sha256_low64_; }
    uint32_t model_crc32c() const { return model_crc32c_; }
    uint32_t n_layers() const { return n_layers_; }
    uint32_t d_model() const { return d_model_; }
    uint32_t d_v() const { return d_v_; }
    uint32_t n_pairs() const { return n_pairs_; }
    uint64_t tokens() const { return tokens_; }
    const uint8_t *digest() const { return digest_; }  // 32 bytes: SHA-256 of bytes 128..end (zero in before_digest)
    std::string digest_hex() const;
    const CalibLayer &layer(uint32_t l) const { return layers_[l]; }

private:
    void parse(const uint8_t *data, uint64_t size, const std::function<void(const CalibStats &)> &before_digest);
    MappedFile file_;
    std::string name_;
    uint64_t model_sha256_low64_ = 0;
    uint32_t model_crc32c_ = 0;
    uint32_t n_layers_ = 0, d_model_ = 0, d_v_ = 0, n_pairs_ = 0;
    uint64_t tokens_ = 0;
    uint8_t digest_[32] = {};
    std::vector<CalibLayer> layers_;
};

}  // namespace stk

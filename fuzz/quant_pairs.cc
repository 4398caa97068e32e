// Fuzz the pairing of quantised safetensors weights with their scales, through to dequantised
// values: block-scaled fp8 (<w> F8_E4M3 / F8_E5M2 + <w>_scale_inv, block size from
// quantization_config weight_block_size: attach_fp8_scales) and MXFP4 (NAME_blocks +
// NAME_scales: wrap_mxfp4), as describe_model applies them to the checkpoint open_checkpoint
// builds.  The input is a 9-byte control prefix and one or two safetensors files:
//   byte 0     bit 0: fp8 (attach_fp8_scales), bit 1: mxfp4 (wrap_mxfp4), bit 2: two shards
//              (bytes 5-8, u32 LE: the first file's length; the rest is the second file),
//              bits 3-7: where the second of two chunks starts (parse_tensors converts chunks)
//   bytes 1-4  block rows, block cols (u16 LE each; config.json allows 1..2^20, 0 must be refused)
// The files stay in the fuzzer's buffer (a Source over memory, the safetensors reader's header
// parse and the same multi-source checkpoint as a mapped file), so ASan sees every read.
// Checks beyond "no crash": a refusal after the files parsed names the file (or is the block
// size's STK_E_INVALID_ARGUMENT); every accepted fp8 weight and MXFP4 tensor dequantises to the
// values an independent reference computes from the raw bytes (transformers' arithmetic: f32(w) x
// f32(scale) once rounded; FP4_VALUES[code] x 2^(scale - 127)), whole and in two chunks alike.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/float16.h"
#include "ingest/checkpoint.h"
#include "ingest/dtype_convert.h"
#include "ingest/mxfp4.h"
#include "ingest/safetensors.h"
#include "ingest/source.h"

namespace {

class MemorySource final : public stk::Source {
public:
    MemorySource(const uint8_t *data, size_t size, const std::string &name)
        : data_(data), header_(stk::parse_safetensors(data, size, name)) {}
    const char *kind() const override { return "safetensors"; }
    std::vector<stk::TensorRef> &tensors() override { return header_.tensors; }
    const uint8_t *bytes(const stk::TensorRef &t, std::vector<uint8_t> &) const override { return data_ + t.file_offset; }
    const stk::MappedFile &file() const override { return file_; }

private:
    const uint8_t *data_;
    stk::SafetensorsHeader header_;
    stk::MappedFile file_;  // unopened: no path, size 0
};

struct File {
    const uint8_t *data;
    size_t size;
    std::string name;
    std::vector<stk::TensorRef> tensors;  // the reader's own list, before any pairing
};

const stk::TensorRef *find_in(const std::vector<File> &files, const std::string &name, const File **in) {
    for (const File &f : files)
        for (const stk::TensorRef &t : f.tensors)
            if (t.name == name) {
                *in = &f;
                return &t;
            }
    return nullptr;
}

bool same_bits(float a, float b) {
    if (std::isnan(a) && std::isnan(b)) return true;  // NaN payloads from NaN scales are not pinned
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y;
}

float scalar(stk::SrcDType dt, const uint8_t *p) {
    if (dt == stk::SrcDType::F32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    if (dt == stk::SrcDType::BF16) return stk::bf16_to_f32(uint16_t(p[0] | p[1] << 8));
    __builtin_trap();  // attach_fp8_scales accepted a scale that is neither F32 nor BF16
}

// Converts t whole and as [0, cut) + [cut, n); both must equal `want`.
void check_values(const stk::Checkpoint &ck, const stk::TensorRef &t, const std::vector<float> &want, unsigned cut_code) {
    std::vector<uint8_t> scratch;
    const uint8_t *bytes = ck.tensor_bytes(t, scratch);
    const uint64_t n = t.n_elements;
    if (want.size() != n) __builtin_trap();
    std::vector<float> got(n), parts(n);
    if (n == 0) return;
    stk::convert_to_f32(t, bytes, 0, n, got.data());
    const uint64_t cut = n * cut_code / 32;
    stk::convert_to_f32(t, bytes, 0, cut, parts.data());
    stk::convert_to_f32(t, bytes, cut, n - cut, parts.data() + cut);
    for (uint64_t i = 0; i < n; i++)
        if (!same_bits(got[i], want[i]) || !same_bits(parts[i], want[i])) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) return 0;
    const uint8_t flags = data[0];
    const bool fp8 = flags & 1, mxfp4 = flags & 2, sharded = flags & 4;
    const unsigned cut_code = flags >> 3;
    const uint32_t br = uint32_t(data[1] | data[2] << 8), bc = uint32_t(data[3] | data[4] << 8);
    const uint32_t first_len = uint32_t(data[5] | data[6] << 8 | data[7] << 16 | uint32_t(data[8]) << 24);
    data += 9;
    size -= 9;

    std::vector<File> files;
    if (sharded && first_len <= size) {
        files.push_back({data, first_len, "fuzz-a.safetensors", {}});
        files.push_back({data + first_len, size - first_len, "fuzz-b.safetensors", {}});
    } else {
        files.push_back({data, size, "fuzz-a.safetensors", {}});
    }
    std::unique_ptr<stk::Checkpoint> ck;
    try {
        std::vector<std::unique_ptr<stk::Source>> sources;
        for (File &f : files) {
            sources.push_back(std::make_unique<MemorySource>(f.data, f.size, f.name));
            f.tensors = sources.back()->tensors();
        }
        ck = stk::make_checkpoint(files.size() > 1 ? "safetensors-sharded" : "safetensors", std::move(sources), {});
    } catch (const stk::Error &) {
        return 0;  // the reader's own refusals: fuzz/safetensors_header.cc
    }

    try {
        if (fp8) stk::attach_fp8_scales(*ck, br, bc);
        if (mxfp4) ck = stk::wrap_mxfp4(std::move(ck));
    } catch (const stk::Error &e) {
        if (e.status() == STK_E_INVALID_ARGUMENT) {
            if (br != 0 && bc != 0) __builtin_trap();  // only the block size is an argument
        } else if (std::strstr(e.what(), "fuzz-a.safetensors") == nullptr &&
                   std::strstr(e.what(), "fuzz-b.safetensors") == nullptr) {
            __builtin_trap();  // a refusal of the files must name the file
        }
        return 0;
    }
    if (fp8 && (br == 0 || bc == 0)) __builtin_trap();

    for (const stk::TensorRef &t : ck->tensors()) {
        const File *f = nullptr;
        std::vector<float> want;
        if (t.dtype == stk::SrcDType::MXFP4) {
            // NAME_blocks [..., R, G, 16] + NAME_scales [..., R, G], one file.
            const stk::TensorRef *b = find_in(files, t.name, &f);
            const std::string stem = t.name.substr(0, t.name.size() - 7);
            const File *fs = nullptr;
            const stk::TensorRef *s = find_in(files, stem + "_scales", &fs);
            if (!mxfp4 || !b || !s || fs != f || b->dtype != stk::SrcDType::U8 || s->dtype != stk::SrcDType::U8) __builtin_trap();
            if (b->shape.size() < 3 || b->shape.back() != 16 || s->shape.size() + 1 != b->shape.size()) __builtin_trap();
            if (t.shape.size() != s->shape.size() || t.shape.back() != s->shape.back() * 32) __builtin_trap();
            if (t.n_elements != b->n_bytes * 2 || s->n_bytes * 32 != t.n_elements) __builtin_trap();
            if (int64_t(s->file_offset) - int64_t(b->file_offset) != t.aux_offset || s->file_offset + s->n_bytes > f->size)
                __builtin_trap();
            want.resize(t.n_elements);
            for (uint64_t k = 0; k < t.n_elements; k++) {
                const uint8_t byte = f->data[b->file_offset + k / 2], code = (k & 1) ? byte >> 4 : byte & 0xF;
                want[k] = std::ldexp(stk::kFp4Values[code], int(f->data[s->file_offset + k / 32]) - 127);
            }
        } else if (t.block_scale) {
            const stk::TensorRef *w = find_in(files, t.name, &f);
            const File *fs = nullptr;
            const stk::TensorRef *s = find_in(files, t.name + "_scale_inv", &fs);
            if (!fp8 || !w || !s || t.shape.size() != 2 || t.block_rows != br || t.block_cols != bc) __builtin_trap();
            if (t.dtype != stk::SrcDType::F8_E4M3 && t.dtype != stk::SrcDType::F8_E5M2) __builtin_trap();
            const uint64_t rows = t.shape[0], cols = t.shape[1];
            const uint64_t gr = rows / br + (rows % br != 0), gc = cols / bc + (cols % bc != 0);
            if (s->shape.size() != 2 || s->shape[0] != gr || s->shape[1] != gc || t.block_scale->size() != gr * gc)
                __builtin_trap();
            const size_t ss = stk::src_dtype_size(s->dtype);
            want.resize(t.n_elements);
            for (uint64_t e = 0; e < t.n_elements; e++) {
                const uint64_t r = e / cols, c = e % cols;
                const uint8_t q = f->data[w->file_offset + e];
                const float wv = t.dtype == stk::SrcDType::F8_E4M3 ? stk::f8e4m3_to_f32(q) : stk::f8e5m2_to_f32(q);
                want[e] = wv * scalar(s->dtype, fs->data + s->file_offset + ((r / br) * gc + c / bc) * ss);
            }
        } else {
            if (fp8 && (t.dtype == stk::SrcDType::F8_E4M3 || t.dtype == stk::SrcDType::F8_E5M2)) __builtin_trap();
            if (mxfp4 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, "_scales") == 0) __builtin_trap();
            continue;  // plain tensors: fuzz/safetensors_header.cc
        }
        try {
            check_values(*ck, t, want, cut_code);
        } catch (const stk::Error &) {
            __builtin_trap();  // an accepted tensor converts
        }
    }
    return 0;
}

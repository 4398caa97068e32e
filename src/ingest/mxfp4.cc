#include "ingest/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/checked.h"
#include "core/error.h"

namespace stk {

const float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

namespace {
// Every (scale, code) value: torch.ldexp rounds the exact x * 2^(scale - 127) once, as ldexp
// does (0.5 * 2^128 is 2^127, not 0.5 * inf; 1.0 * 2^128 overflows to inf; 0 stays 0).  Those
// values are exact in bfloat16 and float32 alike (same exponent range, 2 significant bits), so
// the bfloat16 transformers writes and this float32 hold the same numbers.
struct Fp4Table {
    float v[256][16];
    Fp4Table() {
        for (int s = 0; s < 256; s++)
            for (int c = 0; c < 16; c++) v[s][c] = std::ldexp(kFp4Values[c], s - 127);
    }
};
}  // namespace

void mxfp4_to_f32(const uint8_t *blocks, const uint8_t *scales, uint64_t first, uint64_t count, float *out) {
    static const Fp4Table table;
    for (uint64_t i = 0; i < count;) {
        const uint64_t k = first + i, block = k / 32;
        const float *lut = table.v[scales[block]];
        const uint8_t *b = blocks + block * 16;
        const uint64_t end = std::min<uint64_t>(count, i + (32 - k % 32));
        for (uint64_t j = k % 32; i < end; i++, j++) out[i] = lut[(j & 1) ? b[j / 2] >> 4 : b[j / 2] & 0xF];
    }
}

void mxfp4_ggml_to_f32(const uint8_t *blocks, uint64_t first, uint64_t count, float *out) {
    static const Fp4Table table;
    for (uint64_t i = 0; i < count; i++) {
        const uint64_t k = first + i, j = k % 32;
        const uint8_t *b = blocks + (k / 32) * 17;
        const int code = j < 16 ? b[1 + j] & 0xF : b[1 + j - 16] >> 4;
        out[i] = code == 8 ? 0.0f : table.v[b[0]][code];  // ggml's integer table has no -0 (transformers' has)
    }
}

void mxfp4_ggml_to_hf(const uint8_t g[17], uint8_t hf[16], uint8_t *scale) {
    *scale = g[0];
    auto code = [&](int j) { return j < 16 ? g[1 + j] & 0xF : g[1 + j - 16] >> 4; };
    for (int k = 0; k < 16; k++) hf[k] = uint8_t(code(2 * k) | (code(2 * k + 1) << 4));
}

namespace {

bool ends_with(const std::string &s, const char *suffix, std::string *stem) {
    size_t n = std::strlen(suffix);
    if (s.size() <= n || s.compare(s.size() - n, n, suffix) != 0) return false;
    *stem = s.substr(0, s.size() - n);
    return true;
}

std::string shape_of(const std::vector<uint64_t> &s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

class Mxfp4Checkpoint final : public Checkpoint {
public:
    explicit Mxfp4Checkpoint(std::unique_ptr<Checkpoint> inner) : inner_(std::move(inner)) {
        const std::vector<TensorRef> &all = inner_->tensors();
        const bool safetensors = std::strncmp(inner_->format(), "safetensors", 11) == 0;
        for (const TensorRef &t : all) {
            std::string stem;
            if (ends_with(t.name, "_scales", &stem)) {
                if (!inner_->find(stem + "_blocks"))
                    throw_error(STK_E_CORRUPT, "%s: tensor '%s' (offset %llu): MXFP4 scales without '%s_blocks'", t.file.c_str(),
                                t.name.c_str(), (unsigned long long)t.file_offset, stem.c_str());
                continue;  // folded into its blocks
            }
            if (!ends_with(t.name, "_blocks", &stem)) {
                tensors_.push_back(t);
                continue;
            }
            const TensorRef *s = inner_->find(stem + "_scales");
            auto refuse = [&](const char *why) {
                throw_error(STK_E_CORRUPT, "%s: tensor '%s' (offset %llu, %s %s): MXFP4 blocks %s", t.file.c_str(),
                            t.name.c_str(), (unsigned long long)t.file_offset, src_dtype_name(t.dtype), shape_of(t.shape).c_str(),
                            why);
            };
            if (!s) refuse(("without their scales '" + stem + "_scales'").c_str());
            if (t.dtype != SrcDType::U8 || s->dtype != SrcDType::U8)
                refuse(("and scales must be U8; the blocks are " + std::string(src_dtype_name(t.dtype)) + ", '" + s->name +
                        "' (offset " + std::to_string(s->file_offset) + ") is " + src_dtype_name(s->dtype))
                           .c_str());
            if (t.shape.size() < 3 || t.shape.back() != 16) refuse("must be [..., rows, groups, 16] (16 bytes: 32 values)");
            if (s->shape.size() != t.shape.size() - 1 || !std::equal(s->shape.begin(), s->shape.end(), t.shape.begin()))
                refuse(("need scales of shape [..., rows, groups]; '" + s->name + "' (" + s->file + ", offset " +
                        std::to_string(s->file_offset) + ") is " + shape_of(s->shape))
                           .c_str());
            if (!safetensors || !t.strides.empty())
                throw_error(STK_E_UNSUPPORTED,
                            "%s: tensor '%s' (offset %llu): MXFP4 blocks are read from safetensors only (this is %s)",
                            t.file.c_str(), t.name.c_str(), (unsigned long long)t.file_offset, inner_->format());
            if (s->source_index != t.source_index)
                throw_error(STK_E_UNSUPPORTED,
                            "%s: tensor '%s' (offset %llu): its MXFP4 scales '%s' are in another file (%s, offset %llu); stk "
                            "reads the two from one file",
                            t.file.c_str(), t.name.c_str(), (unsigned long long)t.file_offset, s->name.c_str(), s->file.c_str(),
                            (unsigned long long)s->file_offset);
            TensorRef v = t;
            v.dtype = SrcDType::MXFP4;
            v.shape.pop_back();
            // groups x 32 values.  The reader bounded the product of the blocks' shape by the file,
            // but not one dimension when another is 0: a dimension near 2^64 must not wrap.
            if (!mul_ok(v.shape.back(), 32, &v.shape.back()) || !mul_ok(t.n_elements, 2, &v.n_elements))
                throw_error(STK_E_DIMS_OVERFLOW,
                            "%s: tensor '%s' (offset %llu, %s): MXFP4 blocks: %llu groups x 32 values overflows 64 bits",
                            t.file.c_str(), t.name.c_str(), (unsigned long long)t.file_offset, shape_of(t.shape).c_str(),
                            (unsigned long long)t.shape[t.shape.size() - 2]);
            v.aux_offset = int64_t(s->file_offset) - int64_t(t.file_offset);
            tensors_.push_back(v);
        }
    }
    const char *format() const override { return inner_->format(); }
    const std::vector<TensorRef> &tensors() const override { return tensors_; }
    const uint8_t *tensor_bytes(const TensorRef &t, std::vector<uint8_t> &scratch) const override {
        return inner_->tensor_bytes(t, scratch);  // same file, offset and size as the stored tensor
    }
    uint64_t file_bytes() const override { return inner_->file_bytes(); }
    void release(const TensorRef &t) const override { inner_->release(t); }
    std::vector<std::string> files() const override { return inner_->files(); }

private:
    std::unique_ptr<Checkpoint> inner_;
    std::vector<TensorRef> tensors_;  // still sorted by name: entries were only dropped or kept in place
};

}  // namespace

std::unique_ptr<Checkpoint> wrap_mxfp4(std::unique_ptr<Checkpoint> inner) {
    return std::make_unique<Mxfp4Checkpoint>(std::move(inner));
}

}  // namespace stk

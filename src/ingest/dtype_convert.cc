#include "ingest/dtype_convert.h"

#include <algorithm>

#include <cmath>
#if defined(__x86_64__)
#  include <cpuid.h>
#  include <immintrin.h>
#endif
#include <cstring>

#include "core/bytes.h"
#include "core/checked.h"
#include "core/error.h"
#include "format/ggml_dequant.h"
#include "ingest/mxfp4.h"

namespace stk {

namespace {
constexpr uint64_t kMaxGgmlBlock = 256;  // the K-quants' QK_K, ggml's largest block

struct DTypeInfo {
    const char *name;
    size_t size;
};
// Indexed by SrcDType.  MXFP4 is packed (4.25 bits a value): its "size" 1 only keeps byte
// arithmetic in messages finite.
constexpr DTypeInfo kDTypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8},  {"I32", 4},
    {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2},     {"U8", 1},      {"BOOL", 1}, {"MXFP4", 1},
};
constexpr size_t kNumDTypes = sizeof kDTypes / sizeof kDTypes[0];
static_assert(kNumDTypes == size_t(SrcDType::MXFP4) + 1, "kDTypes follows SrcDType");
}  // namespace

const char *src_dtype_name(SrcDType t) {
    size_t i = size_t(t);
    return i < kNumDTypes ? kDTypes[i].name : "?";
}

size_t src_dtype_size(SrcDType t) {
    size_t i = size_t(t);
    return i < kNumDTypes ? kDTypes[i].size : 0;
}

bool parse_src_dtype(const char *name, size_t len, SrcDType *out) {
    for (size_t i = 0; i < kNumDTypes; i++) {
        if (SrcDType(i) == SrcDType::MXFP4) continue;  // no file names it: made by wrap_mxfp4 only
        if (std::strlen(kDTypes[i].name) == len && std::memcmp(kDTypes[i].name, name, len) == 0) {
            *out = SrcDType(i);
            return true;
        }
    }
    return false;
}

float element_to_f32(SrcDType t, const uint8_t *p) {
    switch (t) {
        case SrcDType::F64: return float(load_le<double>(p));
        case SrcDType::F32: return load_le<float>(p);
        case SrcDType::F16: return f16_to_f32(load_u16(p));
        case SrcDType::BF16: return bf16_to_f32(load_u16(p));
        case SrcDType::F8_E4M3: return f8e4m3_to_f32(*p);
        case SrcDType::F8_E5M2: return f8e5m2_to_f32(*p);
        case SrcDType::I64: return float(load_le<int64_t>(p));
        case SrcDType::I32: return float(load_le<int32_t>(p));
        case SrcDType::I16: return float(load_le<int16_t>(p));
        case SrcDType::I8: return float(int8_t(*p));
        case SrcDType::U64: return float(load_u64(p));
        case SrcDType::U32: return float(load_u32(p));
        case SrcDType::U16: return float(load_u16(p));
        case SrcDType::U8: return float(*p);
        case SrcDType::BOOL: return *p ? 1.0f : 0.0f;
        case SrcDType::MXFP4: break;  // a value depends on its index: convert_to_f32 only
    }
    throw_error(STK_E_INTERNAL, "element_to_f32: dtype %d", int(t));
}

// Typed loops the compiler vectorises (bf16/f16/f32 are the bulk of real checkpoints).
template <class Fn>
static void convert_loop(const uint8_t *src, size_t esize, uint64_t count, float *out, Fn fn) {
    for (uint64_t i = 0; i < count; i++) out[i] = fn(src + i * esize);
}

#if defined(__x86_64__)
// x86 fast paths, chosen at run time.  Both are exact and give the same bits as the scalar
// definitions (tests/test_checkpoint.cc compares all 65536 inputs).
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint8_t *src, uint64_t n, float *out) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i))));
    for (; i < n; i++) out[i] = f16_to_f32(load_u16(src + 2 * i));
}

__attribute__((target("avx2"))) static void bf16_to_f32_avx2(const uint8_t *src, uint64_t n, float *out) {
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + 2 * i)));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++) out[i] = bf16_to_f32(load_u16(src + 2 * i));
}

// __builtin_cpu_supports("avx2") also checks that the OS saves the AVX state; clang 14 does not
// know "f16c", so read its CPUID bit (leaf 1, ecx bit 29) directly.
static bool cpu_has_f16c() {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
static const bool g_has_avx2 = __builtin_cpu_supports("avx2");
static const bool g_has_f16c = g_has_avx2 && cpu_has_f16c();
#endif

void convert_contiguous(SrcDType t, const uint8_t *src, uint64_t count, float *out) {
    switch (t) {
        case SrcDType::F32: std::memcpy(out, src, size_t(count) * 4); return;
        case SrcDType::BF16:
#if defined(__x86_64__)
            if (g_has_avx2) return bf16_to_f32_avx2(src, count, out);
#endif
            for (uint64_t i = 0; i < count; i++) out[i] = bf16_to_f32(load_u16(src + 2 * i));
            return;
        case SrcDType::F16:
#if defined(__x86_64__)
            if (g_has_f16c) return f16_to_f32_f16c(src, count, out);
#endif
            for (uint64_t i = 0; i < count; i++) out[i] = f16_to_f32(load_u16(src + 2 * i));
            return;
        default: {
            size_t es = src_dtype_size(t);
            convert_loop(src, es, count, out, [t](const uint8_t *p) { return element_to_f32(t, p); });
            return;
        }
    }
}

std::vector<TensorRef> &Checkpoint::mutable_tensors() {
    throw_error(STK_E_UNSUPPORTED, "%s checkpoints cannot carry F8 block scales", format());
}

// f32(w) x f32(scale of w's block), one rounding, in element order (the arithmetic of
// transformers' Fp8Dequantize / _dequantize_fp8_weight in float32).  A NaN / inf scale is a value
// like any other, multiplied in as transformers does; the conversion's non-finite policy sees it.
static void convert_block_scaled(const TensorRef &t, const uint8_t *bytes, uint64_t first, uint64_t count, float *out) {
    const uint64_t cols = t.shape[1], scols = (cols + t.block_cols - 1) / t.block_cols;
    const float *scale = t.block_scale->data();
    for (uint64_t i = 0; i < count; i++) {
        const uint64_t e = first + i, r = e / cols, c = e % cols;
        out[i] = element_to_f32(t.dtype, bytes + e) * scale[(r / t.block_rows) * scols + c / t.block_cols];
    }
}

// ceil(a / b) for b > 0, without the a + b - 1 that wraps for a dimension near 2^64 (a tensor
// with a zero dimension elsewhere has no bytes, so its other dimensions are not bounded by the file).
static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

void attach_fp8_scales(Checkpoint &ck, uint32_t br, uint32_t bc) {
    if (br == 0 || bc == 0)
        throw_error(STK_E_INVALID_ARGUMENT, "F8 block size %u x %u: quantization_config weight_block_size needs two sizes >= 1",
                    br, bc);
    std::vector<TensorRef> &ts = ck.mutable_tensors();
    static const std::string kSuffix = "_scale_inv";
    std::vector<uint8_t> scratch;
    for (const TensorRef &s : ts) {
        if (s.name.size() <= kSuffix.size() || s.name.compare(s.name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
            continue;
        const std::string wname = s.name.substr(0, s.name.size() - kSuffix.size());
        auto it =
            std::lower_bound(ts.begin(), ts.end(), wname, [](const TensorRef &a, const std::string &n) { return a.name < n; });
        if (it == ts.end() || it->name != wname)
            throw_error(STK_E_CORRUPT, "%s: tensor '%s' (offset %llu): an F8 block scale without its weight '%s'", s.file.c_str(),
                        s.name.c_str(), (unsigned long long)s.file_offset, wname.c_str());
        TensorRef &w = *it;
        if ((w.dtype != SrcDType::F8_E4M3 && w.dtype != SrcDType::F8_E5M2) || w.shape.size() != 2 || !w.strides.empty())
            throw_error(STK_E_CORRUPT,
                        "%s: tensor '%s' (offset %llu) has a block scale '%s' (offset %llu) but is %s of rank %zu%s, not a "
                        "contiguous 2-D F8 matrix",
                        w.file.c_str(), w.name.c_str(), (unsigned long long)w.file_offset, s.name.c_str(),
                        (unsigned long long)s.file_offset, src_dtype_name(w.dtype), w.shape.size(),
                        w.strides.empty() ? "" : " (a strided view)");
        const uint64_t gr = ceil_div(w.shape[0], br), gc = ceil_div(w.shape[1], bc);
        if (s.shape.size() != 2 || s.shape[0] != gr || s.shape[1] != gc ||
            (s.dtype != SrcDType::F32 && s.dtype != SrcDType::BF16)) {
            std::string shape = "[";
            for (size_t i = 0; i < s.shape.size(); i++) shape += (i ? ", " : "") + std::to_string(s.shape[i]);
            throw_error(STK_E_CORRUPT,
                        "%s: tensor '%s' (offset %llu): %s scale of shape %s], but weight '%s' [%llu, %llu] in %u x %u blocks "
                        "needs F32 [%llu, %llu]",
                        s.file.c_str(), s.name.c_str(), (unsigned long long)s.file_offset, src_dtype_name(s.dtype), shape.c_str(),
                        w.name.c_str(), (unsigned long long)w.shape[0], (unsigned long long)w.shape[1], br, bc,
                        (unsigned long long)gr, (unsigned long long)gc);
        }
        auto grid = std::make_shared<std::vector<float>>(size_t(gr * gc));
        convert_to_f32(s, ck.tensor_bytes(s, scratch), 0, gr * gc, grid->data());
        ck.release(s);
        w.block_scale = grid;
        w.block_rows = br;
        w.block_cols = bc;
    }
    for (const TensorRef &w : ts)
        if ((w.dtype == SrcDType::F8_E4M3 || w.dtype == SrcDType::F8_E5M2) && !w.block_scale)
            throw_error(STK_E_CORRUPT,
                        "%s: tensor '%s' (offset %llu) is %s without a '%s_scale_inv': quantization_config says block-scaled "
                        "fp8",
                        w.file.c_str(), w.name.c_str(), (unsigned long long)w.file_offset, src_dtype_name(w.dtype),
                        w.name.c_str());
}

// Elements [first, first + count) of a tensor stored as ggml blocks: whole blocks straight into
// `out`, a partial block at either end through a block on the stack (every block dequantises on
// its own, so any split gives the same values).
static void convert_ggml_blocks(const TensorRef &t, const uint8_t *bytes, uint64_t first, uint64_t count, float *out) {
    const uint64_t B = ggml::ggml_dequant_block(t.ggml_type), BB = ggml::ggml_dequant_block_bytes(t.ggml_type);
    if (!B || B > kMaxGgmlBlock)
        throw_error(STK_E_INTERNAL, "%s: tensor '%s': no dequantiser for ggml type %u", t.file.c_str(), t.name.c_str(),
                    t.ggml_type);
    const auto dequant = [&](uint64_t block, uint64_t n_blocks, float *to) {
        if (!ggml::ggml_dequantize(t.ggml_type, bytes + block * BB, n_blocks, to))
            throw_error(STK_E_INTERNAL, "%s: tensor '%s': no dequantiser for ggml type %u", t.file.c_str(), t.name.c_str(),
                        t.ggml_type);
    };
    float block[kMaxGgmlBlock];
    uint64_t done = 0;
    if (first % B) {
        dequant(first / B, 1, block);
        const uint64_t skip = first % B, k = std::min<uint64_t>(B - skip, count);
        std::memcpy(out, block + skip, size_t(k) * 4);
        done = k;
    }
    const uint64_t whole = (count - done) / B;
    if (whole) dequant((first + done) / B, whole, out + done);
    done += whole * B;
    if (done < count) {
        dequant((first + done) / B, 1, block);
        std::memcpy(out + done, block, size_t(count - done) * 4);
    }
}

uint64_t stored_byte_offset(const TensorRef &t, uint64_t element) {
    if (t.ggml_type != 0) {
        const uint32_t block = ggml::ggml_dequant_block(t.ggml_type);
        return block ? t.file_offset + element / block * ggml::ggml_dequant_block_bytes(t.ggml_type) : t.file_offset;
    }
    if (t.dtype == SrcDType::MXFP4) return t.file_offset + element / 2;
    return t.file_offset + element * src_dtype_size(t.dtype);
}

void convert_to_f32(const TensorRef &t, const uint8_t *bytes, uint64_t first, uint64_t count, float *out) {
    uint64_t end;
    if (!add_ok(first, count, &end) || end > t.n_elements)
        throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor '%s': elements [%llu, +%llu) outside its %llu elements", t.file.c_str(),
                    t.name.c_str(), (unsigned long long)first, (unsigned long long)count, (unsigned long long)t.n_elements);
    if (count == 0) return;
    if (t.block_scale) return convert_block_scaled(t, bytes, first, count, out);
    if (t.ggml_type == kGgmlMxfp4) return mxfp4_ggml_to_f32(bytes, first, count, out);
    if (t.ggml_type) return convert_ggml_blocks(t, bytes, first, count, out);
    if (t.dtype == SrcDType::MXFP4) return mxfp4_to_f32(bytes, bytes + t.aux_offset, first, count, out);
    size_t es = src_dtype_size(t.dtype);
    if (t.strides.empty()) {
        convert_contiguous(t.dtype, bytes + first * es, count, out);
        return;
    }
    // Strided view (validated at open: every addressed element lies inside span_bytes).  Walk
    // the row-major multi-index of `first`, one innermost row at a time.
    const size_t rank = t.shape.size();
    if (rank == 0) {
        convert_contiguous(t.dtype, bytes, 1, out);
        return;
    }
    uint64_t idx[64];
    if (rank > 64) throw_error(STK_E_UNSUPPORTED, "tensor '%s': rank %zu > 64", t.name.c_str(), rank);
    uint64_t rem = first;
    for (size_t d = rank; d-- > 0;) {
        idx[d] = rem % t.shape[d];
        rem /= t.shape[d];
    }
    const uint64_t inner = t.shape[rank - 1];
    const uint64_t inner_stride = t.strides[rank - 1];
    uint64_t done = 0;
    while (done < count) {
        uint64_t off = 0;
        for (size_t d = 0; d < rank; d++) off += idx[d] * t.strides[d];
        uint64_t run = inner - idx[rank - 1];
        if (run > count - done) run = count - done;
        if (inner_stride == 1) {
            convert_contiguous(t.dtype, bytes + off * es, run, out + done);
        } else {
            for (uint64_t i = 0; i < run; i++) out[done + i] = element_to_f32(t.dtype, bytes + (off + i * inner_stride) * es);
        }
        done += run;
        idx[rank - 1] += run;
        for (size_t d = rank - 1; d > 0 && idx[d] == t.shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

uint64_t first_nonfinite(const float *values, uint64_t count) {
    for (uint64_t i = 0; i < count; i++) {
        uint32_t b;
        std::memcpy(&b, &values[i], 4);
        if ((b & 0x7F800000u) == 0x7F800000u) return i;
    }
    return count;
}

}  // namespace stk

// GGUF tensors as checkpoint sources (gguf.h, open_gguf_sources).
#include <cstring>

#include "core/error.h"
#include "ingest/gguf.h"
#include "format/ggml_dequant.h"
#include "ingest/mxfp4.h"

namespace stk {

namespace {

class GgufSource final : public Source {
public:
    GgufSource(std::shared_ptr<const GgufFile> g, uint32_t file_index) : g_(std::move(g)), index_(file_index) {
        const auto &all = g_->tensors();
        for (uint32_t i = 0; i < all.size(); i++) {
            const GgufTensorInfo &t = all[i];
            if (t.file_index != index_) continue;
            TensorRef r;
            r.name = t.name;
            switch (t.type) {
                case uint32_t(GgmlType::F32): r.dtype = SrcDType::F32; break;
                case uint32_t(GgmlType::F16): r.dtype = SrcDType::F16; break;
                case uint32_t(GgmlType::BF16): r.dtype = SrcDType::BF16; break;
                default:
                    if (!ggml::ggml_dequant_supported(t.type) && t.type != kGgmlMxfp4)
                        throw_at(STK_E_UNSUPPORTED, file().path(), t.info_offset,
                                 "tensor '%s': ggml type %s is not supported (stk dequantises F32, F16, BF16, Q8_0, Q4_0, "
                                 "Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4)",
                                 printable(t.name).c_str(), ggml_type_name(t.type).c_str());
                    r.dtype = SrcDType::F32;  // the values' type: convert_to_f32 dequantises the blocks
                    r.ggml_type = t.type;
                    break;
            }
            r.shape = t.shape;
            r.n_elements = t.n_elements;
            r.n_bytes = t.n_elements *
                        src_dtype_size(r.dtype);  // f32 bytes when quantised: <= 4x the stored elements, checked by the parser
            r.span_bytes = r.n_bytes;
            r.file = file().path();
            r.file_offset = t.data_offset;
            r.storage_index = i;  // the GgufFile's tensor
            tensors_.push_back(std::move(r));
        }
    }
    const char *kind() const override { return "gguf"; }
    std::vector<TensorRef> &tensors() override { return tensors_; }
    // The mapped bytes, blocks included: a quantised tensor is dequantised by its readers range by
    // range (convert_to_f32), never here into a copy of the whole tensor.
    const uint8_t *bytes(const TensorRef &ref, std::vector<uint8_t> &) const override {
        return g_->tensor_data(g_->tensors().at(ref.storage_index));
    }
    const MappedFile &file() const override { return g_->file(index_); }
    void release(const TensorRef &ref) const override {
        const GgufTensorInfo &t = g_->tensors().at(ref.storage_index);
        file().dont_need(t.data_offset, t.n_bytes);
    }
    const GgufFile *gguf() const { return g_.get(); }

private:
    std::shared_ptr<const GgufFile> g_;
    uint32_t index_;
    std::vector<TensorRef> tensors_;
};

}  // namespace

std::vector<std::unique_ptr<Source>> open_gguf_sources(const std::string &path) {
    auto g = std::make_shared<const GgufFile>(path);
    std::vector<std::unique_ptr<Source>> out;
    for (uint32_t i = 0; i < g->file_count(); i++) out.push_back(std::make_unique<GgufSource>(g, i));
    return out;
}

const GgufFile *gguf_file_of(const Source &s) {
    auto *gs = dynamic_cast<const GgufSource *>(&s);
    return gs ? gs->gguf() : nullptr;
}

}  // namespace stk

// WeightSource over an ingested model: describe_model's plan, each streamed tensor materialised
// once (ingest/model.h materialize_f32: the HF layout, whatever the checkpoint stored).
#include "lm/weights.h"

#include <map>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/float16.h"
#include "ingest/model.h"

namespace stk::lm {

const char *wdtype_name(WDType t) {
    switch (t) {
        case WDType::F32: return "f32";
        case WDType::BF16: return "bf16";
        case WDType::I8: return "int8";
        case WDType::Q4_0: return "q4_0";
        case WDType::Q8_0: return "q8_0";
    }
    return "?";
}

bool wdtype_block(WDType t, BlockQType *out) {
    if (t == WDType::Q4_0) *out = BlockQType::Q4_0;
    else if (t == WDType::Q8_0) *out = BlockQType::Q8_0;
    else return false;
    return true;
}

namespace {

using Key = std::tuple<int, int, int32_t, int32_t>;  // role, slot, layer, expert

class ModelWeights final : public WeightSource {
public:
    ModelWeights(const std::string &path, WDType keep, WDType ffn) : path_(path), keep_(keep) {
        if (keep != WDType::F32 && keep != WDType::BF16)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: model weights are kept as f32 or bf16, not %s", path.c_str(), wdtype_name(keep));
        BlockQType bq{};
        const bool block_ffn = wdtype_block(ffn, &bq);
        if (!block_ffn && ffn != WDType::F32)
            throw_error(STK_E_INVALID_ARGUMENT, "%s: FFN weights are kept as the model's or block-scaled (q4_0, q8_0), not %s", path.c_str(),
                        wdtype_name(ffn));
        std::unique_ptr<ModelDescription> d = describe_model(path);
        config_ = d->plan.config;
        const Checkpoint &ck = *d->checkpoint;
        const auto &refs = ck.tensors();
        std::vector<float> f32, scratch(size_t(d->plan.max_row_floats ? d->plan.max_row_floats : 1));
        std::vector<uint8_t> bytes_scratch;
        for (const PlanTensor &t : d->layout.tensors) {
            // Buffers (masks, inv_freq, a stored copy of a tied head), a tied head (the forward
            // reads EMB) and MLA's composed per-head matrices (the stored factors are kept) are
            // not weights of the forward.
            if (!t.streamed || t.buffer || t.tied || t.composed || t.role == Role::NONE) continue;
            const TensorRef &src = refs.at(t.source);
            const uint8_t *bytes = ck.tensor_bytes(src, bytes_scratch);
            f32.resize(size_t(t.n_elements));
            materialize_f32(t, src, bytes, f32.data(), scratch.data());
            ck.release(src);
            Stored s;
            s.rows = t.dims[0];
            s.cols = t.rank == 2 ? t.dims[1] : 1;
            s.dtype = keep;
            const bool is_ffn = t.role == Role::FFN_W1 || t.role == Role::FFN_W2 || t.role == Role::FFN_W3;
            if (block_ffn && is_ffn && t.rank == 2) {
                uint64_t row_bytes = 0;
                if (!blockq_bytes(bq, s.cols, &row_bytes))
                    throw_error(STK_E_INVALID_ARGUMENT, "%s: tensor %s has rows of %llu values, not a multiple of %llu: it cannot be kept as %s",
                                path.c_str(), t.name, (unsigned long long)s.cols, (unsigned long long)kBlockQElems, blockq_name(bq));
                s.blk.resize(size_t(row_bytes * s.rows));
                blockq_quantize(bq, f32.data(), s.rows * s.cols, s.blk.data());  // rows end on block boundaries
                s.dtype = ffn;
            } else if (keep == WDType::F32) {
                s.f32 = f32;
            } else {
                s.bf16.resize(f32.size());
                for (size_t i = 0; i < f32.size(); i++) s.bf16[i] = f32_to_bf16_rne(f32[i]);
            }
            const NormSlot slot = (t.role == Role::LN_G || t.role == Role::LN_B) ? t.slot : NormSlot::None;
            const Key k{int(t.role), int(slot), t.layer, t.expert};
            if (!tensors_.emplace(k, std::move(s)).second)
                throw_error(STK_E_CORRUPT, "%s: two tensors hold %s (slot %s) of layer %d expert %d (the second: %s)", path.c_str(),
                            role_name(t.role), norm_slot_name(slot), t.layer, t.expert, t.name);
        }
    }
    const ModelConfig &config() const override { return config_; }
    TensorView find(const WeightKey &key) const override {
        const NormSlot slot = (key.role == Role::LN_G || key.role == Role::LN_B) ? key.slot : NormSlot::None;
        auto it = tensors_.find(Key{int(key.role), int(slot), key.layer, key.expert});
        if (it == tensors_.end()) return {};
        TensorView v;
        v.rows = it->second.rows;
        v.cols = it->second.cols;
        v.dtype = it->second.dtype;
        v.data = v.dtype == WDType::F32    ? static_cast<const void *>(it->second.f32.data())
                 : v.dtype == WDType::BF16 ? static_cast<const void *>(it->second.bf16.data())
                                           : static_cast<const void *>(it->second.blk.data());
        return v;
    }
    std::string describe() const override { return "model " + path_; }

private:
    struct Stored {
        uint64_t rows = 0, cols = 0;
        WDType dtype = WDType::F32;
        std::vector<float> f32;
        std::vector<uint8_t> blk;  // Q4_0 / Q8_0 rows
        std::vector<uint16_t> bf16;
    };
    std::string path_;
    WDType keep_;
    ModelConfig config_;
    std::map<Key, Stored> tensors_;
};

}  // namespace

std::unique_ptr<WeightSource> open_model_weights(const std::string &path, WDType keep, WDType ffn) {
    return std::make_unique<ModelWeights>(path, keep, ffn);
}

}  // namespace stk::lm

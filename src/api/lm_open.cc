#include "api/lm_open.h"

#include "core/error.h"
#include "core/mapped_file.h"
#include "format/array.h"
#include "format/manifest.h"
#include "lm/from_generation.h"
#include "publish/generations.h"

namespace stk::lm {

std::unique_ptr<WeightSource> open_weights(const std::string &path, WDType keep, WDType ffn, bool *generation) {
    bool root = false;
    const std::string dir = resolve_generation(path, nullptr, &root);
    const bool gen = root || file_exists(dir + "/" + kManifestFileName);
    if (generation) *generation = gen;
    if (!gen) return open_model_weights(path, keep, ffn);
    if (ffn != WDType::F32) {
        // A generation runs at the widths it was written in: a block type that names what its FFN
        // holds (stk convert --profile faithful --ffn q4_0|q8_0) is that; re-quantising another
        // width at open is not done.
        const Manifest m = read_manifest(dir + "/" + kManifestFileName);
        const uint32_t want = ffn == WDType::Q4_0 ? uint32_t(DType::Q4_0) : ffn == WDType::Q8_0 ? uint32_t(DType::Q8_0) : 0;
        if (!m.has_runtime || m.runtime.ffn_dtype != want)
            throw_error(STK_E_NOT_IMPLEMENTED,
                        "%s: a faithful generation keeps the FFN width it was converted with (%s); block-scaled FFN weights "
                        "(%s) apply to a model read from its checkpoint, or to a generation converted with --ffn %s",
                        path.c_str(), m.has_runtime ? dtype_name(uint16_t(m.runtime.ffn_dtype)) : "no runtime block",
                        wdtype_name(ffn), wdtype_name(ffn));
    }
    return open_generation_weights(dir);
}

}  // namespace stk::lm

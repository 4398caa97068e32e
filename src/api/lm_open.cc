#include "api/lm_open.h"

#include "core/error.h"
#include "core/mapped_file.h"
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
    if (ffn != WDType::F32)
        throw_error(STK_E_NOT_IMPLEMENTED, "%s: a faithful generation keeps the FFN width it was converted with; "
                    "block-scaled FFN weights (%s) apply to a model read from its checkpoint only", path.c_str(), wdtype_name(ffn));
    return open_generation_weights(dir);
}

}  // namespace stk::lm

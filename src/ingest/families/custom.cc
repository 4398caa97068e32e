// An unknown model_type described by the user's role patterns ("stk_roles" / stk_roles.json):
// what the keys say, nothing assumed.
#include "ingest/family.h"

namespace stk {

static void custom_defaults(const ConfigReader &c, const std::string &, ModelConfig &m) {
    m.norm = c.has("rms_norm_eps") ? NormKind::RmsNorm : NormKind::LayerNorm;
    m.positions = c.has("rope_theta") ? PosKind::Rope : PosKind::None;
    m.rope_theta = 10000.0;
}

static void no_roles(RoleRules &, const ModelConfig &) {}

static const char *const kNone[] = {nullptr};

extern const FamilyDef kCustomFamilyDef = {
    "custom",
    kNone,
    kNone,
    nullptr,
    "any other decoder-only model: user role patterns (stk_roles.json); no shape model to check against",
    "tests/data/ingest",
    false,
    nullptr,
    custom_defaults,
    nullptr,
    no_roles,
};

}  // namespace stk

// The array names of the faithful profile (docs/format.md "Faithful profile"): one table from
// (role, norm slot, expert class) to the kind an array is named by, read both ways: by the writer
// (stages/faithful.cc) and by the runtime's loader of a generation (lm/from_generation.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/roles.h"

namespace stk {

enum class ExpertClass : uint8_t { Dense = 0, Shared = 1, Routed = 2 };
inline ExpertClass expert_class(int32_t expert) {
    return expert == kNoExpert ? ExpertClass::Dense : expert == kSharedExpert ? ExpertClass::Shared : ExpertClass::Routed;
}

struct FaithfulKind {
    const char *name;  // "attn_q", "experts_w1", "final_norm.w", ...
    Role role;
    NormSlot slot;  // LN_G / LN_B only; None otherwise
    ExpertClass expert;
};

// The kind of a tensor, or null when the profile has no array for it.
const FaithfulKind *faithful_kind_of(Role role, NormSlot slot, ExpertClass expert);
// The kind named `name`, or null.
const FaithfulKind *faithful_kind_named(std::string_view name);

// "<kind>.bin" for a model-wide tensor (layer < 0), "L<layer, 4 digits>.<kind>.bin" otherwise.
std::string faithful_file_name(const FaithfulKind &k, int32_t layer);
// The inverse: kind and layer (kNoLayer for a model-wide one) of an array file name; false for a
// name that is not a weight array of the profile (rope_inv_freq.bin, *.scale.bin, the tokenizer's).
bool parse_faithful_file_name(std::string_view file, const FaithfulKind **kind, int32_t *layer);

}  // namespace stk

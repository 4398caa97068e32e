// The table of families: one line per src/ingest/families/<family>.cc.  Entry 0 is "custom".
#include "ingest/family.h"

namespace stk {

extern const FamilyDef kCustomFamilyDef, kGpt2Family, kLlamaFamily, kMistralFamily, kMixtralFamily, kQwen2Family, kQwen2MoeFamily,
    kGptNeoxFamily, kBloomFamily, kFalconFamily, kGemma3Family, kQwen3Family, kQwen3MoeFamily, kGemmaFamily, kGemma2Family,
    kPhi3Family, kPhiFamily, kOlmo2Family, kOlmoeFamily, kStablelmFamily, kStarcoder2Family, kGptBigcodeFamily, kGptjFamily,
    kOptFamily, kCohereFamily, kGraniteFamily, kMptFamily, kArceeFamily, kDeepseekV2Family, kDeepseekV3Family, kPhimoeFamily,
    kGranitemoeFamily, kGptOssFamily, kInternlm2Family;

const FamilyDef *const kFamilyDefs[] = {
    &kCustomFamilyDef, &kGpt2Family,       &kLlamaFamily,      &kMistralFamily,    &kMixtralFamily,    &kQwen2Family,
    &kQwen2MoeFamily,  &kGptNeoxFamily,    &kBloomFamily,      &kFalconFamily,     &kGemma3Family,     &kQwen3Family,
    &kQwen3MoeFamily,  &kGemmaFamily,      &kGemma2Family,     &kPhi3Family,       &kPhiFamily,        &kOlmo2Family,
    &kOlmoeFamily,     &kStablelmFamily,   &kStarcoder2Family, &kGptBigcodeFamily, &kGptjFamily,       &kOptFamily,
    &kCohereFamily,    &kGraniteFamily,    &kMptFamily,        &kArceeFamily,      &kDeepseekV2Family, &kDeepseekV3Family,
    &kPhimoeFamily,    &kGranitemoeFamily, &kGptOssFamily,     &kInternlm2Family,
};
const uint32_t kFamilyCount = uint32_t(sizeof kFamilyDefs / sizeof kFamilyDefs[0]);

}  // namespace stk

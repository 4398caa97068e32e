#include "core/error.h"
#include "stages/stages.h"

namespace stk {
void tokenizer_stage_size(const stk_job_params &, ArenaSizer &) {}
void tokenizer_stage_run(Job &) { throw_error(STK_E_NOT_IMPLEMENTED, "stage tokenizer_build_or_wrap is not implemented yet"); }
}  // namespace stk

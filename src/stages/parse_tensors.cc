#include "core/error.h"
#include "stages/stages.h"

namespace stk {
void parse_tensors_size(const stk_job_params &, ArenaSizer &) {}
void parse_tensors_run(Job &) { throw_error(STK_E_NOT_IMPLEMENTED, "stage parse_tensors is not implemented yet"); }
}  // namespace stk

#include "core/error.h"
#include "stages/stages.h"

namespace stk {
void check_stage_run(Job &) { throw_error(STK_E_NOT_IMPLEMENTED, "stage check is not implemented yet"); }
}  // namespace stk

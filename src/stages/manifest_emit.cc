#include "core/error.h"
#include "stages/stages.h"

namespace stk {
void manifest_emit_run(Job &) { throw_error(STK_E_NOT_IMPLEMENTED, "stage manifest_emit is not implemented yet"); }
}  // namespace stk

// (in progress)
#include "ops/backend.h"
namespace ocrt {
void register_cpu_linalg(Backend&) {}
}  // namespace ocrt

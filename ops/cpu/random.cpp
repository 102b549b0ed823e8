// (in progress)
#include "ops/backend.h"
namespace ocrt {
void register_cpu_random(Backend&) {}
}  // namespace ocrt

// How a loss over many elements (or samples) is reduced to what it returns.
#pragma once

namespace ocrt {

enum class Reduction { none, sum, mean };

}  // namespace ocrt

#pragma once
#include "config/config.hpp"

namespace mt {
// Rules between fields (divisibility, top_k <= experts, ...). Throws UserError that names the
// key's origin, both values and what would be valid.
void validate_config(const Config& cfg);
// training.cuda_graph against the device and the layout (validate_graph.cpp).
void validate_cuda_graph(const Config& cfg);
}  // namespace mt

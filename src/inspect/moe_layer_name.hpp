#pragma once
// The name a user sees for the i-th MoE layer of a log (its rows in moe/expert_load): the block index,
// as parameter names and model.n_dense_layers count, so inspect and plot name each layer alike.
#include <cstddef>
#include <string>

#include "inspect/flat_config.hpp"

namespace mt {

// "block 3" (blocks counted from 0, the dense ones first), then "MTP module 1" for the MTP modules;
// "MoE layer i" when the config does not say.
std::string moe_layer_name(const FlatConfig& config, size_t i);

}  // namespace mt

#include "inspect/moe_layer_name.hpp"

namespace mt {

std::string moe_layer_name(const FlatConfig& config, size_t i) {
  // The log's MoE layers: the main blocks after the dense ones, then the MTP modules.
  if (!config.count("model.n_layers")) return "MoE layer " + std::to_string(i);  // a log without its config
  const long long dense = config_int(config, "model.n_dense_layers", 0);
  const long long main_moe = config_int(config, "model.n_layers", 0) - dense;
  if ((long long)i < main_moe) return "block " + std::to_string(dense + (long long)i);
  return "MTP module " + std::to_string((long long)i - main_moe + 1);
}

}  // namespace mt

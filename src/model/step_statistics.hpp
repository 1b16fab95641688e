#pragma once
// The MoE layers' statistics of one optimizer step (tokens per expert; for a global-batch balance
// loss the routing-probability sums and the loss they fix), kept by each layer's router. The
// trainer sums them over the ranks that share them and reads them here, as values.
#include <vector>

namespace mt {

class Comm;
class Model;

// One MoE layer of this rank after the step's update.
struct LayerStatistics {
  int layer = 0;             // its number among the model's MoE layers
  std::vector<double> load;  // [experts] tokens routed to each in the step
  std::vector<float> bias;   // [experts] the balancing bias
};

// Zeroes every layer's statistics before a step's first forward.
void reset_step_statistics(Model& model);
// Under tensor parallelism each rank routes its share of the tokens: the loads add up over `tp`
// (first, before any other sum).
void sum_token_shares(Model& model, Comm& tp);
// Sums the loads over `group`, and for a global-batch balance loss the probability sums.
void sum_step_statistics(Model& model, Comm& group);
// A global-batch balance loss, once the statistics of the step's `tokens` tokens are in: fixes
// every layer's f and returns the loss.
double finish_global_balance(Model& model, long tokens);
// The auxiliary-loss-free bias update of every layer from the step's load.
void update_biases(Model& model);
// Every MoE layer this rank holds, in order.
std::vector<LayerStatistics> step_statistics(Model& model);

}  // namespace mt

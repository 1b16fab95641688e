#pragma once
// The MoE layers' statistics of one optimizer step (tokens per expert; for a global-batch balance
// loss the routing-probability sums and the loss they fix), kept by each layer's router in device
// memory. The trainer sums them over the ranks that share them on the device; StepScalars brings
// them to the host with the step's other scalars.

namespace mt {

class DeviceComm;
class Model;

// Zeroes every layer's statistics before a step's first forward.
void reset_step_statistics(Model& model);
// Under tensor parallelism each rank routes its share of the tokens: the loads add up over `tp`
// (first, before any other sum). Queued after every chunk's work so far; the chunks' later work
// waits for the sums.
void sum_token_shares(Model& model, DeviceComm& tp);
// Sums the loads over `group`, and for a global-batch balance loss the probability sums, ordered
// as sum_token_shares.
void sum_step_statistics(Model& model, DeviceComm& group);
// A global-batch balance loss, once the statistics of the step's `tokens` tokens are in: fixes
// every layer's f and adds the loss to *sum (device memory).
void finish_global_balance(Model& model, long tokens, double* sum);
// The auxiliary-loss-free bias update of every layer from the step's load, unless the step's
// `guard` (device memory, BiasUpdateArgs; written on the model's first stream) fails.
void update_biases(Model& model, const double* guard);

}  // namespace mt

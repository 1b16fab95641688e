#pragma once
// All trainable parameters of a rank in one flat fp32 buffer, with gradients and AdamW moments
// in parallel buffers of the same layout. Flat storage makes the optimizer, gradient clipping,
// gradient reduction and checkpoints one loop each. Non-trainable state that is part of the
// model (the router biases of auxiliary-loss-free balancing) lives in `buffers`.
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

struct ParamInfo {
  std::string name;           // e.g. "blocks.3.moe.experts.w_up"
  std::vector<int64_t> shape;
  size_t offset = 0, numel = 0;
  bool decay = true;          // weight decay applies (matrices), not to norms and biases
};

class ParamStore {
 public:
  enum class Init { normal, ones, zeros };
  // Declares a parameter; returns its index. Call before finalize().
  int add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay);
  int add_buffer(const std::string& name, size_t numel);
  // Allocates the buffers and initialises every parameter from (seed, name, element index).
  void finalize(uint64_t seed, double init_std);

  float* value(int id) { return values.data() + infos[id].offset; }
  float* grad(int id) { return grads.data() + infos[id].offset; }
  const ParamInfo& info(int id) const { return infos[id]; }
  float* buffer(int id) { return buffers[id].data(); }

  size_t total() const { return total_; }

  std::vector<ParamInfo> infos;
  std::vector<float> values, grads, adam_m, adam_v;
  std::vector<std::string> buffer_names;
  std::vector<std::vector<float>> buffers;

 private:
  std::vector<Init> inits_;
  size_t total_ = 0;
};

}  // namespace mt

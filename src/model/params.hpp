#pragma once
// All trainable parameters of a rank in one flat fp32 buffer, with gradients in a parallel
// buffer of the same layout. Flat storage makes the optimizer, gradient clipping, gradient
// reduction and checkpoints one loop each. Non-trainable state that is part of the model (the
// router biases of auxiliary-loss-free balancing) lives in `buffers`.
// A rank may hold a slice of a parameter along one dimension (tensor or expert parallelism):
// `shape` is the slice, `global_shape` the whole, and initialisation draws the numbers of the
// whole parameter's elements, so every layout starts from the same model.
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

// How a parameter lies over the ranks of a pipeline stage; it decides whose gradients sum.
enum class Spread {
  replicated,      // whole on every rank; each computes its full gradient
  tensor_split,    // sliced over the tensor-parallel group
  tensor_partial,  // whole on every rank, but each tensor-parallel rank computes part of its
                   // gradient (the latent projections of MLA, fed by one rank's heads)
  expert_split,    // routed experts sliced over the expert-parallel group
};

// A slice along `dim` of `parts` equal pieces; this rank holds piece `index`.
struct Split {
  int dim = -1;
  int parts = 1, index = 0;
};

struct ParamInfo {
  std::string name;           // e.g. "blocks.3.moe.experts.w_up"
  std::vector<int64_t> shape;         // what this rank holds
  std::vector<int64_t> global_shape;  // the whole parameter
  int split_dim = -1;                 // shape differs from global_shape only along this dimension,
  int64_t split_start = 0;            // where the slice begins
  Spread spread = Spread::replicated;
  size_t offset = 0, numel = 0;
  bool decay = true;          // weight decay applies (matrices), not to norms and biases
  // A second copy of a parameter whose first copy lives on another pipeline rank (the
  // embedding that multi-token prediction needs on the last stage); their gradients sum.
  bool pipeline_copy = false;
  // Flat index in the whole parameter of element i of this rank's slice.
  size_t global_index(size_t i) const;
};

class ParamStore {
 public:
  enum class Init { normal, ones, zeros };
  // Declares a parameter of the whole shape `shape`, of which this rank holds `split`; returns
  // its index. Call before finalize().
  int add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay,
          Spread spread = Spread::replicated, Split split = {});
  int add_buffer(const std::string& name, size_t numel);
  // Allocates the buffers and initialises every parameter from (seed, name, element index).
  void finalize(uint64_t seed, double init_std);

  float* value(int id) { return values.data() + infos[id].offset; }
  float* grad(int id) { return grads.data() + infos[id].offset; }
  const ParamInfo& info(int id) const { return infos[id]; }
  float* buffer(int id) { return buffers[id].data(); }

  size_t total() const { return total_; }

  std::vector<ParamInfo> infos;
  std::vector<float> values, grads;
  std::vector<std::string> buffer_names;
  std::vector<std::vector<float>> buffers;

 private:
  std::vector<Init> inits_;
  size_t total_ = 0;
};

}  // namespace mt

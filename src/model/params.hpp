#pragma once
// All trainable parameters of a rank in one flat fp32 device buffer, with gradients in a parallel
// buffer of the same layout (less what ZeRO-2/3 releases: those are lent while a pass uses them,
// see release_gradients). Flat storage makes the optimizer, gradient clipping, gradient
// reduction and checkpoints one loop each. Non-trainable state that is part of the model (the
// router biases of auxiliary-loss-free balancing) lives in `buffers`.
// A rank may hold a slice of a parameter along one dimension (tensor or expert parallelism):
// `shape` is the slice, `global_shape` the whole, and initialisation draws the numbers of the
// whole parameter's elements, so every layout starts from the same model.
#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "model/prepared_weights.hpp"
#include "tensor/buffer.hpp"
#include "util/error.hpp"

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
  // Where its gradient and its value lie in their buffers (offset, unless ZeRO released some);
  // released: no storage of its own (ParamStore::release_gradients, release_values).
  size_t grad_offset = 0, value_offset = 0;
  bool grad_released = false, value_released = false;
  bool decay = true;          // weight decay applies (matrices), not to norms and biases
  // A second copy of a parameter whose first copy lives on another pipeline rank (the
  // embedding that multi-token prediction needs on the last stage); their gradients sum.
  bool pipeline_copy = false;
  // Flat index in the whole parameter of element i of this rank's slice.
  size_t global_index(size_t i) const;
  // The slice's elements in runs of this length have consecutive global indices (all of them
  // when the parameter is whole).
  size_t contiguous_run() const;
};

class ParamStore {
 public:
  enum class Init { normal, ones, zeros };
  // Declares a parameter of the whole shape `shape`, of which this rank holds `split`; returns
  // its index. Call before finalize().
  int add(const std::string& name, std::vector<int64_t> shape, Init init, bool decay,
          Spread spread = Spread::replicated, Split split = {});
  int add_buffer(const std::string& name, size_t numel);
  // Allocates the buffers on `backend` and initialises every parameter from (seed, name, element
  // index) on `threads` threads (the numbers do not depend on how many); buffers start at zero.
  void finalize(const Backend& backend, uint64_t seed, double init_std,
                int threads = int(std::thread::hardware_concurrency()));

  // Device pointers (for ops and Comm); the host reads and writes them through the host_/set_ calls.
  float* value(int id) const {
    return infos[id].value_released ? lent_values_[id] : values_.f32() + infos[id].value_offset;
  }
  float* grad(int id) const { return infos[id].grad_released ? lent_[id] : grads_.f32() + infos[id].grad_offset; }
  float* buffer(int id) const { return buffers_[id].f32(); }
  float* values_data() const { return values_.f32(); }
  float* grads_data() const { return grads_.f32(); }
  const ParamInfo& info(int id) const { return infos[id]; }
  size_t buffer_size(int id) const { return buffer_sizes_[id]; }
  size_t buffers_total() const {
    size_t n = 0;
    for (size_t s : buffer_sizes_) n += s;
    return n;
  }
  size_t total() const { return total_; }
  const Backend& backend() const { return values_.backend(); }

  std::vector<float> host_values() const {
    MT_CHECK(values_.count() == total_);  // no value released
    return values_.to_host_f32();
  }
  std::vector<float> host_grads() const { return grads_.to_host_f32(); }
  std::vector<float> host_buffer(int id) const { return buffers_[id].to_host_f32(); }
  void set_values(const std::vector<float>& v) const {
    MT_CHECK(values_.count() == total_);
    values_.from_host(v);
    values_updated();
  }
  void set_buffer(int id, const std::vector<float>& v) const { buffers_[id].from_host(v); }
  void zero_grads() const { grads_.zero(); }
  // The gradients' own storage: every parameter's, less the released ones (grad_offset's layout).
  size_t grads_total() const { return grads_.count(); }

  // ZeRO-2: the listed parameters' gradients lose their storage here. Whoever accumulates them
  // lends memory while a backward pass writes them (lend_gradient) and takes it back after.
  void release_gradients(const std::vector<int>& ids);
  void lend_gradient(int id, float* at) { lent_[size_t(id)] = at; }
  // ZeRO-3: the same for values (the rest keep theirs); host_values and set_values then refuse.
  void release_values(const std::vector<int>& ids);
  void lend_value(int id, float* at) { lent_values_[size_t(id)] = at; }
  size_t values_total() const { return values_.count(); }
  std::vector<float> host_stored_values() const { return values_.to_host_f32(); }  // value_offset's layout

  // Parameter ids and buffer ids by name, for code that addresses a model by names (a decoder,
  // another library's checkpoint).
  std::unordered_map<std::string, int> ids_by_name() const;
  std::unordered_map<std::string, int> buffer_ids_by_name() const;

  // The weights in the forms GEMMs read them (model/prepared_weights.hpp), for parameters with
  // values of their own (not ZeRO-3's released ones); none yet: the GEMM converts the fp32 values.
  const Bf16* prepared_bf16(int id) const { return infos[id].value_released ? nullptr : prepared_.bf16(id); }
  Fp8Codes prepared_fp8(int id, bool dgrad, const Fp8Recipe& r) const {
    return infos[id].value_released ? Fp8Codes{} : prepared_.fp8(id, dgrad, r);
  }
  // Whatever changes the values calls this, which remakes the prepared forms: set_values, finalize
  // and the optimizer after its step.
  void values_updated() const { prepared_.refresh(*this); }
  size_t prepared_bytes() const { return prepared_.bytes(); }

  std::vector<ParamInfo> infos;
  std::vector<std::string> buffer_names;

 private:
  std::vector<Init> inits_;
  std::vector<size_t> buffer_sizes_;
  size_t total_ = 0;
  Buffer values_, grads_;
  std::vector<float*> lent_, lent_values_;  // per parameter: the lent memory of a released gradient, value
  std::vector<Buffer> buffers_;
  mutable PreparedWeights prepared_;  // derived from values_: remade by values_updated()
};

}  // namespace mt

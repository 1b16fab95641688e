// The CPU op table. Host memory is the device memory, so the memory entries are plain copies.
#include <cstdlib>
#include <cstring>

#include "ops/cpu/cpu_ops.hpp"

namespace mt {

namespace {
void* host_alloc(DeviceState*, size_t bytes) { return std::malloc(bytes ? bytes : 1); }
void host_release(DeviceState*, void* p) { std::free(p); }
void host_copy(DeviceState*, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void host_sync(DeviceState*) {}
}  // namespace

const OpTable& cpu_ops() {
  static const OpTable table{
      .name = "cpu",
      .alloc = host_alloc,
      .release = host_release,
      .upload = host_copy,
      .download = host_copy,
      .synchronize = host_sync,
      .gemm = cpu::gemm,
      .rmsnorm_forward = cpu::rmsnorm_forward,
      .rmsnorm_backward_input = cpu::rmsnorm_backward_input,
      .rmsnorm_backward_weight = cpu::rmsnorm_backward_weight,
      .rope = cpu::rope,
      .attention_forward = cpu::attention_forward,
      .attention_backward = cpu::attention_backward,
      .swiglu_forward = cpu::swiglu_forward,
      .swiglu_backward = cpu::swiglu_backward,
      .cross_entropy = cpu::cross_entropy,
      .embedding_forward = cpu::embedding_forward,
      .embedding_backward = cpu::embedding_backward,
      .add = cpu::add,
      .copy_columns = cpu::copy_columns,
  };
  return table;
}

Backend cpu_backend() { return Backend{&cpu_ops(), nullptr}; }

std::vector<std::string> missing_ops(const OpTable& t) {
  std::vector<std::string> out;
  auto need = [&](const void* fn, const char* name) { if (!fn) out.push_back(name); };
  need((const void*)t.gemm, "gemm");
  need((const void*)t.rmsnorm_forward, "rmsnorm_forward");
  need((const void*)t.rmsnorm_backward_input, "rmsnorm_backward_input");
  need((const void*)t.rmsnorm_backward_weight, "rmsnorm_backward_weight");
  need((const void*)t.rope, "rope");
  need((const void*)t.attention_forward, "attention_forward");
  need((const void*)t.attention_backward, "attention_backward");
  need((const void*)t.swiglu_forward, "swiglu_forward");
  need((const void*)t.swiglu_backward, "swiglu_backward");
  need((const void*)t.cross_entropy, "cross_entropy");
  need((const void*)t.embedding_forward, "embedding_forward");
  need((const void*)t.embedding_backward, "embedding_backward");
  need((const void*)t.add, "add");
  need((const void*)t.copy_columns, "copy_columns");
  return out;
}

}  // namespace mt

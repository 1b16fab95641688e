// cuDNN's fused attention graphs (see cudnn_sdpa.cuh). cudnn-frontend is built with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: it calls cuDNN through the handle cudnn_loader.cpp opened,
// so libcudnn is never linked and its absence only means the own kernels.
#if MT_CUDNN
#include <cudnn_frontend.h>

// cudnn-frontend's one global, which it declares and leaves to its user to define: the library
// handle it looks every cuDNN function up in. Set once, before any cuDNN call (cudnn_attention_missing).
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}
#endif

#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ops/attention/cudnn_loader.hpp"
#include "ops/attention/cudnn_sdpa.cuh"
#include "ops/backend/cuda_check.cuh"
#include "util/error.hpp"

namespace mt::cuda {

#if MT_CUDNN

namespace fe = cudnn_frontend;

namespace {

// The graphs' tensors, named by uid so that a call binds its pointers without the tensor objects.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv };

struct SdpaGraph {
  fe::graph::Graph graph;
  int64_t workspace = 0;
};

// The operand [batch*seq, heads, dim] packed, as cuDNN's [batch, heads, seq, dim] view.
std::shared_ptr<fe::graph::Tensor_attributes> head_tensor(fe::graph::Graph& g, const SdpaKey& k, const char* name,
                                                          int64_t uid, int64_t heads, int64_t dim) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({k.batch, heads, k.seq, dim})
                      .set_stride({k.seq * heads * dim, dim, heads * dim, 1}));
}
void as_head_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, const SdpaKey& k, int64_t uid,
                    int64_t heads, int64_t dim) {
  t->set_output(true).set_uid(uid).set_dim({k.batch, heads, k.seq, dim}).set_stride({k.seq * heads * dim, dim,
                                                                                      heads * dim, 1});
}
// lse: [batch, heads, seq, 1] fp32, the layout the own backward reads.
std::vector<int64_t> stats_dim(const SdpaKey& k) { return {k.batch, k.heads, k.seq, 1}; }
std::vector<int64_t> stats_stride(const SdpaKey& k) { return {int64_t(k.heads) * k.seq, k.seq, 1, 1}; }

void describe(fe::graph::Graph& g, const SdpaKey& k) {
  g.set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto q = head_tensor(g, k, "q", kQ, k.heads, k.qk_dim), kt = head_tensor(g, k, "k", kK, k.kv_heads, k.qk_dim);
  auto v = head_tensor(g, k, "v", kV, k.kv_heads, k.v_dim);
  if (!k.backward) {
    auto [o, stats] = g.sdpa(q, kt, v, fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true)
                                           .set_causal_mask(true).set_attn_scale(k.scale));
    as_head_output(o, k, kO, k.heads, k.v_dim);
    stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim(k))
        .set_stride(stats_stride(k));
    return;
  }
  auto o = head_tensor(g, k, "o", kO, k.heads, k.v_dim), dout = head_tensor(g, k, "dout", kDout, k.heads, k.v_dim);
  auto stats = g.tensor(fe::graph::Tensor_attributes().set_name("stats").set_uid(kStats)
                            .set_data_type(fe::DataType_t::FLOAT).set_dim(stats_dim(k)).set_stride(stats_stride(k)));
  auto [dq, dk, dv] = g.sdpa_backward(q, kt, v, o, dout, stats, fe::graph::SDPA_backward_attributes()
                                          .set_name("sdpa_backward").set_causal_mask(true).set_attn_scale(k.scale));
  as_head_output(dq, k, kDq, k.heads, k.qk_dim);
  as_head_output(dk, k, kDk, k.kv_heads, k.qk_dim);
  as_head_output(dv, k, kDv, k.kv_heads, k.v_dim);
}

}  // namespace

// The backend's cuDNN handle and its graphs per shape.
struct SdpaPlans {
  cudnnHandle_t handle = nullptr;
  int sm = 0;
  size_t version = 0;
  std::string broken;  // why no handle could be made: every shape then runs on the own kernels
  SdpaCache<SdpaGraph> graphs;
  ~SdpaPlans() {
    if (handle) fe::detail::destroy_handle(handle);
  }
};

namespace {

SdpaPlans& plans_of(DeviceState* st) {
  if (!st->sdpa_plans) {
    auto p = std::make_shared<SdpaPlans>();
    int major = 0, minor = 0;
    MT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, st->device));
    MT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, st->device));
    p->sm = major * 10 + minor;
    p->version = fe::detail::get_backend_version();
    const cudnnStatus_t created = fe::detail::create_handle(&p->handle);
    if (created != CUDNN_STATUS_SUCCESS) {
      p->handle = nullptr;
      p->broken = std::string("cudnnCreate failed: ") + fe::detail::get_error_string(created);
    }
    st->sdpa_plans = std::move(p);
  }
  return *st->sdpa_plans;
}

std::unique_ptr<SdpaGraph> build(SdpaPlans& p, const SdpaKey& k, std::string* why) {
  const std::string limit = p.broken.empty() ? sdpa_unsupported(k, p.sm, int(p.version)) : p.broken;
  if (!limit.empty()) {
    *why = limit;
    return nullptr;
  }
  auto g = std::make_unique<SdpaGraph>();
  try {
    describe(g->graph, k);
    fe::error_t built = g->graph.build(p.handle, {fe::HeurMode_t::A});
    fe::error_t sized = built.is_good() ? g->graph.get_workspace_size(g->workspace) : built;
    if (sized.is_good()) return g;
    *why = "cuDNN refused the graph: " + sized.get_message();
  } catch (const std::exception& ex) {
    *why = std::string("cuDNN failed building the graph: ") + ex.what();
  }
  return nullptr;
}

}  // namespace

std::string cudnn_attention_missing() {
  static const std::string missing = [] {
    std::string why;
    const CudnnLibrary* lib = cudnn_library(&why);
    if (!lib) return why;
    fe::cudnn_dlhandle = lib->handle;
    // cudnn-frontend opens the CUDA runtime itself and, finding both libcudart.so.12 and .13, would take the
    // first: name the one moetrain is built with, unless the user named one.
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", ("libcudart.so." + std::to_string(CUDART_VERSION / 1000)).c_str(), 0);
    return why;
  }();
  return missing;
}

std::string cudnn_attention_library() {
  const CudnnLibrary* lib = cudnn_library(nullptr);
  return lib ? "cuDNN " + cudnn_version_text(lib->version) + " (" + lib->name + ")" : "";
}

long long sdpa_prepare(DeviceState* st, const SdpaKey& key, std::string* why) {
  SdpaPlans& p = plans_of(st);
  const SdpaGraph* g = p.graphs.get(key, [&](const SdpaKey& k, std::string* w) { return build(p, k, w); }, why);
  return g ? g->workspace : -1;
}

void sdpa_run(DeviceState* st, const SdpaKey& key, const SdpaOperands& x, void* workspace) {
  SdpaPlans& p = plans_of(st);
  std::string why;
  SdpaGraph* g = p.graphs.get(key, [](const SdpaKey&, std::string*) { return nullptr; }, &why);
  MT_CHECK(g != nullptr);  // sdpa_prepare built it
  if (fe::detail::set_stream(p.handle, st->stream) != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error("cudnnSetStream failed");
  std::unordered_map<int64_t, void*> pack{{kQ, const_cast<void*>(x.q)}, {kK, const_cast<void*>(x.k)},
                                          {kV, const_cast<void*>(x.v)}, {kO, x.o}, {kStats, x.lse}};
  if (key.backward) {
    pack[kDout] = const_cast<void*>(x.dout);
    pack[kDq] = x.dq, pack[kDk] = x.dk, pack[kDv] = x.dv;
  }
  fe::error_t e = g->graph.execute(p.handle, pack, workspace);
  if (!e.is_good()) throw std::runtime_error("cuDNN attention (" + sdpa_key_text(key) + "): " + e.get_message());
}

std::string sdpa_shapes(const DeviceState* st) {
  if (!st->sdpa_plans) return "";
  std::string out;
  st->sdpa_plans->graphs.each([&](const SdpaKey& k, bool ready, const std::string& why) {
    out += sdpa_key_text(k) + ": " + (ready ? "cudnn" : "own kernels (" + why + ")") + "\n";
  });
  return out;
}

#else  // built without cudnn-frontend's headers

std::string cudnn_attention_missing() {
  return "moetrain was built without cudnn-frontend's headers (scripts/deps.sh installs them with nvcc present)";
}
std::string cudnn_attention_library() { return ""; }
long long sdpa_prepare(DeviceState*, const SdpaKey&, std::string* why) {
  *why = cudnn_attention_missing();
  return -1;
}
void sdpa_run(DeviceState*, const SdpaKey&, const SdpaOperands&, void*) { MT_CHECK(false); }
std::string sdpa_shapes(const DeviceState*) { return ""; }

#endif

}  // namespace mt::cuda

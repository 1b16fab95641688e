// The CUDA backend: device selection, per-device state, memory entries and the op table (every
// op of ops/op_list.hpp has its kernels in its family's cuda.cu, declared in cuda_ops.hpp).
#include <string>

#include "ops/backend/cuda_backend.hpp"
#include "ops/backend/cuda_check.cuh"
#include "ops/backend/cuda_ops.hpp"
#include "ops/backend/cuda_state.cuh"
#include "util/error.hpp"

namespace mt {

namespace {

// cuBLASLt's heuristics prefer large workspaces for split-K; 32 MiB is what NVIDIA's samples use.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
// Kernels are compiled for sm_90 (SASS) plus compute_90 PTX, so older GPUs cannot run them.
constexpr int kMinComputeMajor = 9;

std::string describe(cudaError_t e) {
  return std::to_string(int(e)) + " (" + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
}

// Why device `d` is unusable, or "" when it is fine.
std::string device_problem(int d) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, d);
  if (e != cudaSuccess) return "cudaGetDeviceProperties(" + std::to_string(d) + ") returned " + describe(e);
  if (p.major < kMinComputeMajor)
    return "CUDA device " + std::to_string(d) + " (" + p.name + ") has compute capability " + std::to_string(p.major) +
           "." + std::to_string(p.minor) + ", but moetrain's kernels need 9.0 (Hopper) or newer";
  return "";
}

// Device memory (cudaMalloc) or pinned host memory (cudaMallocHost: a copy from it is truly asynchronous, and a
// captured one reads it at each launch), on this backend's device; a zero-byte request gets an address of its own.
template <cudaError_t (*Malloc)(void**, size_t)>
void* allocate(DeviceState* s, size_t bytes) {
  activate(s);
  void* p = nullptr;
  MT_CUDA_CHECK(Malloc(&p, bytes ? bytes : 1));
  return p;
}

void device_release(DeviceState* s, void* p) {
  activate(s);
  // Wait for queued ops of this backend explicitly rather than rely on cudaFree's implicit sync.
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  MT_CUDA_CHECK(cudaFree(p));
}

// Upload and download wait for the copy: callers may free or read the host buffer right after,
// exactly as with the CPU backend's memcpy. cudaMemcpyDefault also accepts device sources.
void device_copy(DeviceState* s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate(s);
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->stream));
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

// Device to device: stream-ordered like an op, so it needs no wait.
void device_copy_on_stream(DeviceState* s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate(s);
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s->stream));
}

void device_zero(DeviceState* s, void* dst, size_t bytes) {
  if (bytes == 0) return;
  activate(s);
  MT_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, s->stream));
}

void device_sync(DeviceState* s) {
  activate(s);
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
}

void* device_mark_create(DeviceState* s) {
  activate(s);
  cudaEvent_t e = nullptr;
  MT_CUDA_CHECK(cudaEventCreate(&e));
  return e;
}

void device_mark_destroy(DeviceState* s, void* mark) {
  activate(s);
  MT_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(mark)));
}

void device_mark_record(DeviceState* s, void* mark) {
  activate(s);
  MT_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(mark), s->stream));
}

void device_mark_wait(DeviceState* s, void* mark) {
  activate(s);
  MT_CUDA_CHECK(cudaStreamWaitEvent(s->stream, static_cast<cudaEvent_t>(mark), 0));
}

double device_mark_seconds(DeviceState* s, void* from, void* to) {
  activate(s);
  MT_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(to)));
  float ms = 0;
  MT_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
  return ms * 1e-3;
}

const FallbackCounts* device_fallbacks(DeviceState* s) { return &s->fallbacks; }

// Stream capture (ops/backend/graph_capture.hpp). Relaxed: a pass's first capture may still
// allocate pinned staging for its uploads, which the stricter modes refuse while capturing.
// Streams that wait on a mark recorded here join the capture and rejoin it through the pass's
// own marks, as the model's side streams do.
void device_graph_begin(DeviceState* s) {
  activate(s);
  MT_CUDA_CHECK(cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeRelaxed));
}

void* device_graph_end(DeviceState* s) {
  activate(s);
  cudaGraph_t graph = nullptr;
  MT_CUDA_CHECK(cudaStreamEndCapture(s->stream, &graph));
  cudaGraphExec_t exec = nullptr;
  MT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  MT_CUDA_CHECK(cudaGraphDestroy(graph));
  return exec;
}

void device_graph_launch(DeviceState* s, void* exec) {
  activate(s);
  MT_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), s->stream));
}

void device_graph_destroy(DeviceState* s, void* exec) {
  activate(s);
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));  // a launch may still run it
  MT_CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec)));
}

void device_host_release(DeviceState* s, void* p) {
  activate(s);
  MT_CUDA_CHECK(cudaFreeHost(p));
}

void device_upload_async(DeviceState* s, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate(s);
  MT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s->stream));
}

const OpTable& cuda_ops() {
  static const OpTable table = [] {
    OpTable t{};
    t.name = "cuda";
    t.alloc = allocate<cudaMalloc>;
    t.release = device_release;
    t.upload = device_copy;
    t.download = device_copy;
    t.synchronize = device_sync;
    t.copy = device_copy_on_stream;
    t.zero = device_zero;
    t.mark_create = device_mark_create;
    t.mark_destroy = device_mark_destroy;
    t.mark_record = device_mark_record;
    t.mark_seconds = device_mark_seconds;
    t.mark_wait = device_mark_wait;
    t.fallbacks = device_fallbacks;
    t.graph_begin = device_graph_begin;
    t.graph_end = device_graph_end;
    t.graph_launch = device_graph_launch;
    t.graph_destroy = device_graph_destroy;
    t.host_alloc = allocate<cudaMallocHost>;
    t.host_release = device_host_release;
    t.upload_async = device_upload_async;
#define MT_CUDA_ENTRY(op, ...) t.op = cuda::op;
    MT_OPS(MT_CUDA_ENTRY)
#undef MT_CUDA_ENTRY
    return t;
  }();
  return table;
}

}  // namespace

void activate(DeviceState* s) { MT_CUDA_CHECK(cudaSetDevice(s->device)); }

void* scratch(DeviceState* s, ScratchSlot slot, size_t bytes) {
  if (bytes > s->scratch_bytes[slot]) {
    // Round up to 1 MiB so that slowly growing requests do not reallocate every call.
    const size_t grown = (bytes + (size_t(1) << 20) - 1) & ~((size_t(1) << 20) - 1);
    MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));  // queued ops may still read the old buffer
    MT_CUDA_CHECK(cudaFree(s->scratch[slot]));
    s->scratch[slot] = nullptr;
    MT_CUDA_CHECK(cudaMalloc(&s->scratch[slot], grown));
    s->scratch_bytes[slot] = grown;
  }
  return s->scratch[slot];
}

bool cuda_available(std::string* why) {
  std::string reason;
  int count = 0;
  // cudart loads the driver library lazily and reports its absence as an error code here.
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    reason = "no CUDA device: cudaGetDeviceCount returned " + describe(e);
    if (e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary)
      reason += "; the NVIDIA driver (libcuda.so.1) is missing or older than the CUDA runtime";
    cudaGetLastError();  // clear it so later runtime calls do not see a stale error
  } else if (count == 0) {
    reason = "no CUDA device: cudaGetDeviceCount found 0 devices";
  } else {
    for (int d = 0; d < count; ++d) {
      const std::string p = device_problem(d);
      if (p.empty()) return true;
      if (reason.empty()) reason = "no usable CUDA device: " + p;
    }
  }
  if (why) *why = reason;
  return false;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // as in cuda_available: no stale error for later calls
    return 0;
  }
  return count;
}

Backend cuda_backend_create(int device, const CudaBackendOptions& options) {
  std::string why;
  if (!cuda_available(&why)) throw UserError("cannot use a GPU: " + why);
  int count = 0;
  MT_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw UserError("GPU " + std::to_string(device) + " does not exist: this machine has " + std::to_string(count) +
                    " CUDA device(s), numbered 0 to " + std::to_string(count - 1));
  const std::string problem = device_problem(device);
  if (!problem.empty()) throw UserError("cannot use GPU " + std::to_string(device) + ": " + problem);

  auto* s = new DeviceState;
  s->device = device;
  s->force_gemm_fallback = options.force_gemm_fallback;
  s->attention = options.attention;
  activate(s);
  MT_CUDA_CHECK(cudaDeviceGetAttribute(&s->sm_count, cudaDevAttrMultiProcessorCount, device));
  // Non-blocking: the backend's work never serialises against the legacy default stream.
  MT_CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  MT_CUBLAS_CHECK(cublasLtCreate(&s->lt));
  s->workspace_bytes = kWorkspaceBytes;
  MT_CUDA_CHECK(cudaMalloc(&s->workspace, s->workspace_bytes));
  // Both libraries run only on this stream, one call after another, so they can share the workspace.
  MT_CUBLAS_CHECK(cublasCreate(&s->blas));
  MT_CUBLAS_CHECK(cublasSetStream(s->blas, s->stream));
  MT_CUBLAS_CHECK(cublasSetWorkspace(s->blas, s->workspace, s->workspace_bytes));
  return Backend{&cuda_ops(), s};
}

CudaDeviceInfo cuda_device_info(int device) {
  CudaDeviceInfo info;
  cudaDeviceProp p{};
  MT_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  info.name = p.name;
  int current = 0;
  MT_CUDA_CHECK(cudaGetDevice(&current));
  MT_CUDA_CHECK(cudaSetDevice(device));
  MT_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  MT_CUDA_CHECK(cudaSetDevice(current));
  return info;
}

void cuda_backend_destroy(Backend& b) {
  DeviceState* s = b.state;
  b = Backend{};
  if (!s) return;
  activate(s);
  MT_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  for (void* p : s->scratch) MT_CUDA_CHECK(cudaFree(p));
  MT_CUDA_CHECK(cudaFree(s->workspace));
  MT_CUBLAS_CHECK(cublasDestroy(s->blas));
  MT_CUBLAS_CHECK(cublasLtDestroy(s->lt));
  MT_CUDA_CHECK(cudaStreamDestroy(s->stream));
  delete s;
}

}  // namespace mt

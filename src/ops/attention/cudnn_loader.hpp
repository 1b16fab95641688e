#pragma once
// libcudnn, found at run time (dlopen) rather than linked: moetrain starts on machines without it, and
// its absence means the own attention kernels. cudnn-frontend, built with
// NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, finds every cuDNN function through the handle opened here.
#include <cstddef>
#include <optional>
#include <string>

namespace mt {

struct CudnnLibrary {
  void* handle = nullptr;  // dlopen's, never closed
  size_t version = 0;      // cudnnGetVersion: major * 10000 + minor * 100 + patch
  std::string name;        // what was opened: a path or a soname
};

// "9.26.0" for a cudnnGetVersion code.
std::string cudnn_version_text(size_t version);

// `name` opened and checked to be cuDNN 9 or newer, or nullopt with the reason in *why.
std::optional<CudnnLibrary> load_cudnn(const std::string& name, std::string* why);

// The process's cuDNN: the library MOETRAIN_CUDNN_LIBRARY names (a path or a soname), else libcudnn.so.9
// where the loader finds it (LD_LIBRARY_PATH, the system's folders). Loaded by the first call, once for
// all threads. Null when it cannot be loaded, with the reason and the remedy in *why (when non-null).
const CudnnLibrary* cudnn_library(std::string* why);

}  // namespace mt

// Opens libcudnn with dlopen on first use (see cudnn_loader.hpp) and says why when it cannot.
#include "ops/attention/cudnn_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace mt {

namespace {

constexpr size_t kOldestVersion = 90000;  // cuDNN 9: the fused attention's forward and backward graphs

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "no reason given";
}

}  // namespace

std::string cudnn_version_text(size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

std::optional<CudnnLibrary> load_cudnn(const std::string& name, std::string* why) {
  using GetVersion = size_t (*)();
  // RTLD_LOCAL: cuDNN's symbols stay out of the global scope; cudnn-frontend looks them up in this handle.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto get_version = handle ? reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion")) : nullptr;
  const size_t version = get_version ? get_version() : 0;
  std::string reason;
  if (!handle) reason = name + " could not be loaded (" + dl_error() + ")";
  else if (!get_version) reason = name + " is not cuDNN (" + dl_error() + ")";
  else if (version < kOldestVersion)
    reason = name + " is cuDNN " + cudnn_version_text(version) + "; moetrain needs " +
             cudnn_version_text(kOldestVersion) + " or newer";
  if (reason.empty()) return CudnnLibrary{handle, version, name};
  if (handle) dlclose(handle);
  if (why) *why = reason;
  return std::nullopt;
}

namespace {

// The library MOETRAIN_CUDNN_LIBRARY names, else libcudnn.so.9; when neither loads, why and the remedy.
std::optional<CudnnLibrary> open_process_cudnn(std::string* why) {
  const char* chosen = std::getenv("MOETRAIN_CUDNN_LIBRARY");
  const bool by_env = chosen && *chosen;
  std::optional<CudnnLibrary> lib = load_cudnn(by_env ? chosen : "libcudnn.so.9", why);
  if (!lib)
    *why = (by_env ? "MOETRAIN_CUDNN_LIBRARY: " : "") + *why +
           "; for cuDNN's attention install cuDNN 9 (e.g. pip install nvidia-cudnn-cu13) and put the folder of its "
           "libcudnn.so.9 on LD_LIBRARY_PATH, or name that file in MOETRAIN_CUDNN_LIBRARY";
  return lib;
}

}  // namespace

const CudnnLibrary* cudnn_library(std::string* why) {
  // Function-local statics: the first caller opens the library, once, while any other waits.
  static std::string reason;
  static const std::optional<CudnnLibrary> lib = open_process_cudnn(&reason);
  if (!lib && why) *why = reason;
  return lib ? &*lib : nullptr;
}

}  // namespace mt

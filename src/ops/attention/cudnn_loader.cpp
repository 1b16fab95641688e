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
  auto refuse = [&](void* handle, const std::string& reason) -> std::optional<CudnnLibrary> {
    if (handle) dlclose(handle);
    if (why) *why = reason;
    return std::nullopt;
  };
  // RTLD_LOCAL: cuDNN's symbols stay out of the global scope; cudnn-frontend looks them up in this handle.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return refuse(nullptr, name + " could not be loaded (" + dl_error() + ")");
  using GetVersion = size_t (*)();
  auto get_version = reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
  if (!get_version) return refuse(handle, name + " is not cuDNN (" + dl_error() + ")");
  const size_t version = get_version();
  if (version < kOldestVersion)
    return refuse(handle, name + " is cuDNN " + cudnn_version_text(version) + "; moetrain needs " +
                              cudnn_version_text(kOldestVersion) + " or newer");
  return CudnnLibrary{handle, version, name};
}

const CudnnLibrary* cudnn_library(std::string* why) {
  struct Loaded {
    std::optional<CudnnLibrary> lib;
    std::string why;
  };
  // A function-local static: initialised by the first caller, once, while any other waits.
  static const Loaded loaded = [] {
    const char* chosen = std::getenv("MOETRAIN_CUDNN_LIBRARY");
    const bool by_env = chosen && *chosen;
    Loaded l;
    l.lib = load_cudnn(by_env ? chosen : "libcudnn.so.9", &l.why);
    if (!l.lib)
      l.why = (by_env ? "MOETRAIN_CUDNN_LIBRARY: " : "") + l.why +
              "; for cuDNN's attention install cuDNN 9 (e.g. pip install nvidia-cudnn-cu13) and put the folder of "
              "its libcudnn.so.9 on LD_LIBRARY_PATH, or name that file in MOETRAIN_CUDNN_LIBRARY";
    return l;
  }();
  if (!loaded.lib && why) *why = loaded.why;
  return loaded.lib ? &*loaded.lib : nullptr;
}

}  // namespace mt

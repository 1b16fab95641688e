// Loads NCCL with dlopen on first use (see nccl_library.cuh), and says why when it cannot.
#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "comm/nccl_comm.hpp"
#include "comm/nccl_library.cuh"

namespace mt {

namespace {

// The oldest NCCL moetrain calls correctly: 2.18.1 brought ncclCommSplit and NCCL_SPLIT_NOCOLOR.
constexpr int kOldestVersion = NCCL_VERSION(2, 18, 1);

// "2.18.1" for a version code of ncclGetVersion (major * 10000 + minor * 100 + patch since 2.9, major *
// 1000 + minor * 100 + patch before).
std::string version_text(int code) {
  const int major_unit = code >= 10000 ? 10000 : 1000;
  return std::to_string(code / major_unit) + "." + std::to_string(code % major_unit / 100) + "." +
         std::to_string(code % 100);
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "no reason given";
}

// `name` opened and every function found, or nullopt with the reason in *why. A library that is not
// NCCL or too old is closed again; an NCCL is never closed, as a linked library would not be.
std::optional<NcclLibrary> load_nccl(const std::string& name, std::string* why) {
  auto refuse = [&](void* handle, const std::string& reason) -> std::optional<NcclLibrary> {
    if (handle) dlclose(handle);
    if (why) *why = reason;
    return std::nullopt;
  };
  // RTLD_LOCAL: NCCL's symbols stay out of the global scope, where other libraries might bind to them.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return refuse(nullptr, name + " could not be loaded (" + dl_error() + ")");
  // The version first: an older NCCL lacks some functions, and its version says why more clearly.
  auto get_version = reinterpret_cast<decltype(&ncclGetVersion)>(dlsym(handle, "ncclGetVersion"));
  if (!get_version) return refuse(handle, name + " is not NCCL (" + dl_error() + ")");
  int version = 0;
  if (get_version(&version) != ncclSuccess) return refuse(handle, name + ": ncclGetVersion failed");
  if (version < kOldestVersion)
    return refuse(handle, name + " is NCCL " + version_text(version) + "; moetrain needs " +
                              version_text(kOldestVersion) + " or newer");
  NcclLibrary lib;
  const char* missing = nullptr;
#define MT_NCCL_FIND(f) \
  if (!missing && !(lib.f = reinterpret_cast<decltype(lib.f)>(dlsym(handle, "nccl" #f)))) missing = "nccl" #f;
  MT_NCCL_FUNCTIONS(MT_NCCL_FIND)
#undef MT_NCCL_FIND
  if (missing)
    return refuse(handle, name + " (NCCL " + version_text(version) + ") lacks " + missing + " (" + dl_error() + ")");
  return lib;
}

}  // namespace

const NcclLibrary* nccl_library(std::string* why) {
  struct Loaded {
    std::optional<NcclLibrary> lib;
    std::string why;
  };
  // A function-local static: initialised by the first caller, once, while any other waits.
  static const Loaded loaded = [] {
    const char* chosen = std::getenv("MOETRAIN_NCCL_LIBRARY");
    const bool by_env = chosen && *chosen;
    Loaded l;
    l.lib = load_nccl(by_env ? chosen : "libnccl.so.2", &l.why);
    if (!l.lib)
      l.why = (by_env ? "MOETRAIN_NCCL_LIBRARY: " : "") + l.why + "; install NCCL " + version_text(kOldestVersion) +
              " or newer (e.g. pip install nvidia-nccl-cu13) and put the folder of its libnccl.so.2 on " +
              "LD_LIBRARY_PATH, or name that file in MOETRAIN_NCCL_LIBRARY";
    return l;
  }();
  if (!loaded.lib && why) *why = loaded.why;
  return loaded.lib ? &*loaded.lib : nullptr;
}

bool nccl_available(std::string* why) { return nccl_library(why) != nullptr; }

bool nccl_loads(const std::string& library, std::string* why) { return load_nccl(library, why).has_value(); }

}  // namespace mt

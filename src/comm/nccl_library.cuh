#pragma once
// NCCL's functions, found at run time (dlopen) rather than linked: moetrain starts on machines without
// libnccl, and only a run that communicates over NCCL loads it. nccl.h gives the types and constants.
#include <nccl.h>

#include <string>

namespace mt {

// Every NCCL function moetrain calls, without the "nccl" prefix; X(f) for each.
#define MT_NCCL_FUNCTIONS(X)                                                                                      \
  X(GetVersion) X(GetErrorString) X(GetLastError) X(GetUniqueId) X(CommInitRank) X(CommSplit) X(CommDestroy)     \
  X(CommAbort) X(CommGetAsyncError) X(AllReduce) X(ReduceScatter) X(AllGather) X(Send) X(Recv) X(GroupStart)     \
  X(GroupEnd)

// One loaded NCCL: nccl.AllReduce is its ncclAllReduce.
struct NcclLibrary {
#define MT_NCCL_POINTER(f) decltype(&::nccl##f) f = nullptr;
  MT_NCCL_FUNCTIONS(MT_NCCL_POINTER)
#undef MT_NCCL_POINTER
};

// The process's NCCL: the library MOETRAIN_NCCL_LIBRARY names (a path or a soname), else libnccl.so.2
// where the loader finds it (LD_LIBRARY_PATH, the binary's rpath, the system's folders). Loaded by the
// first call, once for all threads, and kept for the process's life. Null when it cannot be loaded or is
// too old, with the reason and the remedy in *why (when non-null).
const NcclLibrary* nccl_library(std::string* why);

}  // namespace mt

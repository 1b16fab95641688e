#include "runtime/gpu_choice.hpp"

#include <cstdlib>
#include <string>

#include "util/error.hpp"

namespace mt {

namespace {

// The integer value of environment variable `name`, or `fallback` when it is not set.
int env_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0)
    throw UserError(std::string("environment variable ") + name + " = \"" + text +
                    "\" is not a non-negative integer (OpenMPI's mpirun sets it; do not set it by hand)");
  return int(v);
}

}  // namespace

NodePlace node_place_from_env() {
  NodePlace p;
  p.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  p.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", p.local_rank + 1);
  return p;
}

int gpu_for_rank(NodePlace place, int visible_gpus, bool share, std::string* why) {
  if (place.local_size <= visible_gpus) return place.local_rank;
  if (share && visible_gpus > 0) return place.local_rank % visible_gpus;
  if (why)
    *why = "this node runs " + std::to_string(place.local_size) + " ranks but has " + std::to_string(visible_gpus) +
           " visible GPU(s), and each rank needs a GPU of its own (chosen by its node-local rank) unless "
           "parallel.share_gpu = true";
  return -1;
}

}  // namespace mt

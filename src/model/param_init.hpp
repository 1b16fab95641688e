#pragma once
// Initial values of a ParamStore's parameters, drawn on several threads. Element i of a normal
// parameter is float(init_std * counter_normal(param_key(seed, name), global_index(i))), a ones
// or zeros parameter holds 1 or 0: the same bits whatever the thread count or the range asked for.
#include <cstdint>
#include <functional>
#include <vector>

#include "model/params.hpp"

namespace mt {

// Writes the flat elements [begin, end) of the parameters `infos` (placed by their offsets, with
// inits[i] the init of infos[i]) to out[0, end - begin), on `threads` threads. `meanwhile` runs
// on the calling thread before it joins them (the previous piece's upload).
void draw_initial_values(const std::vector<ParamInfo>& infos, const std::vector<ParamStore::Init>& inits,
                         uint64_t seed, double init_std, size_t begin, size_t end, float* out, int threads,
                         const std::function<void()>& meanwhile = {});

}  // namespace mt

#include "model/param_init.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>

#include "util/init_rng.hpp"

namespace mt {

namespace {

// Elements [a, b) of parameter p's slice to out. Global indices run on by one within a
// stretch of the slice, so only each stretch's first one is computed in full.
void draw_param(const ParamInfo& p, ParamStore::Init init, uint64_t seed, double init_std, size_t a, size_t b,
                float* out) {
  if (init != ParamStore::Init::normal) {
    std::fill(out, out + (b - a), init == ParamStore::Init::ones ? 1.0f : 0.0f);
    return;
  }
  const uint64_t key = param_key(seed, p.name);
  const size_t stretch = p.contiguous_run();
  for (size_t j = a; j < b;) {
    const size_t n = std::min(b, (j / stretch + 1) * stretch) - j;
    counter_normals(key, p.global_index(j), n, init_std, out + (j - a));
    j += n;
  }
}

}  // namespace

void draw_initial_values(const std::vector<ParamInfo>& infos, const std::vector<ParamStore::Init>& inits,
                         uint64_t seed, double init_std, size_t begin, size_t end, float* out, int threads,
                         const std::function<void()>& meanwhile) {
  // Threads take blocks in turn rather than fixed shares: parameters differ in cost (a normal
  // draw against a fill) and other processes may hold a core.
  constexpr size_t block = size_t(1) << 16;
  std::atomic<size_t> next{begin};
  auto work = [&] {
    for (size_t a; (a = next.fetch_add(block)) < end;) {
      const size_t b = std::min(end, a + block);
      // The parameter holding element a: the last whose offset is not past it.
      size_t i = size_t(std::upper_bound(infos.begin(), infos.end(), a,
                                         [](size_t x, const ParamInfo& q) { return x < q.offset; }) -
                        infos.begin()) - 1;
      for (size_t at = a; at < b; ++i) {
        const size_t stop = std::min(b, infos[i].offset + infos[i].numel);
        draw_param(infos[i], inits[i], seed, init_std, at - infos[i].offset, stop - infos[i].offset,
                   out + (at - begin));
        at = stop;
      }
    }
  };
  std::vector<std::thread> helpers;
  try {
    while (int(helpers.size()) + 1 < threads) helpers.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: those started share the work.
  }
  // The helpers must be joined even when `meanwhile` fails (a device error in an upload).
  std::exception_ptr failed;
  try {
    if (meanwhile) meanwhile();
  } catch (...) {
    failed = std::current_exception();
  }
  work();
  for (std::thread& t : helpers) t.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace mt

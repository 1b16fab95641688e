// What of NCCL and the host-side helpers runs without a GPU: texts over a Comm of one rank, NcclComm
// refusing a backend whose memory is not a GPU's (or saying that the build has no CUDA), and loading NCCL.
#include <doctest/doctest.h>

#include <string>

#include "comm/gather_text.hpp"
#include "comm/nccl_comm.hpp"
#include "util/error.hpp"

TEST_CASE("all_gather_text on one rank gives the rank's bytes back, zero bytes included") {
  std::unique_ptr<mt::Comm> one = mt::make_local_comm();
  const std::string text = std::string("cuda:0 H100") + '\0' + '\xff';
  const std::vector<std::string> all = mt::all_gather_text(*one, text);
  REQUIRE(all.size() == 1);
  CHECK(all[0] == text);
  CHECK(mt::all_gather_text(*one, "")[0].empty());
}

TEST_CASE("NcclComm needs the CUDA backend, and says what to set") {
  std::unique_ptr<mt::Comm> one = mt::make_local_comm();
  CHECK_THROWS_WITH_AS(mt::make_nccl_comm(*one, mt::cpu_backend()), doctest::Contains("NCCL"), mt::UserError);
}

TEST_CASE("nccl_loads: a missing library is refused naming its path; what is not NCCL is refused too") {
  std::string why;
  CHECK_FALSE(mt::nccl_loads("/nonexistent/libnccl.so.2", &why));
  CHECK(why.find("/nonexistent/libnccl.so.2") != std::string::npos);
  // The C library loads, but has no ncclGetVersion.
  why.clear();
  CHECK_FALSE(mt::nccl_loads("libc.so.6", &why));
  CHECK(why.find("libc.so.6") != std::string::npos);
}

TEST_CASE("nccl_loads: the NCCL a CUDA build is made with loads") {
  std::string why;
  const bool loads = mt::nccl_loads("libnccl.so.2", &why);
  if (why.find("built without CUDA") != std::string::npos) return;  // a CPU-only build loads no NCCL
  CHECK_MESSAGE(loads, why);
}

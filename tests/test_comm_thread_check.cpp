// The check that one communicator takes one thread's calls at a time (comm/thread_check.hpp): two
// threads inside it at once fail; during an overlap a second thread fails even when the calls do
// not meet in time; outside an overlap, threads taking turns pass.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "comm/thread_check.hpp"

namespace {

// enter() on a thread of its own, left inside unless `leave`; its message.
std::string enter_on_thread(mt::ThreadCheck& check, const char* call, bool leave) {
  std::string why;
  std::thread t([&] {
    why = check.enter(call);
    if (why.empty() && leave) check.leave();
  });
  t.join();
  return why;
}

}  // namespace

TEST_CASE("thread check: threads taking turns outside an overlap pass") {
  mt::ThreadCheck check("the data-parallel communicator");
  CHECK(enter_on_thread(check, "reduce_scatter_sum", true).empty());
  CHECK(check.enter("all_reduce_sum").empty());
  check.leave();
  CHECK(enter_on_thread(check, "reduce_scatter_sum", true).empty());
}

TEST_CASE("thread check: a call while another thread's is inside fails, naming both") {
  mt::ThreadCheck check("the data-parallel communicator");
  REQUIRE(enter_on_thread(check, "reduce_scatter_sum", false).empty());
  const std::string why = check.enter("all_gather");
  CHECK(why.find("the data-parallel communicator: all_gather") == 0);
  CHECK(why.find("another thread's reduce_scatter_sum was still inside it") != std::string::npos);
}

TEST_CASE("thread check: during an overlap a communicator takes the calls of the first thread only") {
  mt::ThreadCheck dp("the data-parallel communicator"), tp("the tensor-parallel communicator");
  {
    const mt::OverlapScope overlap;
    // This thread owns dp; the other thread owns tp: each may call its own again.
    CHECK(dp.enter("reduce_scatter_sum").empty());
    dp.leave();
    CHECK(enter_on_thread(tp, "all_reduce_sum", true).empty());
    CHECK(dp.enter("reduce_scatter_sum").empty());
    dp.leave();
    // The other thread's call on dp fails though this thread's calls are over.
    const std::string why = enter_on_thread(dp, "all_gather", true);
    CHECK(why.find("the data-parallel communicator: all_gather was called by one thread") == 0);
    CHECK(why.find("(reduce_scatter_sum)") != std::string::npos);
    CHECK(!tp.enter("all_reduce_sum").empty());  // tp belongs to the thread that ended
  }
  // A new overlap (or none) frees them again.
  CHECK(enter_on_thread(dp, "all_gather", true).empty());
  {
    const mt::OverlapScope overlap;
    CHECK(enter_on_thread(dp, "all_gather", true).empty());
    CHECK(tp.enter("all_reduce_sum").empty());
    tp.leave();
  }
}

// The op list (ops/op_list.hpp) drives every table: each op it names is an entry of the CPU, strict
// and profiled tables, the CPU one its reference in mt::cpu, and missing_ops() and the op profile
// name the ops in the list's order.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ops/backend/cpu_ops.hpp"
#include "ops/backend/op_profile.hpp"

namespace {

std::vector<std::string> listed_ops() {
  std::vector<std::string> names;
#define MT_LISTED(name, ...) names.push_back(#name);
  MT_OPS(MT_LISTED)
#undef MT_LISTED
  return names;
}

}  // namespace

TEST_CASE("an empty table misses every op of the list, in the list's order") {
  const mt::OpTable empty{};
  const std::vector<std::string> listed = listed_ops();
  CHECK(listed.size() == 40);
  CHECK(listed.front() == "gemm");
  CHECK(listed.back() == "fp8_quantize_weight");
  CHECK(mt::missing_ops(empty) == listed);
}

TEST_CASE("the CPU table holds each op's reference from its family's cpu.cpp") {
  const mt::OpTable& cpu = mt::cpu_ops();
  CHECK(mt::missing_ops(cpu).empty());
  int same = 0;
#define MT_SAME_ENTRY(name, ...) same += cpu.name == &mt::cpu::name;
  MT_OPS(MT_SAME_ENTRY)
#undef MT_SAME_ENTRY
  CHECK(same == int(listed_ops().size()));
}

TEST_CASE("the strict CPU backend and the op profile fill every entry of the list") {
  mt::Backend strict = mt::cpu_strict_backend_create();
  CHECK(mt::missing_ops(*strict.ops).empty());
  {
    mt::OpProfile profile(strict);
    CHECK(mt::missing_ops(*profile.backend().ops).empty());
    std::vector<std::string> kinds;
    for (const mt::OpKindTime& k : profile.take()) kinds.push_back(k.name);
    std::vector<std::string> expected = listed_ops();
    expected.push_back("copy");
    expected.push_back("zero");
    CHECK(kinds == expected);
  }
  mt::cpu_strict_backend_destroy(strict);
}

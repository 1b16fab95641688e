#pragma once
// The pipeline schedules by name: an experiment's parallel.schedule, plan's layouts and
// `moetrain schedule --kind` all parse into this enum.
#include <array>

#include "util/names.hpp"

namespace mt::pipeline {

enum class Kind { gpipe, one_f_one_b, interleaved, zb_h1, dualpipe, dualpipev };

}  // namespace mt::pipeline

namespace mt {

template <>
struct Names<pipeline::Kind> {
  static constexpr std::array<std::pair<const char*, pipeline::Kind>, 6> list{
      {{"gpipe", pipeline::Kind::gpipe}, {"1f1b", pipeline::Kind::one_f_one_b},
       {"interleaved", pipeline::Kind::interleaved}, {"zb-h1", pipeline::Kind::zb_h1},
       {"dualpipe", pipeline::Kind::dualpipe}, {"dualpipev", pipeline::Kind::dualpipev}}};
};

}  // namespace mt

// The kinds an experiment names (attention, RoPE scaling, learning-rate schedule and its extension) are
// parsed into enums once, at the config border, and written back with the same spelling: stored configs
// keep the strings.
#include <doctest/doctest.h>

#include <string>

#include "config/config.hpp"
#include "test_helpers.hpp"

namespace {

const char* kKinds = R"(
[model]
d_model = 64
n_heads = 4
head_dim = 16
[model.attention]
kind = "mla"
[model.rope_scaling]
kind = "yarn"
factor = 4.0
[lr_schedule]
kind = "constant"
extend = "rewarm"
)";

}  // namespace

TEST_CASE("config kinds: parsed into enums, written back with the file's spelling") {
  const mt::Config c = mt::parse_config(kKinds, "exp.toml", {});
  CHECK(c.model.attention.kind == mt::AttentionKind::mla);
  CHECK(c.model.rope_scaling.kind == mt::RopeScalingKind::yarn);
  CHECK(c.lr_schedule.kind == mt::LrScheduleKind::constant);
  CHECK(c.lr_schedule.extend == mt::LrExtend::rewarm);
  CHECK(testing::contains(c.resolved_toml, "kind = 'mla'"));
  CHECK(testing::contains(c.resolved_toml, "kind = 'yarn'"));
  CHECK(testing::contains(c.resolved_toml, "kind = 'constant'"));
  CHECK(testing::contains(c.resolved_toml, "extend = 'rewarm'"));
  const mt::Config d = mt::parse_config("", "exp.toml", {});
  CHECK(d.model.attention.kind == mt::AttentionKind::mha);
  CHECK(d.model.rope_scaling.kind == mt::RopeScalingKind::none);
  CHECK(d.lr_schedule.kind == mt::LrScheduleKind::cosine);
  CHECK(d.lr_schedule.extend == mt::LrExtend::constant);
}

TEST_CASE("config kinds: a bad one names the file, the key, the value and the valid ones") {
  const std::string e = testing::user_error_of(
      [] { mt::parse_config("[model.rope_scaling]\nkind = \"ntk\"\n", "exp.toml", {}); });
  CHECK(testing::contains(e, "exp.toml"));
  CHECK(testing::contains(e, "model.rope_scaling.kind"));
  CHECK(testing::contains(e, "must be one of \"none\" | \"yarn\", got \"ntk\""));
}

// Comparable runs: the learning-rate cycle a resumed run follows (lr_schedule.extend).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "train/lr_schedule.hpp"
#include "util/error.hpp"

using namespace mt;

namespace {

// A cosine schedule of 10 steps from lr 1 down to 0.1, 2 of warmup.
Config schedule_config(LrExtend extend, long long steps = 10) {
  Config c;
  c.optimizer.lr = 1.0;
  c.lr_schedule = {LrScheduleKind::cosine, 2, 0.1, extend};
  c.training.steps = int(steps);
  return c;
}

std::string refusal(const Config& cfg, LrCycle saved, long long saved_steps, long long step) {
  try {
    resumed_lr_cycle(cfg, saved, saved_steps, step, "ckpt/step_00000010");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the lr of a cycle: warmup, cosine down to the final lr, held after its end") {
  const Config c = schedule_config(LrExtend::constant);
  CHECK(learning_rate(c, {0, 10}, 0) == doctest::Approx(0.5));
  CHECK(learning_rate(c, {0, 10}, 2) == doctest::Approx(1.0));
  CHECK(learning_rate(c, {0, 10}, 9) == doctest::Approx(0.1));
  for (long long s : {10, 11, 500}) CHECK(learning_rate(c, {0, 10}, s) == doctest::Approx(0.1));
  // A second cycle warms up from the final lr, not from zero.
  CHECK(learning_rate(c, {10, 20}, 10) == doctest::Approx(0.55));
  CHECK(learning_rate(c, {10, 20}, 12) == doctest::Approx(1.0));
  CHECK(learning_rate(c, {10, 20}, 19) == doctest::Approx(0.1));
}

TEST_CASE("extending a finished decay: \"refuse\" names the key and both choices") {
  const std::string e = refusal(schedule_config(LrExtend::refuse, 20), {0, 10}, 10, 10);
  CHECK(e.find("ckpt/step_00000010 ends the cosine decay of this run (steps 0 to 10, lr now 1.00e-01)") == 0);
  CHECK(e.find("training.steps = 20") != std::string::npos);
  CHECK(e.find("lr_schedule.extend = \"constant\"") != std::string::npos);
  CHECK(e.find("\"rewarm\"") != std::string::npos);
  // An older checkpoint without a recorded cycle: its config's training.steps is where the decay ended.
  CHECK(refusal(schedule_config(LrExtend::refuse, 20), {0, 0}, 10, 10).find("steps 0 to 10") != std::string::npos);
}

TEST_CASE("extending a finished decay never jumps: held (the default), or a stated second warmup") {
  CHECK(Config().lr_schedule.extend == LrExtend::constant);
  const Config held = schedule_config(LrExtend::constant, 20);
  const LrCycle h = resumed_lr_cycle(held, {0, 10}, 10, 10, "c");
  CHECK(h.start == 0);
  CHECK(h.end == 10);
  for (long long s = 10; s < 20; ++s) CHECK(learning_rate(held, h, s) == doctest::Approx(0.1));
  const Config again = schedule_config(LrExtend::rewarm, 20);
  const LrCycle r = resumed_lr_cycle(again, {0, 10}, 10, 10, "c");
  CHECK(r.start == 10);
  CHECK(r.end == 20);
  // The lr before the resume and the first of the added steps: from the final lr halfway to the peak.
  CHECK(learning_rate(again, r, 10) - learning_rate(again, {0, 10}, 9) == doctest::Approx(0.45));
  CHECK(learning_rate(again, r, 19) == doctest::Approx(0.1));
}

TEST_CASE("a decay under way stretches to the new total; a constant schedule has nothing to keep") {
  const LrCycle under_way = resumed_lr_cycle(schedule_config(LrExtend::refuse, 20), {0, 10}, 10, 6, "c");
  CHECK(under_way.start == 0);
  CHECK(under_way.end == 20);
  Config flat = schedule_config(LrExtend::refuse, 20);
  flat.lr_schedule.kind = LrScheduleKind::constant;
  CHECK(resumed_lr_cycle(flat, {0, 10}, 10, 10, "c").end == 20);
  // Within an extension already made, a later resume keeps its cycle.
  const LrCycle later = resumed_lr_cycle(schedule_config(LrExtend::constant, 30), {0, 10}, 20, 15, "c");
  CHECK(later.end == 10);
}

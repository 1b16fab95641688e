// Weights prepared once per update (model/prepared_weights.hpp): a GEMM reading a weight's
// prepared bfloat16 copy or FP8 codes computes bit for bit what it computes converting the fp32
// weight itself, and after training steps every prepared form matches the current weights.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "config/config.hpp"
#include "io/shards.hpp"
#include "ops/bf16.hpp"
#include "runtime/matmul_setup.hpp"
#include "test_helpers.hpp"
#include "train/trainer.hpp"

using mt::Buffer;
using mt::DType;
using mt::GemmPrecision;

namespace {

// Values whose magnitudes differ from piece to piece, so that every piece gets its own scale.
std::vector<float> spread_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = normal(rng) * std::ldexp(1.0f, int(i % 7) - 3);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `groups` weights [rows, cols] on a device, with their FP8 codes for the forward and for Dgrad
// and their bfloat16 copy, made by the ops the parameter store uses.
struct PreparedWeight {
  int groups, rows, cols;
  Buffer w, bf16, codes[2], scales[2];
  PreparedWeight(const mt::Backend& be, const mt::Fp8Recipe& r, int g, int rows_, int cols_)
      : groups(g), rows(rows_), cols(cols_), w(be, DType::f32, size_t(g) * rows_ * cols_),
        bf16(be, DType::u8, size_t(g) * rows_ * cols_ * sizeof(mt::Bf16)) {
    w.from_host(spread_values(w.count(), 7));
    be.copy_columns({.rows = groups * rows, .cols = cols, .src = w.f32(), .src_stride = cols, .dst_stride = cols,
                     .dst_bf16 = static_cast<mt::Bf16*>(bf16.raw())});
    for (int dgrad = 0; dgrad < 2; ++dgrad) {
      const mt::Fp8WeightLayout l = mt::fp8_weight_layout(r, rows, cols, dgrad);
      codes[dgrad] = Buffer(be, DType::u8, size_t(groups) * l.codes());
      scales[dgrad] = Buffer(be, DType::f32, size_t(groups) * l.pieces());
      be.fp8_quantize_weight({.recipe = &r, .x = w.f32(), .groups = groups, .rows = rows, .cols = cols,
                              .transposed = bool(dgrad), .codes = static_cast<uint8_t*>(codes[dgrad].raw()),
                              .scales = scales[dgrad].f32()});
    }
  }
  mt::Fp8Codes fp8(const mt::Fp8Recipe& r, bool dgrad) const {
    const mt::Fp8WeightLayout l = mt::fp8_weight_layout(r, rows, cols, dgrad);
    return {static_cast<const uint8_t*>(codes[dgrad].raw()), scales[dgrad].f32(), l.k_pad, dgrad, l.codes(),
            l.pieces()};
  }
  const mt::Bf16* bf16_copy() const { return static_cast<const mt::Bf16*>(bf16.raw()); }
};

std::vector<mt::Fp8Recipe> recipes() {
  mt::Fp8Recipe blocks;  // 4 x 4 blocks that cut the 6 x 10 weight unevenly
  blocks.block = 4;
  blocks.tile = 4;
  mt::Fp8Recipe whole;  // DeepSeek-V3's 128: one block covers the weight
  mt::Fp8Recipe tensor;
  tensor.per_tensor = true;
  mt::Fp8Recipe limited = blocks;  // the emulated tensor-core accumulator
  limited.accumulator_bits = 12;
  limited.promote_every = 4;
  limited.gradient = mt::Fp8Format::e5m2;
  return {blocks, whole, tensor, limited};
}

// The FP8 kinds of the forward's operands (x W^T) or Dgrad's (dy W).
mt::Fp8Gemm kinds(const mt::Fp8Recipe& r, bool dgrad) {
  return {&r, dgrad ? mt::Fp8Operand::gradient : mt::Fp8Operand::activation, mt::Fp8Operand::weight};
}

// Runs the GEMM `g` (plain or grouped, through `op`) converting its weight, then reading w's
// prepared form for g's inputs: whether both give the same bits in the `out` values of C.
template <class Args, class Op>
bool prepared_equals_converted(const testing::StrictDevice& dev, Args g, const PreparedWeight& w,
                               const mt::Fp8Recipe& r, bool dgrad, size_t out, Op op) {
  Buffer converted = dev.floats(out), prepared = dev.floats(out);
  g.c = converted.f32();
  op(g);
  g.c = prepared.f32();
  if (g.inputs == GemmPrecision::bf16) g.b_bf16 = w.bf16_copy();
  else g.fp8_b = w.fp8(r, dgrad);
  op(g);
  return same_bits(prepared.to_host_f32(), converted.to_host_f32());
}

}  // namespace

TEST_CASE("a GEMM with the prepared weight equals the GEMM converting it, bit for bit") {
  testing::StrictDevice dev;
  const int m = 5, n = 6, k = 10;  // the weight W is [n, k]
  const Buffer x = dev.upload(spread_values(size_t(m) * k, 1));
  const Buffer dy = dev.upload(spread_values(size_t(m) * n, 2));
  for (const mt::Fp8Recipe& r : recipes()) {
    CAPTURE(r.block);
    CAPTURE(r.per_tensor);
    CAPTURE(r.accumulator_bits);
    const PreparedWeight w(dev.be, r, 1, n, k);
    for (GemmPrecision inputs : {GemmPrecision::bf16, GemmPrecision::fp8})
      for (bool dgrad : {false, true}) {
        CAPTURE(int(inputs));
        CAPTURE(dgrad);
        // Forward: x W^T; Dgrad: dy W.
        const mt::GemmArgs g{.m = m, .n = dgrad ? k : n, .k = dgrad ? n : k, .a = dgrad ? dy.f32() : x.f32(),
                             .b = w.w.f32(), .trans_b = !dgrad, .inputs = inputs, .fp8 = kinds(r, dgrad)};
        CHECK(prepared_equals_converted(dev, g, w, r, dgrad, size_t(g.m) * g.n,
                                        [&](const mt::GemmArgs& a) { dev.be.gemm(a); }));
      }
  }
}

TEST_CASE("a grouped GEMM reads each expert's prepared codes and copy, bit for bit") {
  testing::StrictDevice dev;
  const int groups = 3, rows = 7, n = 6, k = 10;
  const int offsets[] = {0, 2, 2, rows};  // an expert without rows in the middle
  const Buffer x = dev.upload(spread_values(size_t(rows) * k, 3));
  const Buffer dy = dev.upload(spread_values(size_t(rows) * n, 4));
  for (const mt::Fp8Recipe& r : recipes()) {
    CAPTURE(r.block);
    CAPTURE(r.per_tensor);
    const PreparedWeight w(dev.be, r, groups, n, k);
    for (GemmPrecision inputs : {GemmPrecision::bf16, GemmPrecision::fp8})
      for (bool dgrad : {false, true}) {
        CAPTURE(int(inputs));
        CAPTURE(dgrad);
        const mt::GroupedGemmArgs g{.groups = groups, .offsets = offsets, .m = rows, .n = dgrad ? k : n,
                                    .k = dgrad ? n : k, .a = dgrad ? dy.f32() : x.f32(), .b = w.w.f32(),
                                    .trans_b = !dgrad, .inputs = inputs, .fp8 = kinds(r, dgrad)};
        CHECK(prepared_equals_converted(dev, g, w, r, dgrad, size_t(rows) * g.n,
                                        [&](const mt::GroupedGemmArgs& a) { dev.be.grouped_gemm(a); }));
      }
  }
}

namespace {

mt::Config prepared_config(const std::string& name, const std::string& matmul) {
  const std::string dir = testing::temp_dir("prepared_" + name);
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back(uint16_t("abcdefgh "[i * 7 % 9]));
  mt::write_shard(dir + "/train_000000.bin", tokens);
  mt::write_shard(dir + "/val_000000.bin", tokens);
  return mt::parse_config(
      "", "test.toml",
      {"run.name=" + name, "run.out_dir=" + dir + "/runs", "data.train=" + dir + "/train_*.bin",
       "data.val=" + dir + "/val_*.bin", "model.vocab_size=128", "model.d_model=16", "model.n_layers=2",
       "model.n_heads=2", "model.head_dim=8", "model.ffn_hidden=32", "model.seq_len=8", "model.moe.expert_hidden=16",
       "model.moe.n_routed_experts=4", "model.mtp.depth=1", "training.steps=3", "training.global_batch=4",
       "training.micro_batch=2", "training.eval_every=0", "lr_schedule.warmup_steps=1", "fp8.block=4",
       "precision.matmul=\"" + matmul + "\"", "precision.device=cpu-strict"});
}

// The weights GEMMs read: every matrix but the embedding table.
std::vector<int> gemm_weights(const mt::ParamStore& p) {
  std::vector<int> ids;
  for (size_t i = 0; i < p.infos.size(); ++i)
    if (p.infos[i].shape.size() >= 2 && p.infos[i].name.find("embedding") == std::string::npos) ids.push_back(int(i));
  return ids;
}

}  // namespace

TEST_CASE("after each optimizer step the prepared bf16 copies are the new weights rounded") {
  mt::Trainer t(prepared_config("bf16", "bf16"), {.quiet = true});
  t.run();
  const mt::ParamStore& p = t.model().params;
  const std::vector<float> values = p.host_values();
  const std::vector<int> ids = gemm_weights(p);
  REQUIRE(ids.size() > 10);
  for (int id : ids) {
    CAPTURE(p.info(id).name);
    const mt::Bf16* copy = p.prepared_bf16(id);
    REQUIRE(copy != nullptr);  // wanted in the first step, made by every update since
    std::vector<uint16_t> bits(p.info(id).numel);
    p.backend().download(bits.data(), copy, bits.size() * sizeof(uint16_t));
    int stale = 0;
    for (size_t i = 0; i < bits.size(); ++i)
      stale += mt::bf16_bits_to_float(bits[i]) != mt::round_to_bf16(values[p.info(id).offset + i]);
    CHECK(stale == 0);
  }
}

TEST_CASE("after each optimizer step the prepared FP8 codes give the GEMM of the new weights") {
  const mt::Config cfg = prepared_config("fp8", "fp8");
  mt::Trainer t(cfg, {.quiet = true});
  t.run();
  const mt::ParamStore& p = t.model().params;
  const mt::Fp8Recipe r = mt::fp8_recipe(cfg.fp8);
  const mt::Backend& be = p.backend();
  int checked = 0;
  for (int id : gemm_weights(p)) {
    const mt::ParamInfo& info = p.info(id);
    if (info.shape.size() != 2) continue;  // the experts' groups: the grouped GEMM test above
    CAPTURE(info.name);
    const int rows = int(info.shape[0]), cols = int(info.shape[1]), m = 3;
    for (bool dgrad : {false, true}) {
      const mt::Fp8Codes codes = p.prepared_fp8(id, dgrad, r);
      if (!codes.codes) continue;  // a weight the model keeps in BF16 (head, router)
      const int inner = dgrad ? rows : cols, outer = dgrad ? cols : rows;
      const Buffer a = [&] {
        Buffer b(be, DType::f32, size_t(m) * inner);
        b.from_host(spread_values(b.count(), 5));
        return b;
      }();
      Buffer converted(be, DType::f32, size_t(m) * outer), prepared(be, DType::f32, size_t(m) * outer);
      mt::GemmArgs g{.m = m, .n = outer, .k = inner, .a = a.f32(), .b = p.value(id), .trans_b = !dgrad,
                     .c = converted.f32(), .inputs = GemmPrecision::fp8,
                     .fp8 = {&r, mt::Fp8Operand::activation, mt::Fp8Operand::weight}};
      be.gemm(g);
      g.c = prepared.f32();
      g.fp8_b = codes;
      be.gemm(g);
      CHECK(same_bits(prepared.to_host_f32(), converted.to_host_f32()));
      ++checked;
    }
  }
  CHECK(checked >= 10);
}

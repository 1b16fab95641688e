#pragma once
// The list of ops: one line per op, its name, its argument struct and what it returns. The op table
// (ops/ops.hpp), Backend's calls, the CPU and CUDA declarations and both tables are generated from
// it, so an op is added here and in its family folder (docs/ops.md). The order is the order of the
// op table's entries and of the op profile's rows.
#include "ops/attention/args.hpp"
#include "ops/cross_entropy/args.hpp"
#include "ops/dispatch/args.hpp"
#include "ops/elementwise/args.hpp"
#include "ops/embedding/args.hpp"
#include "ops/fp8/args.hpp"
#include "ops/fp8_rows/args.hpp"
#include "ops/gemm/args.hpp"
#include "ops/grouped_gemm/args.hpp"
#include "ops/optimizer/args.hpp"
#include "ops/rmsnorm/args.hpp"
#include "ops/rope/args.hpp"
#include "ops/routing/args.hpp"

// X(name, Args, Result): the op `name` takes (DeviceState*, const Args&) and returns Result.
#define MT_OPS(X)                                                    \
  X(gemm, GemmArgs, void)                                            \
  X(rmsnorm_forward, RmsNormForwardArgs, void)                       \
  X(rmsnorm_backward_input, RmsNormBackwardInputArgs, void)          \
  X(rmsnorm_backward_weight, RmsNormBackwardWeightArgs, void)        \
  X(rope, RopeArgs, void)                                            \
  X(attention_forward, AttentionForwardArgs, void)                   \
  X(attention_backward, AttentionBackwardArgs, void)                 \
  X(attention_decode, AttentionDecodeArgs, void)                     \
  X(qk_clip_rows, QkClipRowsArgs, void)                              \
  X(swiglu_forward, SwigluForwardArgs, void)                         \
  X(swiglu_backward, SwigluBackwardArgs, void)                       \
  X(cross_entropy, CrossEntropyArgs, void)                           \
  X(embedding_forward, EmbeddingForwardArgs, void)                   \
  X(embedding_backward, EmbeddingBackwardArgs, void)                 \
  X(add, AddArgs, void)                                              \
  X(copy_columns, CopyColumnsArgs, void)                             \
  X(grouped_gemm, GroupedGemmArgs, void)                             \
  X(sigmoid, SigmoidArgs, void)                                      \
  X(router_select, RouterSelectArgs, void)                           \
  X(moe_permute, MoePermuteArgs, void)                               \
  X(moe_arrivals, MoeArrivalsArgs, void)                             \
  X(gather_rows, GatherRowsArgs, void)                               \
  X(moe_combine, MoeCombineArgs, void)                               \
  X(moe_combine_backward, MoeCombineBackwardArgs, void)              \
  X(balance_loss, BalanceLossArgs, void)                             \
  X(balance_prob_sums, BalanceProbSumsArgs, void)                    \
  X(global_balance, GlobalBalanceArgs, void)                         \
  X(router_backward, RouterBackwardArgs, void)                       \
  X(bias_update, BiasUpdateArgs, void)                               \
  X(shift_tokens, ShiftTokensArgs, void)                             \
  X(scale, ScaleArgs, void)                                          \
  X(sum_squares, SumSquaresArgs, void)                               \
  X(sum_scalars, SumScalarsArgs, void)                               \
  X(adamw, AdamwArgs, void)                                          \
  X(muon_momentum, MuonMomentumArgs, void)                           \
  X(newton_schulz, NewtonSchulzArgs, void)                           \
  X(muon_apply, MuonApplyArgs, void)                                 \
  X(fp8_pack_rows, Fp8PackRowsArgs, void)                            \
  X(fp8_unpack_rows, Fp8UnpackRowsArgs, void)                        \
  X(fp8_quantize_weight, Fp8WeightArgs, void)

// The declarations of one device's implementations, `Result name(DeviceState*, const Args&);` for
// every op, inside that device's namespace (backend/cpu_ops.hpp, backend/cuda_ops.hpp).
#define MT_OP_DECLARATION(name, Args, Result) Result name(DeviceState*, const Args&);

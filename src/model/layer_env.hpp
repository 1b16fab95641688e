#pragma once
// What every layer needs to run: the device, the GEMM input precision, the parameter store and
// the rank's place in the tensor- and expert-parallel groups.
// Linear maps follow the PyTorch convention: W is [out, in] and y = x W^T.
#include "comm/device_comm.hpp"
#include "model/params.hpp"
#include "ops/ops.hpp"
#include "tensor/arena.hpp"

namespace mt {

// The slice of every layer this rank holds: attention heads and dense-FFN hidden units split
// tp ways (Megatron-style column- then row-parallel pairs), routed experts split ep ways.
// With sequence parallelism the rows between those pairs (the residual stream, its norms, what
// moves between pipeline stages) are split tp ways too: rank i holds rows [i rows/tp, (i+1) rows/tp).
struct ShardPlace {
  int tp_rank = 0, tp_size = 1;
  int ep_rank = 0, ep_size = 1;
  double ep_receive_bound = 0;  // parallel.ep_receive_bound (model/ep_receive.hpp): 0 the worst case
  bool sequence_parallel = false;
  DeviceComm* tp = nullptr;  // set when tp_size > 1
  DeviceComm* ep = nullptr;  // set when ep_size > 1
  Split tp_split(int dim) const { return {dim, tp_size, tp_rank}; }
  bool split_rows() const { return sequence_parallel && tp_size > 1; }
  // How many of `rows` whole rows this rank holds between the tensor-parallel regions, and the first.
  int row_share(int rows) const { return split_rows() ? rows / tp_size : rows; }
  int first_row(int rows) const { return split_rows() ? tp_rank * (rows / tp_size) : 0; }
};

// The GEMM precision of a model: the inputs' storage, and with fp8 the recipe and which of the
// layers DeepSeek-V3 keeps in BF16 (output head, MoE router) run in FP8 anyway.
struct MatmulSetup {
  GemmPrecision inputs = GemmPrecision::fp32;
  Fp8Recipe fp8;
  bool fp8_head = false, fp8_router = false;
  bool bf16_activations = false;  // LayerEnv::bf16_activations; only with bf16 inputs
  bool bf16_outputs = false;      // LayerEnv::bf16_outputs; only with bf16_activations
  bool fp8_fused_codes = true;    // LayerEnv::fp8_fused_codes
  MatmulSetup(GemmPrecision i = GemmPrecision::fp32) : inputs(i) {}  // NOLINT: a plain precision converts
};

// A weight as GEMMs read it: its fp32 values and, for a parameter of the store (LayerEnv::weight),
// its id, by which a GEMM finds the form prepared for it (ParamStore::prepared_bf16, prepared_fp8).
struct WeightOperand {
  const float* f32 = nullptr;
  int id = -1;
  WeightOperand() = default;
  WeightOperand(const float* w) : f32(w) {}  // NOLINT: plain fp32 values, nothing prepared
  WeightOperand(const float* w, int param) : f32(w), id(param) {}
};

// What a GEMM reads in place of a weight's fp32 values (nothing: it converts them itself).
struct PreparedOperand {
  const Bf16* bf16 = nullptr;
  Fp8Codes fp8 = {};
};

// Where a layer writes its output: fp32, or bfloat16 (the GEMM rounding its fp32 sums as it stores
// them) for a reader that reads it so (precision.bf16_outputs: the residual adds).
struct LayerOutput {
  float* f32 = nullptr;
  Bf16* bf16 = nullptr;
  LayerOutput(float* y) : f32(y) {}  // NOLINT: an fp32 output converts
  LayerOutput(Bf16* y) : bf16(y) {}  // NOLINT: so does a bfloat16 one
};

struct LayerEnv {
  const Backend* backend = nullptr;
  GemmPrecision gemm_inputs = GemmPrecision::fp32;
  ParamStore* params = nullptr;
  ShardPlace shard;
  const Fp8Recipe* fp8 = nullptr;  // the recipe, when gemm_inputs is fp8
  bool fp8_router = false;
  // Activations that only GEMMs read are kept in bfloat16 (bf16 GEMM inputs only): see GemmOperand.
  bool bf16_activations = false;
  // GEMM outputs that only SwiGLU reads (gate, up) are written in bfloat16 (GemmArgs::c_bf16) and
  // kept so for the backward: one rounding more than fp32 outputs (precision.bf16_outputs).
  bool bf16_outputs = false;
  // Under fp8 inputs, RMSNorm and SwiGLU write the FP8 codes of what only GEMMs read (fp8_row_codes);
  // false: the GEMMs quantize it themselves (the same codes).
  bool fp8_fused_codes = true;
  // A second queue of the same device for work that may overlap the layer's own (the MoE's shared
  // experts beside the routed ones); null: everything on `backend`.
  const Backend* side = nullptr;

  const Backend& be() const { return *backend; }

  // This layer in the precision FP8 training keeps for sensitive layers: BF16 GEMM inputs.
  LayerEnv high_precision() const {
    LayerEnv e = *this;
    if (e.gemm_inputs == GemmPrecision::fp8) e.gemm_inputs = GemmPrecision::bf16;
    return e;
  }
  // What an FP8 GEMM of this layer knows of its operands.
  Fp8Gemm fp8_operands(Fp8Operand a, Fp8Operand b) const { return {fp8, a, b}; }

  WeightOperand weight(int id) const { return {params->value(id), id}; }
  // The form of w prepared for this layer's GEMM inputs, read as the forward's x W^T or Dgrad's dy W.
  PreparedOperand prepared(WeightOperand w, bool dgrad) const {
    if (w.id < 0) return {};
    if (gemm_inputs == GemmPrecision::bf16) return {params->prepared_bf16(w.id), {}};
    if (gemm_inputs == GemmPrecision::fp8) return {nullptr, params->prepared_fp8(w.id, dgrad, *fp8)};
    return {};
  }

  // Sums the partial results of a row-parallel product (or the input gradient of a column-
  // parallel one) over the tensor-parallel group.
  void tp_sum(float* x, size_t n) const {
    if (shard.tp_size > 1) shard.tp->all_reduce_sum(device_span(x, n));
  }
  // The same sum, from `whole` (this rank's part, for every row) to this rank's `mine` (its
  // `values` of the row share, ShardPlace::row_share): a reduce-scatter under sequence parallelism,
  // else the all-reduce, in place (`mine` is `whole`).
  void tp_sum_rows(float* whole, float* mine, size_t values) const {
    if (!shard.split_rows()) return tp_sum(whole, values);
    shard.tp->reduce_scatter_sum(device_span(whole, values * shard.tp_size), device_span(mine, values));
  }
  // Every row, into `arena`, from each rank's share (`values` each); `mine` itself without
  // sequence parallelism. A bfloat16 share stays bfloat16.
  GemmOperand gather_rows(Arena& arena, GemmOperand mine, size_t values) const {
    if (!shard.split_rows()) return mine;
    const size_t all = values * size_t(shard.tp_size);
    if (mine.bf16) {
      Bf16* rows = arena.bf16s(all);
      const size_t bytes = sizeof(Bf16) * values;
      shard.tp->all_gather({const_cast<Bf16*>(mine.bf16), bytes, DType::u8}, {rows, bytes * shard.tp_size, DType::u8});
      return rows;
    }
    float* rows = arena.floats(all);
    shard.tp->all_gather(device_span(mine.f32, values), device_span(rows, all));
    return rows;
  }
  const float* gather_rows(Arena& arena, const float* mine, size_t values) const {
    return gather_rows(arena, GemmOperand(mine), values).f32;
  }

  // Room in `arena` for the FP8 codes of an activation (or a gradient: `kind`) [rows, cols] that a
  // GEMM reads as its A, for its producer to write with it (ops/fp8/row_codes.hpp): under fp8 inputs
  // quantized in 1 x tile pieces; otherwise none (codes null), and the GEMMs quantize what they read.
  Fp8RowCodes fp8_row_codes(Arena& arena, int rows, int cols, Fp8Operand kind = Fp8Operand::activation) const {
    Fp8RowCodes q;
    if (gemm_inputs != GemmPrecision::fp8 || !fp8_fused_codes || fp8->per_tensor || rows == 0 || cols == 0) return q;
    q.ld = fp8_pad(cols, kFp8PadK);
    q.rows_pad = fp8_pad(rows, kFp8PadOuter);
    q.tile = fp8->tile;
    q.format = fp8->format(kind);
    q.pow2 = fp8->pow2_scales;
    q.codes = static_cast<uint8_t*>(arena.bytes(size_t(q.rows_pad) * q.ld));
    q.scales = arena.floats(size_t(rows) * fp8_row_pieces(cols, q.tile));
    return q;
  }

  // RMSNorm (a's output left unset) into `arena`, for an output only GEMMs read: bfloat16 under
  // bf16_activations; with its FP8 codes under fp8 inputs unless !fp8_codes (rows the GEMMs do
  // not read as they are, such as a share that is gathered first).
  GemmOperand rmsnorm_for_gemms(Arena& arena, RmsNormForwardArgs a, bool fp8_codes = true) const {
    const size_t n = size_t(a.rows) * a.dim;
    GemmOperand y;
    if (bf16_activations) y = a.y_bf16 = arena.bf16s(n);
    else y = a.y = arena.floats(n);
    if (fp8_codes) a.fp8 = fp8_row_codes(arena, a.rows, a.dim);
    y.fp8 = {a.fp8.codes, a.fp8.scales, a.fp8.ld};
    backend->rmsnorm_forward(a);
    return y;
  }

  // SwiGLU's product [rows, cols] into `arena`, which only the down projection's GEMMs read (with
  // its FP8 codes under fp8 inputs).
  // gate_bf16, up_bf16: the inputs in bfloat16 in place of gate, up (SwigluForwardArgs).
  GemmOperand swiglu_for_gemms(Arena& arena, int rows, int cols, const float* gate, const float* up,
                               const Bf16* gate_bf16 = nullptr, const Bf16* up_bf16 = nullptr) const {
    const size_t n = size_t(rows) * cols;
    SwigluForwardArgs a{.n = n, .gate = gate, .up = up, .cols = cols, .fp8 = fp8_row_codes(arena, rows, cols),
                        .gate_bf16 = gate_bf16, .up_bf16 = up_bf16};
    GemmOperand h;
    if (bf16_activations) h = a.h_bf16 = arena.bf16s(n);
    else h = a.h = arena.floats(n);
    h.fp8 = {a.fp8.codes, a.fp8.scales, a.fp8.ld};
    backend->swiglu_forward(a);
    return h;
  }

  // y[rows,out] = x[rows,in] W^T  (accumulate: y += ...)
  void linear_forward(GemmOperand x, WeightOperand w, int rows, int in, int out, float* y,
                      bool accumulate = false) const {
    const PreparedOperand p = prepared(w, false);
    backend->gemm({.m = rows, .n = out, .k = in, .a = x.f32, .b = w.f32, .trans_b = true, .c = y,
                   .beta = accumulate ? 1.0f : 0.0f, .inputs = gemm_inputs,
                   .fp8 = fp8_operands(Fp8Operand::activation, Fp8Operand::weight), .a_bf16 = x.bf16,
                   .b_bf16 = p.bf16, .fp8_b = p.fp8,
                   .fp8_a = gemm_inputs == GemmPrecision::fp8 ? x.fp8 : Fp8Codes{}});
  }
  // y[rows,out] = x[rows,in] W^T in bfloat16 (bf16 inputs): the fp32 sums rounded once as they are stored.
  void linear_forward(GemmOperand x, WeightOperand w, int rows, int in, int out, Bf16* y) const {
    const PreparedOperand p = prepared(w, false);
    backend->gemm({.m = rows, .n = out, .k = in, .a = x.f32, .b = w.f32, .trans_b = true, .inputs = gemm_inputs,
                   .a_bf16 = x.bf16, .b_bf16 = p.bf16, .c_bf16 = y});
  }
  // y = x W^T into either form of `y` (accumulate: fp32 only).
  void linear_forward(GemmOperand x, WeightOperand w, int rows, int in, int out, LayerOutput y,
                      bool accumulate = false) const {
    if (y.bf16) return linear_forward(x, w, rows, in, out, y.bf16);
    linear_forward(x, w, rows, in, out, y.f32, accumulate);
  }
  // dx[rows,in] = dy[rows,out] W in bfloat16 (bf16 inputs), for a reader that reads bfloat16
  // (precision.bf16_outputs): the fp32 sums rounded once as they are stored.
  void linear_backward_input(const float* dy, WeightOperand w, int rows, int in, int out, Bf16* dx) const {
    const PreparedOperand p = prepared(w, true);
    backend->gemm({.m = rows, .n = in, .k = out, .a = dy, .b = w.f32, .inputs = gemm_inputs, .b_bf16 = p.bf16,
                   .c_bf16 = dx});
  }
  // dx[rows,in] = dy[rows,out] W  (accumulate: dx += ...); dy_codes: dy's FP8 codes written by its
  // producer (fp8_row_codes with kind gradient), read under fp8 inputs.
  void linear_backward_input(const float* dy, WeightOperand w, int rows, int in, int out, float* dx,
                             bool accumulate = false, Fp8Codes dy_codes = {}) const {
    const PreparedOperand p = prepared(w, true);
    backend->gemm({.m = rows, .n = in, .k = out, .a = dy, .b = w.f32, .c = dx,
                   .beta = accumulate ? 1.0f : 0.0f, .inputs = gemm_inputs,
                   .fp8 = fp8_operands(Fp8Operand::gradient, Fp8Operand::weight), .b_bf16 = p.bf16, .fp8_b = p.fp8,
                   .fp8_a = gemm_inputs == GemmPrecision::fp8 ? dy_codes : Fp8Codes{}});
  }
  // dW[out,in] += dy[rows,out]^T x[rows,in]
  void linear_backward_weight(const float* dy, GemmOperand x, int rows, int in, int out, float* dw) const {
    backend->gemm({.m = out, .n = in, .k = rows, .a = dy, .trans_a = true, .b = x.f32, .c = dw,
                   .beta = 1.0f, .inputs = gemm_inputs,
                   .fp8 = fp8_operands(Fp8Operand::gradient, Fp8Operand::activation), .b_bf16 = x.bf16});
  }
};

}  // namespace mt

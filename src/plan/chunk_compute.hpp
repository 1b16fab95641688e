#pragma once
// The compute time of one micro-batch through one pipeline piece on one rank, kernel class by
// kernel class: the linear layers' GEMMs in the layout's precision, the routed experts' GEMMs
// through a roofline (few rows per expert leave them bound by HBM), the attention core and the
// output heads in BF16 (FP8 recipes keep them there), memory-bound passes, and under FP8 the
// quantization of every FP8 GEMM's inputs and output gradients.
#include "config/config.hpp"
#include "parallel/layout.hpp"
#include "plan/cluster.hpp"

namespace mt::plan {

struct ChunkCompute {
  double forward = 0;      // seconds: the forward
  double backward = 0;     // the backward without recomputation (input and weight gradients)
  double weight_grad = 0;  // of backward: the weight gradients' GEMMs
  double linear_gemms = 0; // of forward: the linear layers' GEMMs, which tensor-parallel collectives overlap
  double attention = 0;    // of forward: the attention core, which context parallelism's ring overlaps
};

// `tokens`: one micro-batch's tokens on this rank (a context-parallel rank holds 1/cp of them);
// `pieces`: the pieces the model is cut into (pipeline stages, DualPipe's included).
ChunkCompute chunk_compute(const ModelConfig& m, const Cluster& c, const Layout& l, double tokens, int pieces);

// The rows one routed expert's GEMM multiplies per micro-batch on a rank, balanced routing:
// the tokens each of the ep ranks sends it.
double rows_per_expert(const ModelConfig& m, const Layout& l, double tokens);

// Achieved over compute-bound time of an (rows x k) by (k x n) GEMM whose operands take
// `operand_bytes` per value, on a chip reaching `rate` FLOP/s and `bandwidth` bytes/s of HBM.
double gemm_roofline(double rows, double k, double n, double operand_bytes, double rate, double bandwidth);

}  // namespace mt::plan

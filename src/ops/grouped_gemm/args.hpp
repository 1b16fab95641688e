#pragma once
// Arguments of the grouped GEMM op: one GEMM per group of rows.
#include "ops/gemm/args.hpp"

namespace mt {

// One GEMM per group of rows; group g owns rows [offsets[g], offsets[g+1]) of the ragged operands,
// so all the experts of a layer run in one call. offsets ([groups + 1]) are in device memory, as
// the dispatch computes them: the device reads the group sizes itself, so the host never waits
// for the routing (the CPU reference reads them inside the op).
//   Ragged::rows    C[rows_g, n] = A[rows_g, k] op(B_g) (+ C when beta = 1), B_g = b + g*n*k stored
//                   [n, k] when trans_b, else [k, n] (forward: x W^T; input gradient: dy W)
//   Ragged::reduce  C_g[m, n] += A[rows_g, m]^T B[rows_g, n], C_g = c + g*m*n (weight gradients)
enum class Ragged { rows, reduce };
struct GroupedGemmArgs {
  int groups = 0;
  const int* offsets = nullptr;
  Ragged ragged = Ragged::rows;
  // The ragged dimension's entry (m for rows, k for reduce) holds all groups' rows together: the
  // ops never read it (offsets decide), profiles count FLOPs from it.
  int m = 0, n = 0, k = 0;
  const float* a = nullptr;
  const float* b = nullptr; bool trans_b = false;
  float* c = nullptr;
  float beta = 0.0f;
  GemmPrecision inputs = GemmPrecision::fp32;
  Fp8Gemm fp8 = {};  // read when inputs is fp8
  const Bf16* a_bf16 = nullptr;  // as GemmArgs: a or b stored in bfloat16
  const Bf16* b_bf16 = nullptr;
  Fp8Codes fp8_b = {};  // as GemmArgs, for Ragged::rows: group g's at the Fp8Codes' group steps
  // As GemmArgs (bf16 inputs, beta 0), for Ragged::rows: C in bfloat16 in place of c, each group's
  // fp32 sums rounded once to nearest even as they are stored (the routed experts' gate and up).
  Bf16* c_bf16 = nullptr;
  // As GemmArgs, for Ragged::rows: A as the codes its producer wrote for all the rows (Fp8RowCodes'
  // layout: `ld` codes a row, the scales of each row's 1 x tile pieces); group g's from its first row.
  Fp8Codes fp8_a = {};
};

}  // namespace mt

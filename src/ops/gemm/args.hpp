#pragma once
// Arguments of the GEMM op: C = alpha op(A) op(B) + beta C, and what its inputs are stored in.
#include <cstddef>
#include <cstdint>

#include "ops/bf16.hpp"
#include "ops/fp8/recipe.hpp"

namespace mt {

// Storage precision of GEMM inputs. bf16 rounds A and B to bfloat16 (round to nearest even)
// and accumulates in fp32: the CPU reference emulates exactly what the GPU path computes. fp8
// quantizes them as the call's recipe says (ops/fp8/recipe.hpp), by what each operand is.
enum class GemmPrecision { fp32, bf16, fp8 };

// What an FP8 GEMM needs besides GemmPrecision::fp8: the recipe and the kind of each operand.
struct Fp8Gemm {
  const Fp8Recipe* recipe = nullptr;
  Fp8Operand a = Fp8Operand::activation, b = Fp8Operand::weight;
};

// A weight's FP8 codes and scales made ahead of the GEMM (ops/fp8/args.hpp: Fp8WeightArgs), read in
// place of quantizing b: B as the [n, K] view with K contiguous, `ld` codes a row (K padded), and
// the scale of each piece of that view. transposed: the view is B's storage transposed (B stored
// [k, n], Dgrad's weight), as Hopper's FP8 GEMM wants K contiguous.
struct Fp8Codes {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  int ld = 0;
  bool transposed = false;
  size_t group_codes = 0, group_scales = 0;  // a grouped GEMM's step from one group's to the next
};

// C[m,n] = alpha * op(A) * op(B) + beta * C, op(A) is [m,k], op(B) is [k,n].
// A is stored [m,k] (or [k,m] when trans_a), B is stored [k,n] (or [n,k] when trans_b), each
// row-major with the leading dimensions below.
struct GemmArgs {
  int m = 0, n = 0, k = 0;
  const float* a = nullptr; bool trans_a = false;
  const float* b = nullptr; bool trans_b = false;
  float* c = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  GemmPrecision inputs = GemmPrecision::fp32;
  Fp8Gemm fp8 = {};  // read when inputs is fp8
  // A or B stored in bfloat16 (an activation kept so, see GemmOperand), in place of a or b: only
  // with bf16 inputs, whose rounding leaves such values as they are.
  const Bf16* a_bf16 = nullptr;
  const Bf16* b_bf16 = nullptr;
  // Strided operands (elements): the row strides of A, B and C as stored (0: packed, the
  // stored width), and `batch` products in one call, product i reading a + i * batch_a and
  // b + i * batch_b and writing c + i * batch_c (a batch stride of 0 shares A or B).
  int lda = 0, ldb = 0, ldc = 0;
  int batch = 1;
  long long batch_a = 0, batch_b = 0, batch_c = 0;
  // B as prepared FP8 codes (fp8 inputs, B a weight): the same values as quantizing b.
  Fp8Codes fp8_b = {};
  // A (an activation or gradient stored [m, k], not trans_a) as the FP8 codes its producer wrote with it
  // (ops/fp8/row_codes.hpp): the same values as quantizing a.
  Fp8Codes fp8_a = {};
  // C written in bfloat16 in place of c (bf16 inputs, beta 0): the fp32 sums rounded once, to
  // nearest even, as they are stored; for an output whose readers read bfloat16 (SwiGLU's gate and up).
  Bf16* c_bf16 = nullptr;
};

// The leading dimensions g means, 0s filled in with the packed ones.
inline int gemm_lda(const GemmArgs& g) { return g.lda ? g.lda : (g.trans_a ? g.m : g.k); }
inline int gemm_ldb(const GemmArgs& g) { return g.ldb ? g.ldb : (g.trans_b ? g.k : g.n); }
inline int gemm_ldc(const GemmArgs& g) { return g.ldc ? g.ldc : g.n; }
// Whether g is one packed product, as every GEMM was before strides.
inline bool gemm_packed(const GemmArgs& g) {
  return g.batch == 1 && gemm_lda(g) == (g.trans_a ? g.m : g.k) && gemm_ldb(g) == (g.trans_b ? g.k : g.n) &&
         gemm_ldc(g) == g.n;
}

// An activation as GEMMs read it: fp32, or (with bf16 GEMM inputs) already rounded and stored in
// bfloat16, half the memory for the same products. With fp8 inputs, fp8 may hold the codes its
// producer wrote beside f32, which the forward GEMM reads in place of quantizing f32.
struct GemmOperand {
  const float* f32 = nullptr;
  const Bf16* bf16 = nullptr;
  Fp8Codes fp8 = {};
  GemmOperand() = default;
  GemmOperand(const float* x) : f32(x) {}  // NOLINT: an fp32 activation converts
  GemmOperand(const Bf16* x) : bf16(x) {}  // NOLINT: so does a bfloat16 one
};

}  // namespace mt

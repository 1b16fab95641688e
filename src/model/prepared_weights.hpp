#pragma once
// The weights in the forms GEMMs read them, made once per update of the fp32 master weights
// instead of inside every GEMM: bfloat16 copies (bf16 GEMM inputs) and FP8 codes with their block
// scales in the orientations the forward (x W^T) and Dgrad (dy W) read (fp8 inputs).
// A GEMM asks for the form it reads. The first request notes the want and finds nothing (that GEMM
// rounds or quantizes the fp32 weight itself, to the same values); every change of the values from
// then on (ParamStore::values_updated: the optimizer's step, a load) remakes every wanted form. So
// after the first step no GEMM converts a weight, nothing is allocated inside a step, and a form is
// never older than the values it was made from.
#include <array>
#include <cstddef>
#include <vector>

#include "ops/ops.hpp"
#include "tensor/buffer.hpp"

namespace mt {

class ParamStore;

class PreparedWeights {
 public:
  enum class Form { bf16, fp8_forward, fp8_dgrad };

  // Parameter id's bfloat16 copy, or null (not made yet).
  const Bf16* bf16(int id);
  // Its FP8 codes for the forward or for Dgrad (codes null: not made yet, or `recipe` is not the
  // one the codes follow).
  Fp8Codes fp8(int id, bool dgrad, const Fp8Recipe& recipe);
  // Makes every wanted form from the parameters' values (allocating what the new wants need).
  void refresh(const ParamStore& params);
  // Device bytes the forms hold.
  size_t bytes() const;

 private:
  struct Copy {
    int id = 0;
    Form form = Form::bf16;
    Buffer codes, scales;  // bf16: the copy in `codes`; fp8: codes and piece scales
    Fp8Codes fp8;          // fp8: how GEMMs read them
    bool made = false;
  };
  Copy* want(int id, Form form);
  void make(const ParamStore& params, Copy& c) const;  // fills c's buffers, allocated on the first call

  std::vector<Copy> copies_;
  std::vector<std::array<int, 3>> index_;  // [parameter][form]: into copies_, -1 none
  Fp8Recipe recipe_;  // the one FP8 recipe the codes follow (a model has one)
  bool have_recipe_ = false;
};

}  // namespace mt

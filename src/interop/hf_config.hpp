#pragma once
// A transformers config.json (model_type deepseek_v3 or llama) read key by key into moetrain's
// [model] table. Every key that changes the computation is honoured as transformers computes it,
// or refused naming the key and its value; sizes must be written out; other keys take
// transformers' defaults. docs/hf_config_keys.md lists each key and its fate.
#include <string>

#include "io/json.hpp"

namespace mt {

struct HfModel {
  std::string toml;  // the [model] table
  bool deepseek = false;
  // DeepseekV3 with rope_interleave false: RoPE turns feature i with i + d/2 of the rotary part,
  // so its rows of the query and key projections are reordered to moetrain's interleaved pairs.
  bool rope_halves = false;
};

// Throws UserError("<where>: <key> = <value>: <why>") for what moetrain cannot run exactly.
HfModel hf_model_of(const Json& config, const std::string& where);

// A JSON float as Python writes and reads it: the shortest text that reads back to `v`, with a
// point or an exponent always ("1.0", not "1", which transformers' typed configs refuse).
std::string json_float(double v);

}  // namespace mt

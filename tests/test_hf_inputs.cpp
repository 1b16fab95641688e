// What `moetrain import` refuses in a transformers model's files: safetensors byte ranges and
// shapes outside the file, non-finite weights, and config.json values it cannot run exactly.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <limits>

#include "interop/hf_config.hpp"
#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "test_helpers.hpp"

namespace {

// A safetensors file of one tensor "w" with `header_entry` as its header entry, then `data`.
std::string one_tensor_file(const std::string& name, const std::string& header_entry, const std::vector<char>& data) {
  const std::string path = testing::temp_dir("hf_inputs") + "/" + name + ".safetensors";
  const std::string header = "{\"w\":" + header_entry + "}";
  std::ofstream f(path, std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header;
  f.write(data.data(), std::streamsize(data.size()));
  return path;
}

std::vector<char> floats(const std::vector<float>& v) {
  std::vector<char> out(4 * v.size());
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::string refusal(const std::string& path) {
  return testing::user_error_of([&] { mt::read_safetensors(path); });
}

}  // namespace

TEST_CASE("safetensors: data_offsets outside the data, reversed or fractional are refused by tensor name") {
  const std::vector<char> data = floats({1, 2, 3, 4});
  for (const char* range : {"[-16,0]", "[-8,8]", "[0,24]", "[8,0]", "[0.5,16.5]", "[0]", "\"0,16\""}) {
    CAPTURE(range);
    const std::string path = one_tensor_file(
        "range", std::string(R"({"dtype":"F32","shape":[4],"data_offsets":)") + range + "}", data);
    const std::string e = refusal(path);
    CHECK(testing::contains(e, "range.safetensors: w: data_offsets must be [begin, end]"));
    CHECK(testing::contains(e, "0 <= begin <= end <= 16"));
  }
  const std::string fine = one_tensor_file("fine", R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", data);
  CHECK(mt::read_safetensors(fine).at("w").values == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("safetensors: a negative or oversized shape is refused by tensor name") {
  const std::vector<char> data = floats({1, 2, 3, 4});
  for (const char* shape : {"[-4]", "[2,-2]", "[1e30]", "[65536,65536,65536,65536]", "[2.5]"}) {
    CAPTURE(shape);
    const std::string path = one_tensor_file(
        "shape", std::string(R"({"dtype":"F32","shape":)") + shape + R"(,"data_offsets":[0,16]})", data);
    CHECK(testing::contains(refusal(path), "shape.safetensors: w: shape:"));
  }
}

TEST_CASE("safetensors: NaN and infinite weights are refused with the tensor and the first bad index") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  CHECK(testing::contains(
      refusal(one_tensor_file("nan", R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", floats({1, 2, nan, nan}))),
      "nan.safetensors: w: value 2 (of 4) is NaN"));
  CHECK(testing::contains(
      refusal(one_tensor_file("inf", R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})", floats({1, -inf, 3, 4}))),
      "inf.safetensors: w: value 1 (of 4) is infinite"));
  // BF16 +inf is 0x7F80; F16 NaN is 0x7E00.
  const uint16_t bf16[2] = {0x3F80, 0x7F80}, f16[2] = {0x3C00, 0x7E00};
  std::vector<char> bytes(4);
  std::memcpy(bytes.data(), bf16, 4);
  CHECK(testing::contains(
      refusal(one_tensor_file("bf16", R"({"dtype":"BF16","shape":[2],"data_offsets":[0,4]})", bytes)),
      "bf16.safetensors: w: value 1 (of 2) is infinite"));
  std::memcpy(bytes.data(), f16, 4);
  CHECK(testing::contains(
      refusal(one_tensor_file("f16", R"({"dtype":"F16","shape":[2],"data_offsets":[0,4]})", bytes)),
      "f16.safetensors: w: value 1 (of 2) is NaN"));
}

TEST_CASE("JSON floats for transformers: whole numbers keep a point, others the shortest round trip") {
  CHECK(mt::json_float(1.0) == "1.0");
  CHECK(mt::json_float(-3.0) == "-3.0");
  CHECK(mt::json_float(2.5) == "2.5");
  CHECK(mt::json_float(1e-6) == "1e-06");
  CHECK(mt::json_float(0.1) == "0.1");
  CHECK(mt::json_float(10000.0) == "10000.0");
  CHECK(mt::json_float(1e300) == "1e+300");
  CHECK(mt::json_float(1.5e-7) == "1.5e-07");
  CHECK(mt::json_float(0.0001) == "0.0001");
  CHECK(std::strtod(mt::json_float(0.02 * 3).c_str(), nullptr) == 0.02 * 3);
}

TEST_CASE("config.json: required sizes named, refused values named, defaults as transformers' classes") {
  const std::string base = R"("model_type": "deepseek_v3", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
      "num_hidden_layers": 2, "num_attention_heads": 4, "q_lora_rank": null, "kv_lora_rank": 16,
      "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 8,
      "moe_intermediate_size": 16, "first_k_dense_replace": 1, "n_group": 2, "topk_group": 1,
      "num_experts_per_tok": 2)";
  auto model = [&](const std::string& extra) {
    return mt::hf_model_of(mt::parse_json("{" + base + extra + "}", "c.json"), "c.json");
  };
  auto error = [&](const std::string& extra) { return testing::user_error_of([&] { model(extra); }); };
  const mt::HfModel plain = model("");
  CHECK(plain.deepseek);
  CHECK(!plain.rope_halves);
  CHECK(testing::contains(plain.toml, "n_shared_experts = 1\n"));   // DeepseekV3Config's default
  CHECK(testing::contains(plain.toml, "route_scale = 2.5\n"));
  CHECK(testing::contains(plain.toml, "seq_len = 4096\n"));
  CHECK(model(R"(, "rope_interleave": false)").rope_halves);
  CHECK(testing::contains(error(R"(, "rms_norm_eps": 1e-5)"),
                          "c.json: rms_norm_eps = 1e-05: DeepseekV3's latent norms"));
  CHECK(testing::contains(error(R"(, "hidden_act": "gelu")"), "c.json: hidden_act = \"gelu\""));
  CHECK(testing::contains(error(R"(, "num_key_value_heads": 2)"), "c.json: num_key_value_heads = 2"));
  CHECK(testing::contains(error(R"(, "hidden_size": -32)"), "c.json: hidden_size = -32: expected a whole number"));
  CHECK(testing::contains(error(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "truncate": false})"),
                          "c.json: rope_scaling.truncate = false"));
  CHECK(testing::contains(error(R"(, "rope_scaling": {"rope_type": "linear", "factor": 2.0})"),
                          "c.json: rope_scaling.rope_type = \"linear\""));
  // YaRN without original_max_position_embeddings: transformers takes max_position_embeddings.
  const std::string yarn = R"(, "max_position_embeddings": 96, "rope_scaling": {"type": "yarn", "factor": 2.0})";
  CHECK(testing::contains(model(yarn).toml, "original_seq_len = 96\n"));
  CHECK(testing::contains(
      testing::user_error_of([] {
        mt::hf_model_of(mt::parse_json(R"({"model_type": "llama", "vocab_size": 64, "num_hidden_layers": 2,
                                           "num_attention_heads": 4, "intermediate_size": 48})", "c.json"), "c.json");
      }),
      "c.json: no \"hidden_size\""));
}

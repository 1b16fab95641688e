// The JSON reader and safetensors files behind `moetrain export` and `import`.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "io/json.hpp"
#include "io/safetensors.hpp"
#include "test_helpers.hpp"

TEST_CASE("JSON: a config.json's values, escapes included") {
  const mt::Json j = mt::parse_json(
      R"({"a": 1.5e2, "b": [true, false, null], "c": {"d": "x\"y\\n\u00e9\ud83d\ude00"}, "e": -3})", "test");
  CHECK(j.at("a", "test").number == 150.0);
  CHECK(j.at("b", "test").array.size() == 3);
  CHECK(j.at("b", "test").array[0].boolean);
  CHECK(!j.at("b", "test").array[1].boolean);
  CHECK(j.at("b", "test").array[2].kind == mt::Json::Kind::null);
  CHECK(j.at("c", "test").at("d", "test").string == "x\"y\\n\xc3\xa9\xf0\x9f\x98\x80");
  CHECK(j.at("e", "test").number == -3.0);
  CHECK(testing::contains(testing::user_error_of([&] { j.at("zz", "config.json"); }), "config.json: no \"zz\""));
}

TEST_CASE("JSON: malformed text is refused with the byte where it goes wrong") {
  CHECK(testing::contains(testing::user_error_of([] { mt::parse_json(R"({"a": 1,})", "c.json"); }),
                          "c.json: byte 8: expected a key in quotes"));
  CHECK(testing::contains(testing::user_error_of([] { mt::parse_json(R"({"a" 1})", "c.json"); }), "byte 5: expected ':'"));
  CHECK(testing::contains(testing::user_error_of([] { mt::parse_json(R"([1, 2)", "c.json"); }), "the text ends inside a value"));
  CHECK(testing::contains(testing::user_error_of([] { mt::parse_json(R"({} x)", "c.json"); }), "text after the JSON value"));
  CHECK(testing::contains(testing::user_error_of([] { mt::parse_json(R"("\u12")", "c.json"); }), "four hex digits"));
}

TEST_CASE("safetensors: written tensors read back; BF16 and F16 widen; a bad range is refused") {
  const std::string dir = testing::temp_dir("safetensors");
  std::map<std::string, mt::Tensor> t;
  t["b.weight"] = {{2, 3}, {1, 2, 3, 4, 5, -6.5f}};
  t["a"] = {{1}, {0.25f}};
  mt::write_safetensors(dir + "/m.safetensors", t);
  const auto back = mt::read_safetensors(dir + "/m.safetensors");
  REQUIRE(back.size() == 2);
  CHECK(back.at("b.weight").shape == std::vector<int64_t>{2, 3});
  CHECK(back.at("b.weight").values == t["b.weight"].values);
  CHECK(back.at("a").values == t["a"].values);

  // A file as another writer makes it: BF16 1.5 (0x3FC0) and F16 -2 (0xC000), 1e-7 (subnormal 0x0002 ~ 1.19e-7).
  const std::string header =
      R"({"x":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]},"y":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})";
  const uint16_t data[3] = {0x3FC0, 0xC000, 0x0002};
  auto write = [&](const std::string& path, const std::string& h) {
    std::ofstream f(path, std::ios::binary);
    const uint64_t n = h.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << h;
    f.write(reinterpret_cast<const char*>(data), sizeof data);
  };
  write(dir + "/half.safetensors", header);
  const auto half = mt::read_safetensors(dir + "/half.safetensors");
  CHECK(half.at("x").values[0] == 1.5f);
  CHECK(half.at("y").values[0] == -2.0f);
  CHECK(half.at("y").values[1] == doctest::Approx(std::ldexp(2.0, -24)));
  std::string bad = header;
  bad.replace(bad.find("[2,6]"), 5, "[2,8]");
  write(dir + "/bad.safetensors", bad);
  CHECK(testing::contains(testing::user_error_of([&] { mt::read_safetensors(dir + "/bad.safetensors"); }),
                          "bad.safetensors: y: data_offsets must be [begin, end]"));
  std::ofstream(dir + "/short.safetensors") << "abc";
  CHECK(testing::contains(testing::user_error_of([&] { mt::read_safetensors(dir + "/short.safetensors"); }),
                          "not a safetensors file"));
}

#include "io/json.hpp"

#include <cstdlib>

#include "util/error.hpp"

namespace mt {

namespace {

// Objects and arrays nest at most this deep: the parser recurses once per level, and a header of a
// million '[' would overflow the stack. Hugging Face's files nest three or four levels.
constexpr int kMaxDepth = 512;

class Parser {
 public:
  Parser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  Json document() {
    Json v = value();
    space();
    if (at_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(where_ + ": byte " + std::to_string(at_) + ": " + what);
  }
  void space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }
  char peek() {
    space();
    if (at_ >= s_.size()) fail("the text ends inside a value");
    return s_[at_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  bool word(std::string_view w) {
    if (s_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }

  Json value() {
    Json v;
    const char c = peek();
    if ((c == '{' || c == '[') && depth_ == kMaxDepth)
      fail("objects and arrays nest deeper than " + std::to_string(kMaxDepth) + " levels");
    if (c == '{') {
      v.kind = Json::Kind::object;
      ++at_;
      if (peek() == '}') return ++at_, v;
      for (;;) {
        if (peek() != '"') fail("expected a key in quotes");
        std::string key = text();
        expect(':');
        v.object[key] = nested();
        if (peek() == '}') return ++at_, v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = Json::Kind::array;
      ++at_;
      if (peek() == ']') return ++at_, v;
      for (;;) {
        v.array.push_back(nested());
        if (peek() == ']') return ++at_, v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = Json::Kind::string;
      v.string = text();
      return v;
    }
    if (word("true") || word("false")) {
      v.kind = Json::Kind::boolean;
      v.boolean = c == 't';
      return v;
    }
    if (word("null")) return v;
    const std::string rest(s_.substr(at_, 64));
    char* end = nullptr;
    v.number = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) fail("expected a value");
    v.kind = Json::Kind::number;
    at_ += size_t(end - rest.c_str());
    return v;
  }

  Json nested() {
    ++depth_;
    Json v = value();
    --depth_;
    return v;
  }

  // A quoted string; escapes as JSON has them, \uXXXX as UTF-8 (surrogate pairs joined).
  std::string text() {
    ++at_;
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) fail("the text ends inside a string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) fail("the text ends inside a string");
      const char e = s_[at_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && word("\\u")) cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4() - 0xDC00);
          utf8(cp, out);
          break;
        }
        default: out += e;
      }
    }
  }
  unsigned hex4() {
    if (at_ + 4 > s_.size()) fail("a \\u escape needs four hex digits");
    const std::string digits(s_.substr(at_, 4));
    char* end = nullptr;
    const unsigned long v = std::strtoul(digits.c_str(), &end, 16);
    if (end != digits.c_str() + 4) fail("a \\u escape needs four hex digits");
    at_ += 4;
    return unsigned(v);
  }
  static void utf8(unsigned cp, std::string& out) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string_view s_;
  const std::string& where_;
  size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

const Json& Json::at(const std::string& key, const std::string& where) const {
  if (!has(key)) throw UserError(where + ": no \"" + key + "\"");
  return object.at(key);
}

Json parse_json(std::string_view text, const std::string& where) { return Parser(text, where).document(); }

}  // namespace mt

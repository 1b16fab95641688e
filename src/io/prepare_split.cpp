#include "io/prepare_split.hpp"

#include <algorithm>
#include <cstdio>

#include "util/error.hpp"

namespace mt {

namespace {

// Only spaces, tabs and line breaks.
bool blank(std::string_view text) { return text.find_first_not_of(" \t\n") == std::string_view::npos; }

// Each line without its "\n", the last one too when the text does not end in a line break.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

// Documents of the runs of lines between the lines `cut` accepts; runs of blank lines alone are dropped.
template <class Cut>
std::vector<std::string> runs_between(std::string_view text, Cut cut) {
  std::vector<std::string> docs;
  std::string doc;
  auto close = [&] {
    if (!blank(doc)) docs.push_back(doc);
    doc.clear();
  };
  for (std::string_view line : lines_of(text)) {
    if (cut(line)) {
      close();
    } else {
      doc += line;
      doc += '\n';
    }
  }
  close();
  return docs;
}

std::vector<std::string> pieces(std::string_view text, size_t n) {
  MT_CHECK(n >= 4);  // a UTF-8 character fits (split_options asks for kMinPieceBytes)
  std::vector<std::string> docs;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.size();
    if (end - at > n) {
      const std::string_view window = text.substr(at + n / 2, n - n / 2);
      size_t cut = window.rfind('\n');
      if (cut == std::string_view::npos) cut = window.find_last_of(" \t");
      if (cut != std::string_view::npos) {
        end = at + n / 2 + cut + 1;
      } else {
        end = at + n;  // no boundary: cut before a UTF-8 character, never inside one
        while (end > at + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
      }
    }
    docs.emplace_back(text.substr(at, end - at));
    at = end;
  }
  return docs;
}

// Length of the UTF-8 sequence at text[i], or 0 when it is not one (overlong forms, surrogates
// and code points above U+10FFFF included).
size_t utf8_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) len = 2;
  else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + len > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return len;
}

std::string where(const std::string& path, std::string_view text, size_t i) {
  const size_t line = 1 + std::count(text.begin(), text.begin() + i, '\n');
  return path + ": byte " + std::to_string(i) + " (line " + std::to_string(line) + ")";
}

}  // namespace

SplitOptions split_options(const std::string& split, const std::string* separator, const size_t* piece_bytes) {
  SplitOptions opt;
  if (separator && piece_bytes)
    throw UserError("prepare: --separator and --piece-bytes belong to different splits (separator, bytes); give one");
  if (split.empty())
    opt.kind = separator ? DocumentSplit::Separator : piece_bytes ? DocumentSplit::Bytes : DocumentSplit::Auto;
  else if (split == "auto") opt.kind = DocumentSplit::Auto;
  else if (split == "paragraphs") opt.kind = DocumentSplit::Paragraphs;
  else if (split == "separator") opt.kind = DocumentSplit::Separator;
  else if (split == "bytes") opt.kind = DocumentSplit::Bytes;
  else if (split == "file") opt.kind = DocumentSplit::File;
  else
    throw UserError("prepare: --split " + split + " is not a split; use auto, paragraphs, separator, bytes or file");
  if (separator && opt.kind != DocumentSplit::Separator)
    throw UserError("prepare: --separator applies to --split separator, not --split " + split);
  if (piece_bytes && opt.kind != DocumentSplit::Bytes)
    throw UserError("prepare: --piece-bytes applies to --split bytes, not --split " + split);
  if (separator) {
    if (separator->empty() || separator->find('\n') != std::string::npos)
      throw UserError("prepare: --separator must be the text of one non-empty line (for blank lines use "
                      "--split paragraphs)");
    opt.separator = *separator;
  }
  if (piece_bytes) {
    if (*piece_bytes < kMinPieceBytes)
      throw UserError("prepare: --piece-bytes " + std::to_string(*piece_bytes) + " is below the smallest piece, " +
                      std::to_string(kMinPieceBytes) + " bytes");
    opt.piece_bytes = *piece_bytes;
  }
  return opt;
}

void check_text(const std::string& path, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0')
      throw UserError(where(path, text, i) + " is a NUL byte: this looks like a binary file, and prepare takes "
                      "UTF-8 text; leave the file out of the inputs");
    const size_t len = utf8_length(text, i);
    if (len == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[i]));
      throw UserError(where(path, text, i) + " is " + hex + ", not UTF-8: prepare takes UTF-8 text; convert the "
                      "file first, e.g. for Latin-1 or Windows text: iconv -f WINDOWS-1252 -t UTF-8 " + path +
                      " > " + path + ".utf8");
    }
    i += len;
  }
}

FileDocuments split_documents(std::string_view raw, const SplitOptions& opt) {
  FileDocuments out;
  if (raw.starts_with("\xEF\xBB\xBF")) raw.remove_prefix(3);  // a byte-order mark is no text
  std::string lf;
  out.crlf = raw.find("\r\n") != std::string_view::npos;
  if (out.crlf) {
    lf.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i)
      if (!(raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n')) lf += raw[i];
    raw = lf;
  }
  const std::string_view text = raw;
  out.bytes = text.size();
  out.used = opt.kind;
  if (opt.kind == DocumentSplit::Auto) {
    const auto lines = lines_of(text);
    const bool fortune = std::find(lines.begin(), lines.end(), "%") != lines.end();
    out.used = fortune ? DocumentSplit::Separator : DocumentSplit::Paragraphs;
  }
  switch (out.used) {
    case DocumentSplit::Paragraphs: out.docs = runs_between(text, blank); break;
    case DocumentSplit::Separator: {
      const std::string sep = opt.kind == DocumentSplit::Auto ? "%" : opt.separator;
      out.docs = runs_between(text, [&](std::string_view line) { return line == sep; });
      break;
    }
    case DocumentSplit::Bytes: out.docs = pieces(text, opt.piece_bytes); break;
    default:
      if (!blank(text)) out.docs.emplace_back(text);
  }
  return out;
}

std::string split_description(DocumentSplit used, const SplitOptions& opt) {
  switch (used) {
    case DocumentSplit::Paragraphs: return "split at blank lines";
    case DocumentSplit::Separator:
      return "split at lines holding only \"" + (opt.kind == DocumentSplit::Auto ? std::string("%") : opt.separator) +
             "\"";
    case DocumentSplit::Bytes: return "pieces of at most " + std::to_string(opt.piece_bytes) + " bytes";
    case DocumentSplit::File: return "one document per file";
    default: return "split automatically";
  }
}

}  // namespace mt

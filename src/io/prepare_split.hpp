#pragma once
// How `moetrain prepare` reads a text file and cuts it into documents (each gets a document-start
// token; every 20th document goes to the validation shard).
//   auto        (default) a file with a line holding only "%" (fortune(6) format) at those lines,
//               any other file at blank lines
//   paragraphs  at blank lines (empty or only spaces and tabs); a run of them is one cut
//   separator   at lines holding exactly --separator TEXT (default "%"); the lines are dropped
//   bytes       pieces of at most --piece-bytes N bytes, each cut after the last line break in its
//               second half, else after the last space or tab there, else before a UTF-8 character;
//               every byte is kept
//   file        the whole file is one document
// Paragraphs and separator documents are their lines, each ending in "\n". Text must be UTF-8
// without NUL bytes (check_text); CRLF line ends are read as LF and a leading byte-order mark is dropped.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mt {

enum class DocumentSplit { Auto, Paragraphs, Separator, Bytes, File };

constexpr size_t kMinPieceBytes = 16;
constexpr size_t kDefaultPieceBytes = 4096;

struct SplitOptions {
  DocumentSplit kind = DocumentSplit::Auto;
  std::string separator = "%";
  size_t piece_bytes = kDefaultPieceBytes;
};

// The options from prepare's command line: `split` is "" when --split was not given, and then
// --separator alone means separator and --piece-bytes alone means bytes. Throws UserError on
// an unknown name, a conflict, an empty separator or a piece size below kMinPieceBytes.
SplitOptions split_options(const std::string& split, const std::string* separator, const size_t* piece_bytes);

struct FileDocuments {
  std::vector<std::string> docs;
  DocumentSplit used = DocumentSplit::Paragraphs;  // Auto resolved
  bool crlf = false;               // CRLF line ends were read as LF
  size_t bytes = 0;                // of the text as read (what --split bytes cuts)
};

// Throws UserError naming the file, the byte offset and line of a NUL byte or of the first byte
// that is not UTF-8, and how to convert the file.
void check_text(const std::string& path, std::string_view text);

FileDocuments split_documents(std::string_view text, const SplitOptions& opt);

// "split at blank lines", "split at lines holding only \"%\"", "pieces of at most 4096 bytes", ...
std::string split_description(DocumentSplit used, const SplitOptions& opt);

}  // namespace mt

// `moetrain prepare` cutting text files into documents (io/prepare_split.hpp) and what it says about them.
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "io/prepare.hpp"
#include "io/prepare_split.hpp"
#include "io/shards.hpp"
#include "fuzz_cases.hpp"
#include "test_helpers.hpp"
#include "util/error.hpp"

using mt::DocumentSplit;
using testing::contains;
constexpr auto error_of = testing::user_error_of;

namespace {

using Docs = std::vector<std::string>;

mt::FileDocuments cut(const std::string& text, DocumentSplit kind, size_t piece_bytes = mt::kDefaultPieceBytes,
                      const std::string& separator = "%") {
  return mt::split_documents(text, {.kind = kind, .separator = separator, .piece_bytes = piece_bytes});
}

std::string joined(const Docs& docs) {
  std::string all;
  for (auto& d : docs) all += d;
  return all;
}

bool valid_utf8(const std::string& s) {
  try {
    mt::check_text("x", s);
    return true;
  } catch (const mt::UserError&) {
    return false;
  }
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST_CASE("paragraphs: a run of blank lines (spaces and tabs too) is one cut, each line ends in a line break") {
  const auto f = cut("\n\na\nb\n\n\n c \n  \t\nd", DocumentSplit::Paragraphs);
  CHECK(f.docs == Docs{"a\nb\n", " c \n", "d\n"});
  CHECK(f.used == DocumentSplit::Paragraphs);
  CHECK_FALSE(f.crlf);
  CHECK(cut("one\n%\ntwo\n", DocumentSplit::Paragraphs).docs == Docs{"one\n%\ntwo\n"});
}

TEST_CASE("auto: fortune files at their % lines, any other file at blank lines") {
  const auto fortune = cut("one\n\nstill one\n%\ntwo\n%\n", DocumentSplit::Auto);
  CHECK(fortune.used == DocumentSplit::Separator);
  CHECK(fortune.docs == Docs{"one\n\nstill one\n", "two\n"});
  const auto prose = cut("one\n\ntwo 50%\n", DocumentSplit::Auto);
  CHECK(prose.used == DocumentSplit::Paragraphs);
  CHECK(prose.docs == Docs{"one\n", "two 50%\n"});
}

TEST_CASE("separator: lines holding exactly the text cut; empty and blank documents are dropped") {
  const auto f = cut("----\na\n----\n----\n  \n----\nb\n%\nc\n ----\n", DocumentSplit::Separator, 0, "----");
  CHECK(f.docs == Docs{"a\n", "b\n%\nc\n ----\n"});
}

TEST_CASE("bytes: pieces of at most N bytes cut after a line break, else a space, else between characters") {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "line " + std::to_string(i) + " of some words\n";
  const auto lines = cut(text, DocumentSplit::Bytes, 100);
  CHECK(joined(lines.docs) == text);  // every byte kept, in order
  REQUIRE(lines.docs.size() >= text.size() / 100);
  for (size_t i = 0; i < lines.docs.size(); ++i) {
    CHECK(lines.docs[i].size() <= 100);
    CHECK(lines.docs[i].back() == '\n');
    if (i + 1 < lines.docs.size()) CHECK(lines.docs[i].size() > 50);
  }
  const std::string words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi";
  const auto w = cut(words, DocumentSplit::Bytes, 20);
  CHECK(joined(w.docs) == words);
  for (size_t i = 0; i + 1 < w.docs.size(); ++i) {
    CHECK(w.docs[i].size() <= 20);
    CHECK(w.docs[i].back() == ' ');
  }
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xC3\xA9";  // é, two bytes each, no boundary anywhere
  const auto a = cut(accents, DocumentSplit::Bytes, 17);
  CHECK(joined(a.docs) == accents);
  for (auto& piece : a.docs) {
    CHECK(piece.size() <= 17);
    CHECK(valid_utf8(piece));
  }
}

TEST_CASE("file: one document, none for a file of only blank lines or nothing") {
  CHECK(cut("a\n\nb\n%\n", DocumentSplit::File).docs == Docs{"a\n\nb\n%\n"});
  CHECK(cut(" \n\t\n\n", DocumentSplit::File).docs.empty());
  for (auto kind : {DocumentSplit::Auto, DocumentSplit::Paragraphs, DocumentSplit::Separator, DocumentSplit::Bytes,
                    DocumentSplit::File})
    CHECK(cut("", kind).docs.empty());
}

TEST_CASE("CRLF line ends are read as LF, a lone CR is kept, a byte-order mark is dropped") {
  const auto f = cut("a\r\nb\r\n\r\nc\rd\r\n", DocumentSplit::Paragraphs);
  CHECK(f.crlf);
  CHECK(f.docs == Docs{"a\nb\n", "c\rd\n"});
  CHECK(f.bytes == 9);  // "a\nb\n\nc\rd\n"
  CHECK(cut("x\r\n%\r\ny\r\n", DocumentSplit::Auto).docs == Docs{"x\n", "y\n"});
  CHECK(cut("\xEF\xBB\xBFhello\n", DocumentSplit::File).docs == Docs{"hello\n"});
}

TEST_CASE("text must be UTF-8 without NUL bytes; the error names the byte and line and how to convert") {
  CHECK(valid_utf8("plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80\n"));
  const std::string nul = error_of([] { mt::check_text("notes.txt", std::string("ab\ncd\0e", 7)); });
  CHECK(contains(nul, "notes.txt: byte 5 (line 2) is a NUL byte"));
  CHECK(contains(nul, "binary file"));
  const std::string latin1 = error_of([] { mt::check_text("notes.txt", "one\ntwo\ncaf\xE9\n"); });
  CHECK(contains(latin1, "notes.txt: byte 11 (line 3) is 0xE9, not UTF-8"));
  CHECK(contains(latin1, "iconv -f WINDOWS-1252 -t UTF-8 notes.txt"));
  CHECK_FALSE(valid_utf8("\xC0\x80"));          // overlong NUL
  CHECK_FALSE(valid_utf8("\xE0\x80\xAF"));      // overlong '/'
  CHECK_FALSE(valid_utf8("\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(valid_utf8("ends in \xE2\x82"));  // cut short
  CHECK_FALSE(valid_utf8("\x80"));
}

TEST_CASE("the split options: --separator or --piece-bytes alone choose their split; conflicts are refused") {
  CHECK(mt::split_options("", nullptr, nullptr).kind == DocumentSplit::Auto);
  const std::string sep = "***";
  const size_t piece = 500, tiny = 4;
  const auto s = mt::split_options("", &sep, nullptr);
  CHECK(s.kind == DocumentSplit::Separator);
  CHECK(s.separator == "***");
  const auto b = mt::split_options("bytes", nullptr, &piece);
  CHECK(b.kind == DocumentSplit::Bytes);
  CHECK(b.piece_bytes == 500);
  CHECK(mt::split_options("", nullptr, &piece).kind == DocumentSplit::Bytes);
  CHECK(mt::split_options("paragraphs", nullptr, nullptr).kind == DocumentSplit::Paragraphs);
  CHECK(mt::split_options("file", nullptr, nullptr).kind == DocumentSplit::File);
  CHECK(contains(error_of([] { mt::split_options("lines", nullptr, nullptr); }),
                 "--split lines is not a split; use auto, paragraphs, separator, bytes or file"));
  CHECK(contains(error_of([&] { mt::split_options("paragraphs", nullptr, &piece); }),
                 "--piece-bytes applies to --split bytes, not --split paragraphs"));
  CHECK(contains(error_of([&] { mt::split_options("bytes", &sep, nullptr); }), "--separator applies to"));
  CHECK(contains(error_of([&] { mt::split_options("", &sep, &piece); }), "give one"));
  CHECK(contains(error_of([&] { mt::split_options("", nullptr, &tiny); }), "--piece-bytes 4 is below"));
  const std::string empty;
  CHECK(contains(error_of([&] { mt::split_options("", &empty, nullptr); }), "--split paragraphs"));
  CHECK(mt::split_description(DocumentSplit::Bytes, b) == "pieces of at most 500 bytes");
  CHECK(mt::split_description(DocumentSplit::Separator, s) == "split at lines holding only \"***\"");
  CHECK(mt::split_description(DocumentSplit::Separator, {}) == "split at lines holding only \"%\"");
}

TEST_CASE("prepare: one text file gives documents at blank lines, every 20th for validation") {
  const std::string dir = testing::temp_dir("prepare_split");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "paragraph " + std::to_string(i) + "\nits second line\n\n";
  write(dir + "/book.txt", text);
  const mt::PrepareStats st = mt::prepare_shards({dir + "/book.txt"}, dir + "/out");
  CHECK(st.documents == 40);
  REQUIRE(st.inputs.size() == 1);
  CHECK(mt::describe(st.inputs[0]) == dir + "/book.txt: 40 documents (split at blank lines)");
  const auto val = mt::read_shard(dir + "/out/val_000000.bin");
  const std::string first = "paragraph 19\nits second line\n";
  REQUIRE(val.size() == 2 * (1 + first.size()));
  CHECK(val[0] == mt::kDocumentStart);
  CHECK(std::string(val.begin() + 1, val.begin() + 1 + first.size()) == first);
  CHECK(st.train_tokens + st.val_tokens == text.size());  // each blank line out, a start token in
}

TEST_CASE("prepare: too few documents are refused with a piece size that gives enough") {
  const std::string dir = testing::temp_dir("prepare_few");
  std::string text;
  for (int i = 0; i < 5; ++i) text += std::string(300, 'a' + i) + " some words to cut at\n\n";
  write(dir + "/short.txt", text);
  const std::string e = error_of([&] { mt::prepare_shards({dir + "/short.txt"}, dir + "/out"); });
  CHECK(contains(e, "short.txt: 5 documents (split at blank lines); at least 20 are needed"));
  std::smatch m;
  REQUIRE(std::regex_search(e, m, std::regex("try --split bytes --piece-bytes ([0-9]+) ")));
  const size_t piece = std::stoul(m[1]);
  const auto st = mt::prepare_shards({dir + "/short.txt"}, dir + "/out", 0,
                                     mt::split_options("bytes", nullptr, &piece));
  CHECK(st.documents >= 20);

  write(dir + "/tiny.txt", "a few words\n");
  CHECK(contains(error_of([&] { mt::prepare_shards({dir + "/tiny.txt"}, dir + "/out"); }),
                 "the text holds 12 bytes, too few for 20 documents of 16 bytes; give at least 320 bytes"));
  write(dir + "/empty.txt", "");
  CHECK(contains(error_of([&] { mt::prepare_shards({dir + "/empty.txt", dir + "/short.txt"}, dir + "/out"); }),
                 "empty.txt: 0 documents (empty); " + dir + "/short.txt: 5 documents (split at blank lines); "
                 "5 documents in all"));
}

TEST_CASE("prepare: a directory's files are described together; a binary file in it is refused by name") {
  const std::string dir = testing::temp_dir("prepare_dir");
  std::filesystem::create_directories(dir + "/in");
  std::string fortunes, prose;
  for (int i = 0; i < 15; ++i) fortunes += "fortune " + std::to_string(i) + "\n%\n";
  for (int i = 0; i < 15; ++i) prose += "paragraph " + std::to_string(i) + "\r\n\r\n";
  write(dir + "/in/a", fortunes);
  write(dir + "/in/b", prose);
  write(dir + "/in/c", "");
  const auto st = mt::prepare_shards({dir + "/in"}, dir + "/out");
  REQUIRE(st.inputs.size() == 1);
  CHECK(mt::describe(st.inputs[0]) == dir + "/in: 3 files, 30 documents (1 split at blank lines, 1 split at lines "
                                            "holding only \"%\", 1 empty; CRLF line ends read as LF in 1)");
  write(dir + "/in/d.png", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  CHECK(contains(error_of([&] { mt::prepare_shards({dir + "/in"}, dir + "/out"); }), "d.png: byte 0 (line 1) is 0x89"));
}

TEST_CASE("prepare names the command that trains on its shards, the run named after their directory") {
  CHECK(mt::train_command("data/my", 0) ==
        "moetrain train EXP.toml --set run.name=my --set data.train='data/my/train_*.bin' "
        "--set data.val='data/my/val_*.bin'");
  CHECK(mt::train_command("data/my-notes/", 512) ==
        "moetrain train EXP.toml --set run.name=my-notes --set data.train='data/my-notes/train_*.bin' "
        "--set data.val='data/my-notes/val_*.bin' --set model.vocab_size=512");
  CHECK(mt::train_command("my notes", 0) ==
        "moetrain train EXP.toml --set data.train='my notes/train_*.bin' --set data.val='my notes/val_*.bin'");
  CHECK(mt::train_command(".", 0) ==
        "moetrain train EXP.toml --set data.train='./train_*.bin' --set data.val='./val_*.bin'");
}

TEST_CASE("mutated text: every split keeps its promises or check_text refuses the bytes") {
  Rng rng(11);
  const std::string seed_text = "One line.\r\n\r\nAnother, caf\xC3\xA9 \xE2\x82\xAC.\n%\nThird\t \n \n";
  for (int c = 0; c < fuzz_cases(3000); ++c) {
    std::string text = seed_text;
    for (int m = 0; m < 1 + int(below(rng, 4)); ++m) mutate_bytes(text, rng, int(below(rng, 4)), "\r\n%\t \xC3");
    if (!valid_utf8(text)) continue;
    const size_t piece = mt::kMinPieceBytes + below(rng, 8);
    const auto pieces = cut(text, DocumentSplit::Bytes, piece);
    std::string lf = text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text;
    for (size_t at = 0; (at = lf.find("\r\n", at)) != std::string::npos; ++at) lf.erase(at, 1);  // one pass
    REQUIRE(joined(pieces.docs) == lf);
    for (auto& p : pieces.docs) {
      CHECK(p.size() <= piece);
      CHECK(valid_utf8(p));
    }
    for (auto kind : {DocumentSplit::Auto, DocumentSplit::Paragraphs, DocumentSplit::Separator, DocumentSplit::File})
    {
      const auto docs = cut(text, kind).docs;
      for (auto& doc : docs) CHECK(doc.find_first_not_of(" \t\n") != std::string::npos);
      CHECK(joined(docs).size() <= lf.size() + docs.size());  // at most a line break added to each
    }
  }
}

// llm.c's GPT-2 tokenizer file: files the test writes with a writer of its own (llm.c's layout, versions
// 1 and 2) decode to their pieces, the writer's bytes are that layout, and hostile files are refused
// with an accel::Error naming the file and the field.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "accel.h"
#include "../temp_dir.h"

using namespace accel;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

// As train_gpt2.py's write_tokenizer writes it: 256 uint32 little-endian (magic, version, vocab, eot),
// then a length byte and the bytes of each token.
std::vector<uint8_t> independent_tokenizer(const std::vector<std::string>& pieces, uint32_t version = 2,
                                           uint32_t eot = 0, uint32_t magic = 20240328) {
  std::vector<uint8_t> out(1024, 0);
  auto put32 = [&](size_t at, uint32_t v) {
    for (int b = 0; b < 4; ++b) out[at + b] = static_cast<uint8_t>((v >> (8 * b)) & 0xff);
  };
  put32(0, magic);
  put32(4, version);
  put32(8, static_cast<uint32_t>(pieces.size()));
  if (version == 2) put32(12, eot);
  for (const std::string& p : pieces) {
    out.push_back(static_cast<uint8_t>(p.size()));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

const std::vector<std::string> kPieces{"!", "hello", " world", "\n", std::string("\xe2\x82", 2), std::string(1, '\xac'),
                                       "<|endoftext|>"};

}  // namespace

TEST_CASE("a version 2 tokenizer file decodes ids to their bytes, and the writer's bytes are llm.c's layout") {
  const TempDir dir("gpt2_tokenizer");
  write_bytes(dir.file("tok.bin"), independent_tokenizer(kPieces, 2, 6));
  const llmc::Gpt2Tokenizer t = llmc::read_gpt2_tokenizer(dir.file("tok.bin"));
  CHECK(t.version == 2);
  CHECK(t.vocab_size() == 7);
  CHECK(t.eot_token == 6);
  CHECK(t.decode(1) == "hello");
  CHECK(t.decode({1, 2, 3}) == "hello world\n");
  CHECK(t.decode({4, 5}) == "\xe2\x82\xac");  // a character split over two byte-level tokens
  CHECK(t.pieces == kPieces);
  CHECK(llmc::gpt2_tokenizer_bytes(t) == independent_tokenizer(kPieces, 2, 6));
  llmc::write_gpt2_tokenizer(dir.file("again.bin"), t);
  CHECK(llmc::read_gpt2_tokenizer(dir.file("again.bin")).pieces == kPieces);
  CHECK_THROWS_WITH_AS(t.decode(7), "Gpt2Tokenizer::decode: token id 7 is outside the table, expected 0 to 6", Error);
  CHECK_THROWS_WITH_AS(t.decode(-1), "Gpt2Tokenizer::decode: token id -1 is outside the table, expected 0 to 6", Error);
}

TEST_CASE("a version 1 file has GPT-2's end-of-text id 50256 when its table reaches it") {
  const TempDir dir("gpt2_tokenizer");
  std::vector<std::string> gpt2(50257);
  for (size_t i = 0; i < gpt2.size(); ++i) gpt2[i] = fmt::format("t{}", i);
  write_bytes(dir.file("v1.bin"), independent_tokenizer(gpt2, 1));
  const llmc::Gpt2Tokenizer t = llmc::read_gpt2_tokenizer(dir.file("v1.bin"));
  CHECK(t.version == 1);
  CHECK(t.vocab_size() == 50257);
  CHECK(t.eot_token == 50256);
  CHECK(t.decode(50256) == "t50256");
  CHECK(llmc::gpt2_tokenizer_bytes(t) == independent_tokenizer(gpt2, 1));
  write_bytes(dir.file("v1_short.bin"), independent_tokenizer(kPieces, 1));
  CHECK(llmc::read_gpt2_tokenizer(dir.file("v1_short.bin")).eot_token == -1);
}

TEST_CASE("hostile tokenizer files are refused with the file and the field named") {
  const TempDir dir("gpt2_tokenizer");
  const std::string f = dir.file("bad.bin");
  auto refused = [&](std::vector<uint8_t> bytes, const std::string& what) {
    write_bytes(f, bytes);
    try {
      llmc::read_gpt2_tokenizer(f);
      FAIL("accepted a tokenizer with " << what);
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(m.find("read_gpt2_tokenizer: " + f + ": ") == 0, m);
      CHECK_MESSAGE(m.find(what) != std::string::npos, m);
    }
  };
  const std::vector<uint8_t> good = independent_tokenizer(kPieces, 2, 6);
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 1000), "the header is truncated (1000 bytes, expected 1024)");
  refused({}, "the header is truncated (0 bytes, expected 1024)");
  refused(independent_tokenizer(kPieces, 2, 6, 20240326), "magic is 20240326, expected 20240328");
  refused(independent_tokenizer(kPieces, 3, 6), "version is 3, expected 1 or 2");
  refused(independent_tokenizer({}, 2, 0), "vocab_size is 0, expected > 0");
  refused(independent_tokenizer(kPieces, 2, 7), "eot_token is 7, expected < vocab_size 7");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 3), "token 6 is truncated (length 13, but 10 bytes are left)");
  std::vector<uint8_t> short_table = independent_tokenizer({"abc", "defgh"}, 2, 0);
  short_table[8] = 3;  // vocab_size 3, two tokens follow: 10 bytes, enough for the size check
  refused(short_table, "token 2 is truncated (the file ends before its length; vocab_size is 3)");
  std::vector<uint8_t> huge = good;
  huge[8] = 0xff, huge[9] = 0xff, huge[10] = 0xff, huge[11] = 0xff;  // 4294967295 tokens in a few bytes
  refused(huge, "vocab_size is 4294967295, which needs at least 8589934590 bytes of tokens");
  std::vector<uint8_t> empty_token = good;
  empty_token[1024 + 2 + 6] = 0;  // the third token's length byte (after 1 + "!" and 1 + "hello")
  refused(empty_token, "token 2 has length 0, expected >= 1");
  std::vector<uint8_t> trailing = good;
  trailing.push_back('x');
  refused(trailing, "1 bytes follow the last of its 7 tokens, expected none");
  CHECK_THROWS_WITH_AS(llmc::read_gpt2_tokenizer(dir.file("absent.bin")),
                       ("read_gpt2_tokenizer: " + dir.file("absent.bin") + ": cannot be opened").c_str(), Error);
}

TEST_CASE("the writer refuses what llm.c's layout cannot hold") {
  llmc::Gpt2Tokenizer t{.version = 2, .pieces = {"a", ""}, .eot_token = 0};
  CHECK_THROWS_WITH_AS(llmc::gpt2_tokenizer_bytes(t),
                       "write_gpt2_tokenizer: token 1 has 0 bytes, expected 1 to 255 (its length is one byte)", Error);
  t.pieces = {"a", std::string(256, 'b')};
  CHECK_THROWS_WITH_AS(llmc::gpt2_tokenizer_bytes(t),
                       "write_gpt2_tokenizer: token 1 has 256 bytes, expected 1 to 255 (its length is one byte)", Error);
  t.pieces = {"a"};
  t.eot_token = 1;
  CHECK_THROWS_WITH_AS(llmc::gpt2_tokenizer_bytes(t), "write_gpt2_tokenizer: eot_token is 1, expected 0 to 0", Error);
  t.pieces.clear();
  CHECK_THROWS_AS(llmc::gpt2_tokenizer_bytes(t), Error);
}

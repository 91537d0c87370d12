// llm.c's token shards: the file layout byte for byte against a writer of the test's own, the reader's
// refusal of hostile files (each error naming the file and the field), and the loader's windows per
// rank, its move between shards, its wrap-around and its resumable position.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "accel.h"
#include "../temp_dir.h"

using namespace accel;
namespace fs = std::filesystem;
using test::TempDir;

namespace {

// The layout as llm.c's dev/data/data_common.py writes it: 256 int32 little-endian, then uint16s.
std::vector<uint8_t> independent_shard(const std::vector<uint16_t>& tokens, int32_t magic = 20240520,
                                       int32_t version = 1, std::optional<int32_t> count = std::nullopt) {
  std::vector<uint8_t> out(1024, 0);
  auto put32 = [&](size_t at, int32_t v) {
    for (int b = 0; b < 4; ++b) out[at + b] = static_cast<uint8_t>((static_cast<uint32_t>(v) >> (8 * b)) & 0xff);
  };
  put32(0, magic);
  put32(4, version);
  put32(8, count.value_or(static_cast<int32_t>(tokens.size())));
  for (uint16_t t : tokens) {
    out.push_back(static_cast<uint8_t>(t & 0xff));
    out.push_back(static_cast<uint8_t>(t >> 8));
  }
  return out;
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint16_t> iota_tokens(size_t n, uint16_t first) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint16_t>(first + i);
  return t;
}

std::vector<int64_t> ids(const Tensor& t) { return t.to_vector<int64_t>(); }

}  // namespace

TEST_CASE("a token shard's bytes are llm.c's layout, and it reads back") {
  const TempDir dir("token_shards");
  const std::vector<uint16_t> tokens{0, 1, 50256, 65535, 258};
  CHECK(llmc::token_shard_bytes(tokens) == independent_shard(tokens));
  llmc::write_token_shard(dir.file("a.bin"), tokens);
  CHECK(llmc::read_token_shard(dir.file("a.bin")) == tokens);
  write_bytes(dir.file("b.bin"), independent_shard(tokens));
  CHECK(llmc::read_token_shard(dir.file("b.bin"), 65536) == tokens);
  llmc::write_token_shard(dir.file("empty.bin"), {});
  CHECK(llmc::read_token_shard(dir.file("empty.bin")).empty());
}

TEST_CASE("hostile shards are refused with the file and the field named") {
  const TempDir dir("token_shards");
  const std::vector<uint16_t> tokens{1, 2, 3, 4};
  const std::string f = dir.file("bad.bin");
  auto refused = [&](const std::vector<uint8_t>& bytes, const std::string& what, int64_t vocab = 0) {
    write_bytes(f, bytes);
    try {
      llmc::read_token_shard(f, vocab);
      FAIL("accepted a shard with " << what);
    } catch (const Error& e) {
      const std::string m = e.what();
      CHECK_MESSAGE(m.find(f) != std::string::npos, m);
      CHECK_MESSAGE(m.find(what) != std::string::npos, m);
    }
  };
  std::vector<uint8_t> good = independent_shard(tokens);
  refused(std::vector<uint8_t>(good.begin(), good.begin() + 100), "the header is truncated");
  refused(independent_shard(tokens, 20240326), "magic is 20240326, expected 20240520");
  refused(independent_shard(tokens, 20240520, 2), "version is 2, expected 1");
  refused(independent_shard(tokens, 20240520, 1, -5), "the token count is -5");
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), "the header says 4 tokens (8 bytes) but 7 bytes follow");
  refused(independent_shard(tokens, 20240520, 1, 2147483647), "the header says 2147483647 tokens");
  refused(good, "token 3 is id 4, expected < the vocab size 4", 4);
  CHECK_THROWS_WITH_AS(llmc::read_token_shard(dir.file("missing.bin")),
                       doctest::Contains("missing.bin: cannot be opened"), Error);
  CHECK_THROWS_WITH_AS(llmc::expand_shard_pattern(dir.file("train_*.bin")), doctest::Contains("matches no file"), Error);
}

TEST_CASE("the loader gives each rank its own window of a step, moves on by world x B x T, then to the next shard") {
  const TempDir dir("token_shards");
  // B = 2, T = 3, 2 ranks: a step takes 12 tokens (+1 for the last target). 30 tokens: 2 steps.
  llmc::write_token_shard(dir.file("train_000.bin"), iota_tokens(30, 0));
  llmc::write_token_shard(dir.file("train_001.bin"), iota_tokens(13, 1000));  // 1 step
  const std::string pattern = dir.file("train_*.bin");
  CHECK(llmc::expand_shard_pattern(pattern) == std::vector<std::string>{dir.file("train_000.bin"), dir.file("train_001.bin")});
  llmc::TokenShardLoader r0(pattern, 2, 3, 0, 2), r1(pattern, 2, 3, 1, 2);
  CHECK(r0.steps_in_shard() == 2);
  llmc::TokenBatch a = r0.next_batch(), b = r1.next_batch();
  CHECK(a.inputs.shape() == Shape{2, 3});
  CHECK(ids(a.inputs) == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(ids(a.targets) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(ids(b.inputs) == std::vector<int64_t>{6, 7, 8, 9, 10, 11});
  CHECK(ids(b.targets) == std::vector<int64_t>{7, 8, 9, 10, 11, 12});
  CHECK(ids(r0.next_batch().inputs)[0] == 12);
  CHECK(ids(r1.next_batch().targets).back() == 24);
  // The first shard's tokens 24..29 do not make a whole step: the second shard starts.
  CHECK(ids(r0.next_batch().inputs) == std::vector<int64_t>{1000, 1001, 1002, 1003, 1004, 1005});
  CHECK(ids(r1.next_batch().targets) == std::vector<int64_t>{1007, 1008, 1009, 1010, 1011, 1012});
  CHECK(r0.shard() == 1);
  // After the last shard, the first again.
  CHECK(ids(r0.next_batch().inputs)[0] == 0);
  CHECK(r0.shard() == 0);
}

TEST_CASE("the loader's position survives a checkpoint, at the same world size and at another") {
  const TempDir dir("token_shards");
  llmc::write_token_shard(dir.file("train_000.bin"), iota_tokens(49, 0));
  llmc::write_token_shard(dir.file("train_001.bin"), iota_tokens(49, 500));
  const std::string pattern = dir.file("train_*.bin");
  llmc::TokenShardLoader run(pattern, 2, 2, 0, 2);  // 8 tokens a step: 6 steps a shard
  for (int i = 0; i < 7; ++i) run.next_batch();      // into the second shard, one step done
  const nn::StateDict saved = run.state_dict();
  const std::vector<int64_t> next = ids(run.next_batch().inputs);
  llmc::TokenShardLoader resumed(pattern, 2, 2, 0, 2);
  resumed.load_state_dict(saved);
  CHECK(ids(resumed.next_batch().inputs) == next);
  // One rank with B = 4 takes the same 8 tokens a step: it continues at the same token.
  llmc::TokenShardLoader one(pattern, 4, 2, 0, 1);
  one.load_state_dict(saved);
  CHECK(ids(one.next_batch().inputs)[0] == 508);
  llmc::TokenShardLoader wide(pattern, 3, 2, 0, 1);  // 6 tokens a step: 8 consumed is not whole steps
  CHECK_THROWS_WITH_AS(wide.load_state_dict(saved), doctest::Contains("8 tokens consumed of shard 1 are not whole steps"),
                       Error);
}

TEST_CASE("shuffled, each epoch reads every step of every shard once, in an order the ranks share and resume") {
  const TempDir dir("token_shards");
  // B = 1, T = 2, 2 ranks: 4 tokens a step. 41 tokens: 10 steps; 21 tokens: 5 steps.
  llmc::write_token_shard(dir.file("train_000.bin"), iota_tokens(41, 0));
  llmc::write_token_shard(dir.file("train_001.bin"), iota_tokens(21, 1000));
  llmc::write_token_shard(dir.file("train_002.bin"), iota_tokens(21, 2000));
  const std::string pattern = dir.file("train_*.bin");
  auto epoch_of = [](llmc::TokenShardLoader& r0, llmc::TokenShardLoader& r1) {
    std::vector<int64_t> firsts;  // each step's first input token, rank 0's then rank 1's
    for (int i = 0; i < 20; ++i) {
      const std::vector<int64_t> a = ids(r0.next_batch().inputs), b = ids(r1.next_batch().inputs);
      CHECK(b[0] == a[0] + 2);  // rank 1 reads the second half of the same step
      firsts.push_back(a[0]);
    }
    return firsts;
  };
  llmc::TokenShardLoader r0(pattern, 1, 2, 0, 2, 0, 7), r1(pattern, 1, 2, 1, 2, 0, 7);
  const std::vector<int64_t> first = epoch_of(r0, r1);
  CHECK(r0.epoch() == 0);
  std::vector<int64_t> sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> every;  // unshuffled, the same steps in file order
  llmc::TokenShardLoader plain0(pattern, 1, 2, 0, 2), plain1(pattern, 1, 2, 1, 2);
  for (int64_t f : epoch_of(plain0, plain1)) every.push_back(f);
  CHECK(sorted == every);
  CHECK(first != every);
  const nn::StateDict saved = r0.state_dict();  // the end of epoch 0
  const std::vector<int64_t> second = epoch_of(r0, r1);
  CHECK(r0.epoch() == 1);
  CHECK(second != first);  // another order of shards and steps
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> second_sorted = second;
  std::sort(second_sorted.begin(), second_sorted.end());
  CHECK(second_sorted == every);
  // Resumed from the end of epoch 0, on new loaders: the same second epoch.
  llmc::TokenShardLoader again0(pattern, 1, 2, 0, 2, 0, 7), again1(pattern, 1, 2, 1, 2, 0, 7);
  again0.load_state_dict(saved);
  again1.load_state_dict(saved);
  CHECK(epoch_of(again0, again1) == second);
  // Another seed, another order.
  llmc::TokenShardLoader other0(pattern, 1, 2, 0, 2, 0, 8), other1(pattern, 1, 2, 1, 2, 0, 8);
  CHECK(epoch_of(other0, other1) != first);
}

TEST_CASE("the loader refuses shards too small for a step, and bad sizes") {
  const TempDir dir("token_shards");
  llmc::write_token_shard(dir.file("small.bin"), iota_tokens(12, 0));
  CHECK_THROWS_WITH_AS(llmc::TokenShardLoader(dir.file("small.bin"), 2, 3, 0, 2),
                       doctest::Contains("holds 12 tokens; 2 ranks x B 2 x T 3 need at least 13"), Error);
  CHECK_THROWS_WITH_AS(llmc::TokenShardLoader(dir.file("small.bin"), 0, 3, 0, 1),
                       doctest::Contains("batch 0 and seq_len 3"), Error);
  CHECK_THROWS_WITH_AS(llmc::TokenShardLoader(dir.file("small.bin"), 1, 3, 2, 2), doctest::Contains("rank 2 of 2"),
                       Error);
  CHECK_THROWS_WITH_AS(llmc::TokenShardLoader(dir.file("small.bin"), 1, 3, 0, 1, 5),
                       doctest::Contains("token 5 is id 5, expected < the vocab size 5"), Error);
}

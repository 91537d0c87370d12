// A main for a harness built without libFuzzer (g++, the normal build): runs LLVMFuzzerTestOneInput
// once on every file under the directories or files given, so that each crash found, once added to
// a corpus, stays fixed in every build.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "fuzz_check.h"

namespace fs = std::filesystem;

namespace {

int replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (!fs::is_directory(arg)) {
      inputs += replay(arg);
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(arg))
      if (entry.is_regular_file()) inputs += replay(entry.path());
  }
  std::cout << "replayed " << inputs << " inputs" << std::endl;
  return inputs > 0 ? 0 : 1;  // an empty or missing corpus is a mistake, not a pass
}

// Deferred-init agreement: one 64-bit fingerprint of the meta entries per rank, all-gathered.
#include "runtime/strategy/deferred_init_agreement.h"

#include <fmt/format.h>

#include "kernels/fnv1a.h"
#include "tensor/creation.h"
#include "tensor/meta_tensor.h"
#include "tensor/nograd/copy.h"

namespace accel {

nn::StateDict materialised_entries(const nn::StateDict& entries) {
  nn::StateDict out;
  for (const auto& entry : entries)
    if (!entry.second.is_meta()) out.push_back(entry);
  return out;
}

namespace {

int64_t fingerprint_of(const nn::StateDict& entries) {
  Fnv1a hash;
  for (const auto& [name, t] : entries) {
    hash.text(name).word(t.is_meta() ? 1 : 0);
    if (t.is_meta()) hash.word(static_cast<uint64_t>(t.offset())).word(t.storage()->recipe()->fingerprint());
  }
  return static_cast<int64_t>(hash.value());
}

}  // namespace

void check_deferred_init_agrees(const nn::StateDict& entries, Communicator& comm, const std::string& who) {
  const Tensor mine = nograd::to_device(from_vector<int64_t>({fingerprint_of(entries)}), comm.device());
  const Tensor all = zeros({comm.size()}, DType::i64, comm.device());
  comm.all_gather(mine, all, fmt::format("{} deferred-init fingerprints", who));
  const std::vector<int64_t> prints = nograd::to_device(all, Device::cpu()).to_vector<int64_t>();
  std::string differing;
  for (size_t r = 1; r < prints.size(); ++r)
    if (prints[r] != prints[0]) differing += fmt::format("{}{}", differing.empty() ? "" : ", ", r);
  if (!differing.empty())
    throw Error(fmt::format("{}: the parameters of rank(s) {} differ from rank 0's in their names or their "
                            "deferred-init recipes (another seed, model or init order?). Under accel::DeferredInit "
                            "nothing is broadcast: each rank materialises its own slice from its own recipe, so "
                            "every rank must build the model from the same seed",
                            who, differing));
}

}  // namespace accel

// Objects travel as their JSON text, one i32 per byte, padded to the longest rank's text.
#include "runtime/object_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "tensor/creation.h"

namespace accel {
namespace {

Tensor text_tensor(const std::string& text, int64_t width) {
  std::vector<int32_t> codes(static_cast<size_t>(width), 0);
  for (size_t i = 0; i < text.size(); ++i) codes[i] = static_cast<unsigned char>(text[i]);
  return from_vector(codes);
}

std::string text_of(const int32_t* codes, int64_t length) {
  std::string text(static_cast<size_t>(length), '\0');
  for (int64_t i = 0; i < length; ++i) text[static_cast<size_t>(i)] = static_cast<char>(codes[i]);
  return text;
}

}  // namespace

std::vector<nlohmann::json> gather_object(Communicator* comm, const nlohmann::json& object, const CallSite& site) {
  if (!comm) return {object};
  const std::string text = object.dump();
  const int n = comm->size();
  Tensor lengths = empty({n}, DType::i64);
  comm->all_gather(from_vector(std::vector<int64_t>{static_cast<int64_t>(text.size())}), lengths, site);
  const std::vector<int64_t> length = lengths.to_vector<int64_t>();
  const int64_t width = std::max<int64_t>(1, *std::max_element(length.begin(), length.end()));
  Tensor all = empty({n * width}, DType::i32);
  comm->all_gather(text_tensor(text, width), all, site);
  const std::vector<int32_t> codes = all.to_vector<int32_t>();
  std::vector<nlohmann::json> out;
  for (int r = 0; r < n; ++r)
    out.push_back(nlohmann::json::parse(text_of(codes.data() + static_cast<size_t>(r) * width, length[r])));
  return out;
}

std::vector<nlohmann::json> broadcast_object_list(Communicator* comm, const std::vector<nlohmann::json>& objects,
                                                  int from, const CallSite& site) {
  const int n = comm ? comm->size() : 1;
  if (from < 0 || from >= n)
    throw Error(fmt::format("Accelerator::broadcast_object_list: from = {} is not a rank of {}", from, n));
  if (!comm) return objects;
  const std::string text = comm->rank() == from ? nlohmann::json(objects).dump() : std::string();
  Tensor length = from_vector(std::vector<int64_t>{static_cast<int64_t>(text.size())});
  comm->broadcast(length, from, site);
  const int64_t width = std::max<int64_t>(1, length.to_vector<int64_t>()[0]);
  Tensor codes = text_tensor(text, width);
  comm->broadcast(codes, from, site);
  const std::vector<int32_t> received = codes.to_vector<int32_t>();
  const nlohmann::json list = nlohmann::json::parse(text_of(received.data(), length.to_vector<int64_t>()[0]));
  if (list.size() != objects.size())
    throw Error(fmt::format("Accelerator::broadcast_object_list: rank {} passed {} objects, rank {} {}", comm->rank(),
                            objects.size(), from, list.size()));
  return list.get<std::vector<nlohmann::json>>();
}

}  // namespace accel

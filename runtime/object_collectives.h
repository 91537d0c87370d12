// gather_object and broadcast_object_list: JSON values (strings, numbers, maps, lists) between the
// ranks, as Accelerate moves picklable objects. Each is serialised, its length exchanged, then its bytes.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "collective/communicator.h"

namespace accel {

// Every rank's object, in rank order. comm null: {object}. Collective.
std::vector<nlohmann::json> gather_object(Communicator* comm, const nlohmann::json& object, const CallSite& site = {});
// Rank from's objects on every rank (the other ranks' inputs only give their count, which must match).
std::vector<nlohmann::json> broadcast_object_list(Communicator* comm, const std::vector<nlohmann::json>& objects,
                                                  int from, const CallSite& site = {});

}  // namespace accel

// HookList and HookHandle: an ordered list of callbacks, and the handle that adding one returns so
// that it can be removed again. Grad-ready hooks on leaves and nn::Module's hooks are kept in these.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace accel {

class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover) : remover_(std::move(remover)) {}

  // Takes the hook out. Removing twice, or after the hook's owner is gone, does nothing.
  void remove() {
    if (auto remover = std::exchange(remover_, nullptr)) remover();
  }
  // False once removed (or for a default-constructed handle).
  bool active() const { return remover_ != nullptr; }

 private:
  std::function<void()> remover_;
};

template <class Signature>
class HookList {
 public:
  using Hook = std::function<Signature>;

  HookHandle add(Hook hook) {
    const uint64_t id = next_id_++;
    entries_->emplace_back(id, std::move(hook));
    // Weak: a handle that outlives the list must not keep it, or its owner, alive.
    std::weak_ptr<Entries> entries = entries_;
    return HookHandle([entries, id] {
      if (auto list = entries.lock()) std::erase_if(*list, [id](const auto& entry) { return entry.first == id; });
    });
  }

  bool empty() const { return entries_->empty(); }
  size_t size() const { return entries_->size(); }

  // Calls every hook in the order they were added. A hook may add or remove hooks: this call runs the
  // ones present when it started.
  template <class... Args>
  void run(Args&&... args) const {
    if (entries_->empty()) return;
    const Entries snapshot = *entries_;
    for (const auto& entry : snapshot) entry.second(args...);
  }

 private:
  using Entries = std::vector<std::pair<uint64_t, Hook>>;
  std::shared_ptr<Entries> entries_ = std::make_shared<Entries>();
  uint64_t next_id_ = 0;
};

}  // namespace accel

// Caching allocator, after PyTorch's: two pools per device. Requests up to 1 MiB are cut from 2 MiB
// segments (the small pool); larger ones from 20 MiB segments, or from a segment of their own size
// rounded up to 2 MiB when they are 10 MiB or more (the large pool). A request takes the smallest
// free block that fits (best fit), split when the rest is worth keeping; a freed block merges with
// free neighbours in its segment, so segments do not fragment into unusable slivers.
#include "tensor/cuda/allocator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/error.h"
#include "tensor/cuda/device.h"
#include "tensor/cuda/stream.h"

namespace accel::cuda {

namespace {

constexpr size_t kMinBlock = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;   // largest request served by the small pool
constexpr size_t kSmallSegment = size_t{2} << 20;
constexpr size_t kMidLimit = size_t{10} << 20;     // below this, large requests share 20 MiB segments
constexpr size_t kMidSegment = size_t{20} << 20;
constexpr size_t kLargeRound = size_t{2} << 20;
constexpr int kMaxDevices = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  bool small = false;      // which pool
  bool allocated = false;
  Block* prev = nullptr;   // neighbours inside the same segment
  Block* next = nullptr;
  std::vector<cudaStream_t> streams;  // other streams that use it (record_stream)
};

struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};

// A freed block waiting for other streams' work before it may be reused.
struct Pending {
  Block* block;
  std::vector<cudaEvent_t> events;
};

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}

  void* allocate(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    process_pending();
    const size_t size = allocation_size(nbytes);
    const bool small = size <= kSmallLimit;
    Block* block = take_free(size, small);
    if (block == nullptr) block = new_segment(size, small, nbytes);
    block = split(block, size);
    block->allocated = true;
    live_.emplace(block->ptr, block);
    stats_.allocated_bytes += block->size;
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    stats_.allocations += 1;
    return block->ptr;
  }

  void deallocate(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) {
      std::fprintf(stderr, "accel: device_free: %p was not allocated on cuda:%d; ignored\n", ptr, device_);
      return;
    }
    Block* block = it->second;
    live_.erase(it);
    stats_.allocated_bytes -= block->size;
    if (!block->streams.empty()) {
      Pending pending{block, {}};
      for (cudaStream_t s : block->streams) {
        cudaEvent_t event = take_event();
        if (event == nullptr || cudaEventRecord(event, s) != cudaSuccess) {
          // Without an event we cannot know when the other stream is done: wait for it here.
          cudaGetLastError();
          if (cudaStreamSynchronize(s) != cudaSuccess) cudaGetLastError();
          if (event != nullptr) spare_events_.push_back(event);
          continue;
        }
        pending.events.push_back(event);
      }
      block->streams.clear();
      if (!pending.events.empty()) {
        pending_.push_back(std::move(pending));
        return;
      }
    }
    release(block);
  }

  void record_stream(void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end())
      throw Error(fmt::format("record_stream: {} was not allocated on cuda:{}", ptr, device_));
    if (stream == compute_stream(device_)) return;  // the stream rule already covers it
    auto& streams = it->second->streams;
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) streams.push_back(stream);
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    AllocatorStats s = stats_;
    s.cached_bytes = s.reserved_bytes - s.allocated_bytes;
    return s;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceGuard guard(device_);
    ACCEL_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    process_pending();
    release_free_segments();
  }

 private:
  std::set<Block*, BySize>& pool(bool small) { return small ? small_free_ : large_free_; }

  Block* take_free(size_t size, bool small) {
    auto& free = pool(small);
    Block key;
    key.size = size;
    const auto it = free.lower_bound(&key);
    if (it == free.end()) return nullptr;
    Block* block = *it;
    free.erase(it);
    return block;
  }

  Block* new_segment(size_t size, bool small, size_t requested) {
    const size_t segment = small ? kSmallSegment : size < kMidLimit ? kMidSegment : round_up(size, kLargeRound);
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, segment);
    if (err == cudaErrorMemoryAllocation) {
      // Give the cache back and try once more before failing.
      cudaGetLastError();
      if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
      process_pending();
      release_free_segments();
      err = cudaMalloc(&ptr, segment);
    }
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw Error(fmt::format("cudaMalloc({} bytes) on cuda:{}: {} ({}); a request of {} bytes, with {} bytes in use "
                              "and {} reserved",
                              segment, device_, cudaGetErrorString(err), cudaGetErrorName(err), requested,
                              stats_.allocated_bytes, stats_.reserved_bytes));
    }
    stats_.device_mallocs += 1;
    stats_.reserved_bytes += segment;
    Block* block = new Block();
    block->ptr = ptr;
    block->size = segment;
    block->small = small;
    return block;
  }

  // Cuts the front `size` bytes off a free block when the rest is large enough to serve another
  // request of the same pool; the rest goes back to the free set.
  Block* split(Block* block, size_t size) {
    const size_t rest = block->size - size;
    const bool worth_it = block->small ? rest >= kMinBlock : rest > kSmallLimit;
    if (!worth_it) return block;
    Block* tail = new Block();
    tail->ptr = static_cast<char*>(block->ptr) + size;
    tail->size = rest;
    tail->small = block->small;
    tail->prev = block;
    tail->next = block->next;
    if (tail->next != nullptr) tail->next->prev = tail;
    block->next = tail;
    block->size = size;
    pool(tail->small).insert(tail);
    return block;
  }

  // A block is free again: merge it with free neighbours and put it in the free set.
  void release(Block* block) {
    block->allocated = false;
    auto& free = pool(block->small);
    // Pending blocks stay marked allocated until their events complete, so they never merge early.
    if (Block* prev = block->prev; prev != nullptr && !prev->allocated) {
      free.erase(prev);
      prev->size += block->size;
      prev->next = block->next;
      if (prev->next != nullptr) prev->next->prev = prev;
      delete block;
      block = prev;
    }
    if (Block* next = block->next; next != nullptr && !next->allocated) {
      free.erase(next);
      block->size += next->size;
      block->next = next->next;
      if (block->next != nullptr) block->next->prev = block;
      delete next;
    }
    free.insert(block);
  }

  void process_pending() {
    for (size_t i = 0; i < pending_.size();) {
      Pending& p = pending_[i];
      bool done = true;
      for (cudaEvent_t e : p.events) {
        const cudaError_t err = cudaEventQuery(e);
        if (err == cudaErrorNotReady) {
          done = false;
          break;
        }
        if (err != cudaSuccess) cudaGetLastError();  // a failed stream is finished too
      }
      if (!done) {
        ++i;
        continue;
      }
      for (cudaEvent_t e : p.events) spare_events_.push_back(e);
      Block* block = p.block;
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      release(block);
    }
  }

  cudaEvent_t take_event() {
    if (!spare_events_.empty()) {
      cudaEvent_t e = spare_events_.back();
      spare_events_.pop_back();
      return e;
    }
    DeviceGuard guard(device_);
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return e;
  }

  // cudaFree of every segment that is one free block. The caller has synchronised the device, so
  // no queued kernel still uses them.
  void release_free_segments() {
    for (bool small : {true, false}) {
      auto& free = pool(small);
      for (auto it = free.begin(); it != free.end();) {
        Block* block = *it;
        if (block->prev != nullptr || block->next != nullptr) {
          ++it;
          continue;
        }
        it = free.erase(it);
        if (cudaFree(block->ptr) != cudaSuccess) cudaGetLastError();
        stats_.device_frees += 1;
        stats_.reserved_bytes -= block->size;
        delete block;
      }
    }
  }

  const int device_;
  std::mutex mutex_;
  std::set<Block*, BySize> small_free_, large_free_;
  std::unordered_map<void*, Block*> live_;
  std::vector<Pending> pending_;
  std::vector<cudaEvent_t> spare_events_;
  AllocatorStats stats_;
};

DeviceAllocator& allocator_for(const char* op, Device device) {
  check_device(op, device);
  if (device.index >= kMaxDevices)
    throw Error(fmt::format("{}: {} exceeds the {} devices accel supports", op, device.str(), kMaxDevices));
  static std::mutex mutex;
  // Never destroyed: tensors freed during static teardown still return their blocks here.
  static auto* allocators = new std::array<std::unique_ptr<DeviceAllocator>, kMaxDevices>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*allocators)[static_cast<size_t>(device.index)];
  if (!slot) slot = std::make_unique<DeviceAllocator>(device.index);
  return *slot;
}

}  // namespace

size_t allocation_size(size_t nbytes) { return nbytes <= kMinBlock ? kMinBlock : round_up(nbytes, kMinBlock); }

void* device_allocate(size_t nbytes, Device device) {
  DeviceAllocator& a = allocator_for("device_allocate", device);
  if (nbytes == 0) return nullptr;
  return a.allocate(nbytes);
}

void device_free(void* ptr, Device device) {
  if (ptr == nullptr) return;
  try {
    allocator_for("device_free", device).deallocate(ptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accel: device_free on %s failed: %s\n", device.str().c_str(), e.what());
  }
}

void record_stream(void* ptr, Device device, cudaStream_t stream) {
  if (ptr == nullptr) return;
  allocator_for("record_stream", device).record_stream(ptr, stream);
}

AllocatorStats allocator_stats(Device device) { return allocator_for("allocator_stats", device).stats(); }
void reset_peak_stats(Device device) { allocator_for("reset_peak_stats", device).reset_peak(); }
void empty_cache(Device device) { allocator_for("empty_cache", device).empty_cache(); }

}  // namespace accel::cuda

// TrainingCheckpoint: the files of a checkpoint and the order they are written and read in.
//   model.safetensors, model_<i>.safetensors        each prepared model's full state (rank 0), or
//   model.shards.json, model.shard-*.safetensors     a strategy's per-rank shards (state_shard_files.h)
//   optimizer.safetensors, optimizer_<i>.safetensors each prepared optimizer, keyed by parameter name
//   precision.safetensors                            the precision recipe's state, when it has any
//   custom_checkpoint_<i>.safetensors                registered objects
//   random_states_<rank>.safetensors                 every random stream of that rank
//   accelerator_state.json                           format, version, world size, positions
//   COMPLETE                                         the commit marker, last
#include "runtime/checkpoint/training_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <fstream>
#include <map>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "accel_config.h"
#include "autograd/grad_mode.h"
#include "nn/dropout.h"
#include "runtime/checkpoint/checkpoint_dir.h"
#include "runtime/checkpoint/named_optimizer_state.h"
#include "runtime/checkpoint/state_shard_files.h"
#include "runtime/safetensors.h"
#include "tensor/creation.h"
#include "tensor/nograd/copy.h"
#include "tensor/nograd/views.h"

namespace accel {

namespace {

using json = nlohmann::json;

constexpr const char* kStateFile = "accelerator_state.json";

std::string numbered_file(const char* stem, size_t i) {
  return i == 0 ? fmt::format("{}.safetensors", stem) : fmt::format("{}_{}.safetensors", stem, i);
}

std::string random_file(int rank) { return fmt::format("random_states_{}.safetensors", rank); }

// save_safetensors into the staging directory, with a stage before and after.
void write_tensors(const fs::path& staging, const std::string& name, const nn::StateDict& state,
                   const SafetensorsMetadata& metadata = {}) {
  checkpoint_stage("writing " + name);
  save_safetensors((staging / name).string(), state, metadata);
  checkpoint_stage("wrote " + name);
}

void barrier(const TrainingParts& parts) {
  if (Communicator* comm = parts.env->comm()) comm->barrier();
}

bool is_main(const TrainingParts& parts) { return parts.env->rank() == 0; }

template <class T>
std::shared_ptr<T> alive(const std::weak_ptr<T>& weak, const char* what, size_t i) {
  std::shared_ptr<T> p = weak.lock();
  if (!p) throw Error(fmt::format("save_state/load_state: prepared {} {} no longer exists", what, i));
  return p;
}

// A Philox stream as two i64 tensors (the u64 bits as they are).
void add_stream(nn::StateDict& out, const std::string& name, const GeneratorState& s) {
  out.emplace_back(name + ".seed", scalar_tensor(0.0, DType::i64));
  out.back().second.data<int64_t>()[0] = std::bit_cast<int64_t>(s.seed);
  out.emplace_back(name + ".offset", scalar_tensor(0.0, DType::i64));
  out.back().second.data<int64_t>()[0] = std::bit_cast<int64_t>(s.offset);
}

// Every random stream of this rank: each prepared model's dropout layers, then the registered ones.
std::vector<std::pair<std::string, Generator*>> random_streams(const TrainingParts& parts) {
  std::vector<std::pair<std::string, Generator*>> out;
  for (size_t i = 0; i < parts.models.size(); ++i)
    for (const auto& [name, m] : alive(parts.models[i], "model", i)->named_modules())
      if (auto* dropout = dynamic_cast<nn::Dropout*>(m)) out.emplace_back(fmt::format("model_{}.{}", i, name), &dropout->generator());
  for (size_t i = 0; i < parts.generators.size(); ++i) out.emplace_back(fmt::format("generator_{}", i), parts.generators[i]);
  return out;
}

json small_state(const TrainingParts& parts) {
  json loaders = json::array();
  for (const PreparedLoader& l : parts.loaders)
    loaders.push_back({{"epoch", l.progress->epoch},
                       {"samples_seen", l.progress->steps_done * l.global_batch_size},
                       {"global_batch_size", l.global_batch_size}});
  const GradientAccumulation::Position p = parts.accumulation->position();
  return {{"format", kCheckpointFormat},
          {"accel_version", ACCEL_VERSION},
          {"world_size", parts.env->world_size()},
          {"strategy", parts.strategy->name()},
          {"mixed_precision", parts.precision->name()},
          {"models", parts.models.size()},
          {"optimizers", parts.optimizers.size()},
          {"objects", parts.objects.size()},
          {"generators", parts.generators.size()},
          {"loaders", loaders},
          {"completed_steps", parts.training_step->completed_steps()},
          {"accumulation",
           {{"steps", parts.accumulation->steps()},
            {"micro_step", p.micro_step},
            {"batches_seen", p.batches_seen},
            {"batches", p.batches}}}};
}

// The host buffers of an earlier snapshot, by file and tensor name, for the next one to copy into:
// fresh buffers would page-fault on every first touch, which costs more than the copy itself.
using BufferPool = std::map<std::pair<std::string, std::string>, Tensor>;

BufferPool pool_of(const CheckpointSnapshot* previous) {
  BufferPool pool;
  if (!previous) return pool;
  for (const CheckpointSnapshot::TensorFile& f : previous->tensor_files)
    for (const auto& [name, t] : f.tensors) pool.emplace(std::make_pair(f.group, name), t);
  return pool;
}

// A host copy that the caller's later steps cannot change (for a save written in the background),
// in a buffer of the pool where one of the same shape and dtype is there.
nn::StateDict host_copy(const nn::StateDict& state, const std::string& file, BufferPool& pool) {
  nn::StateDict out;
  for (const auto& [name, t] : state) {
    auto it = pool.find({file, name});
    if (it != pool.end() && it->second.shape() == t.shape() && it->second.dtype() == t.dtype()) {
      nograd::copy_(it->second, t);
      out.emplace_back(name, it->second);
    } else {
      out.emplace_back(name, nograd::to_device(nograd::clone(t), Device::cpu()));
    }
  }
  return out;
}

int64_t state_bytes(const nn::StateDict& state) {
  int64_t bytes = 0;
  for (const auto& [name, t] : state) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

// A model's state as one file, or beyond max_shard_bytes as Hugging Face's shards and index:
// <stem>-00001-of-0000N.safetensors and <stem>.safetensors.index.json.
void add_model_files(CheckpointSnapshot& snap, const std::string& stem, nn::StateDict state, int64_t max_shard_bytes) {
  const SafetensorsMetadata pt{{"format", "pt"}};
  if (state_bytes(state) <= max_shard_bytes) {
    snap.tensor_files.push_back({stem + ".safetensors", std::move(state), pt, stem});
    return;
  }
  std::vector<nn::StateDict> shards(1);
  int64_t in_shard = 0;
  for (auto& entry : state) {
    const auto bytes = static_cast<int64_t>(entry.second.nbytes());
    if (!shards.back().empty() && in_shard + bytes > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(std::move(entry));
    in_shard += bytes;
  }
  json weight_map = json::object();
  int64_t total = 0;
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file = fmt::format("{}-{:05d}-of-{:05d}.safetensors", stem, k + 1, shards.size());
    for (const auto& [name, t] : shards[k]) {
      weight_map[name] = file;
      total += static_cast<int64_t>(t.nbytes());
    }
    snap.tensor_files.push_back({file, std::move(shards[k]), pt, stem});
  }
  snap.text_files.emplace_back(stem + ".safetensors.index.json",
                               json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
}

}  // namespace

CheckpointSnapshot take_checkpoint_snapshot(const TrainingParts& parts, const SaveStateOptions& options,
                                            const CheckpointSnapshot* previous) {
  if (!parts.accumulation->may_clear_grads())
    throw Error("save_state: called inside an accumulation window, whose accumulated grads a checkpoint does not "
                "hold; save after the optimizer step that ends the window");
  if (options.max_shard_bytes <= 0)
    throw Error(fmt::format("save_state: max_shard_bytes must be > 0, got {}", options.max_shard_bytes));
  BufferPool pool = options.async ? pool_of(previous) : BufferPool{};
  auto keep = [&](nn::StateDict state, const std::string& file) {
    return options.async ? host_copy(state, file, pool) : state;
  };
  CheckpointSnapshot snap;
  snap.rank = parts.env->rank();
  const bool main = is_main(parts);
  // A strategy that keeps state split (tensor parallel, ZeRO) has every writing rank save its own
  // shard, with no collective; the others' full state is taken on every rank and rank 0 writes it.
  auto add_shard = [&](const std::string& stem, StateShard shard) {
    if (main) snap.text_files.emplace_back(state_shard_index_name(stem), state_shard_index(stem, shard.parts));
    if (!shard.writer) return;
    const std::string file = state_shard_file_name(stem, shard.part, shard.parts);
    shard.local = keep(std::move(shard.local), file);
    auto [tensors, metadata] = state_shard_file(shard);
    snap.tensor_files.push_back({file, std::move(tensors), std::move(metadata), file});
  };
  for (size_t i = 0; i < parts.models.size(); ++i) {
    const nn::Module& model = *alive(parts.models[i], "model", i);
    const std::string stem = i == 0 ? "model" : fmt::format("model_{}", i);
    if (std::optional<StateShard> shard = parts.strategy->model_state_shard(model)) {
      add_shard(stem, std::move(*shard));
      continue;
    }
    nn::StateDict state = parts.strategy->model_state_dict(model);
    if (main) add_model_files(snap, stem, keep(std::move(state), stem), options.max_shard_bytes);
  }
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    const PreparedOptimizer& o = parts.optimizers[i];
    const optim::Optimizer& optimizer = *alive(o.optimizer, "optimizer", i);
    const std::string file = numbered_file("optimizer", i);
    if (std::optional<StateShard> shard = parts.strategy->optimizer_state_shard(optimizer)) {
      shard->local = name_optimizer_state(shard->local, o.names);
      add_shard(file.substr(0, file.size() - std::string(".safetensors").size()), std::move(*shard));
      continue;
    }
    const optim::StateDict state = parts.strategy->optimizer_state_dict(optimizer);
    if (main) snap.tensor_files.push_back({file, keep(name_optimizer_state(state, o.names), file), {}, file});
  }
  if (main) {
    const optim::StateDict precision = parts.precision->state_dict();
    const std::string precision_file = "precision.safetensors";
    if (!precision.empty())
      snap.tensor_files.push_back({precision_file, keep(precision, precision_file), {}, precision_file});
    for (size_t i = 0; i < parts.objects.size(); ++i) {
      const std::string file = fmt::format("custom_checkpoint_{}.safetensors", i);
      snap.tensor_files.push_back({file, keep(parts.objects[i].state_dict(), file), {}, file});
    }
    snap.text_files.emplace_back(kStateFile, small_state(parts).dump(2) + "\n");
  }
  nn::StateDict streams;
  for (const auto& [name, gen] : random_streams(parts)) add_stream(streams, name, gen->state());
  snap.tensor_files.push_back({random_file(snap.rank), std::move(streams), {}, random_file(snap.rank)});
  return snap;
}

void write_checkpoint(const CheckpointSnapshot& snap, const fs::path& dir, Communicator* comm) {
  auto barrier = [comm] {
    if (comm) comm->barrier();
  };
  const fs::path staging = staging_dir(dir);
  if (snap.rank == 0) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    fs::create_directories(staging);
    checkpoint_stage("staging directory created");
  }
  barrier();
  for (const CheckpointSnapshot::TensorFile& f : snap.tensor_files) write_tensors(staging, f.name, f.tensors, f.metadata);
  for (const auto& [name, text] : snap.text_files) {
    write_synced(staging / name, text);
    checkpoint_stage("wrote " + name);
  }
  barrier();  // every rank's files are on the disk
  checkpoint_stage("every rank's files written");
  if (snap.rank == 0) commit_checkpoint(staging, dir);
  barrier();
  checkpoint_stage("committed");
}

namespace {

// Everything a checkpoint holds, read and checked before anything is applied.
struct ReadCheckpoint {
  SavedCheckpointState state;
  std::vector<std::shared_ptr<const StateReader>> models, optimizers;  // read lazily: each rank takes its share
  std::vector<nn::StateDict> objects;
  optim::StateDict precision;
  nn::StateDict streams;
  int streams_rank = 0;  // whose streams these are (this rank's, unless the world size changed)
};

nn::StateDict read_tensors(const fs::path& file) { return load_safetensors(file.string()).tensors; }

SavedCheckpointState read_state(const fs::path& dir) {
  const fs::path file = dir / kStateFile;
  return parse_checkpoint_state(read_checkpoint_text(file), file.string());
}

void check_count(uint64_t saved, const char* key, size_t have, const fs::path& dir) {
  if (saved != have)
    throw Error(fmt::format("load_state: {} holds {} {}, but {} are prepared or registered here; prepare the same "
                            "objects in the same order before load_state",
                            (dir / kStateFile).string(), saved, key, have));
}

ReadCheckpoint read_checkpoint(const TrainingParts& parts, const fs::path& dir) {
  ReadCheckpoint r;
  r.state = read_state(dir);
  check_count(r.state.models, "models", parts.models.size(), dir);
  check_count(r.state.optimizers, "optimizers", parts.optimizers.size(), dir);
  check_count(r.state.objects, "objects", parts.objects.size(), dir);
  check_count(r.state.generators, "generators", parts.generators.size(), dir);
  for (size_t i = 0; i < parts.models.size(); ++i)
    r.models.push_back(open_checkpoint_model(dir, i));
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    const fs::path file = dir / numbered_file("optimizer", i);
    const std::string stem = file.stem().string();
    std::shared_ptr<const StateReader> by_name;
    if (fs::exists(dir / state_shard_index_name(stem))) by_name = open_state_shards(dir, stem);
    else by_name = std::make_shared<SafetensorsReader>(std::vector<std::string>{file.string()});
    std::vector<std::string> keys;
    for (const StateEntry& e : by_name->entries()) keys.push_back(e.name);
    r.optimizers.push_back(std::make_shared<RenamedStateReader>(
        by_name, index_optimizer_keys(keys, parts.optimizers[i].names, file.string())));
  }
  if (fs::exists(dir / "precision.safetensors")) r.precision = read_tensors(dir / "precision.safetensors");
  for (size_t i = 0; i < parts.objects.size(); ++i)
    r.objects.push_back(read_tensors(dir / fmt::format("custom_checkpoint_{}.safetensors", i)));
  const int saved_world = r.state.world_size;  // >= 1, checked by parse_checkpoint_state
  r.streams_rank = parts.env->rank() < saved_world ? parts.env->rank() : parts.env->rank() % saved_world;
  r.streams = read_tensors(dir / random_file(r.streams_rank));
  return r;
}

GeneratorState stream_of(const nn::StateDict& streams, const std::string& name, const fs::path& file) {
  auto find = [&](const std::string& key) -> int64_t {
    for (const auto& [k, t] : streams)
      if (k == key && t.dtype() == DType::i64 && t.numel() == 1) return nograd::contiguous(t).data<int64_t>()[0];
    throw Error(fmt::format("load_state: {}: no random stream '{}'; is this a checkpoint of another model?",
                            file.string(), key));
  };
  return {std::bit_cast<uint64_t>(find(name + ".seed")), std::bit_cast<uint64_t>(find(name + ".offset"))};
}

// Where each loader resumes: the saved global sample count in steps of this run's global batch.
std::vector<std::pair<int64_t, int64_t>> loader_positions(const TrainingParts& parts, const SavedCheckpointState& state,
                                                          const fs::path& dir) {
  const std::vector<SavedLoaderPosition>& saved = state.loaders;
  if (saved.size() != parts.loaders.size())
    throw Error(fmt::format("load_state: {} holds {} data loaders, but {} are prepared here", (dir / kStateFile).string(),
                            saved.size(), parts.loaders.size()));
  std::vector<std::pair<int64_t, int64_t>> out;
  for (size_t i = 0; i < saved.size(); ++i) {
    const int64_t samples = saved[i].samples_seen, batch = parts.loaders[i].global_batch_size;
    if (samples % batch != 0)
      throw Error(fmt::format("load_state: data loader {} had seen {} samples of its epoch, which is not a whole "
                              "number of this run's global batches of {}; resume with a global batch that divides it",
                              i, samples, batch));
    out.emplace_back(saved[i].epoch, samples / batch);
  }
  return out;
}

// What load applies, taken beforehand so that a failure part way can put it back: a rank's own shard
// where the strategy loads back from it, else the full state.
struct Snapshot {
  std::vector<std::shared_ptr<const StateReader>> models, optimizers;
  optim::StateDict precision;
};

nn::StateDict cloned(const nn::StateDict& state) {
  nn::StateDict out;
  for (const auto& [k, t] : state) out.emplace_back(k, nograd::clone(t));
  return out;
}

std::shared_ptr<const StateReader> own_shard_copy(StateShard shard) {
  shard.local = cloned(shard.local);
  return state_shard_reader(shard);
}

Snapshot take_snapshot(const TrainingParts& parts) {
  Snapshot s;
  // Through the strategy: a sharded one holds its state in shards (gathering them is collective, and
  // every rank loads).
  const Strategy& strategy = *parts.strategy;
  for (size_t i = 0; i < parts.models.size(); ++i) {
    const nn::Module& model = *alive(parts.models[i], "model", i);
    std::optional<StateShard> own = strategy.model_loads_own_shard() ? strategy.model_state_shard(model) : std::nullopt;
    s.models.push_back(own ? own_shard_copy(std::move(*own))
                           : std::make_shared<DictStateReader>(cloned(strategy.model_state_dict(model))));
  }
  for (size_t i = 0; i < parts.optimizers.size(); ++i) {
    const optim::Optimizer& optimizer = *alive(parts.optimizers[i].optimizer, "optimizer", i);
    std::optional<StateShard> own =
        strategy.optimizer_loads_own_shard() ? strategy.optimizer_state_shard(optimizer) : std::nullopt;
    s.optimizers.push_back(own ? own_shard_copy(std::move(*own))
                               : std::make_shared<DictStateReader>(cloned(strategy.optimizer_state_dict(optimizer))));
  }
  s.precision = cloned(parts.precision->state_dict());
  return s;
}

void put_back(const TrainingParts& parts, const Snapshot& s) {
  for (size_t i = 0; i < s.models.size(); ++i) parts.strategy->load_model_state(*parts.models[i].lock(), *s.models[i], true);
  for (size_t i = 0; i < s.optimizers.size(); ++i)
    parts.strategy->load_optimizer_state(*parts.optimizers[i].optimizer.lock(), *s.optimizers[i]);
  if (!s.precision.empty()) parts.precision->load_state_dict(s.precision);
}

// The tensor states, each failure naming its file; the caller puts the snapshot back on failure.
void apply_tensors(const TrainingParts& parts, const ReadCheckpoint& r, const fs::path& dir) {
  auto named = [&](const std::string& file, const auto& apply) {
    try {
      apply();
    } catch (const Error& e) {
      throw Error(fmt::format("load_state: {}: {}", (dir / file).string(), e.what()));
    }
  };
  for (size_t i = 0; i < parts.models.size(); ++i)
    named(numbered_file("model", i),
          [&] { parts.strategy->load_model_state(*parts.models[i].lock(), *r.models[i], true); });
  for (size_t i = 0; i < parts.optimizers.size(); ++i)
    named(numbered_file("optimizer", i),
          [&] { parts.strategy->load_optimizer_state(*parts.optimizers[i].optimizer.lock(), *r.optimizers[i]); });
  named("precision.safetensors", [&] { parts.precision->load_state_dict(r.precision); });
  for (size_t i = 0; i < parts.objects.size(); ++i)
    named(fmt::format("custom_checkpoint_{}.safetensors", i), [&] { parts.objects[i].load_state_dict(r.objects[i]); });
}

// Random streams, loader positions and the accumulation position: checked first, then set (these
// cannot fail part way).
void apply_positions(const TrainingParts& parts, const ReadCheckpoint& r, const fs::path& dir) {
  const fs::path streams_file = dir / random_file(r.streams_rank);
  std::vector<std::pair<Generator*, GeneratorState>> streams;
  for (const auto& [name, gen] : random_streams(parts)) streams.emplace_back(gen, stream_of(r.streams, name, streams_file));
  const auto positions = loader_positions(parts, r.state, dir);
  const bool remapped = r.streams_rank != parts.env->rank();
  for (auto& [gen, s] : streams) {
    // A rank the saved run did not have takes another rank's streams, reseeded by its own rank.
    if (remapped) s = {s.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(parts.env->rank() + 1)), 0};
    gen->set_state(s);
  }
  if (remapped && parts.env->rank() == parts.env->world_size() - 1)
    std::cout << fmt::format("accel: load_state: the checkpoint was saved by {} ranks; ranks from {} on reseeded "
                             "their random streams from it deterministically",
                             r.state.world_size, r.state.world_size)
              << std::endl;
  for (size_t i = 0; i < parts.loaders.size(); ++i) {
    LoaderProgress& p = *parts.loaders[i].progress;
    p.epoch = positions[i].first;
    p.steps_done = positions[i].second;
    p.resume_epoch = positions[i].first;
    p.resume_step = positions[i].second;
  }
  parts.accumulation->restore({r.state.micro_step, r.state.batches_seen, r.state.batches});
  parts.training_step->restore_completed_steps(r.state.completed_steps);
}

}  // namespace

void load_training_checkpoint(const TrainingParts& parts, const fs::path& requested) {
  const fs::path dir = resolve_checkpoint("load_state", requested);
  const ReadCheckpoint read = read_checkpoint(parts, dir);
  NoGradGuard no_grad;
  const Snapshot before = take_snapshot(parts);
  try {
    apply_tensors(parts, read, dir);
    apply_positions(parts, read, dir);
  } catch (...) {
    put_back(parts, before);
    throw;
  }
  parts.precision->weights_changed();
  barrier(parts);
}

std::shared_ptr<const StateReader> open_checkpoint_model(const fs::path& dir, size_t model_index) {
  const std::string stem = model_index == 0 ? "model" : fmt::format("model_{}", model_index);
  const fs::path whole = dir / (stem + ".safetensors"), index = dir / (stem + ".safetensors.index.json");
  if (fs::exists(dir / state_shard_index_name(stem))) return open_state_shards(dir, stem);
  std::vector<std::string> files{whole.string()};
  if (!fs::exists(whole) && fs::exists(index)) {
    files.clear();
    for (const std::string& file : parse_shard_index(read_checkpoint_text(index), index.string()))
      files.push_back((dir / file).string());
  }
  return std::make_shared<SafetensorsReader>(std::move(files));
}

nn::StateDict read_checkpoint_model(const fs::path& dir, size_t model_index) {
  return open_checkpoint_model(dir, model_index)->read_all();
}

}  // namespace accel

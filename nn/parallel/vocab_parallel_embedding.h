// nn::parallel::VocabParallelEmbedding: an Embedding whose rows are split by vocabulary range; each
// rank looks up the ids it owns, the others' rows give zero, and the sum over the group is the lookup.
#pragma once

#include <memory>
#include <optional>

#include "collective/communicator.h"
#include "nn/embedding.h"
#include "nn/module.h"
#include "nn/parallel/partition.h"
#include "nn/parallel/split_layer.h"
#include "tensor/generator.h"

namespace accel::nn::parallel {

class VocabParallelEmbedding : public Module, public SplitLayer {
 public:
  // Draws the full table from gen exactly as Embedding(num, dim, gen, options) does (leaving gen where
  // that leaves it) and keeps this rank's rows: it equals from_full of that Embedding.
  VocabParallelEmbedding(int64_t num_embeddings, int64_t embedding_dim, Communicator& tp, Generator& gen,
                         const EmbeddingOptions& options = {});
  // This rank's rows of a full table, copied or taken (FromFull). A vocabulary that is not a multiple
  // of tp.size() is padded up to one (vocab_range): the padding rows are zero and no id reaches them.
  static std::shared_ptr<VocabParallelEmbedding> from_full(const Embedding& full, Communicator& tp,
                                                           FromFull how = FromFull::copy);

  std::string type_name() const override { return "VocabParallelEmbedding"; }

  int64_t num_embeddings() const { return num_embeddings_; }  // of the full table, padding excluded
  int64_t embedding_dim() const { return weight_.size(1); }
  const VocabRange& range() const { return range_; }
  Communicator& tp() const override { return *tp_; }
  std::vector<std::pair<std::string, TensorSplit>> parameter_splits() const override;
  const Tensor& weight() const { return weight_; }  // [range().per_rank, dim]

 protected:
  // Integer ids in [0, num_embeddings) of any shape, the same on every rank -> ids.shape + [dim],
  // replicated (one all-reduce).
  Tensor forward_impl(const Tensor& ids) override;

 private:
  VocabParallelEmbedding(const Embedding& full, Communicator& tp, FromFull how);

  int64_t num_embeddings_;
  VocabRange range_;
  std::optional<int64_t> padding_idx_;  // the full table's padding row, when this rank holds it (local)
  Communicator* tp_;
  Tensor weight_;
};

}  // namespace accel::nn::parallel

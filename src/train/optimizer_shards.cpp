// ZeRO-1's pieces, their step, their publication and the checkpoint's whole state (see optimizer_shards.h).
#include "train/optimizer_shards.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "ops/fused_optimizers.h"
#include "ops/optimizer_state.h"
#include "train/optimizer.h"

namespace mpt::train {
namespace {

using precision::MasterPair;

torch::Tensor piece_of(const torch::Tensor& tensor, const Piece& piece) {
  return io::memory_order(tensor).narrow(0, piece.start, piece.length);
}

// A whole master another rank's pieces now hold: its shape over one element.
void shrink(const torch::Tensor& master) {
  if (master.numel() > 1) master.set_data(torch::zeros({}, master.options()).expand(master.sizes()));
}

// An optimizer of `optimizer`'s kind and options over `parameters`.
std::unique_ptr<torch::optim::Optimizer> same_kind(torch::optim::Optimizer& optimizer,
                                                   const std::vector<torch::Tensor>& parameters) {
  const auto& options = optimizer.param_groups().front().options();
  if (dynamic_cast<ops::FusedAdamW*>(&optimizer))
    return std::make_unique<ops::FusedAdamW>(parameters, static_cast<const torch::optim::AdamWOptions&>(options));
  if (dynamic_cast<ops::FusedAdam*>(&optimizer))
    return std::make_unique<ops::FusedAdam>(parameters, static_cast<const torch::optim::AdamOptions&>(options));
  if (dynamic_cast<ops::FusedSgd*>(&optimizer))
    return std::make_unique<ops::FusedSgd>(parameters, static_cast<const torch::optim::SGDOptions&>(options));
  throw Error("distributed.shard_optimizer: no sharding for this optimizer");
}

std::vector<int64_t> numels_of(const std::vector<MasterPair>& pairs) {
  std::vector<int64_t> numels;
  for (const auto& pair : pairs) numels.push_back(pair.master.numel());
  return numels;
}

}  // namespace

std::vector<Piece> partition(const std::vector<int64_t>& numels, int world_size) {
  std::vector<int64_t> offsets = {0};  // where each parameter starts in the flat run
  for (int64_t n : numels) offsets.push_back(offsets.back() + n);
  const int64_t total = offsets.back();
  // Range r starts at r/N of the run, moved back to a multiple of kPieceAlignment elements into the parameter it
  // falls in, so that a piece's elements take the same path through the optimizer's vector loop as in the whole
  // tensor (a piece cut anywhere else gave another rounding in its last elements).
  const auto boundary = [&](int rank) {
    const int64_t exact = total * rank / world_size;
    const size_t i = std::upper_bound(offsets.begin(), offsets.end(), exact) - offsets.begin() - 1;
    return i + 1 < offsets.size() ? offsets[i] + (exact - offsets[i]) / kPieceAlignment * kPieceAlignment : exact;
  };
  std::vector<Piece> pieces;
  for (size_t i = 0; i < numels.size(); ++i)
    for (int rank = 0; rank < world_size; ++rank) {
      const int64_t lo = std::max(offsets[i], boundary(rank)), hi = std::min(offsets[i + 1], boundary(rank + 1));
      if (hi > lo) pieces.push_back({i, lo - offsets[i], hi - lo, rank});
    }
  return pieces;
}

std::vector<RankState> state_per_rank(const std::vector<MasterPair>& pairs, const std::string& optimizer,
                                      double momentum, int ranks, bool sharded) {
  const int64_t state_bytes = optimizer == "sgd" ? (momentum != 0.0 ? 4 : 0) : 8;
  std::vector<RankState> states(ranks);
  for (RankState& rank : states)
    for (const auto& pair : pairs) rank.weights += pair.master.numel() * pair.model_param.element_size();
  for (const Piece& piece : partition(numels_of(pairs), sharded ? ranks : 1))
    for (int rank = 0; rank < ranks; ++rank) {
      if (sharded && piece.owner != rank) continue;
      if (!pairs[piece.pair].shared) states[rank].masters += piece.length * 4;
      states[rank].optimizer_state += piece.length * state_bytes;
    }
  for (RankState& rank : states) rank.gradients = rank.weights;
  return states;
}

OptimizerShards::OptimizerShards(torch::optim::Optimizer& optimizer, precision::Recipe& recipe,
                                 distributed::Group& group)
    : optimizer_(optimizer), recipe_(recipe), group_(group) {
  MPT_CHECK(optimizer_.param_groups().size() == 1, "distributed.shard_optimizer needs one parameter group");
  pieces_ = partition(numels_of(recipe_.pairs()), group_.world_size());
  for (size_t i = 0; i < pieces_.size(); ++i)
    if (pieces_[i].owner == group_.rank()) mine_.push_back(i);
}

OptimizerShards::~OptimizerShards() = default;

void OptimizerShards::take_pieces() {
  if (!whole_) return;
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  layouts_.clear();
  for (const auto& pair : pairs) layouts_.push_back(pair.master.strides().vec());
  shards_.clear();
  for (size_t k : mine_) {  // an FP32 parameter is its own master: its piece is a view, stepped in place
    const MasterPair& pair = pairs[pieces_[k].pair];
    const torch::Tensor piece = piece_of(pair.master.detach(), pieces_[k]);
    shards_.push_back(pair.shared ? piece : piece.clone());
  }
  shard_ = same_kind(optimizer_, shards_);
  auto& whole_states = optimizer_.state();
  for (size_t k = 0; k < mine_.size(); ++k) {  // a loaded state: this rank's pieces of it
    const Piece& piece = pieces_[mine_[k]];
    const auto found = whole_states.find(pairs[piece.pair].master.unsafeGetTensorImpl());
    if (found == whole_states.end()) continue;
    auto state = ops::fresh_state(optimizer_);
    const ops::StateFields from = ops::fields_of(*found->second), to = ops::fields_of(*state);
    if (from.step) *to.step = *from.step;
    for (size_t f = 0; f < from.tensors.size(); ++f)
      if (from.tensors[f].second->defined()) *to.tensors[f].second = piece_of(*from.tensors[f].second, piece).clone();
    shard_->state()[shards_[k].unsafeGetTensorImpl()] = std::move(state);
  }
  release_whole_state();
}

void OptimizerShards::step() {
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (size_t k = 0; k < mine_.size(); ++k) {
    const Piece& piece = pieces_[mine_[k]];
    const torch::Tensor& grad = pairs[piece.pair].master.grad();
    shards_[k].mutable_grad() = grad.defined() ? piece_of(grad, piece) : torch::Tensor();
  }
  set_learning_rate(*shard_, optimizer_.param_groups().front().options().get_lr());
  shard_->step();
  for (size_t k = 0; k < mine_.size(); ++k) {
    const Piece& piece = pieces_[mine_[k]];
    if (!pairs[piece.pair].shared) piece_of(pairs[piece.pair].model_param, piece).copy_(shards_[k]);  // rounded
    shards_[k].mutable_grad() = torch::Tensor();
  }
  publish();
}

void OptimizerShards::release_whole_state() {
  optimizer_.state().clear();
  for (const auto& pair : recipe_.pairs())
    if (!pair.shared) shrink(pair.master);
  whole_ = false;
}

// Each owner's pieces of the model's weights as one flat tensor per dtype, from the owner to every rank; every rank
// builds the same groups, so the collectives line up.
void OptimizerShards::publish() {
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (int owner = 0; owner < group_.world_size(); ++owner) {
    std::map<torch::ScalarType, std::vector<torch::Tensor>> by_dtype;
    for (const Piece& piece : pieces_)
      if (piece.owner == owner) {
        torch::Tensor target = piece_of(pairs[piece.pair].model_param, piece);
        by_dtype[target.scalar_type()].push_back(target);
      }
    for (auto& [dtype, targets] : by_dtype) {
      torch::Tensor buffer = torch::cat(targets);
      group_.broadcast({buffer}, "sharded weight broadcast", owner);
      if (owner == group_.rank()) continue;
      int64_t offset = 0;
      for (auto& target : targets) {
        target.copy_(buffer.narrow(0, offset, target.numel()));
        offset += target.numel();
      }
    }
  }
}

io::ShardedMasters OptimizerShards::write_pieces(const std::string& main_path, const std::vector<std::string>& names) {
  take_pieces();  // a checkpoint before the first step after a load: cut the loaded state first
  const auto& pairs = recipe_.pairs();
  MPT_CHECK(names.size() == pairs.size(), "a checkpoint's weight names do not match the recipe's weights");
  io::CheckpointWriter writer(io::shard_path(main_path, group_.rank(), group_.world_size()));
  for (size_t k = 0; k < mine_.size(); ++k) {
    const Piece& piece = pieces_[mine_[k]];
    const std::string& name = names[piece.pair];
    if (!pairs[piece.pair].shared) writer.tensor(io::piece_record(name, "master", piece.start), shards_[k]);
    const auto found = shard_->state().find(shards_[k].unsafeGetTensorImpl());
    if (found == shard_->state().end()) continue;  // no step yet
    const ops::StateFields fields = ops::fields_of(*found->second);
    if (fields.step) writer.integer(io::piece_record(name, "step", piece.start), *fields.step);
    for (const auto& [field, tensor] : fields.tensors)
      if (tensor->defined()) writer.tensor(io::piece_record(name, field, piece.start), *tensor);
  }
  const io::CommittedFile mine = writer.commit();
  // Every rank's row of the table, summed: each shard's size and CRC for the index (both exact in a double).
  torch::Tensor table = torch::zeros({group_.world_size(), 2}, torch::kDouble);
  table[group_.rank()] =
      torch::tensor({static_cast<double>(mine.bytes), static_cast<double>(mine.crc)}, torch::kDouble);
  table = table.to(pairs.front().master.device());
  group_.all_reduce({table}, "checkpoint shard index");
  table = table.cpu();
  io::ShardedMasters sharded;
  for (int rank = 0; rank < group_.world_size(); ++rank)
    sharded.shards.push_back(
        {static_cast<uint64_t>(table[rank][0].item<double>()), static_cast<uint32_t>(table[rank][1].item<double>())});
  for (size_t i = 0; i < pairs.size(); ++i)
    if (!pairs[i].shared) sharded.strides[names[i]] = layouts_[i];
  return sharded;
}

}  // namespace mpt::train

// ZeRO-1's pieces, their step, their publication and the checkpoint's whole state (see optimizer_shards.h).
#include "train/optimizer_shards.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "ops/fused_optimizers.h"
#include "train/optimizer.h"

namespace mpt::train {
namespace {

using precision::MasterPair;

// A dense tensor's elements in memory order (a channels-last weight's too), as one run.
torch::Tensor flat(const torch::Tensor& tensor) {
  MPT_CHECK(tensor.is_non_overlapping_and_dense(), "distributed.shard_optimizer needs dense parameters");
  return tensor.as_strided({tensor.numel()}, {1}, tensor.storage_offset());
}

torch::Tensor piece_of(const torch::Tensor& tensor, const Piece& piece) {
  return flat(tensor).narrow(0, piece.start, piece.length);
}

// A whole master another rank's pieces now hold: its shape over one element.
void shrink(const torch::Tensor& master) {
  if (master.numel() > 1) master.set_data(torch::zeros({}, master.options()).expand(master.sizes()));
}

void materialize(const torch::Tensor& master) {
  if (!master.is_non_overlapping_and_dense()) master.set_data(torch::empty(master.sizes(), master.options()));
}

// An optimizer state's element-wise tensors and its step count (Adam's), whatever its kind.
struct StateFields {
  int64_t* step = nullptr;
  std::vector<torch::Tensor*> tensors;
};

StateFields fields_of(torch::optim::OptimizerParamState& state) {
  if (auto* s = dynamic_cast<torch::optim::AdamWParamState*>(&state))
    return {&s->step(), {&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()}};
  if (auto* s = dynamic_cast<torch::optim::AdamParamState*>(&state))
    return {&s->step(), {&s->exp_avg(), &s->exp_avg_sq(), &s->max_exp_avg_sq()}};
  if (auto* s = dynamic_cast<torch::optim::SGDParamState*>(&state)) return {nullptr, {&s->momentum_buffer()}};
  throw Error("distributed.shard_optimizer: an optimizer state of an unknown kind");
}

std::unique_ptr<torch::optim::OptimizerParamState> fresh_state(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) return std::make_unique<torch::optim::AdamWParamState>();
  if (dynamic_cast<torch::optim::Adam*>(&optimizer)) return std::make_unique<torch::optim::AdamParamState>();
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) return std::make_unique<torch::optim::SGDParamState>();
  throw Error("distributed.shard_optimizer: no sharding for this optimizer");
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
    auto state = fresh_state(optimizer_);
    const StateFields from = fields_of(*found->second), to = fields_of(*state);
    if (from.step) *to.step = *from.step;
    for (size_t f = 0; f < from.tensors.size(); ++f)
      if (from.tensors[f]->defined()) *to.tensors[f] = piece_of(*from.tensors[f], piece).clone();
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
  publish(/*masters=*/false);
}

void OptimizerShards::gather_whole_state() {
  if (whole_) return;  // no step yet: the masters and the run's optimizer are whole already
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (const auto& pair : pairs) materialize(pair.master);
  for (size_t k = 0; k < mine_.size(); ++k)
    if (!pairs[pieces_[mine_[k]].pair].shared)
      piece_of(pairs[pieces_[mine_[k]].pair].master, pieces_[mine_[k]]).copy_(shards_[k]);
  publish(/*masters=*/true);
  gather_optimizer_state();
  whole_ = true;
}

void OptimizerShards::release_whole_state() {
  optimizer_.state().clear();
  for (const auto& pair : recipe_.pairs())
    if (!pair.shared) shrink(pair.master);
  whole_ = false;
}

// Each owner's pieces (of the model's weights, or of the FP32 masters) as one flat tensor per dtype, from the owner
// to every rank; every rank builds the same groups, so the collectives line up.
void OptimizerShards::publish(bool masters) {
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (int owner = 0; owner < group_.world_size(); ++owner) {
    std::map<torch::ScalarType, std::vector<torch::Tensor>> by_dtype;
    for (const Piece& piece : pieces_)
      if (piece.owner == owner && !(masters && pairs[piece.pair].shared)) {
        torch::Tensor target = piece_of(masters ? pairs[piece.pair].master : pairs[piece.pair].model_param, piece);
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

// Every piece's optimizer state from its owner to every rank, assembled into the run's optimizer as one state per
// parameter: per owner, a header (per piece: has a state, its step, which of its tensors are defined), then the
// defined tensors back to back.
void OptimizerShards::gather_optimizer_state() {
  const auto& pairs = recipe_.pairs();
  auto& whole_states = optimizer_.state();
  for (int owner = 0; owner < group_.world_size(); ++owner) {
    std::vector<size_t> owned;
    for (size_t i = 0; i < pieces_.size(); ++i)
      if (pieces_[i].owner == owner) owned.push_back(i);
    torch::Tensor header = torch::zeros({static_cast<int64_t>(owned.size()), 3}, torch::kInt64);
    std::vector<torch::Tensor> values;
    if (owner == group_.rank())
      for (size_t k = 0; k < shards_.size(); ++k) {
        const auto found = shard_->state().find(shards_[k].unsafeGetTensorImpl());
        if (found == shard_->state().end()) continue;
        const StateFields fields = fields_of(*found->second);
        int64_t mask = 0;
        for (size_t f = 0; f < fields.tensors.size(); ++f)
          if (fields.tensors[f]->defined()) mask |= int64_t{1} << f, values.push_back(*fields.tensors[f]);
        header[static_cast<int64_t>(k)].copy_(torch::tensor({int64_t{1}, fields.step ? *fields.step : 0, mask}));
      }
    group_.broadcast({header}, "optimizer state gather", owner);
    int64_t total = 0;
    for (size_t k = 0; k < owned.size(); ++k)
      total += __builtin_popcountll(header[static_cast<int64_t>(k)][2].item<int64_t>()) * pieces_[owned[k]].length;
    if (total == 0) continue;
    torch::Tensor buffer = owner == group_.rank() ? torch::cat(values) : torch::empty({total}, torch::kFloat);
    group_.broadcast({buffer}, "optimizer state gather", owner);
    int64_t offset = 0;
    for (size_t k = 0; k < owned.size(); ++k) {
      const auto row = header[static_cast<int64_t>(k)];
      if (row[0].item<int64_t>() == 0) continue;
      const Piece& piece = pieces_[owned[k]];
      const torch::Tensor& master = pairs[piece.pair].master;
      auto& state = whole_states[master.unsafeGetTensorImpl()];
      if (!state) state = fresh_state(optimizer_);
      const StateFields fields = fields_of(*state);
      if (fields.step) *fields.step = row[1].item<int64_t>();
      for (size_t f = 0; f < fields.tensors.size(); ++f) {
        if (!((row[2].item<int64_t>() >> f) & 1)) continue;
        if (!fields.tensors[f]->defined())
          *fields.tensors[f] = torch::zeros_like(master, torch::MemoryFormat::Preserve);
        piece_of(*fields.tensors[f], piece).copy_(buffer.narrow(0, offset, piece.length));
        offset += piece.length;
      }
    }
  }
}

}  // namespace mpt::train

// ZeRO-1's ownership, publication and checkpoint gathering (see optimizer_shards.h).
#include "train/optimizer_shards.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "common/error.h"

namespace mpt::train {
namespace {

// A master another rank owns: its shape over one element, so gradients of that shape can still be attached to it.
bool is_placeholder(const torch::Tensor& master) { return master.numel() > 1 && master.stride(0) == 0; }

void shrink(const torch::Tensor& master) {
  if (!is_placeholder(master) && master.numel() > 1)
    master.set_data(torch::zeros({}, master.options()).expand(master.sizes()));
}

void materialize(const torch::Tensor& master) {
  if (is_placeholder(master)) master.set_data(torch::empty(master.sizes(), master.options()));
}

// An empty state of the optimizer's own kind, for the one another rank sends.
std::unique_ptr<torch::optim::OptimizerParamState> fresh_state(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) return std::make_unique<torch::optim::AdamWParamState>();
  if (dynamic_cast<torch::optim::Adam*>(&optimizer)) return std::make_unique<torch::optim::AdamParamState>();
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) return std::make_unique<torch::optim::SGDParamState>();
  throw Error("distributed.shard_optimizer: no state transfer for this optimizer");
}

torch::Tensor serialized(const torch::optim::OptimizerParamState& state) {
  torch::serialize::OutputArchive archive;
  state.serialize(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  const std::string data = bytes.str();
  return torch::from_blob(const_cast<char*>(data.data()), {static_cast<int64_t>(data.size())}, torch::kUInt8).clone();
}

// What owning a parameter costs a rank, for the split: Adam's 8 bytes of state per element, plus 4 for an FP32
// master where the model's parameter is low precision.
std::vector<int64_t> ownership_costs(const std::vector<precision::MasterPair>& pairs) {
  std::vector<int64_t> costs;
  for (const auto& pair : pairs) costs.push_back(pair.master.numel() * (pair.shared ? 2 : 3));
  return costs;
}

}  // namespace

std::vector<int> assign_owners(const std::vector<int64_t>& costs, int world_size) {
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<int64_t> load(world_size, 0);
  std::vector<int> owners(costs.size(), 0);
  for (size_t i : order) {
    const int rank = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    owners[i] = rank;
    load[rank] += costs[i];
  }
  return owners;
}

std::vector<RankState> state_per_rank(const std::vector<precision::MasterPair>& pairs, const std::string& optimizer,
                                      double momentum, int ranks, bool sharded) {
  const std::vector<int> owners = assign_owners(ownership_costs(pairs), ranks);
  const int64_t state_bytes = optimizer == "sgd" ? (momentum != 0.0 ? 4 : 0) : 8;
  std::vector<RankState> states(ranks);
  for (int rank = 0; rank < ranks; ++rank)
    for (size_t i = 0; i < pairs.size(); ++i) {
      const int64_t numel = pairs[i].master.numel(), size = numel * pairs[i].model_param.element_size();
      const bool mine = !sharded || owners[i] == rank;
      states[rank].weights += size;
      states[rank].gradients += size;
      if (!pairs[i].shared && mine) states[rank].masters += numel * 4;
      if (mine) states[rank].optimizer_state += numel * state_bytes;
    }
  return states;
}

OptimizerShards::OptimizerShards(torch::optim::Optimizer& optimizer, precision::Recipe& recipe,
                                 distributed::Group& group)
    : optimizer_(optimizer), recipe_(recipe), group_(group) {
  owners_ = assign_owners(ownership_costs(recipe_.pairs()), group_.world_size());
}

void OptimizerShards::drop_foreign_gradients() {
  const auto& pairs = recipe_.pairs();
  for (size_t i = 0; i < pairs.size(); ++i)
    if (!owns(i)) pairs[i].master.mutable_grad() = torch::Tensor();
}

void OptimizerShards::publish() {
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (size_t i = 0; i < pairs.size(); ++i)
    if (owns(i) && !pairs[i].shared) pairs[i].model_param.copy_(pairs[i].master);
  broadcast_weights(/*masters=*/false);
  stepped_ = true;
  release_foreign_state();
}

void OptimizerShards::gather_whole_state() {
  if (!group_.distributed()) return;
  for (const auto& pair : recipe_.pairs()) materialize(pair.master);
  broadcast_weights(/*masters=*/true);
  for (size_t i = 0; i < owners_.size(); ++i) gather_optimizer_state(i);
}

void OptimizerShards::release_foreign_state() {
  const auto& pairs = recipe_.pairs();
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (owns(i)) continue;
    optimizer_.state().erase(pairs[i].master.unsafeGetTensorImpl());
    if (stepped_ && !pairs[i].shared) shrink(pairs[i].master);
  }
}

// Each owner's tensors (the model's weights, or the FP32 masters) as one flat tensor per dtype, from the owner to
// every rank; every rank builds the same groups, so the collectives line up.
void OptimizerShards::broadcast_weights(bool masters) {
  torch::NoGradGuard no_grad;
  const auto& pairs = recipe_.pairs();
  for (int owner = 0; owner < group_.world_size(); ++owner) {
    std::map<torch::ScalarType, std::vector<torch::Tensor>> by_dtype;
    for (size_t i = 0; i < pairs.size(); ++i)
      if (owners_[i] == owner && !(masters && pairs[i].shared)) {
        const torch::Tensor& tensor = masters ? pairs[i].master : pairs[i].model_param;
        by_dtype[tensor.scalar_type()].push_back(tensor);
      }
    for (auto& [dtype, tensors] : by_dtype) {
      std::vector<torch::Tensor> flat_views;
      for (const auto& tensor : tensors) flat_views.push_back(tensor.reshape(-1));
      torch::Tensor flat = torch::cat(flat_views);
      group_.broadcast({flat}, "sharded weight broadcast", owner);
      if (owner == group_.rank()) continue;
      int64_t offset = 0;
      for (auto& tensor : tensors) {
        tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
        offset += tensor.numel();
      }
    }
  }
}

// The owner's optimizer state of one parameter to every rank: its serialized size, then its bytes.
void OptimizerShards::gather_optimizer_state(size_t pair) {
  void* key = recipe_.pairs()[pair].master.unsafeGetTensorImpl();
  auto& states = optimizer_.state();
  torch::Tensor bytes;
  if (owns(pair) && states.count(key)) bytes = serialized(*states.at(key));
  torch::Tensor size = torch::tensor({bytes.defined() ? bytes.numel() : int64_t{0}}, torch::kInt64);
  group_.broadcast({size}, "optimizer state gather", owners_[pair]);
  const int64_t count = size.item<int64_t>();
  if (count == 0) return;
  if (!owns(pair)) bytes = torch::empty({count}, torch::kUInt8);
  group_.broadcast({bytes}, "optimizer state gather", owners_[pair]);
  if (owns(pair)) return;
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(count));
  auto state = fresh_state(optimizer_);
  state->serialize(archive);
  states[key] = std::move(state);
}

}  // namespace mpt::train

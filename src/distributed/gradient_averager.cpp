// Bucketed gradient all-reduce (see gradient_averager.h).
#include "distributed/gradient_averager.h"

namespace mpt::distributed {

GradientAverager::GradientAverager(Group& group, std::vector<torch::Tensor> parameters, double bucket_mb)
    : group_(group), parameters_(std::move(parameters)) {
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1024 * 1024 / sizeof(float)));
  Bucket bucket;
  int64_t filled = 0;
  auto close = [&] {
    if (bucket.members.empty()) return;
    bucket.flat = torch::zeros({filled + static_cast<int64_t>(bucket.members.size())},
                               parameters_.front().options().dtype(torch::kFloat));
    buckets_.push_back(std::move(bucket));
    bucket = Bucket{};
    filled = 0;
  };
  for (size_t i = parameters_.size(); i-- > 0;) {
    bucket.members.push_back(i);
    filled += parameters_[i].numel();
    if (filled >= cap) close();
  }
  close();
}

void GradientAverager::average() {
  if (!group_.distributed()) return;
  torch::NoGradGuard no_grad;
  std::vector<PendingReduce> pending;
  pending.reserve(buckets_.size());
  std::vector<bool> all_local(buckets_.size(), true);  // every member had a gradient here: no flags to read
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    const auto members = static_cast<int64_t>(bucket.members.size());
    std::vector<float> has_grad(bucket.members.size());
    int64_t offset = 0;
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      const torch::Tensor& p = parameters_[bucket.members[k]];
      torch::Tensor slot = bucket.flat.narrow(0, offset, p.numel());
      has_grad[k] = p.grad().defined() ? 1.0f : 0.0f;
      if (p.grad().defined())
        slot.copy_(p.grad().reshape(-1));
      else
        slot.zero_(), all_local[b] = false;
      offset += p.numel();
    }
    bucket.flat.narrow(0, offset, members).copy_(torch::tensor(has_grad));
    pending.push_back(group_.all_reduce_async({bucket.flat}, "gradient all-reduce"));
  }
  const double inverse = 1.0 / group_.world_size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pending[b].wait();
    Bucket& bucket = buckets_[b];
    const auto members = static_cast<int64_t>(bucket.members.size());
    // Which members some rank reached: read on the host only when this rank missed one (rare: unused layers).
    std::vector<float> reached(bucket.members.size(), 1.0f);
    if (!all_local[b]) {
      const torch::Tensor flags = bucket.flat.narrow(0, bucket.flat.numel() - members, members).cpu().contiguous();
      reached.assign(flags.data_ptr<float>(), flags.data_ptr<float>() + members);
    }
    int64_t offset = 0;
    for (size_t k = 0; k < bucket.members.size(); ++k) {
      torch::Tensor& p = parameters_[bucket.members[k]];
      torch::Tensor mean = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      if (reached[k] == 0.0f) continue;
      if (p.grad().defined())
        p.mutable_grad().copy_(mean).mul_(inverse);
      else
        p.mutable_grad() = (mean * inverse).to(p.dtype());
    }
  }
}

}  // namespace mpt::distributed

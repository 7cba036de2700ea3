// c10d wiring (see process_group.h). c10d reports a dead peer as a c10::Error from wait() ("Connection closed
// by peer", "Timed out waiting ..."); each is turned into one mpt::Error saying which collective failed.
#include "distributed/process_group.h"

// The collective interface itself, needed also when no backend is built in.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef MPT_WITH_GLOO
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef MPT_WITH_NCCL
#define USE_C10D_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <fmt/format.h>

#include "common/error.h"

namespace mpt::distributed {

struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
  std::chrono::milliseconds timeout{0};
  int rank = 0;
};

struct PendingReduce::Impl {
  c10::intrusive_ptr<c10d::Work> work;
  std::chrono::milliseconds timeout{0};
  std::string what;
  int rank = 0;
};

namespace {

[[noreturn]] void fail(const std::string& what, int rank, const std::string& why) {
  const bool lost_peer = why.find("onnection") != std::string::npos || why.find("closed") != std::string::npos ||
                         why.find("imed out") != std::string::npos || why.find("reset") != std::string::npos ||
                         why.find("Broken pipe") != std::string::npos;
  throw Error(fmt::format("rank {}: {} failed{} ({})", rank, what,
                          lost_peer ? ": another rank has died or stopped answering" : "", why));
}

void wait_for(c10d::Work& work, std::chrono::milliseconds timeout, const std::string& what, int rank) {
  try {
    if (!work.wait(timeout)) fail(what, rank, "timed out");
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    if (const auto newline = why.find('\n'); newline != std::string::npos) why.resize(newline);
    fail(what, rank, why);
  } catch (const std::exception& e) {
    fail(what, rank, e.what());
  }
}

}  // namespace

PendingReduce::PendingReduce() = default;
PendingReduce::PendingReduce(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

void PendingReduce::wait() {
  if (!impl_) return;
  wait_for(*impl_->work, impl_->timeout, impl_->what, impl_->rank);
  impl_.reset();
}

Group::Group() = default;

Group Group::join(const LaunchInfo& launch, const DistributedConfig& config) {
  Group group;
  group.rank_ = launch.rank;
  group.world_size_ = launch.world_size;
  group.backend_ = config.backend;
  group.impl_ = std::make_shared<Impl>();
  Impl& impl = *group.impl_;
  impl.rank = launch.rank;
  impl.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_sec * 1000));
  const std::string master = launch.master_addr + ":" + std::to_string(launch.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(launch.master_port);
    options.isServer = launch.rank == 0 && !launch.launcher_hosts_store;
    options.numWorkers = static_cast<size_t>(launch.world_size);
    options.waitWorkers = true;
    options.timeout = impl.timeout;
    impl.store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
  } catch (const std::exception& e) {
    std::string why = e.what();
    if (const auto newline = why.find('\n'); newline != std::string::npos) why.resize(newline);
    throw Error(fmt::format(
        "rank {} of {}: no rendezvous at MASTER_ADDR:MASTER_PORT = {} within {:g} s ({}); {}", launch.rank,
        launch.world_size, master, config.timeout_sec, why,
        launch.rank == 0 ? "is the port free?" : "is rank 0 running, and is the address reachable from here?"));
  }
  // A prefix per backend keeps the keys of a later group (after a restart in the same store) apart.
  auto store = c10::make_intrusive<c10d::PrefixStore>("mpt/" + config.backend, impl.store);
  try {
    if (config.backend == "gloo") {
#ifdef MPT_WITH_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(impl.timeout);
      options->devices.push_back(launch.master_addr == "127.0.0.1" || launch.master_addr == "localhost"
                                     ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
      options->threads = 2;
      impl.group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, launch.rank, launch.world_size, options);
#else
      throw UsageError("distributed.backend = gloo: this LibTorch ships no Gloo headers (Debian: libgloo-dev)");
#endif
    } else {
#ifdef MPT_WITH_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = impl.timeout;
      impl.group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, launch.rank, launch.world_size, options);
#else
      throw UsageError(
          "distributed.backend = nccl: this mpt was built without NCCL (configure with -DMPT_NCCL=ON "
          "against a CUDA LibTorch)");
#endif
    }
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    if (const auto newline = why.find('\n'); newline != std::string::npos) why.resize(newline);
    throw Error(fmt::format(
        "rank {} of {}: the {} process group at {} did not form within {:g} s ({}); did all {} "
        "ranks start, with the same MASTER_ADDR/MASTER_PORT?",
        launch.rank, launch.world_size, config.backend, master, config.timeout_sec, why, launch.world_size));
  }
  return group;
}

namespace {

// Starts a collective; c10d throws at the start when the peer's socket is already gone.
template <typename Start>
c10::intrusive_ptr<c10d::Work> start(const std::string& what, int rank, Start&& collective) {
  try {
    return collective();
  } catch (const c10::Error& e) {
    fail(what, rank, e.what_without_backtrace());
  }
}

}  // namespace

PendingReduce Group::all_reduce_async(std::vector<torch::Tensor> tensors, const std::string& what) {
  if (!distributed()) return {};
  MPT_CHECK(tensors.size() == 1, "all_reduce_async takes one tensor (c10d reads a list as one per device)");
  auto pending = std::make_shared<PendingReduce::Impl>();
  pending->timeout = impl_->timeout;
  pending->what = what;
  pending->rank = rank_;
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  pending->work = start(what, rank_, [&] { return impl_->group->allreduce(tensors, options); });
  return PendingReduce(pending);
}

void Group::all_reduce(std::vector<torch::Tensor> tensors, const std::string& what) {
  if (!distributed() || tensors.empty()) return;
  if (tensors.size() == 1) return all_reduce_async(tensors, what).wait();
  // Several small tensors (running sums): one collective over their concatenation.
  std::vector<torch::Tensor> flat_parts;
  for (const auto& t : tensors) flat_parts.push_back(t.reshape(-1));
  torch::Tensor flat = torch::cat(flat_parts);
  all_reduce_async({flat}, what).wait();
  int64_t offset = 0;
  for (auto& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

void Group::all_reduce_max(torch::Tensor tensor, const std::string& what) {
  if (!distributed()) return;
  std::vector<torch::Tensor> tensors{std::move(tensor)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  wait_for(*start(what, rank_, [&] { return impl_->group->allreduce(tensors, options); }), impl_->timeout, what, rank_);
}

void Group::broadcast(std::vector<torch::Tensor> tensors, const std::string& what, int root) {
  if (!distributed()) return;
  torch::NoGradGuard no_grad;
  c10d::BroadcastOptions options;
  options.rootRank = root;
  for (auto& tensor : tensors) {
    std::vector<torch::Tensor> one{tensor.detach()};
    wait_for(*start(what, rank_, [&] { return impl_->group->broadcast(one, options); }), impl_->timeout, what, rank_);
  }
}

void Group::barrier(const std::string& what) {
  if (!distributed()) return;
  wait_for(*start(what, rank_, [&] { return impl_->group->barrier(c10d::BarrierOptions{}); }), impl_->timeout, what,
           rank_);
}

std::function<void(torch::Tensor&)> Group::agree_max(const std::string& what) {
  if (!distributed()) return nullptr;
  return [this, what](torch::Tensor& values) { all_reduce_max(values, what); };
}

}  // namespace mpt::distributed

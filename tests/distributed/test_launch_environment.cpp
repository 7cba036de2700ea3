// Reading a job's place from the launchers' environment variables, and sharding the data across ranks.
#include <catch2/catch.hpp>

#include <map>

#include "common/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "distributed/environment.h"

using mpt::distributed::launch_from_environment;

namespace {

std::optional<mpt::distributed::LaunchInfo> launch_with(const std::map<std::string, std::string>& variables) {
  return launch_from_environment([&](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    return it == variables.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

std::string error_of(const std::map<std::string, std::string>& variables) {
  try {
    launch_with(variables);
  } catch (const mpt::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("torchrun's and Slurm's variables place a process in its job", "[fast][dist]") {
  CHECK_FALSE(launch_with({}));
  CHECK_FALSE(launch_with({{"WORLD_SIZE", "1"}, {"RANK", "0"}}));            // a job of one is no job
  CHECK_FALSE(launch_with({{"SLURM_NTASKS", "1"}, {"SLURM_PROCID", "0"}}));  // a plain sbatch script

  const auto torchrun = launch_with({{"WORLD_SIZE", "4"},
                                     {"RANK", "3"},
                                     {"LOCAL_RANK", "1"},
                                     {"LOCAL_WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "node0"},
                                     {"MASTER_PORT", "1234"}});
  REQUIRE(torchrun);
  CHECK(torchrun->rank == 3);
  CHECK(torchrun->world_size == 4);
  CHECK(torchrun->local_rank == 1);
  CHECK(torchrun->local_world_size == 2);
  CHECK(torchrun->master_addr == "node0");
  CHECK(torchrun->master_port == 1234);
  CHECK_FALSE(torchrun->launcher_hosts_store);
  const auto elastic =
      launch_with({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "a"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  REQUIRE(elastic);
  CHECK(elastic->launcher_hosts_store);  // rank 0 must not bind the port torchrun's agent serves

  const auto slurm = launch_with({{"SLURM_NTASKS", "8"},
                                  {"SLURM_PROCID", "5"},
                                  {"SLURM_LOCALID", "1"},
                                  {"SLURM_NTASKS_PER_NODE", "4"},
                                  {"MASTER_ADDR", "gpu17"}});
  REQUIRE(slurm);
  CHECK(slurm->rank == 5);
  CHECK(slurm->world_size == 8);
  CHECK(slurm->local_rank == 1);
  CHECK(slurm->local_world_size == 4);
  CHECK(slurm->master_port == 29500);
  CHECK(slurm->launcher == "Slurm");

  // Without --ntasks-per-node: this node's share of the step's tasks, so threads divide the node's cores.
  const auto uneven = launch_with({{"SLURM_NTASKS", "7"},
                                   {"SLURM_PROCID", "6"},
                                   {"SLURM_NODEID", "2"},
                                   {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                                   {"MASTER_ADDR", "n0"}});
  REQUIRE(uneven);
  CHECK(uneven->local_world_size == 1);
  const auto spread = launch_with({{"SLURM_NTASKS", "8"},
                                   {"SLURM_PROCID", "0"},
                                   {"SLURM_NODEID", "0"},
                                   {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                   {"MASTER_ADDR", "n0"}});
  REQUIRE(spread);
  CHECK(spread->local_world_size == 4);
  const auto nodes_only =
      launch_with({{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "0"}, {"SLURM_NNODES", "2"}, {"MASTER_ADDR", "n0"}});
  REQUIRE(nodes_only);
  CHECK(nodes_only->local_world_size == 4);
  CHECK(nodes_only->cpus_per_rank == 0);  // Slurm said nothing of CPUs: the machine's cores are divided

  // Threads per rank from Slurm's CPUs: --cpus-per-task, else this node's CPUs of the job shared by its tasks.
  const auto per_task = launch_with({{"SLURM_NTASKS", "4"},
                                     {"SLURM_PROCID", "1"},
                                     {"SLURM_NNODES", "2"},
                                     {"SLURM_CPUS_PER_TASK", "6"},
                                     {"MASTER_ADDR", "n0"}});
  REQUIRE(per_task);
  CHECK(per_task->cpus_per_rank == 6);
  const auto job_cpus = launch_with({{"SLURM_NTASKS", "6"},
                                     {"SLURM_PROCID", "5"},
                                     {"SLURM_NODEID", "1"},
                                     {"SLURM_NNODES", "2"},
                                     {"SLURM_JOB_CPUS_PER_NODE", "8,12"},
                                     {"MASTER_ADDR", "n0"}});
  REQUIRE(job_cpus);
  CHECK(job_cpus->local_world_size == 3);
  CHECK(job_cpus->cpus_per_rank == 4);  // node 1's 12 CPUs over its 3 tasks
  CHECK_THAT(
      error_of({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_CPUS_PER_TASK", "0"}, {"MASTER_ADDR", "a"}}),
      Catch::Contains("SLURM_CPUS_PER_TASK=0: expected an integer in [1, "));
}

TEST_CASE("an incomplete or inconsistent launch environment is a clear error", "[fast][dist]") {
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}) ==
        "RANK is not set; WORLD_SIZE=2 asks for a distributed job");
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "2"}, {"MASTER_ADDR", "a"}}) ==
        "RANK=2: expected an integer in [0, 1]");
  CHECK(error_of({{"WORLD_SIZE", "two"}}) == "WORLD_SIZE=two: expected an integer in [1, 1048576]");
  CHECK(error_of({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}}) ==
        "MASTER_PORT=70000: expected an integer in [1, 65535]");
  CHECK_THAT(error_of({{"WORLD_SIZE", "2"}, {"RANK", "0"}}),
             Catch::StartsWith("MASTER_ADDR is not set: rank 0 of 2 (torchrun-style environment)"));
  CHECK_THAT(error_of({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}}), Catch::Contains("scontrol show hostnames"));
}

TEST_CASE("ranks read disjoint slices that together are the one-process batch", "[fast][dist][data]") {
  mpt::data::DataConfig config;
  config.name = "fashion_mnist";  // its shape only: synthetic images
  const mpt::data::Dataset dataset = mpt::data::synthetic_dataset(config, 100);
  using mpt::data::BatchLoader;
  using mpt::data::Shard;
  BatchLoader whole(dataset, 8, /*shuffle=*/true, /*seed=*/4, /*drop_last=*/true);
  BatchLoader rank0(dataset, 4, true, 4, true, Shard{0, 2}), rank1(dataset, 4, true, 4, true, Shard{1, 2});
  CHECK(rank0.batches_per_epoch() == whole.batches_per_epoch());
  for (int step = 0; step < 20; ++step) {  // across an epoch boundary (12 global batches per epoch)
    const auto a = rank0.next(), b = rank1.next(), together = whole.next();
    CHECK(torch::equal(torch::cat({a.targets, b.targets}), together.targets));
    CHECK(torch::equal(torch::cat({a.inputs, b.inputs}), together.inputs));
  }
  CHECK(rank0.position().batch_samples == 8);

  // A checkpoint of 2 ranks x 4 resumed by one process of 4: the batch that holds the next unseen sample.
  BatchLoader single(dataset, 4, true, 4, true);
  CHECK(single.seek({1, 3, 8}));
  CHECK(single.position().epoch == 1);
  CHECK(single.position().batch == 6);
  CHECK_FALSE(single.seek({1, 3, 4}));  // same global batch: as saved
  CHECK(single.position().batch == 3);
  BatchLoader pair(dataset, 4, true, 4, true, Shard{1, 2});
  CHECK(pair.seek({0, 5, 4}));  // 20 samples seen -> global batch 2 (16..23): repeats 4, skips none
  CHECK(pair.position().batch == 2);
}

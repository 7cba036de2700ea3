// The one table of mpt's subcommands and their flags (CLI11), with the options each fills, and the dispatch to the
// subcommand that was parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "app/commands.h"

namespace mpt::app {

// A subcommand that takes a spec, overrides and --json (inspect, eval).
struct SpecOptions {
  std::string spec_path;
  std::vector<std::string> overrides;
  bool json = false;
  int ranks = 1;  // inspect: the data-parallel ranks its per-rank state assumes
};

class Cli {
 public:
  Cli();
  CLI::App& app() { return app_; }
  // The subcommand named `name`, or null.
  CLI::App* command(const std::string& name);
  // "; did you mean 'train'?" for a command within two edits of a known one, else "".
  std::string nearest_command(const std::string& typed);
  // "; did you mean '--nproc'?" for the first unknown --option of `argv` within two edits of one the command has.
  std::string nearest_option(int argc, char** argv);
  // Runs the parsed subcommand; returns its exit code.
  int run();

 private:
  void add_train();
  void add_ab_compare();
  void add_bench();
  void add_small_commands();
  void add_numerics();

  CLI::App app_{"mpt: mixed-precision training on LibTorch"};
  TrainOptions train_;
  AbCompareOptions ab_;
  NightlyOptions nightly_;
  BenchOptions bench_;
  bool no_peak_ = false;
  SpecOptions inspect_, eval_;
  ExportOptions export_;
  TokenizeOptions tokenize_;
  NumericsCommandOptions numerics_;
  bool markdown_ = false;
};

}  // namespace mpt::app

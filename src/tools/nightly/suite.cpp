// Suite loading and validation.
#include "tools/nightly/suite.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "tools/tracking/tracker.h"

namespace mpt::nightly {
namespace {

namespace fs = std::filesystem;

class SuiteReader {
 public:
  explicit SuiteReader(std::string path) : path_(std::move(path)) {}

  std::string where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    return mark.line >= 0 ? path_ + ":" + std::to_string(mark.line + 1) : path_;
  }
  void problem(const YAML::Node& node, const std::string& what) { problems_.push_back(where(node) + ": " + what); }
  const std::vector<std::string>& problems() const { return problems_; }

  // Reads an optional scalar as T; a wrong type is a problem and leaves `value` as it was.
  template <typename T>
  void read(const YAML::Node& map, const std::string& key, T& value, const std::string& expected) {
    const YAML::Node node = map[key];
    if (!node) return;
    try {
      const T read = node.as<T>();
      if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(read)) {
          problem(node, key + ": expected " + expected + " (a finite number), got '" + echo(YAML::Dump(node)) + "'");
          return;
        }
      }
      value = read;
    } catch (const YAML::Exception&) {
      problem(node, key + ": expected " + expected + ", got '" + echo(YAML::Dump(node)) + "'");
    }
  }

  std::vector<std::string> read_list(const YAML::Node& map, const std::string& key) {
    std::vector<std::string> out;
    const YAML::Node node = map[key];
    if (!node) return out;
    if (!node.IsSequence()) {
      problem(node, key + ": expected a list of strings");
      return out;
    }
    for (const auto& item : node) {
      if (item.IsScalar())
        out.push_back(item.as<std::string>());
      else
        problem(item, key + ": expected a string");
    }
    return out;
  }

  void check_keys(const YAML::Node& map, const std::set<std::string>& known, const std::string& what) {
    std::set<std::string> seen;
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) {
        problem(entry.first, what + " keys must be plain names");
        continue;
      }
      const std::string key = entry.first.as<std::string>();
      if (!seen.insert(key).second) problem(entry.first, what + " key '" + key + "' is given twice; keep one");
      if (!known.count(key)) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        problem(entry.first, "unknown " + what + " key '" + key + "' (expected one of: " + list + ")");
      }
    }
  }

 private:
  std::string path_;
  std::vector<std::string> problems_;
};

std::string resolve_path(const std::string& suite_path, const std::string& path) {
  if (path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::absolute(suite_path).parent_path() / path).lexically_normal().string();
}

// SUITE.yaml's top-level node, after the checks a file must pass before it is parsed.
YAML::Node parse_suite_file(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error))
    throw UsageError(path + ": no such suite file" + (error ? " (" + error.message() + ")" : std::string()));
  require_regular_file(path, "a suite file (SUITE.yaml)");
  if (fs::file_size(path) > (1 << 20)) throw UsageError(path + ": larger than 1 MiB; a suite is a few kilobytes");
  const YAML::Node root = config::parse_yaml(read_file(path), path);
  if (!root.IsMap()) throw UsageError(path + ": expected a mapping with 'jobs:'");
  return root;
}

void read_regression_rules(SuiteReader& reader, const YAML::Node& root, RegressionRules& regression) {
  const YAML::Node rules = root["regression"];
  if (!rules) return;
  if (!rules.IsMap()) {
    reader.problem(rules,
                   "regression: expected a mapping (window, throughput_drop, accuracy_drop, max_other_cpu, "
                   "speed_rounds)");
    return;
  }
  reader.check_keys(rules, {"window", "throughput_drop", "accuracy_drop", "max_other_cpu", "speed_rounds"},
                    "regression");
  reader.read(rules, "window", regression.window, "an integer");
  reader.read(rules, "throughput_drop", regression.throughput_drop, "a fraction");
  reader.read(rules, "accuracy_drop", regression.accuracy_drop, "a fraction");
  reader.read(rules, "max_other_cpu", regression.max_other_cpu, "a fraction");
  reader.read(rules, "speed_rounds", regression.speed_rounds, "an integer");
  if (regression.window < 1) reader.problem(rules["window"], "window: expected an integer >= 1");
  if (regression.speed_rounds < 0 || regression.speed_rounds > 20)
    reader.problem(rules["speed_rounds"], "speed_rounds: expected an integer from 0 to 20");
}

// The job's name: usable as a folder name and unique in the suite (`names` holds those taken so far).
void read_job_name(SuiteReader& reader, const YAML::Node& node, Job& job, std::set<std::string>& names) {
  reader.read(node, "name", job.name, "a name");
  if (job.name.empty() || job.name.find_first_of("/\\ ") != std::string::npos || job.name[0] == '.')
    reader.problem(node, "name: expected a job name without spaces or slashes");
  else if (!names.insert(job.name).second)
    reader.problem(node["name"], "name: '" + job.name + "' is used by another job");
}

// The job's kind and its spec paths, resolved against the suite file; a spec that does not exist is a problem.
void read_job_specs(SuiteReader& reader, const YAML::Node& node, const std::string& suite_path, Job& job) {
  if (node["train"] && node["ab_compare"]) {
    reader.problem(node, "a job is either train or ab_compare, not both");
  } else if (node["train"]) {
    job.kind = "train";
    std::string spec;
    reader.read(node, "train", spec, "a spec path");
    job.specs = {resolve_path(suite_path, spec)};
  } else if (node["ab_compare"]) {
    job.kind = "ab_compare";
    for (const auto& spec : reader.read_list(node, "ab_compare")) job.specs.push_back(resolve_path(suite_path, spec));
    if (job.specs.size() != 2) reader.problem(node["ab_compare"], "ab_compare: expected [A.yaml, B.yaml]");
  } else {
    reader.problem(node, "job '" + job.name + "': expected train: SPEC or ab_compare: [A, B]");
  }
  for (const auto& spec : job.specs) {
    std::error_code error;  // a name too long for the file system is an error, not an exception
    if (!spec.empty() && !fs::exists(spec, error))
      reader.problem(node, "job '" + job.name + "': no such spec " + spec +
                               (error ? " (" + error.message() + ")" : std::string()));
  }
}

Job read_job(SuiteReader& reader, const YAML::Node& node, const std::string& suite_path, std::set<std::string>& names) {
  reader.check_keys(node, {"name", "train", "ab_compare", "overrides", "allow_diff", "time_budget_min", "tags"}, "job");
  Job job;
  read_job_name(reader, node, job, names);
  read_job_specs(reader, node, suite_path, job);
  job.overrides = reader.read_list(node, "overrides");
  job.allow_diff = reader.read_list(node, "allow_diff");
  if (!job.allow_diff.empty() && job.kind != "ab_compare")
    reader.problem(node["allow_diff"], "allow_diff: only for ab_compare jobs");
  double minutes = 0.0;
  reader.read(node, "time_budget_min", minutes, "a number of minutes");
  if (minutes < 0) reader.problem(node["time_budget_min"], "time_budget_min: expected >= 0");
  job.time_budget_sec = minutes * 60.0;
  job.tags = reader.read_list(node, "tags");
  return job;
}

std::vector<Job> read_jobs(SuiteReader& reader, const YAML::Node& root, const std::string& suite_path) {
  std::vector<Job> jobs;
  const YAML::Node nodes = root["jobs"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    reader.problem(nodes ? nodes : root, "jobs: expected a non-empty list of jobs");
    return jobs;
  }
  std::set<std::string> names;
  for (const auto& node : nodes) {
    if (!node.IsMap()) {
      reader.problem(node, "a job must be a mapping with name and train or ab_compare");
      continue;
    }
    jobs.push_back(read_job(reader, node, suite_path, names));
  }
  return jobs;
}

}  // namespace

// A tracker's section holds its spec keys without their tracking.<name>. prefix.
void read_tracker(SuiteReader& reader, const YAML::Node& node, const tracking::TrackerKind& kind,
                  keys::Options& tracking) {
  const std::string prefix = "tracking." + kind.name + ".";
  std::set<std::string> leaves;
  std::string listed;
  for (const auto& key : kind.keys) {
    leaves.insert(key.key.substr(prefix.size()));
    if (!listed.empty()) listed += ", ";
    listed += key.key.substr(prefix.size());
  }
  if (!node.IsMap()) {
    reader.problem(node, kind.name + ": expected a mapping (" + listed + ")");
    return;
  }
  reader.check_keys(node, leaves, kind.name);
  for (const auto& key : kind.keys) {
    const std::string leaf = key.key.substr(prefix.size());
    if (!node[leaf]) continue;
    if (key.type == keys::KeyType::kStringList) {
      tracking.set(key.key, reader.read_list(node, leaf));
    } else {
      std::string value;
      reader.read(node, leaf, value, "a string");
      tracking.set(key.key, value);
    }
  }
}

void read_trackers(SuiteReader& reader, const YAML::Node& root, keys::Options& tracking) {
  for (const auto& kind : tracking::tracker_kinds())
    if (const YAML::Node node = root[kind.name]) read_tracker(reader, node, kind, tracking);
}

Suite load_suite(const std::string& path) {
  const YAML::Node root = parse_suite_file(path);
  SuiteReader reader(path);
  Suite suite;
  suite.path = fs::absolute(path).string();
  suite.name = fs::path(path).stem().string();
  std::set<std::string> sections = {"suite", "jobs", "regression", "keep_nights", "disk_budget_gb"};
  for (const auto& kind : tracking::tracker_kinds()) sections.insert(kind.name);
  reader.check_keys(root, sections, "suite");
  reader.read(root, "suite", suite.name, "a name");
  reader.read(root, "keep_nights", suite.keep_nights, "an integer");
  reader.read(root, "disk_budget_gb", suite.disk_budget_gb, "a number of GB");
  if (suite.keep_nights < 1) reader.problem(root["keep_nights"], "keep_nights: expected an integer >= 1");
  if (suite.disk_budget_gb < 0) reader.problem(root["disk_budget_gb"], "disk_budget_gb: expected >= 0");
  read_regression_rules(reader, root, suite.regression);
  read_trackers(reader, root, suite.tracking);
  suite.jobs = read_jobs(reader, root, path);
  config::throw_if_errors("suite " + path, reader.problems());
  return suite;
}

}  // namespace mpt::nightly

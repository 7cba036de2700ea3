// See spool.h.
#include "tools/mlflow/spool.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "common/echo.h"
#include "common/files.h"
#include "common/json.h"
#include "common/uri.h"

namespace mpt::mlflow {
namespace {

namespace fs = std::filesystem;

constexpr uintmax_t kMaxEntryBytes = 1 << 20;

std::string text_field(const nlohmann::json& entry, const char* key, bool required, std::string& problem) {
  if (!entry.contains(key)) {
    if (required && problem.empty()) problem = std::string("no '") + key + "'";
    return "";
  }
  if (entry[key].is_string()) return entry[key].get<std::string>();
  if (problem.empty()) problem = std::string("'") + key + "' is not text";
  return "";
}

KeyValues tags_field(const nlohmann::json& entry, std::string& problem) {
  KeyValues tags;
  const nlohmann::json list = entry.value("tags", nlohmann::json::array());
  if (!list.is_array()) return problem = "'tags' is not a list", tags;
  for (const auto& tag : list) {
    if (!tag.is_array() || tag.size() != 2 || !tag[0].is_string() || !tag[1].is_string())
      return problem = "a tag is not a [key, value] pair of text", tags;
    tags.emplace_back(tag[0].get<std::string>(), tag[1].get<std::string>());
  }
  return tags;
}

std::string waited(int64_t spooled_at_ms) {
  const double hours = static_cast<double>(now_ms() - spooled_at_ms) / 3.6e6;
  return hours < 1    ? fmt::format("{:.0f} min", hours * 60)
         : hours < 48 ? fmt::format("{:.0f} h", hours)
                      : fmt::format("{:.0f} days", hours / 24);
}

struct Waiting {
  fs::path file;
  SpoolEntry entry;
};

// Moves an entry file (or a folder posing as one) out of the way, saying why.
void set_aside(const fs::path& file, const std::string& why, const Say& warn) {
  const fs::path folder = file.parent_path() / kSetAsideFolder;
  std::error_code error;
  fs::create_directories(folder, error);
  if (!error) fs::rename(file, folder / file.filename(), error);
  if (error) fs::remove_all(file, error);
  warn(fmt::format("mlflow spool: {} {}; moved to {}", file.string(), why, (folder / file.filename()).string()));
}

std::vector<Waiting> read_entries(const std::string& spool_dir, const Say& warn) {
  std::vector<Waiting> entries;
  for (const auto& file : fs::directory_iterator(spool_dir)) {
    if (file.path().extension() != ".json") continue;
    std::string problem;
    std::optional<SpoolEntry> entry;
    try {
      entry = read_spool_entry(read_file(file.path().string(), kMaxEntryBytes), problem);
    } catch (const std::exception& e) {
      problem = e.what();
    }
    if (entry)
      entries.push_back({file.path(), std::move(*entry)});
    else
      set_aside(file.path(), "is not a spool entry (" + echo(problem, 200) + ")", warn);
  }
  std::sort(entries.begin(), entries.end(), [](const Waiting& a, const Waiting& b) {
    return std::tie(a.entry.spooled_at_ms, a.file) < std::tie(b.entry.spooled_at_ms, b.file);
  });
  return entries;
}

// Why an entry is set aside before any delivery is tried, or "".
std::string hopeless(const SpoolEntry& entry) {
  if (const std::string problem = http_uri_problem(entry.target.uri); !problem.empty())
    return "names a URI that can never work (" + problem + ")";
  if (now_ms() - entry.spooled_at_ms > std::chrono::duration_cast<std::chrono::milliseconds>(kMaxSpoolAge).count())
    return fmt::format("waited {}, past the spool's {} days", waited(entry.spooled_at_ms), kMaxSpoolAge.count() / 24);
  return "";
}

// One warning per server that did not answer, naming what waits for it and for how long.
void warn_held(const std::map<std::string, std::vector<const Waiting*>>& held,
               const std::map<std::string, std::string>& why, const Say& warn) {
  for (const auto& [uri, entries] : held) {
    std::string dirs;
    for (size_t i = 0; i < entries.size() && i < 3; ++i) dirs += (i ? ", " : "") + entries[i]->entry.dir;
    if (entries.size() > 3) dirs += fmt::format(" and {} more", entries.size() - 3);
    warn(fmt::format("mlflow spool: {} is not answering ({}); {} entr{} wait for it, the oldest for {}: {}",
                     echo(uri, 200), why.at(uri), entries.size(), entries.size() == 1 ? "y" : "ies",
                     waited(entries.front()->entry.spooled_at_ms), dirs));
  }
}

}  // namespace

std::optional<SpoolEntry> read_spool_entry(const std::string& text, std::string& problem) {
  const nlohmann::json fields = parse_json(text, &problem);
  if (fields.is_discarded()) return std::nullopt;
  if (!fields.is_object()) return problem = "not a JSON object", std::nullopt;
  SpoolEntry entry;
  entry.kind = text_field(fields, "kind", true, problem);
  entry.dir = text_field(fields, "dir", true, problem);
  entry.target.uri = text_field(fields, "uri", true, problem);
  entry.target.experiment = text_field(fields, "experiment", false, problem);
  entry.target.run_name = text_field(fields, "run_name", false, problem);
  entry.target.source = text_field(fields, "source", false, problem);
  entry.target.tags = tags_field(fields, problem);
  if (problem.empty() && entry.kind != "run" && entry.kind != "comparison" && entry.kind != "night" &&
      entry.kind != "numerics")
    problem = "'kind' is not run, comparison, night or numerics";
  if (problem.empty() && entry.dir.empty()) problem = "'dir' is empty";
  if (problem.empty() && !(fields.contains("spooled_at_ms") && fields["spooled_at_ms"].is_number_integer()))
    problem = "no integer 'spooled_at_ms'";
  if (!problem.empty()) return std::nullopt;
  entry.spooled_at_ms = fields["spooled_at_ms"].get<int64_t>();
  return entry;
}

void spool(const Target& target, const std::string& dir, const std::string& kind) {
  const std::string absolute = fs::absolute(dir).lexically_normal().string();
  if (!fs::is_directory(target.spool)) {
    fs::create_directories(target.spool);
    fs::permissions(target.spool, fs::perms::owner_all);  // its entries may hold credentials
  }
  nlohmann::json tags = nlohmann::json::array();
  for (const auto& [key, value] : target.tags) tags.push_back({key, value});
  const nlohmann::json entry = {{"kind", kind},
                                {"dir", absolute},
                                {"uri", target.uri},
                                {"experiment", target.experiment},
                                {"run_name", target.run_name},
                                {"tags", tags},
                                {"source", target.source},
                                {"spooled_at_ms", now_ms()}};
  const std::string name = fmt::format("{:016x}.json", std::hash<std::string>{}(absolute + "\n" + target.uri));
  write_file_atomically(target.spool + "/" + name, entry.dump(2) + "\n", 0600);
}

int flush_spool(const std::string& spool_dir, const Say& warn) {
  if (!fs::is_directory(spool_dir)) return 0;
  std::map<std::string, std::vector<const Waiting*>> held;  // by URI: entries behind a server that did not answer
  std::map<std::string, std::string> down;                  // by URI: why it did not answer
  int delivered = 0;
  const std::vector<Waiting> entries = read_entries(spool_dir, warn);
  for (const Waiting& waiting : entries) {
    const SpoolEntry& entry = waiting.entry;
    if (const std::string why = hopeless(entry); !why.empty()) {
      set_aside(waiting.file, "(for " + entry.dir + ") " + why, warn);
      continue;
    }
    if (!fs::is_directory(entry.dir)) {
      warn(fmt::format("mlflow spool: {} names {}, which is gone; dropped", waiting.file.string(), entry.dir));
      fs::remove(waiting.file);
      continue;
    }
    if (down.count(entry.target.uri)) {
      held[entry.target.uri].push_back(&waiting);
      continue;
    }
    Target target = entry.target;
    target.spool = spool_dir;
    Client client(target.uri);
    try {
      deliver_directory(client, target, entry.dir, entry.kind);
      ++delivered;
      fs::remove(waiting.file);
    } catch (const Unreachable& e) {
      down[entry.target.uri] = e.what();
      held[entry.target.uri].push_back(&waiting);
    } catch (const std::exception& e) {
      set_aside(waiting.file, "(for " + entry.dir + ") was refused: " + std::string(e.what()), warn);
    }
  }
  warn_held(held, down, warn);
  return delivered;
}

void deliver_spooled(const std::string& spool_dir, const Say& info, const Say& warn) {
  if (const int delivered = flush_spool(spool_dir, warn); delivered > 0)
    info(fmt::format("mlflow: delivered {} spooled director{} from {}", delivered, delivered == 1 ? "y" : "ies",
                     spool_dir));
}

void deliver_or_spool(const Target& target, const std::string& dir, const std::string& kind, const Say& say) {
  const std::string shown = echo(target.uri, 200);
  try {
    deliver_spooled(target.spool, say, say);
    Client client(target.uri);
    deliver_directory(client, target, dir, kind);
    say(fmt::format("mlflow: {} tracked at {} (experiment '{}')", dir, shown, echo(target.experiment)));
  } catch (const Unreachable& e) {
    try {
      spool(target, dir, kind);
      say(fmt::format("mlflow: {} is not answering ({}); {} waits in {} for the next tracked mpt command", shown,
                      e.what(), dir, target.spool));
    } catch (const std::exception& spool_error) {
      say(fmt::format("mlflow: {} is not answering ({}), and the spool failed too: {}", shown, e.what(),
                      spool_error.what()));
    }
  } catch (const std::exception& e) {
    say(fmt::format("mlflow: {} refused {}: {}", shown, dir, e.what()));
  }
}

}  // namespace mpt::mlflow

// safetensors and PyTorch zip weight files.
#include "io/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/echo.h"
#include "common/error.h"
#include "common/files.h"
#include "common/json.h"
#include "io/checkpoint.h"
#include "io/torch_pickle.h"
#include "precision/policy.h"

namespace mpt::io {
namespace {

struct DtypeName {
  torch::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {{torch::kFloat, "F32"},  {torch::kHalf, "F16"}, {torch::kBFloat16, "BF16"},
                                 {torch::kDouble, "F64"}, {torch::kLong, "I64"}, {torch::kInt, "I32"},
                                 {torch::kShort, "I16"},  {torch::kChar, "I8"},  {torch::kByte, "U8"},
                                 {torch::kBool, "BOOL"}};

const char* dtype_name(torch::ScalarType type, const std::string& tensor) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  throw Error("tensor '" + tensor + "': dtype " + std::string(c10::toString(type)) + " has no safetensors name");
}

std::string shape_text(const std::vector<int64_t>& shape) { return c10::str(c10::IntArrayRef(shape)); }

}  // namespace

std::string encode_safetensors(const NamedTensorList& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<torch::Tensor> contiguous;
  int64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    contiguous.push_back(tensor.detach().cpu().contiguous());
    const int64_t bytes = contiguous.back().numel() * static_cast<int64_t>(contiguous.back().element_size());
    header[name] = {{"dtype", dtype_name(tensor.scalar_type(), name)},
                    {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + json.size() + static_cast<size_t>(offset));
  const uint64_t length = json.size();
  out.append(reinterpret_cast<const char*>(&length), 8);  // little-endian on every platform mpt builds for
  out += json;
  for (const auto& t : contiguous) out.append(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
  return out;
}

namespace {

struct SafetensorsEntry {
  std::string name;
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// The JSON header after the 8-byte length; `data_start` is where the tensors' bytes begin.
nlohmann::json safetensors_header(const std::string& bytes, const std::string& source, size_t* data_start) {
  if (bytes.size() < 8)
    throw Error(source + ": " + std::to_string(bytes.size()) +
                " bytes; a safetensors file starts with an 8-byte header length");
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > bytes.size() - 8)
    throw Error(source + ": byte 0: header length " + std::to_string(length) + " exceeds the " +
                std::to_string(bytes.size() - 8) + " bytes after it");
  if (length == 0 || bytes[8] != '{') throw Error(source + ": byte 8: expected the JSON header to start with '{'");
  std::string problem;
  nlohmann::json header =
      parse_json(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(length), &problem);
  if (header.is_discarded())
    throw Error(source + ": bytes 8.." + std::to_string(8 + length) + ": the header is not valid JSON (" + problem +
                ")");
  if (!header.is_object()) throw Error(source + ": byte 8: the header must be a JSON object");
  *data_start = 8 + length;
  return header;
}

// The element count of a header's shape, refused past what mpt reads.
int64_t safetensors_numel(const nlohmann::json& shape, const std::string& where, std::vector<int64_t>& dims) {
  if (!shape.is_array()) throw Error(where + ": shape must be an array");
  int64_t numel = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned()) throw Error(where + ": shape " + shape.dump() + " must hold non-negative integers");
    const uint64_t size = dim.get<uint64_t>();
    if (size > (uint64_t{1} << 40) || __builtin_mul_overflow(numel, static_cast<int64_t>(size), &numel) ||
        numel > (int64_t{1} << 40))
      throw Error(where + ": shape " + shape.dump() + " is larger than any tensor mpt reads");
    dims.push_back(static_cast<int64_t>(size));
  }
  return numel;
}

SafetensorsEntry safetensors_entry(const std::string& name, const nlohmann::json& info, const std::string& source,
                                   size_t data_size) {
  const std::string where = source + ": tensor '" + name + "'";
  if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
    throw Error(where + ": expected {\"dtype\", \"shape\", \"data_offsets\"}");
  SafetensorsEntry entry{name, torch::kFloat, {}, 0, 0};
  const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const auto& d) {
    return info["dtype"].is_string() && info["dtype"].get<std::string>() == d.name;
  });
  if (known == std::end(kDtypes))
    throw Error(where + ": dtype " + info["dtype"].dump() +
                " is not one mpt reads (F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
  entry.type = known->type;
  const int64_t numel = safetensors_numel(info["shape"], where, entry.shape);
  const auto& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw Error(where + ": data_offsets must be [begin, end]");
  entry.begin = offsets[0].get<uint64_t>(), entry.end = offsets[1].get<uint64_t>();
  const uint64_t expected = static_cast<uint64_t>(numel) * c10::elementSize(entry.type);
  if (entry.end < entry.begin || entry.end - entry.begin != expected)
    throw Error(where + ": data_offsets " + offsets.dump() + " hold " + std::to_string(entry.end - entry.begin) +
                " bytes; " + info["dtype"].get<std::string>() + " " + shape_text(entry.shape) + " needs " +
                std::to_string(expected));
  if (entry.end > data_size)
    throw Error(where + ": data_offsets " + offsets.dump() + " run past the file's " + std::to_string(data_size) +
                " data bytes (truncated?)");
  return entry;
}

// The entries in data order, after checking that the data is exactly the tensors' bytes: no holes, no overlaps,
// nothing trailing.
std::vector<const SafetensorsEntry*> in_data_order(const std::vector<SafetensorsEntry>& entries,
                                                   const std::string& source, size_t data_start, size_t data_size) {
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries) by_offset.push_back(&e);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const auto* a, const auto* b) { return a->begin < b->begin; });
  uint64_t expected_begin = 0;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->begin != expected_begin)
      throw Error(source + ": tensor '" + e->name + "' starts at data byte " + std::to_string(e->begin) +
                  ", expected " + std::to_string(expected_begin) +
                  (e->begin < expected_begin ? " (overlaps the previous tensor)" : " (a hole)"));
    expected_begin = e->end;
  }
  if (expected_begin != data_size)
    throw Error(source + ": byte " + std::to_string(data_start + expected_begin) + ": " +
                std::to_string(data_size - expected_begin) + " bytes after the last tensor");
  return by_offset;
}

}  // namespace

NamedTensorList decode_safetensors(const std::string& bytes, const std::string& source) {
  size_t data_start = 0;
  const nlohmann::json header = safetensors_header(bytes, source, &data_start);
  const size_t data_size = bytes.size() - data_start;
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(safetensors_entry(name, info, source, data_size));
      continue;
    }
    if (!info.is_object()) throw Error(source + ": __metadata__ must be an object of strings");
    for (const auto& [key, value] : info.items())
      if (!value.is_string()) throw Error(source + ": __metadata__." + key + ": expected a string");
  }
  NamedTensorList tensors;  // in data order: the order the writer gave
  for (const SafetensorsEntry* e : in_data_order(entries, source, data_start, data_size)) {
    torch::Tensor t = torch::empty(e->shape, torch::TensorOptions().dtype(e->type));
    if (e->end > e->begin) std::memcpy(t.data_ptr(), bytes.data() + data_start + e->begin, e->end - e->begin);
    tensors.emplace_back(e->name, t);
  }
  return tensors;
}

std::string weights_file_in(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) return path;
  for (const char* name : {"model.safetensors", "pytorch_model.bin"})
    if (std::filesystem::is_regular_file(std::filesystem::path(path) / name, error))
      return (std::filesystem::path(path) / name).string();
  return "";
}

NamedTensorList read_weights(const std::string& given) {
  const std::string path = weights_file_in(given);
  if (path.empty()) throw UsageError(given + ": " + kNoWeightsInFolder);
  if (checkpoint_version(path) != 0) return read_checkpoint_weights(path);  // streamed: never the whole file at once
  const std::string bytes = read_file(path);
  if (bytes.rfind("PK\x03\x04", 0) == 0) return read_torch_state_dict(bytes, path);
  // torch.save before 1.6 (or with _use_new_zipfile_serialization=False): a pickled magic number, then pickles.
  if (bytes.rfind(std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14), 0) == 0)
    throw UsageError(path +
                     ": the legacy torch.save format (before PyTorch 1.6), which mpt does not read; convert it "
                     "once with: python -c \"import torch; torch.save(torch.load('" +
                     path + "', weights_only=True), '" + path + ".zip.pt')\"");
  if (bytes.size() >= 9 && bytes[8] == '{') return decode_safetensors(bytes, path);
  throw Error(path + ": byte 0: not a safetensors file, a PyTorch zip file (torch.save) or an mpt checkpoint");
}

void write_weights(const std::string& path, const NamedTensorList& tensors, const std::string& format) {
  if (format == "safetensors") {
    write_file_atomically(path, encode_safetensors(tensors, {{"format", "pt"}}));  // "pt": what HF's loaders expect
  } else if (format == "torch") {
    write_file_atomically(path, encode_torch_state_dict(tensors));
  } else {
    throw UsageError("--format " + format + ": expected safetensors or torch");
  }
}

std::string describe(const InitReport& report) {
  auto some = [](const std::vector<std::string>& names) {
    std::string text;
    for (size_t i = 0; i < names.size() && i < 4; ++i) text += (i ? ", " : " (") + names[i];
    return names.empty() ? text : text + (names.size() > 4 ? ", ...)" : ")");
  };
  return "loaded " + std::to_string(report.loaded) + " tensors; " + std::to_string(report.fresh.size()) +
         " kept their initialisation" + some(report.fresh) + "; " + std::to_string(report.unused.size()) +
         " in the file unused" + some(report.unused) +
         (report.skipped.empty()
              ? ""
              : "; " + std::to_string(report.skipped.size()) + " skipped by model.init_skip" + some(report.skipped)) +
         (report.unmatched_skips.empty()
              ? ""
              : "; model.init_skip globs matching no model tensor" + some(report.unmatched_skips));
}

// A name as the model knows it: without the wrappers DDP ("module.") and torch.compile ("_orig_mod.") add.
std::string unwrapped(std::string name) {
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const char* prefix : {"module.", "_orig_mod."})
      if (name.rfind(prefix, 0) == 0) name.erase(0, std::strlen(prefix)), stripped = true;
  }
  return name;
}

InitReport init_from_weights(torch::nn::Module& model, const NamedTensorList& tensors, const std::string& source,
                             const std::vector<std::string>& skip, const std::string& base_prefix) {
  std::map<std::string, const std::pair<std::string, torch::Tensor>*> by_name;  // unwrapped name -> file entry
  for (const auto& entry : tensors)
    if (!by_name.emplace(unwrapped(entry.first), &entry).second)
      throw Error(source + ": tensors '" + by_name[unwrapped(entry.first)]->first + "' and '" + entry.first +
                  "' are the same tensor once the DDP/torch.compile prefixes are dropped");
  std::map<std::string, bool> used;
  const std::string base = base_prefix.empty() ? "" : base_prefix + ".";
  // The file's tensor for a model name: its own, or the base model's when the file holds the base model alone.
  auto find = [&](const std::string& name) {
    auto it = by_name.find(name);
    if (it == by_name.end() && !base.empty() && name.rfind(base, 0) == 0) it = by_name.find(name.substr(base.size()));
    return it;
  };
  InitReport report;
  torch::NoGradGuard no_grad;
  auto load = [&](const std::string& name, torch::Tensor& target) {
    auto it = find(name);
    const bool skipped =
        std::any_of(skip.begin(), skip.end(), [&](const auto& glob) { return precision::glob_match(glob, name); });
    if (skipped) {
      report.skipped.push_back(name);
      if (it != by_name.end()) used[it->second->first] = true;
      return;
    }
    if (it == by_name.end()) {
      report.fresh.push_back(name);
      return;
    }
    const auto& [file_name, tensor] = *it->second;
    if (tensor.sizes() != target.sizes())
      throw Error(source + ": tensor '" + file_name + "' has shape " + c10::str(tensor.sizes()) + ", the model's '" +
                  name + "' is " + c10::str(target.sizes()) + "; to keep the model's own, add it to model.init_skip " +
                  "(e.g. [" + name.substr(0, name.rfind('.') == std::string::npos ? name.size() : name.rfind('.')) +
                  ".*])");
    target.copy_(tensor.to(target.scalar_type()));
    used[file_name] = true;
    ++report.loaded;
  };
  for (auto& item : model.named_parameters()) load(item.key(), item.value());
  for (auto& item : model.named_buffers()) load(item.key(), item.value());
  for (const auto& [name, tensor] : tensors)
    if (!used.count(name)) report.unused.push_back(name);
  for (const auto& glob : skip)
    if (std::none_of(report.skipped.begin(), report.skipped.end(),
                     [&](const std::string& name) { return precision::glob_match(glob, name); }))
      report.unmatched_skips.push_back(glob);
  const size_t matched_but_skipped =
      static_cast<size_t>(std::count_if(report.skipped.begin(), report.skipped.end(),
                                        [&](const std::string& name) { return find(name) != by_name.end(); }));
  if (report.loaded == 0 && matched_but_skipped > 0)
    throw UsageError(source + ": model.init_skip skips all " + std::to_string(matched_but_skipped) +
                     " model tensors this file holds (first: '" + report.skipped.front() +
                     "'), so nothing would be loaded; narrow the globs or drop model.init_from");
  if (report.loaded == 0)
    throw Error(source + ": none of its " + std::to_string(tensors.size()) +
                " tensor names match the model's (first: '" +
                echo(tensors.empty() ? std::string() : tensors.front().first) + "', the model's first: '" +
                (report.fresh.empty() ? std::string() : report.fresh.front()) + "')");
  return report;
}

}  // namespace mpt::io

// Crafted files of every kind a user hands mpt: each is refused with an error naming the file, never a crash, a
// hang or a silent acceptance. One case per failure class found by hand (issue 26); the fuzz harnesses in fuzz/
// look for the rest.
#include <catch2/catch.hpp>

#include <caffe2/serialize/in_memory_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/dir_lock.h"
#include "common/error.h"
#include "common/files.h"
#include "config/load.h"
#include "data/dataset.h"
#include "data/idx.h"
#include "data/image_decode.h"
#include "data/wordpiece.h"
#include "io/checkpoint.h"
#include "io/torch_pickle.h"
#include "io/weights.h"
#include "run/resolve.h"
#include "tests/support/helpers.h"
#include "tests/support/legacy_checkpoint.h"
#include "tools/nightly/night.h"
#include "tools/nightly/suite.h"

namespace fs = std::filesystem;
using mpt::testing::error_of;
using mpt::testing::scratch_dir;

namespace {

// A PyTorch zip (torch.save's container) whose data.pkl is `pickle`.
std::string torch_zip(const std::string& pickle) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter zip([&out](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  zip.writeRecord("data.pkl", pickle.data(), pickle.size());
  zip.writeEndOfFile();
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

uint32_t crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

}  // namespace

TEST_CASE("crafted pickles are refused: a dict inside itself, deep nesting, opcodes on an empty stack", "[fast][io]") {
  const std::string self_dict = std::string("\x80\x02}q\x00(X\x0a\x00\x00\x00state_dicth\x00u.", 24);
  CHECK_THAT(error_of([&] { mpt::io::read_torch_state_dict(torch_zip(self_dict), "self.pt"); }),
             Catch::Contains("self.pt") && Catch::Contains("contains itself"));

  std::string deep = "\x80\x02";
  for (int i = 0; i < 200000; ++i) deep += ']';
  for (int i = 0; i < 199999; ++i) deep += 'a';
  deep += '.';
  CHECK_THAT(error_of([&] { mpt::io::read_torch_state_dict(torch_zip(deep), "deep.pt"); }),
             Catch::Contains("deep.pt") && Catch::Contains("nested more than"));

  for (const std::string& pickle : {std::string("\x80\x02(e.", 5), std::string("\x80\x02NNs.", 6),
                                    std::string("\x80\x02(u.", 5), std::string("\x80\x02Na.", 5)}) {
    CAPTURE(pickle);
    CHECK_THAT(error_of([&] { mpt::io::read_torch_state_dict(torch_zip(pickle), "stack.pt"); }),
               Catch::Contains("stack.pt: data.pkl byte"));
  }
}

TEST_CASE("a safetensors header nested past the JSON depth limit is refused", "[fast][io]") {
  std::string dtype;
  for (int i = 0; i < 100000; ++i) dtype += '[';
  for (int i = 0; i < 100000; ++i) dtype += ']';
  const std::string header = "{\"w\":{\"dtype\":" + dtype + ",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string bytes(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes += header + std::string(4, '\0');
  CHECK_THAT(error_of([&] { mpt::io::decode_safetensors(bytes, "deep.safetensors"); }),
             Catch::Contains("deep.safetensors") && Catch::Contains("nested more than"));
}

TEST_CASE("a CRC-valid checkpoint whose tensor records are short is refused before training reads them", "[fast][io]") {
  const std::string dir = scratch_dir("hostile_checkpoint");
  torch::nn::Linear model(4, 3);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.1));
  mpt::io::ModelTensors tensors{model->named_parameters(), model->named_buffers()};
  mpt::io::TrainingState state;
  state.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  const std::string good = dir + "/first-format.mpt";  // the zip format's records: the streamed format has none
  mpt::testing::save_first_format_checkpoint(good, tensors, optimizer, state);

  // Unpack the payload, empty every tensor record, pack it again with a correct CRC and length.
  const std::string bytes = mpt::read_file(good);
  uint64_t size = 0;
  std::memcpy(&size, bytes.data() + 16, 8);
  const std::string payload = bytes.substr(24, size);
  caffe2::serialize::PyTorchStreamReader reader(
      std::make_shared<caffe2::serialize::MemoryReadAdapter>(payload.data(), payload.size()));
  std::string repacked;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&repacked](const void* data, size_t n) {
      repacked.append(static_cast<const char*>(data), n);
      return n;
    });
    for (const std::string& name : reader.getAllRecords()) {
      if (name.rfind(".data/", 0) == 0 || name == "version" || name == ".format_version" || name == "byteorder" ||
          name == ".storage_alignment")
        continue;  // written by the writer itself
      auto [data, n] = reader.getRecord(name);
      const bool tensor_data = name.rfind("data/", 0) == 0;
      writer.writeRecord(name, data.get(), tensor_data ? 0 : n);
    }
    writer.writeEndOfFile();
  }
  std::string corrupt = bytes.substr(0, 12);
  const uint32_t checksum = crc(repacked);
  const uint64_t length = repacked.size();
  corrupt.append(reinterpret_cast<const char*>(&checksum), 4);
  corrupt.append(reinterpret_cast<const char*>(&length), 8);
  corrupt += repacked + bytes.substr(bytes.size() - 8);
  const std::string path = dir + "/corrupt.mpt";
  write(path, corrupt);
  // The container itself is sound (magic, length, CRC, trailer); its storages are not.
  CHECK_THAT(mpt::io::verify_checkpoint(path),
             Catch::Contains("payload: data.pkl byte") && Catch::Contains("holds 0 bytes"));

  CHECK_THAT(error_of([&] { mpt::io::load_checkpoint(path, tensors, optimizer); }), Catch::Contains(path));
  CHECK_THAT(error_of([&] { mpt::io::read_checkpoint_weights(path); }), Catch::Contains(path));
}

TEST_CASE("spec files: a directory, duplicate keys, complex keys, control characters, a flood of unknown keys",
          "[fast][config]") {
  const std::string dir = scratch_dir("hostile_specs");
  using mpt::config::load_spec;
  using mpt::config::parse_spec;
  CHECK_THAT(error_of([&] { load_spec(dir, {}); }), Catch::Contains(dir + ": is a directory"));
  CHECK_THAT(error_of([&] { load_spec("/dev/zero", {}); }), Catch::Contains("/dev/zero: is not a regular file"));
  CHECK_THAT(error_of([&] { parse_spec("optimizer:\n  lr: 0.1\n  lr: 0.2\n", "dup.yaml", {}); }),
             Catch::Contains("dup.yaml:3: 'optimizer.lr' is given twice (lines 2 and 3)"));
  CHECK_THAT(error_of([&] { parse_spec("? [a, b]\n: 1\n", "complex.yaml", {}); }),
             Catch::Contains("complex.yaml:1: a key must be a plain name"));
  CHECK_THAT(error_of([&] { parse_spec("experiment:\n  name: \"a\\x1b[31mb\"\n", "ctrl.yaml", {}); }),
             Catch::Contains("ctrl.yaml:2") && Catch::Contains("control characters"));

  std::string flood;
  for (int i = 0; i < 20000; ++i) flood += "unknown_key_" + std::to_string(i) + ": 1\n";
  const auto start = std::chrono::steady_clock::now();
  const std::string message = error_of([&] { parse_spec(flood, "flood.yaml", {}); });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));  // a bound, not a benchmark
  CHECK_THAT(message, Catch::Contains("20000 errors") && Catch::Contains("... and 19980 more"));

  // "did you mean" for a key of half a megabyte: only keys of about its length could be close, and none are.
  CHECK_THAT(error_of([&] { parse_spec("", "long.yaml", {std::string(500000, 'k') + "=1"}); }),
             Catch::Contains("unknown key") && Catch::Contains("see docs/spec.md"));

  write(dir + "/huge.yaml", std::string(2 << 20, '#'));
  CHECK_THAT(error_of([&] { load_spec(dir + "/huge.yaml", {}); }), Catch::Contains("a spec is a few kilobytes"));
}

TEST_CASE("a suite's non-finite numbers are refused, and an unreadable old night does not stop the next",
          "[fast][nightly]") {
  const std::string dir = scratch_dir("hostile_nightly");
  write(dir + "/suite.yaml",
        "jobs:\n  - name: a\n    train: " + mpt::testing::source_path("configs/mlp_fmnist_fp32.yaml") +
            "\n    time_budget_min: .nan\n");
  CHECK_THAT(error_of([&] { mpt::nightly::load_suite(dir + "/suite.yaml"); }),
             Catch::Contains("time_budget_min: expected a number of minutes (a finite number)"));

  const std::string root = dir + "/root";
  fs::create_directories(root + "/2020-01-01_000000");
  write(root + "/2020-01-01_000000/night.json", "{\"jobs\": [{\"status\": \"running\", \"job\": nul");
  mpt::nightly::Suite empty;
  empty.name = "empty";
  volatile int stop = 0;
  const mpt::nightly::NightOutcome outcome = mpt::nightly::run_night(empty, root, &stop);
  CHECK(fs::exists(outcome.night_dir + "/night.json"));
  CHECK(fs::exists(root + "/2020-01-01_000000/night.json.unreadable"));
}

TEST_CASE("inputs that are not regular files are refused up front", "[fast][io]") {
  const std::string dir = scratch_dir("hostile_not_files");
  CHECK_THAT(error_of([] { mpt::read_file("/dev/zero"); }), Catch::Contains("/dev/zero: is not a regular file"));
  // A folder is a Hugging Face model's: refused when it holds no weights file.
  CHECK_THAT(error_of([&] { mpt::io::read_weights(dir); }),
             Catch::Contains(dir + ": a folder without model.safetensors or pytorch_model.bin"));
  CHECK_THAT(error_of([] { mpt::io::read_weights("/dev/zero"); }), Catch::Contains("/dev/zero: is not a regular file"));
  CHECK_THAT(error_of([&] { mpt::data::Vocabulary::load(dir); }), Catch::Contains(dir + ": is a directory"));
  const auto inspect = mpt::testing::run_mpt({"inspect", "/dev/zero"});
  CHECK(inspect.exit_code == 2);
  CHECK_THAT(inspect.output, Catch::Contains("/dev/zero"));
}

TEST_CASE("paths the system refuses are one-line usage errors naming the key, never an escaped exception",
          "[fast][cli]") {
  const std::string dir = scratch_dir("hostile_paths");
  const std::string too_long = dir + "/" + std::string(300, 'a');  // a name over NAME_MAX: ENAMETOOLONG
  write(dir + "/file", "x");
  using mpt::PathKind;
  CHECK(mpt::path_problem(too_long, PathKind::kFile) == "File name too long");
  CHECK(mpt::path_problem(dir, PathKind::kFile) == "a folder, not a file");
  CHECK(mpt::path_problem(dir + "/file", PathKind::kFolder) == "a file, not a folder");
  CHECK(mpt::path_problem(dir + "/file/below", PathKind::kAny) == "no such file or folder");
  CHECK(mpt::path_problem(dir + "/none", PathKind::kFolder) == "no such folder");
  CHECK(mpt::path_problem(dir + "/file", PathKind::kFile).empty());

  const std::string spec = mpt::testing::source_path("configs/mlp_fmnist_fp32.yaml");
  const auto root = mpt::testing::run_mpt({"train", spec, "data.root=" + too_long, "--run-dir", dir + "/r1"});
  CHECK(root.exit_code == 2);
  CHECK_THAT(root.output, Catch::Contains("data.root = " + too_long + ": File name too long"));
  const auto init = mpt::testing::run_mpt({"train", spec, "model.init_from=" + dir, "--run-dir", dir + "/r2"});
  CHECK(init.exit_code == 2);
  CHECK_THAT(init.output,
             Catch::Contains("model.init_from = " + dir + ": a folder without model.safetensors or pytorch_model.bin"));
  const auto run_dir = mpt::testing::run_mpt({"train", spec, "--run-dir", too_long + "/run"});
  CHECK(run_dir.exit_code == 2);
  CHECK_THAT(run_dir.output, Catch::Contains("mpt: error: " + too_long) && Catch::Contains(": File name too long"));
  const auto eval = mpt::testing::run_mpt({"eval", dir + "/file/below"});
  CHECK(eval.exit_code == 2);
  CHECK_THAT(eval.output, Catch::Contains(dir + "/file/below"));
}

TEST_CASE("a vocabulary with a byte-order mark reads as without one", "[fast][data]") {
  const std::string path = scratch_dir("hostile_bom") + "/vocab.txt";
  write(path, "\xEF\xBB\xBF[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  const mpt::data::Vocabulary vocab = mpt::data::Vocabulary::load(path);
  CHECK(vocab.id("[PAD]") == 0);
  CHECK(vocab.id("hello") == 5);
}

TEST_CASE("a corpus folder with a link loop reads each file once", "[fast][data]") {
  const std::string dir = scratch_dir("hostile_corpus");
  fs::create_directories(dir + "/a");
  write(dir + "/a/one.txt", "hello world\n");
  fs::create_directory_symlink("..", dir + "/a/loop");
  fs::create_symlink("one.txt", dir + "/a/also.txt");
  const std::vector<std::string> files = mpt::data::corpus_files(dir);
  CHECK(files.size() == 1);
}

TEST_CASE("images: a truncated JPEG and size bombs are refused, naming the file", "[fast][data]") {
  const std::string dir = scratch_dir("hostile_images");
  std::vector<uint8_t> rgb(64 * 48 * 3, 90);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7);
  tjhandle handle = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  REQUIRE(tjCompress2(handle, rgb.data(), 64, 0, 48, TJPF_RGB, &jpeg, &size, TJSAMP_444, 95, 0) == 0);
  const std::string whole(reinterpret_cast<const char*>(jpeg), size);
  tjFree(jpeg);
  tjDestroy(handle);
  write(dir + "/cut.jpg", whole.substr(0, whole.size() * 2 / 3));
  CHECK_THAT(error_of([&] { mpt::data::decode_image(dir + "/cut.jpg"); }),
             Catch::Contains(dir + "/cut.jpg: corrupt JPEG"));

  std::string bomb = whole;  // SOF0 (FF C0): length, precision, height, width, big-endian
  const size_t sof = bomb.find("\xFF\xC0");
  REQUIRE(sof != std::string::npos);
  for (const size_t at : {sof + 5, sof + 7})
    bomb[at] = static_cast<char>(20000 >> 8), bomb[at + 1] = static_cast<char>(20000 & 0xFF);
  write(dir + "/bomb.jpg", bomb);
  CHECK_THAT(error_of([&] { mpt::data::decode_image(dir + "/bomb.jpg"); }),
             Catch::Contains(dir + "/bomb.jpg: declares 20000 x 20000 pixels"));

  // A PNG whose header (with a valid CRC) declares 20000 x 20000, and nothing else.
  std::string ihdr = "IHDR";
  for (int i = 0; i < 2; ++i) ihdr += std::string("\x00\x00\x4E\x20", 4);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  const uint32_t ihdr_crc = crc(ihdr);
  std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + std::string("\x00\x00\x00\x0d", 4) + ihdr;
  for (int shift = 24; shift >= 0; shift -= 8) png += static_cast<char>((ihdr_crc >> shift) & 0xFF);
  for (const std::string chunk : {"IDAT", "IEND"}) {  // empty chunks: the header is all there is
    png += std::string(4, '\0') + chunk;
    const uint32_t chunk_crc = crc(chunk);
    for (int shift = 24; shift >= 0; shift -= 8) png += static_cast<char>((chunk_crc >> shift) & 0xFF);
  }
  write(dir + "/bomb.png", png);
  CHECK_THAT(error_of([&] { mpt::data::decode_image(dir + "/bomb.png"); }),
             Catch::Contains(dir + "/bomb.png: declares 20000 x 20000 pixels"));
}

TEST_CASE("a JSONL file a crash left mid-line is cut back to its last complete line", "[fast][io]") {
  const std::string path = scratch_dir("hostile_jsonl") + "/metrics.jsonl";
  write(path, "{\"step\": 1}\n{\"step\": 2}\n{\"ste");
  CHECK(mpt::cut_torn_tail(path) == 5);
  CHECK(mpt::read_file(path) == "{\"step\": 1}\n{\"step\": 2}\n");
  CHECK(mpt::cut_torn_tail(path) == 0);
}

TEST_CASE("one writer per run directory: a second mpt train exits 75 naming the holder", "[fast][cli]") {
  const std::string run_dir = scratch_dir("hostile_lock");
  const mpt::DirectoryLock held(run_dir, "mpt train");
  const auto second = mpt::testing::run_mpt(
      {"train", mpt::testing::source_path("configs/mlp_fmnist_fp32.yaml"), "--run-dir", run_dir, "train.max_steps=1"});
  CHECK(second.exit_code == 75);
  CHECK_THAT(second.output,
             Catch::Contains("another mpt train holds " + run_dir + "/.lock (pid " + std::to_string(::getpid())));
  CHECK_FALSE(fs::exists(run_dir + "/config.yaml"));
}

TEST_CASE("a file-size limit fails the write with a message instead of killing mpt", "[fast][cli]") {
  const std::string run_dir = scratch_dir("hostile_fsize");
  const auto result = mpt::testing::run_mpt_with_file_limit(
      {"train", mpt::testing::source_path("configs/mlp_fmnist_fp32.yaml"), "--run-dir", run_dir, "train.max_steps=2"},
      /*max_file_kib=*/1);
  CHECK(result.exit_code == 1);  // not 128 + SIGXFSZ
  CHECK_THAT(result.output, Catch::Contains("File too large"));
}

TEST_CASE(
    "a zip bomb and a tensor declaring 2^62 elements over one stored value are refused naming the file, "
    "before anything is allocated",
    "[fast][io]") {
  if (const std::string missing = mpt::testing::python_missing("torch"); !missing.empty()) MPT_SKIP(missing);
  const std::string dir = scratch_dir("hostile-zip");
  // torch.save stores records uncompressed; a deflated data.pkl of 256 MiB of zeros is a few hundred kB.
  const auto made = mpt::testing::run_python(
      "-c \"import sys, zipfile, torch\n"
      "z = zipfile.ZipFile(sys.argv[1] + '/bomb.pt', 'w', compression=zipfile.ZIP_DEFLATED)\n"
      "z.writestr('archive/data.pkl', bytes(256 << 20)); z.writestr('archive/version', b'3\\\\n'); z.close()\n"
      "torch.save({'w': torch.zeros(1).expand(2 ** 31, 2 ** 31)}, sys.argv[1] + '/expanded.pt')\" " +
      dir);
  INFO(made.output);
  REQUIRE(made.exit_code == 0);
  REQUIRE(fs::file_size(dir + "/bomb.pt") < (4 << 20));
  CHECK_THAT(error_of([&] { mpt::io::read_weights(dir + "/bomb.pt"); }),
             Catch::Contains(dir + "/bomb.pt: record data.pkl inflates to 268435456 bytes, more than the"));
  CHECK_THAT(error_of([&] { mpt::io::read_weights(dir + "/expanded.pt"); }),
             Catch::Contains(dir + "/expanded.pt") && Catch::Contains("a tensor of more than 2^40 elements"));
}

TEST_CASE("an IDX header whose dimensions multiply past 2^64 is refused", "[fast][data]") {
  const std::string dir = scratch_dir("hostile-idx");
  std::string bytes = {0, 0, 0x08, 3};  // unsigned bytes, three dimensions of 2^32 - 1
  for (int d = 0; d < 3; ++d) bytes += std::string(4, '\xff');
  write(dir + "/t10k-images-idx3-ubyte", bytes);
  CHECK_THAT(error_of([&] { mpt::data::read_idx(dir + "/t10k-images-idx3-ubyte", 3); }),
             Catch::Contains("multiply past 2^64"));
}

TEST_CASE(
    "model.init_skip: globs that take every tensor the file holds are an error saying so, and a glob that "
    "matches nothing is reported",
    "[fast][io]") {
  struct Tiny : torch::nn::Module {
    Tiny() { fc = register_module("fc", torch::nn::Linear(4, 3)); }
    torch::nn::Linear fc{nullptr};
  };
  Tiny model;
  const mpt::io::NamedTensorList file = {{"fc.weight", torch::zeros({3, 4})}, {"fc.bias", torch::zeros({3})}};
  CHECK_THROWS_WITH(mpt::io::init_from_weights(model, file, "w.safetensors", {"*"}),
                    Catch::Contains("w.safetensors: model.init_skip skips all 2 model tensors this file holds"));
  const mpt::io::InitReport report = mpt::io::init_from_weights(model, file, "w.safetensors", {"fc.bias", "head.*"});
  CHECK(report.loaded == 1);
  CHECK(report.unmatched_skips == std::vector<std::string>{"head.*"});
  CHECK_THAT(mpt::io::describe(report), Catch::Contains("model.init_skip globs matching no model tensor"));
}

TEST_CASE(
    "model.init_from takes a Hugging Face model folder by its weights file, and a folder without one is "
    "refused naming what it looked for",
    "[fast][io]") {
  const std::string folder = scratch_dir("init-from-folder");
  mpt::io::write_weights(folder + "/model.safetensors", {{"fc.weight", torch::ones({3, 4})}}, "safetensors");
  CHECK(mpt::io::weights_file_in(folder) == folder + "/model.safetensors");
  const mpt::io::NamedTensorList read = mpt::io::read_weights(folder);
  REQUIRE(read.size() == 1);
  CHECK(torch::equal(read[0].second, torch::ones({3, 4})));
  const std::string empty = scratch_dir("init-from-empty");
  CHECK(mpt::io::weights_file_in(empty).empty());
  CHECK_THROWS_WITH(mpt::io::read_weights(empty),
                    Catch::Contains(empty + ": a folder without model.safetensors or pytorch_model.bin"));
  CHECK(error_of([&] {
          mpt::run::load_resolved_spec(mpt::testing::source_path("configs/mlp_fmnist_mixed.yaml"),
                                       {"model.init_from=" + empty});
        }).find("model.init_from = " + empty + ": a folder without model.safetensors") != std::string::npos);
}

// The dataset table: data.name -> what its samples are, the files it needs (checked before any work), its sample
// shape and its loader.
#include "data/datasets.h"

#include <limits>

#include "common/error.h"
#include "common/files.h"
#include "data/image_folder.h"
#include "data/tokenizer.h"

namespace mpt::data {
namespace {

// "ROOT: FILE: why (hint)" for each of `files` under `folder` that is not a readable file.
std::vector<std::string> missing_files(const std::string& root, const std::string& folder,
                                       const std::vector<std::string>& files, const std::string& hint) {
  std::vector<std::string> problems;
  for (const std::string& file : files)
    if (const std::string why = path_problem(folder + "/" + file, PathKind::kFile); !why.empty())
      problems.push_back(root + ": " + file + ": " + why + " (" + hint + ")");
  return problems;
}

std::vector<DataProblem> at_root(const std::vector<std::string>& messages) {
  std::vector<DataProblem> problems;
  for (const auto& message : messages) problems.push_back({"data.root", message});
  return problems;
}

std::vector<DataProblem> vocabulary_problems(const DataConfig& c) {
  if (!c.tokenizer.empty()) {
    if (const std::string why = path_problem(c.tokenizer, PathKind::kAny); !why.empty())
      return {{"data.tokenizer", c.tokenizer + ": " + why + " (a Hugging Face tokenizer.json, or its folder)"}};
    return {};
  }
  if (const std::string why = path_problem(c.vocab, PathKind::kFile); !why.empty())
    return {{"data.vocab", c.vocab + ": " + why +
                               " (scripts/setup.sh converts bert-base-uncased's vocabulary to "
                               "data/bert-base-uncased/vocab.txt)"}};
  return {};
}

std::vector<DataProblem> fashion_mnist_files(const DataConfig& c) {
  if (const std::string why = path_problem(c.root, PathKind::kFolder); !why.empty())
    return {{"data.root", c.root + ": " + why + " (for Fashion-MNIST: apt-get install dataset-fashion-mnist)"}};
  std::vector<DataProblem> problems;
  for (const auto& stem : fashion_mnist_stems())
    if (find_idx_file(c.root, stem).empty()) problems.push_back({"data.root", c.root + ": missing " + stem + "[.gz]"});
  return problems;
}

std::vector<DataProblem> cifar10_files(const DataConfig& c) {
  const std::string nested = c.root + "/cifar-10-batches-bin";
  const std::string folder = path_problem(nested, PathKind::kFolder).empty() ? nested : c.root;
  return at_root(missing_files(c.root, folder,
                               {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                                "data_batch_5.bin", "test_batch.bin"},
                               "CIFAR-10's binary version, cifar-10-binary.tar.gz"));
}

std::vector<DataProblem> image_folder_files(const DataConfig& c) {
  if (const std::string why = path_problem(c.root + "/train", PathKind::kFolder); !why.empty())
    return {{"data.root", c.root + ": train/: " + why + " (expected ROOT/train/<class>/*.jpg)"}};
  return {};
}

std::vector<DataProblem> corpus_problems(const DataConfig& c, const std::vector<std::string>& extensions) {
  std::vector<DataProblem> problems = vocabulary_problems(c);
  try {
    corpus_files(c.root, extensions);
  } catch (const Error& e) {
    problems.insert(problems.begin(), {"data.root", e.what()});
  }
  return problems;
}

std::vector<DataProblem> text_classification_files(const DataConfig& c) {
  std::vector<DataProblem> problems =
      at_root(missing_files(c.root, c.root, {"train.tsv", "test.tsv"}, "LABEL<TAB>TEXT per line"));
  for (auto& problem : vocabulary_problems(c)) problems.push_back(std::move(problem));
  return problems;
}

SampleShape image_shape(int64_t channels, int64_t size, int64_t classes) {
  SampleShape shape;
  shape.channels = channels;
  shape.height = shape.width = size;
  shape.num_classes = classes;
  return shape;
}

SampleShape token_shape(const DataConfig& c, int64_t classes) {
  SampleShape shape;
  shape.seq_len = c.seq_len;
  shape.vocab_size = wordpiece_tokenizer(c).vocab().size();
  shape.num_classes = classes;
  shape.masked_fraction = classes == 0 ? c.mask_prob : 0.0;
  return shape;
}

SampleShape causal_shape(const DataConfig& c) {
  const auto tokenizer = text_tokenizer(c);
  SampleShape shape;
  shape.seq_len = c.seq_len;
  shape.vocab_size = tokenizer->size();
  shape.causal = true;
  shape.eot_id = end_of_text_id(*tokenizer, c.eot_token);
  shape.document_attention = c.document_attention;
  return shape;
}

// The keys every in-memory image dataset reads; image folders add their decoding threads.
keys::OptionTable<DataConfig> image_keys(bool decodes_files) {
  keys::OptionTable<DataConfig> t;
  t.add("data.image_size", &DataConfig::image_size, "Resize images to N x N (bilinear) before the model; 0 = native.")
      .between(0, 4096);
  t.add("data.channels", &DataConfig::channels, "3 replicates grayscale images to RGB; 0 = native.").between(0, 3);
  t.add("data.augment", &DataConfig::augment,
        "Training batches: random crop (padded by 1/8) and flip for in-memory images; random-resized crop and flip "
        "for image folders. Deterministic in (seed, epoch, batch).");
  if (decodes_files)
    t.add("data.workers", &DataConfig::workers, "image_folder: decoding threads, each preparing one upcoming batch.")
        .between(1, 64);
  return t;
}

enum class TextKind { kMaskedLm, kClassification, kCausalLm };

// The keys every tokenized dataset reads; the corpora add their held-out share, masked-LM its masking, causal-LM
// how documents are read and end.
keys::OptionTable<DataConfig> text_keys(TextKind kind) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  keys::OptionTable<DataConfig> t;
  t.add("data.vocab", &DataConfig::vocab,
        "Text datasets: WordPiece vocabulary, one token per line (scripts/setup.sh provides bert-base-uncased's).")
      .path();
  t.add("data.tokenizer", &DataConfig::tokenizer,
        "Text datasets: a Hugging Face tokenizer.json (or its folder) used instead of data.vocab: byte-level BPE for "
        "causal_lm (scripts/setup.sh trains data/fortunes-bpe on the corpus), WordPiece for any.")
      .path();
  t.add("data.lowercase", &DataConfig::lowercase,
        "Text datasets with data.vocab: lower-case and strip accents, as bert-base-uncased does.");
  t.add("data.seq_len", &DataConfig::seq_len,
        "Text datasets: tokens per sequence (for BERT's, [CLS] and [SEP] included).")
      .between(3, 65536);
  if (kind == TextKind::kClassification) return t;
  t.add("data.test_every", &DataConfig::test_every,
        "Text corpora: every N-th packed sequence is held out for evaluation.")
      .between(2, kInf);
  if (kind == TextKind::kMaskedLm) {
    t.add("data.mask_prob", &DataConfig::mask_prob,
          "text_corpus: share of tokens masked-LM predicts (80% [MASK], 10% random, 10% kept).")
        .strictly_between(0, 1);
    return t;
  }
  t.add("data.text_field", &DataConfig::text_field, "causal_lm: the field of each .jsonl line that holds a document.");
  t.add("data.document_delimiter", &DataConfig::document_delimiter,
        "causal_lm: in .txt files, the line that ends a document (\"\" = an empty line; \"%\" for fortunes).");
  t.add("data.eot_token", &DataConfig::eot_token,
        "causal_lm: the token that ends each document (\"\" = the first of <|endoftext|>, <|end_of_text|>, </s>, "
        "<eos>, [SEP] the tokenizer has).");
  t.add("data.document_attention", &DataConfig::document_attention,
        "causal_lm: positions attend only to their own document (the loss never predicts across a boundary "
        "either way).");
  return t;
}

const std::vector<DatasetKind>& kinds() {
  static const std::vector<DatasetKind> table = {
      {"fashion_mnist", Modality::kImages, image_keys(false), fashion_mnist_files,
       [](const DataConfig& c) {
         return image_shape(c.channels > 0 ? c.channels : 1, c.image_size > 0 ? c.image_size : 28, 10);
       },
       [](const DataConfig& c, const std::string& split, int64_t limit) {
         return load_fashion_mnist(c, split == "train" ? "train" : "t10k", limit);
       }},
      {"cifar10", Modality::kImages, image_keys(false), cifar10_files,
       [](const DataConfig& c) { return image_shape(3, c.image_size > 0 ? c.image_size : 32, 10); }, load_cifar10},
      {"image_folder", Modality::kImages, image_keys(true), image_folder_files,
       [](const DataConfig& c) {
         return image_shape(3, c.image_size > 0 ? c.image_size : 224,
                            static_cast<int64_t>(image_folder_classes(c.root).size()));
       },
       load_image_folder},
      {"text_corpus", Modality::kTokens, text_keys(TextKind::kMaskedLm),
       [](const DataConfig& c) { return corpus_problems(c, {".txt"}); },
       [](const DataConfig& c) { return token_shape(c, 0); }, load_text_corpus},
      {"text_classification", Modality::kTokens, text_keys(TextKind::kClassification), text_classification_files,
       [](const DataConfig& c) {
         return token_shape(c, static_cast<int64_t>(text_classification_labels(c.root).size()));
       },
       load_text_classification},
      {"causal_lm", Modality::kTokens, text_keys(TextKind::kCausalLm),
       [](const DataConfig& c) {
         return corpus_problems(c, {".txt", ".jsonl"});
       },
       causal_shape, load_causal_lm},
  };
  return table;
}

}  // namespace

const std::vector<DatasetKind>& dataset_kinds() { return kinds(); }

const DatasetKind& dataset_kind(const std::string& name) {
  for (const DatasetKind& kind : kinds())
    if (kind.name == name) return kind;
  throw UsageError("data.name: unknown dataset '" + name + "'");
}

DataConfig read_options(const keys::Options& values, DataConfig config) {
  return dataset_kind(config.name).options.read(values, std::move(config));
}

SampleShape sample_shape(const DataConfig& config) { return dataset_kind(config.name).shape(config); }

Dataset load_dataset(const DataConfig& config, const std::string& split) {
  return dataset_kind(config.name).load(config, split, split == "train" ? config.train_limit : config.test_limit);
}

}  // namespace mpt::data

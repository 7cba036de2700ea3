// In-memory datasets: images with labels (Fashion-MNIST) and token sequences (a text corpus for masked-LM),
// the config that selects one, and the shape of a sample known before any data is read.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace mpt::data {

// What a sample is: an image (MLP, ResNet) or a token sequence (BERT).
enum class Modality { kImages, kTokens };

// The data section: the common keys (name, root, batch_size, shuffle, the limits), declared in run/stack_keys.cpp, and
// the members each dataset kind binds its own keys to (data/datasets.cpp).
struct DataConfig {
  std::string name = "fashion_mnist";  // a dataset kind (data/datasets.h)
  std::string root = "/usr/share/datasets/fashion-mnist";
  int64_t batch_size = 128;
  bool shuffle = true;
  int64_t train_limit = 0;  // 0 = all
  int64_t test_limit = 0;
  int64_t image_size = 0;  // resize batches to image_size x image_size (0 = native)
  int64_t channels = 0;    // 3 replicates grayscale to RGB (0 = native)
  bool augment = false;    // training batches: random crop and horizontal flip
  int64_t workers = 2;     // image_folder: decoding threads, each preparing one batch ahead
  // Text
  std::string vocab = "data/bert-base-uncased/vocab.txt";  // WordPiece vocab.txt
  std::string tokenizer;    // a Hugging Face tokenizer.json instead of vocab ("" = vocab)
  bool lowercase = true;    // bert-base-uncased's normalisation: lower-case and strip accents
  int64_t seq_len = 128;    // tokens per sequence, [CLS] and [SEP] included
  double mask_prob = 0.15;  // masked-LM: share of tokens chosen for prediction
  int64_t test_every = 20;  // every N-th packed sequence is held out for evaluation
  // Causal LM
  std::string text_field = "text";  // .jsonl: the field holding a document
  std::string document_delimiter;   // .txt: the line that ends a document ("" = an empty line)
  std::string eot_token;            // the token that ends a document ("" = the tokenizer's usual one)
  bool document_attention = false;  // positions attend only within their own document
};

// Causal-LM batches: a window of S + 1 tokens gives inputs (its first S) and next-token targets (its last S); the
// target after an end-of-text token, the next document's first token, is not predicted.
struct CausalLmConfig {
  int64_t eot_id = -1;
};

// Masked-LM batches: of the chosen tokens, 80% become [MASK], 10% a random token, 10% stay (BERT's recipe).
struct MaskedLmConfig {
  double probability = 0.15;
  int64_t mask_id = 103;
  int64_t vocab_size = 30522;
  std::vector<int64_t> special_ids;  // never chosen: [PAD], [CLS], [SEP]
};

struct Dataset {
  // Images: uint8 (N, C, H, W) stays compact on the host; batches become normalised FP32.
  torch::Tensor images;
  std::vector<float> mean{0.0f};  // normalisation per channel (one value: all channels)
  std::vector<float> std{1.0f};
  int64_t out_channels = 0;  // batch shape adjustments (DataConfig::channels, image_size); 0 = native
  int64_t out_size = 0;
  bool augment = false;  // training: random crop (in-memory) or random-resized crop (files), and flips
  // Image files (image_folder): decoded per batch on worker threads instead of `images`.
  std::vector<std::string> files;
  int64_t workers = 2;
  // Text: int32 token ids (N, S), [PAD] = 0 after the text; batches become int64.
  torch::Tensor tokens;
  std::optional<MaskedLmConfig> masked_lm;  // set: targets are made per batch by masking
  std::optional<CausalLmConfig> causal_lm;  // set: tokens are (N, S + 1) windows, targets their shift
  // Labels: int64 (N); undefined for masked-LM.
  torch::Tensor labels;
  int64_t num_classes = 0;

  int64_t size() const { return tokens.defined() ? tokens.size(0) : labels.size(0); }
  bool from_files() const { return !files.empty(); }
};

// What one sample looks like to a model: (channels, height, width) for images, seq_len and vocab_size for text.
struct SampleShape {
  int64_t channels = 0, height = 0, width = 0;
  int64_t seq_len = 0;
  int64_t vocab_size = 0;
  int64_t num_classes = 0;          // labels of a classifier; 0 for masked-LM
  double masked_fraction = 0.0;     // masked-LM: share of positions the loss predicts (data.mask_prob)
  bool causal = false;              // next-token targets (causal_lm)
  int64_t eot_id = -1;              // causal_lm: the token that ends each document
  bool document_attention = false;  // causal_lm: positions attend only within their document
  int64_t features() const { return channels * height * width; }
};
SampleShape sample_shape(const DataConfig& config);

// The spec's dataset, split "train" or "test", with data.train_limit / data.test_limit applied.
Dataset load_dataset(const DataConfig& config, const std::string& split);

// split is "train" or "t10k"; limit > 0 keeps only the first `limit` samples; batches take the config's
// channels and image_size.
Dataset load_fashion_mnist(const DataConfig& config, const std::string& split, int64_t limit);

// The path of ROOT/STEM.gz or ROOT/STEM, whichever exists; "" when neither does.
std::string find_idx_file(const std::string& root, const std::string& stem);

// The four files a Fashion-MNIST root must hold, for validation before any work.
std::vector<std::string> fashion_mnist_stems();

// CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin) in data.root or data.root/cifar-10-batches-bin:
// records of 1 label byte + 3,072 pixel bytes (R, G, B planes of 32 x 32). split "train" or "test".
Dataset load_cifar10(const DataConfig& config, const std::string& split, int64_t limit);

// An image folder: data.root/train/<class>/*.{jpg,jpeg,png} and data.root/val (or test)/<class>/..., classes in
// sorted order. Training batches take a random-resized crop and a flip; evaluation resizes the shorter side
// to 8/7 of data.image_size and center-crops (the 256/224 convention).
Dataset load_image_folder(const DataConfig& config, const std::string& split, int64_t limit);

// A text corpus (data.root: one UTF-8 file, or every *.txt under a folder, sorted) tokenised with the WordPiece
// vocabulary data.vocab and packed into [CLS] tokens... [SEP] sequences of data.seq_len, each file's last one
// padded with [PAD]. Every data.test_every-th sequence is the "test" split, the rest "train"; batches are
// masked per data.mask_prob.
Dataset load_text_corpus(const DataConfig& config, const std::string& split, int64_t limit);

// Labelled text for BERT sequence classification: data.root/train.tsv and test.tsv, one "label<TAB>text" per
// line; labels are the sorted distinct labels of train.tsv. Each text becomes [CLS] tokens [SEP] [PAD]...,
// truncated to data.seq_len.
Dataset load_text_classification(const DataConfig& config, const std::string& split, int64_t limit);
std::vector<std::string> text_classification_labels(const std::string& root);

// Documents for causal language modelling: data.root (a file, or every *.txt and *.jsonl under a folder, sorted)
// read as documents (.txt: separated by data.document_delimiter lines; .jsonl: data.text_field of each line),
// tokenized with data.tokenizer (or data.vocab), each followed by the end-of-text token, packed into windows of
// data.seq_len + 1 tokens; every data.test_every-th window is the "test" split.
Dataset load_causal_lm(const DataConfig& config, const std::string& split, int64_t limit);

// The files with one of `extensions` a text corpus root holds, in reading order; an error naming the root when
// there are none.
std::vector<std::string> corpus_files(const std::string& root, const std::vector<std::string>& extensions = {".txt"});

// Random samples already in the spec's batch shape, for benchmarks that keep disk and decoding out of the
// measurement (`mpt bench` without --real-data).
Dataset synthetic_dataset(const DataConfig& config, int64_t samples);

}  // namespace mpt::data

// Text corpus packing, the train/test split, malformed files, and masked-LM masking statistics.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "data/loader.h"
#include "data/masking.h"
#include "data/wordpiece.h"
#include "tests/support/helpers.h"

using namespace mpt::data;

namespace {

// A vocabulary where every lower-case word of the test texts is one token: ids are predictable.
std::string write_vocab(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  std::ofstream out(path);
  for (const char* token : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", ".", "##s"})
    out << token << "\n";
  return path;
}

DataConfig corpus_config(const std::string& root, const std::string& vocab, int64_t seq_len) {
  DataConfig config;
  config.name = "text_corpus";
  config.root = root;
  config.vocab = vocab;
  config.seq_len = seq_len;
  config.test_every = 3;
  return config;
}

}  // namespace

TEST_CASE("a corpus folder packs each *.txt file into [CLS] ... [SEP] [PAD]... sequences", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("corpus_packing");
  const std::string vocab = write_vocab(dir);
  std::filesystem::create_directories(dir + "/text/sub");
  std::ofstream(dir + "/text/one.txt") << "a b c d e a b c\nd.\n";  // 10 tokens
  std::ofstream(dir + "/text/sub/two.txt") << "E es\n";             // e, e ##s: 3 tokens
  std::ofstream(dir + "/text/notes.md") << "ignored\n";
  CHECK(corpus_files(dir + "/text") == std::vector<std::string>{dir + "/text/one.txt", dir + "/text/sub/two.txt"});

  const DataConfig config = corpus_config(dir + "/text", vocab, 6);  // 4 text tokens per sequence
  const Dataset train = load_text_corpus(config, "train", 0);
  const Dataset test = load_text_corpus(config, "test", 0);
  // one.txt: [a b c d] [e a b c] [d . PAD PAD]; two.txt: [e e ##s PAD]; every 3rd sequence is test.
  REQUIRE(train.size() + test.size() == 4);
  CHECK(test.size() == 1);
  CHECK(test.tokens[0].equal(torch::tensor({2, 8, 10, 3, 0, 0}, torch::kInt)));
  CHECK(train.tokens[0].equal(torch::tensor({2, 5, 6, 7, 8, 3}, torch::kInt)));
  CHECK(train.tokens[2].equal(torch::tensor({2, 9, 9, 11, 3, 0}, torch::kInt)));
  REQUIRE(train.masked_lm.has_value());
  CHECK(train.masked_lm->mask_id == 4);
  CHECK(train.masked_lm->special_ids == std::vector<int64_t>{0, 2, 3});
  CHECK(load_text_corpus(config, "train", 2).size() == 2);  // data.train_limit
}

TEST_CASE("malformed corpora fail with the file and byte offset", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("corpus_errors");
  const std::string vocab = write_vocab(dir);
  std::filesystem::create_directories(dir + "/bad");
  std::ofstream(dir + "/bad/x.txt", std::ios::binary) << "a b\nc \xC3\x28 d\n";
  CHECK_THROWS_WITH(load_text_corpus(corpus_config(dir + "/bad", vocab, 6), "train", 0),
                    Catch::Contains("x.txt: byte offset 6 (line 2): invalid UTF-8"));
  std::filesystem::create_directories(dir + "/empty");
  CHECK_THROWS_WITH(corpus_files(dir + "/empty"), Catch::Contains("no *.txt files"));
  CHECK_THROWS_WITH(corpus_files(dir + "/nowhere"), Catch::Contains("no such file or folder"));
}

TEST_CASE("masking chooses 15% of ordinary tokens and applies BERT's 80/10/10 recipe", "[fast][data]") {
  MaskedLmConfig config;
  config.probability = 0.15;
  config.mask_id = 103;
  config.vocab_size = 30522;
  config.special_ids = {0, 101, 102};
  torch::Tensor tokens = torch::randint(1000, 30522, {400, 128}, torch::kLong);
  tokens.select(1, 0).fill_(101), tokens.select(1, 127).fill_(102), tokens.narrow(1, 100, 27).fill_(0);
  const MaskedTokens masked = mask_tokens(tokens, config, 42);

  const torch::Tensor chosen = masked.targets.ne(kIgnoredTarget);
  const torch::Tensor ordinary = tokens.ge(1000);
  CHECK((chosen & ordinary.logical_not()).sum().item<int64_t>() == 0);  // specials are never chosen
  CHECK(masked.targets.masked_select(chosen).equal(tokens.masked_select(chosen)));
  const double chosen_share = chosen.sum().item<double>() / ordinary.sum().item<double>();
  CHECK(chosen_share == Approx(0.15).margin(0.005));  // ~39,600 eligible tokens: 3 sigma is 0.0054
  const double n = chosen.sum().item<double>();
  const double as_mask = (chosen & masked.inputs.eq(103)).sum().item<double>() / n;
  const double kept = (chosen & masked.inputs.eq(tokens)).sum().item<double>() / n;
  CHECK(as_mask == Approx(0.8).margin(0.015));
  CHECK(kept == Approx(0.1).margin(0.012));
  CHECK(1.0 - as_mask - kept == Approx(0.1).margin(0.012));  // random replacements
  CHECK(masked.inputs.masked_select(chosen.logical_not()).equal(tokens.masked_select(chosen.logical_not())));

  CHECK(mask_tokens(tokens, config, 42).inputs.equal(masked.inputs));  // deterministic in the seed
  CHECK_FALSE(mask_tokens(tokens, config, 43).inputs.equal(masked.inputs));
}

TEST_CASE("masked-LM batches are the same after a seek, so a resumed run sees the same masks", "[fast][data]") {
  Dataset dataset;
  dataset.tokens = torch::randint(1000, 5000, {64, 16}, torch::kInt);
  dataset.masked_lm = MaskedLmConfig{0.15, 103, 5000, {0, 101, 102}};
  BatchLoader loader(dataset, 8, /*shuffle=*/true, /*seed=*/3, /*drop_last=*/true);
  std::vector<Batch> batches;
  for (int i = 0; i < 12; ++i) batches.push_back(loader.next());  // into the second epoch
  BatchLoader resumed(dataset, 8, true, 3, true);
  resumed.seek({1, 2});
  const Batch again = resumed.next();
  CHECK(again.inputs.equal(batches[10].inputs));
  CHECK(again.targets.equal(batches[10].targets));
  CHECK(batches[10].targets.ne(kIgnoredTarget).any().item<bool>());
  CHECK_FALSE(batches[2].targets.equal(batches[10].targets));  // a new epoch draws new masks
}

TEST_CASE("masked-LM batches carry their target positions, found on the host", "[fast][data]") {
  Dataset dataset;
  dataset.tokens = torch::randint(1000, 5000, {32, 16}, torch::kInt);
  dataset.masked_lm = MaskedLmConfig{0.15, 103, 5000, {0, 101, 102}};
  // As a GPU run delivers them (prefetched, finished on the device), asked for on the CPU.
  BatchLoader loader(dataset, 8, /*shuffle=*/true, /*seed=*/5, /*drop_last=*/true, {},
                     Delivery{torch::kCPU, true, true});
  for (int i = 0; i < 5; ++i) {
    const Batch batch = loader.next();
    REQUIRE(batch.target_positions.defined());
    const torch::Tensor flat = batch.targets.reshape({-1});
    CHECK(batch.target_positions.equal(flat.ne(kIgnoredTarget).nonzero().squeeze(1)));
    CHECK(batch.target_positions.size(0) > 0);
  }

  Dataset labelled;
  labelled.tokens = dataset.tokens;
  labelled.labels = torch::zeros({32}, torch::kLong);
  CHECK_FALSE(BatchLoader(labelled, 8, false, 0, true).next().target_positions.defined());
}

TEST_CASE("labelled text: LABEL<TAB>TEXT lines become [CLS] ... [SEP] rows with sorted label ids", "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("text_classification");
  const std::string vocab = write_vocab(dir);
  std::ofstream(dir + "/train.tsv") << "pos\ta b c\nneg\td e\n\npos\ta a a a a a a\n";
  std::ofstream(dir + "/test.tsv") << "neg\te.\n";
  DataConfig config = corpus_config(dir, vocab, 6);
  config.name = "text_classification";
  CHECK(text_classification_labels(dir) == std::vector<std::string>{"neg", "pos"});
  const Dataset train = load_text_classification(config, "train", 0);
  CHECK(train.size() == 3);
  CHECK(train.labels.equal(torch::tensor({1, 0, 1}, torch::kLong)));
  CHECK(train.tokens[0].equal(torch::tensor({2, 5, 6, 7, 3, 0}, torch::kInt)));
  CHECK(train.tokens[2].equal(torch::tensor({2, 5, 5, 5, 5, 3}, torch::kInt)));  // truncated to seq_len
  CHECK_FALSE(train.masked_lm.has_value());
  CHECK(load_text_classification(config, "test", 0).tokens[0].equal(torch::tensor({2, 9, 10, 3, 0, 0}, torch::kInt)));

  std::ofstream(dir + "/test.tsv") << "neutral\tc\n";
  CHECK_THROWS_WITH(load_text_classification(config, "test", 0), Catch::Contains("label 'neutral' does not occur"));
  std::ofstream(dir + "/test.tsv") << "neg\tfine\nno tab here\n";
  CHECK_THROWS_WITH(load_text_classification(config, "test", 0),
                    Catch::Contains("test.tsv:2: expected LABEL<TAB>TEXT"));
}

TEST_CASE("synthetic text batches take the spec's task: labels for classification, masks for masked-LM",
          "[fast][data]") {
  const std::string dir = mpt::testing::scratch_dir("synthetic_text");
  const std::string vocab = write_vocab(dir);
  std::ofstream(dir + "/train.tsv") << "pos\ta b c\nneg\td e\nmid\te\n";
  DataConfig config = corpus_config(dir, vocab, 6);
  config.name = "text_classification";
  const Dataset labelled = synthetic_dataset(config, 50);
  CHECK(labelled.tokens.sizes() == torch::IntArrayRef({50, 6}));
  CHECK_FALSE(labelled.masked_lm.has_value());
  REQUIRE(labelled.labels.defined());
  CHECK(labelled.num_classes == 3);
  CHECK(labelled.labels.min().item<int64_t>() >= 0);
  CHECK(labelled.labels.max().item<int64_t>() < 3);
  CHECK(labelled.tokens.max().item<int32_t>() < 12);

  config.name = "text_corpus";
  const Dataset masked = synthetic_dataset(config, 50);
  CHECK(masked.masked_lm.has_value());
  CHECK_FALSE(masked.labels.defined());
}

"""Trains the byte-level BPE tokenizer the shipped decoder specs read (GPT-2's scheme: byte-level pre-tokenizer,
merges learned on the corpus, <|endoftext|> ending each document) with the pinned tokenizers package, and writes
it as a Hugging Face tokenizer.json. Usage: train_tokenizer.py CORPUS_DIR OUT_JSON VOCAB_SIZE DELIMITER"""
import glob
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


def documents(corpus, delimiter):
    for path in sorted(glob.glob(os.path.join(corpus, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        document = []
        for line in lines:
            line = line.rstrip("\r")
            if line == delimiter:
                if document:
                    yield "\n".join(document)
                document = []
            else:
                document.append(line)
        if document:
            yield "\n".join(document)


def main():
    corpus, out, vocab_size, delimiter = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(documents(corpus, delimiter), trainer=trainer)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tokenizer.save(out + ".partial")
    os.replace(out + ".partial", out)


if __name__ == "__main__":
    main()

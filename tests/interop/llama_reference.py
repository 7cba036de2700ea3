"""The Python side of mpt's decoder interop tests (tests/interop/test_llama_interop.cpp), run with the torch
environment's transformers, tokenizers and safetensors.

  names CONFIG              LlamaForCausalLM(CONFIG's config.json): prints {"parameters": {name: shape}, "count": N}
  save-random DIR CONFIG SEED
                            a LlamaForCausalLM of CONFIG with transformers' random initialisation (seeded), saved
                            with save_pretrained to DIR (config.json, model.safetensors)
  logits DIR IO TOL         AutoModelForCausalLM.from_pretrained(DIR) on IO's input_ids (FP32, eager attention):
                            the largest |difference| from IO's mpt logits, as a fraction of their largest magnitude;
                            exits 1 above TOL
  tokenizers OUT CORPUS     trains tokenizer.json variants on CORPUS's *.txt with the tokenizers library, one per
                            pre-tokenizer scheme mpt reads (Llama 3's split regex, SmolLM's digits + byte level, a
                            byte-fallback BPE with NFC and added tokens), into OUT/<name>/tokenizer.json
  ids TOKENIZER CASES       Tokenizer.from_file(TOKENIZER).encode(text, add_special_tokens=False) on each text of
                            CASES (JSON: [{text, ids}]); exits 1 if any differs from mpt's ids, naming the first ones
  generate DIR PROMPT       AutoTokenizer and pipeline("text-generation") on an mpt export; prints the text as JSON
"""
import glob
import json
import os
import sys

import safetensors.torch
import torch

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def llama(config_path):
    import transformers
    config = transformers.LlamaConfig.from_json_file(config_path)
    return transformers.LlamaForCausalLM(config)


def names(config_path):
    model = llama(config_path)
    parameters = {name: list(p.shape) for name, p in model.named_parameters()}
    print(json.dumps({"parameters": parameters, "count": sum(p.numel() for p in model.parameters())}))
    return 0


def save_random(out, config_path, seed):
    torch.manual_seed(seed)
    model = llama(config_path)
    with torch.no_grad():  # norms of ones would hide a misplaced weight
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(out)
    return 0


def logits(model_dir, io_path, tolerance):
    import transformers
    io = safetensors.torch.load_file(io_path)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                              attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        reference = model(input_ids=io["input_ids"].long()).logits
    mine = io["logits"].float()
    difference = ((mine - reference).abs().max() / reference.abs().max()).item()
    print(json.dumps({"relative_difference": difference, "shape": list(reference.shape)}))
    return 0 if difference <= tolerance else 1


def documents(corpus):
    for path in sorted(glob.glob(os.path.join(corpus, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            yield from f.read().split("\n%\n")


def train_variants(out, corpus):
    from tokenizers import Regex, Tokenizer, AddedToken, decoders, models, normalizers, pre_tokenizers, trainers
    specials = ["<|endoftext|>", "<|begin_of_text|>"]
    variants = {
        "llama3": (models.BPE(ignore_merges=True), None, pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])),
        "smollm": (models.BPE(), None, pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False)])),
        "gpt2_prefix": (models.BPE(), None, pre_tokenizers.ByteLevel(add_prefix_space=True)),
        "fallback": (models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True),
                     normalizers.Sequence([normalizers.NFC(), normalizers.Replace(" ", "\u2581"),
                                           normalizers.Prepend("\u2581")]),
                     pre_tokenizers.Split("\u2581", behavior="merged_with_next")),
    }
    for name, (model, normalizer, pre_tokenizer) in variants.items():
        tokenizer = Tokenizer(model)
        if normalizer is not None:
            tokenizer.normalizer = normalizer
        tokenizer.pre_tokenizer = pre_tokenizer
        tokenizer.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet() if name != "fallback" else []
        extra = ["<unk>"] + [f"<0x{b:02X}>" for b in range(256)] if name == "fallback" else []
        limits = {"limit_alphabet": 200} if name == "fallback" else {}  # rare characters left to the byte fallback
        trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=extra + specials, initial_alphabet=alphabet,
                                      show_progress=False, **limits)
        tokenizer.train_from_iterator(documents(corpus), trainer=trainer)
        tokenizer.add_tokens([AddedToken("<sep>", lstrip=True, rstrip=True), AddedToken("word", single_word=True)])
        os.makedirs(os.path.join(out, name), exist_ok=True)
        tokenizer.save(os.path.join(out, name, "tokenizer.json"))
    return 0


def ids(tokenizer_path, cases_path):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(tokenizer_path)
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    wrong = [case for case in cases
             if tokenizer.encode(case["text"], add_special_tokens=False).ids != case["ids"]]
    for case in wrong[:5]:
        print(json.dumps({"text": case["text"], "mpt": case["ids"],
                          "tokenizers": tokenizer.encode(case["text"], add_special_tokens=False).ids}))
    print(f"{len(cases) - len(wrong)} of {len(cases)} texts equal")
    return 1 if wrong else 0


def generate(model_dir, prompt):
    import transformers
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    generator = transformers.pipeline("text-generation", model=model_dir, tokenizer=tokenizer, device="cpu")
    answer = generator(prompt, max_new_tokens=8, do_sample=False)
    print(json.dumps({"text": answer[0]["generated_text"], "tokenizer": type(tokenizer).__name__,
                      "prompt_ids": tokenizer(prompt, add_special_tokens=False)["input_ids"]}))
    return 0


def main():
    mode = sys.argv[1]
    if mode == "names":
        return names(sys.argv[2])
    if mode == "save-random":
        return save_random(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if mode == "logits":
        return logits(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    if mode == "tokenizers":
        return train_variants(sys.argv[2], sys.argv[3])
    if mode == "ids":
        return ids(sys.argv[2], sys.argv[3])
    if mode == "generate":
        return generate(sys.argv[2], sys.argv[3])
    print(f"unknown mode {mode}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

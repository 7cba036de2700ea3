"""The PyTorch side of mpt numerics' tests: MLP weights to measure, and each layer's local SQNR computed with torch's
own bfloat16 and float8 dtypes from the same weights and the same first batch of Fashion-MNIST.

    numerics_reference.py weights OUT.safetensors --hidden 256,128 [--plant-outlier | --plant-tiny]
    numerics_reference.py check WEIGHTS numerics.json --data DIR --batch 64
    numerics_reference.py bert-weights FOLDER --data DIR
    numerics_reference.py bert-check FOLDER numerics.json --data DIR --vocab VOCAB --batch 32 --seq 128

The BERT pair: a random BertForSequenceClassification (bert-tiny's shape) saved by transformers, and each Linear's
local SQNR from the FP32 input transformers' own forward gives it on the first batch of a text_classification
folder, tokenized as mpt does ([CLS] ids [SEP], truncated to seq - 2, padded with 0).

`--plant-tiny` scales hidden.1 by 2^-30: its weights and outputs under FP16's smallest subnormal. `--plant-outlier` gives hidden.0's first unit a bias of 1e6 and hidden.1 a zero weight column for it: an input
feature a million times the others that the layer ignores (the outlier features of large models), which a per-tensor
FP8 scale crushes the other features under.
"""
import argparse
import gzip
import json
import math
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

MEAN, STD = 0.2860, 0.3530  # mpt's Fashion-MNIST normalisation (src/data/fashion_mnist.cpp)


def write_weights(args):
    torch.manual_seed(7)
    widths = [784] + [int(w) for w in args.hidden.split(",")] + [10]
    tensors = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        name = "head" if i == len(widths) - 2 else f"hidden.{i}"
        bound = 1 / math.sqrt(fan_in)
        tensors[f"{name}.weight"] = torch.empty(fan_out, fan_in).uniform_(-bound, bound)
        tensors[f"{name}.bias"] = torch.empty(fan_out).uniform_(-bound, bound)
    if args.plant_outlier:
        tensors["hidden.0.bias"][0] = 1e6
        tensors["hidden.1.weight"][:, 0] = 0
    if args.plant_tiny:
        for name in ("hidden.1.weight", "hidden.1.bias"):
            tensors[name] *= 2.0**-30
    save_file(tensors, args.out)


def first_batch(root, batch):
    with gzip.open(f"{root}/train-images-idx3-ubyte.gz", "rb") as f:
        data = f.read()
    pixels = torch.frombuffer(bytearray(data[16:16 + batch * 784]), dtype=torch.uint8).float()
    return ((pixels / 255 - MEAN) / STD).view(batch, 784)


def to_float8(x, dtype, max_value):
    amax = x.abs().max()
    scale = (max_value / amax).float() if amax > 0 else torch.tensor(1.0)
    return (x * scale).clamp(-max_value, max_value).to(dtype), scale


def fp8_linear(x, w, b):
    # mpt's FP8 GEMM: E4M3 operands with per-tensor scales from their amaxes, FP32 accumulation, BF16 output,
    # the bias added in BF16.
    xq, xs = to_float8(x, torch.float8_e4m3fn, 448.0)
    wq, ws = to_float8(w, torch.float8_e4m3fn, 448.0)
    y = (xq.float() / xs) @ (wq.float() / ws).t()
    return (y.to(torch.bfloat16) + b.to(torch.bfloat16)).float()


def bf16_linear(x, w, b):
    return F.linear(x.bfloat16(), w.bfloat16(), b.bfloat16()).float()


def sqnr_db(ref, out):
    ref, out = ref.double(), out.double()
    noise = (ref - out).square().sum()
    return float("inf") if noise == 0 else 10 * math.log10(ref.square().sum() / noise)


def check(args):
    weights = load_file(args.weights)
    report = json.load(open(args.numerics))
    names = sorted({k.rsplit(".", 1)[0] for k in weights if k.startswith("hidden.")}) + ["head"]
    x = first_batch(args.data, args.batch)
    layers = {layer["name"]: layer for layer in report["layers"]}
    worst = 0.0
    for name in names:
        w, b = weights[f"{name}.weight"], weights[f"{name}.bias"]
        y = F.linear(x, w, b)
        for fmt, linear in (("bf16", bf16_linear), ("fp8", fp8_linear)):
            entry = layers[name]["formats"][fmt]
            if not entry["eligible"]:
                continue
            ours, theirs = entry["local"]["sqnr_db"], sqnr_db(y, linear(x, w, b))
            print(f"{name} {fmt}: mpt {ours:.3f} dB, torch {theirs:.3f} dB")
            worst = max(worst, abs(ours - theirs))
        x = torch.relu(y)
    print(f"largest difference {worst:.4f} dB")
    return 0 if worst <= 0.1 else 1


def first_examples(root, count):
    examples = []
    with open(f"{root}/train.tsv", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n").rstrip("\r")
            if line:
                examples.append(line.split("\t", 1))
    return examples[:count]


def write_bert(args):
    from transformers import BertConfig, BertForSequenceClassification

    with open(f"{args.data}/train.tsv", encoding="utf-8") as f:
        labels = {line.split("\t", 1)[0] for line in f if line.strip()}
    torch.manual_seed(7)
    config = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512,
                        num_labels=len(labels))
    BertForSequenceClassification(config).save_pretrained(args.out, safe_serialization=True)


def check_bert(args):
    from transformers import BertForSequenceClassification, BertTokenizer

    tokenizer = BertTokenizer(args.vocab, do_lower_case=True)
    rows = []
    for _, text in first_examples(args.data, args.batch):
        ids = tokenizer.encode(text, add_special_tokens=False)[: args.seq - 2]
        row = [tokenizer.cls_token_id] + ids + [tokenizer.sep_token_id]
        rows.append(row + [0] * (args.seq - len(row)))
    input_ids = torch.tensor(rows)
    model = BertForSequenceClassification.from_pretrained(args.folder, attn_implementation="eager").eval()
    measured = {}

    def hook(name):
        def record(module, inputs, output):
            x = inputs[0]
            y = F.linear(x, module.weight, module.bias)
            measured[name] = {"bf16": sqnr_db(y, bf16_linear(x, module.weight, module.bias))}
            if module.in_features % 16 == 0 and module.out_features % 16 == 0:
                measured[name]["fp8"] = sqnr_db(y, fp8_linear(x.reshape(-1, x.shape[-1]), module.weight,
                                                              module.bias).view(y.shape))
        return record

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(hook(name))
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=(input_ids != 0).long())
    layers = {layer["name"]: layer for layer in json.load(open(args.numerics))["layers"]}
    worst, compared = 0.0, 0
    for name, formats in measured.items():
        for fmt, theirs in formats.items():
            if not layers[name]["formats"][fmt]["eligible"]:
                continue
            ours = layers[name]["formats"][fmt]["local"]["sqnr_db"]
            print(f"{name} {fmt}: mpt {ours:.3f} dB, torch {theirs:.3f} dB")
            worst, compared = max(worst, abs(ours - theirs)), compared + 1
    print(f"{compared} compared, largest difference {worst:.4f} dB")
    return 0 if worst <= 0.1 and compared >= 20 else 1


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("weights")
    w.add_argument("out")
    w.add_argument("--hidden", default="256,128")
    w.add_argument("--plant-outlier", action="store_true")
    w.add_argument("--plant-tiny", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("weights")
    c.add_argument("numerics")
    c.add_argument("--data", required=True)
    c.add_argument("--batch", type=int, default=64)
    bw = sub.add_parser("bert-weights")
    bw.add_argument("out")
    bw.add_argument("--data", required=True)
    bc = sub.add_parser("bert-check")
    bc.add_argument("folder")
    bc.add_argument("numerics")
    bc.add_argument("--data", required=True)
    bc.add_argument("--vocab", required=True)
    bc.add_argument("--batch", type=int, default=32)
    bc.add_argument("--seq", type=int, default=128)
    args = parser.parse_args()
    if args.command == "weights":
        write_weights(args)
        return 0
    if args.command == "bert-weights":
        write_bert(args)
        return 0
    if args.command == "bert-check":
        return check_bert(args)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())

"""The PyTorch side of mpt numerics' tests: MLP weights to measure, and each layer's local SQNR computed with torch's
own bfloat16 and float8 dtypes from the same weights and the same first batch of Fashion-MNIST.

    numerics_reference.py weights OUT.safetensors --hidden 256,128 [--plant-outlier | --plant-tiny]
    numerics_reference.py check WEIGHTS numerics.json --data DIR --batch 64
    numerics_reference.py bert-weights FOLDER --data DIR
    numerics_reference.py bert-check FOLDER numerics.json --data DIR --vocab VOCAB --batch 32 --seq 128
    numerics_reference.py resnet-weights OUT.safetensors
    numerics_reference.py resnet-check WEIGHTS numerics.json --data DIR --batch 32

The BERT pair: a random BertForSequenceClassification (bert-tiny's shape) saved by transformers, and the local SQNR
of each Linear, LayerNorm and attention core from the FP32 inputs transformers' own forward gives them on the first
batch of a text_classification folder, tokenized as mpt does ([CLS] ids [SEP], truncated to seq - 2, padded with 0).
The ResNet pair: torchvision's resnet18 with mpt's small-input stem (3x3 stride-1 conv1, no max-pool) on Fashion-MNIST,
and each convolution's and batch norm's (batch statistics, as in training) local SQNR under bfloat16 autocast.
All check the loss's row too: the per-example cross-entropy computed in bfloat16 from the FP32 logits.

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


def bf16_loss_sqnr(logits, targets):
    reference = F.cross_entropy(logits, targets, reduction="none")
    return sqnr_db(reference, F.cross_entropy(logits.bfloat16(), targets, reduction="none").float())


def first_labels(root, batch):
    with gzip.open(f"{root}/train-labels-idx1-ubyte.gz", "rb") as f:
        data = f.read()
    return torch.frombuffer(bytearray(data[8:8 + batch]), dtype=torch.uint8).long()


def compare(layers, measured):
    """measured: {name: {format: torch's SQNR}} -> (largest difference, how many compared)."""
    worst, compared = 0.0, 0
    for name, formats in measured.items():
        for fmt, theirs in formats.items():
            entry = layers[name]["formats"][fmt]
            if not entry["eligible"]:
                continue
            ours = entry["local"]["sqnr_db"]
            print(f"{name} {fmt}: mpt {ours:.3f} dB, torch {theirs:.3f} dB")
            worst, compared = max(worst, abs(ours - theirs)), compared + 1
    return worst, compared


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
    measured = {}
    for name in names:
        w, b = weights[f"{name}.weight"], weights[f"{name}.bias"]
        y = F.linear(x, w, b)
        measured[name] = {"bf16": sqnr_db(y, bf16_linear(x, w, b)), "fp8": sqnr_db(y, fp8_linear(x, w, b))}
        x = torch.relu(y)
    measured["loss"] = {"bf16": bf16_loss_sqnr(y, first_labels(args.data, args.batch))}
    worst, compared = compare(layers, measured)
    print(f"{compared} compared, largest difference {worst:.4f} dB")
    return 0 if worst <= 0.1 and compared >= len(names) + 2 else 1


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


def bert_core(q, k, v, mask_bias, dtype=None):
    # mpt's BERT attention core: q k^T rounded to the compute dtype by its GEMM, scaling, mask and softmax in FP32,
    # the probabilities back in v's dtype for the second product.
    if dtype is not None:
        q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    scores = (q @ k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1]) + mask_bias
    return (torch.softmax(scores, -1).to(v.dtype) @ v).float()


def check_bert(args):
    from transformers import BertForSequenceClassification, BertTokenizer

    tokenizer = BertTokenizer(args.vocab, do_lower_case=True)
    rows = []
    examples = first_examples(args.data, args.batch)
    for _, text in examples:
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

    def norm_hook(name):
        def record(module, inputs, output):
            x = inputs[0]
            low = F.layer_norm(x.bfloat16(), module.normalized_shape, module.weight.bfloat16(), module.bias.bfloat16(),
                               module.eps)
            measured[name] = {"bf16": sqnr_db(output, low.float())}
        return record

    projections = {}  # the FP32 q, k and v of each layer, (B, h, S, d)

    def projection_hook(name):
        def record(module, inputs, output):
            b, s, _ = output.shape
            heads = model.config.num_attention_heads
            projections[name] = output.view(b, s, heads, -1).transpose(1, 2)
        return record

    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(hook(name))
            if name.rsplit(".", 1)[-1] in ("query", "key", "value"):
                module.register_forward_hook(projection_hook(name))
        if isinstance(module, torch.nn.LayerNorm):
            module.register_forward_hook(norm_hook(name))
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=(input_ids != 0).long()).logits
    mask_bias = torch.where(input_ids != 0, 0.0, -1e9).view(len(rows), 1, 1, -1)
    for layer in range(model.config.num_hidden_layers):
        prefix = f"bert.encoder.layer.{layer}.attention.self"
        q, k, v = (projections[f"{prefix}.{part}"] for part in ("query", "key", "value"))
        measured[f"{prefix}.core"] = {"bf16": sqnr_db(bert_core(q, k, v, mask_bias),
                                                      bert_core(q, k, v, mask_bias, torch.bfloat16))}
    labels = sorted({label for label, _ in first_examples(args.data, 10**9)})
    targets = torch.tensor([labels.index(label) for label, _ in examples])
    measured["loss"] = {"bf16": bf16_loss_sqnr(logits, targets)}
    layers = {layer["name"]: layer for layer in json.load(open(args.numerics))["layers"]}
    worst, compared = compare(layers, measured)
    print(f"{compared} compared, largest difference {worst:.4f} dB")
    return 0 if worst <= 0.1 and compared >= 30 else 1


def resnet_model():
    from torchvision.models import resnet18

    torch.manual_seed(7)
    model = resnet18(num_classes=10)
    model.conv1 = torch.nn.Conv2d(1, 64, 3, 1, 1, bias=False)
    model.maxpool = torch.nn.Identity()
    return model


def write_resnet(args):
    save_file({k: v.contiguous() for k, v in resnet_model().state_dict().items()}, args.out)


def check_resnet(args):
    model = resnet_model()
    model.load_state_dict(load_file(args.weights))
    model.train()
    measured = {}

    def hook(name):
        def record(module, inputs, output):
            x = inputs[0].bfloat16()
            if isinstance(module, torch.nn.Conv2d):
                low = F.conv2d(x, module.weight.bfloat16(), None, module.stride, module.padding)
            else:  # the FP32 affine parameters with a bfloat16 input: PyTorch AMP's batch norm
                low = F.batch_norm(x, None, None, module.weight, module.bias, True, 0.0, module.eps)
            measured[name] = {"bf16": sqnr_db(output, low.float())}
        return record

    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.BatchNorm2d)):
            module.register_forward_hook(hook(name))
    with torch.no_grad():
        logits = model(first_batch(args.data, args.batch).view(-1, 1, 28, 28))
    measured["loss"] = {"bf16": bf16_loss_sqnr(logits, first_labels(args.data, args.batch))}
    worst, compared = compare({layer["name"]: layer for layer in json.load(open(args.numerics))["layers"]}, measured)
    print(f"{compared} compared, largest difference {worst:.4f} dB")
    return 0 if worst <= 0.1 and compared == len(measured) else 1


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
    rw = sub.add_parser("resnet-weights")
    rw.add_argument("out")
    rc = sub.add_parser("resnet-check")
    rc.add_argument("weights")
    rc.add_argument("numerics")
    rc.add_argument("--data", required=True)
    rc.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    if args.command == "weights":
        write_weights(args)
        return 0
    if args.command == "bert-weights":
        write_bert(args)
        return 0
    if args.command == "bert-check":
        return check_bert(args)
    if args.command == "resnet-weights":
        write_resnet(args)
        return 0
    if args.command == "resnet-check":
        return check_resnet(args)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())

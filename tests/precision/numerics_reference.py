"""The PyTorch side of mpt numerics' tests: MLP weights to measure, and each layer's local SQNR computed with torch's
own bfloat16 and float8 dtypes from the same weights and the same first batch of Fashion-MNIST.

    numerics_reference.py weights OUT.safetensors --hidden 256,128 [--plant-outlier | --plant-tiny]
    numerics_reference.py check WEIGHTS numerics.json --data DIR --batch 64

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
    args = parser.parse_args()
    if args.command == "weights":
        write_weights(args)
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())

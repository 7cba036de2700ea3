#!/usr/bin/env python3
"""The training step a user would otherwise write: PyTorch eager on Debian's python3-torch (1.13), the same
model, batch, optimizer and precision as `mpt bench`, on synthetic batches of the same shape.

Prints one JSON line: samples/s and step times. Used by scripts/bench_vs_pytorch.sh; a benchmark, not a test.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    """mpt's MLP: 784 -> hidden (ReLU) -> classes, the output layer in FP32 under autocast as mpt does."""

    def __init__(self, inputs, hidden, classes):
        super().__init__()
        sizes = [inputs] + hidden
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.head = nn.Linear(sizes[-1], classes)

    def forward(self, x):
        x = x.flatten(1)
        for layer in self.hidden:
            x = F.relu(layer(x))
        with torch.autocast("cpu", enabled=False):
            return self.head(x.float())


class Fp32(nn.Module):
    """An FP32 island under autocast, as mpt's precision.fp32_modules."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            return self.module(x.float())


def build(args):
    if args.model == "mlp":
        return Mlp(args.channels * args.size * args.size, args.hidden, 10), (args.channels, args.size, args.size)
    import torchvision

    model = getattr(torchvision.models, args.model)(num_classes=10)
    if args.small_input:  # mpt's small-image stem: 3x3 stride 1, no max-pool
        model.conv1 = nn.Conv2d(args.channels, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    model.fc = Fp32(model.fc)  # the output layer FP32 (mpt: precision.fp32_modules=[fc])
    return model, (args.channels, args.size, args.size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp")
    parser.add_argument("--hidden", type=int, nargs="*", default=[512])
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="bf16")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--small-input", action="store_true")
    parser.add_argument("--loss-scale", type=float, default=32768.0, help="dynamic scaling as mpt's mixed spec")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, shape = build(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.randint(0, 256, (args.batch,) + shape, dtype=torch.uint8),
                torch.randint(0, 10, (args.batch,))) for _ in range(8)]
    mixed = args.precision == "bf16"
    params = [p for p in model.parameters()]

    def step(i):
        images, labels = batches[i % len(batches)]
        x = images.float().div_(255).sub_(0.5).div_(0.29)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mixed):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), labels)
        if mixed:  # scaled backward, unscale, one overflow check, skip on Inf/NaN (GradScaler is CUDA-only in 1.13)
            (loss * args.loss_scale).backward()
            grads = [p.grad for p in params if p.grad is not None]
            torch._foreach_mul_(grads, 1.0 / args.loss_scale)
            if not torch.stack([g.isfinite().all() for g in grads]).all():
                return
        else:
            loss.backward()
        optimizer.step()

    for i in range(args.warmup):
        step(i)
    times = []
    for i in range(args.steps):
        start = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - start)
    total = sum(times)
    print(json.dumps({"framework": "pytorch-eager " + torch.__version__, "model": args.model,
                      "precision": args.precision, "batch": args.batch, "threads": torch.get_num_threads(),
                      "samples_per_sec": args.steps * args.batch / total,
                      "median_step_ms": 1000 * statistics.median(times)}))


if __name__ == "__main__":
    main()

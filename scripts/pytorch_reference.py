#!/usr/bin/env python3
"""The training step a user would otherwise write: PyTorch eager, the same model, batch, optimizer and precision
as `mpt bench`, on synthetic batches of the same shape. scripts/bench_vs_pytorch.sh runs it with the torch
environment's torch 2.x (the LibTorch mpt links); scripts/device_check.sh on a GPU machine's PyTorch 2.x (CUDA).

Prints one JSON line: samples/s and step times. Used by scripts/bench_vs_pytorch.sh and scripts/device_check.sh;
a benchmark, not a test.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

DEVICE = "cpu"


def fp32(x):
    """Leave autocast for an FP32 island, as mpt's precision.fp32_modules do."""
    return torch.autocast(DEVICE, enabled=False)


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
        with fp32(x):
            return self.head(x.float())


class Fp32(nn.Module):
    """An FP32 island under autocast, as mpt's precision.fp32_modules."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        with fp32(x):
            return self.module(x.float())


class BertLayer(nn.Module):
    """A post-LN BERT encoder layer as mpt's (and Hugging Face's): FP32 softmax and LayerNorms."""

    def __init__(self, hidden, heads, ffn, dropout):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = Fp32(nn.LayerNorm(hidden, eps=1e-12))
        self.ffn_in = nn.Linear(hidden, ffn)
        self.ffn_out = nn.Linear(ffn, hidden)
        self.norm2 = Fp32(nn.LayerNorm(hidden, eps=1e-12))

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads)
        with fp32(scores):
            probs = F.dropout(scores.float().softmax(-1), self.dropout, self.training)
        context = (probs.to(v.dtype) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norm1(x + F.dropout(self.out(context), self.dropout, self.training))
        return self.norm2(x + F.dropout(self.ffn_out(F.gelu(self.ffn_in(x))), self.dropout, self.training))


class BertMlm(nn.Module):
    """BERT masked-LM pre-training, logits only at masked positions (decoder tied to the word embeddings)."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, positions=512, dropout=0.1):
        super().__init__()
        self.dropout = dropout
        self.words = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(positions, hidden)
        self.types = nn.Embedding(2, hidden)
        self.norm = Fp32(nn.LayerNorm(hidden, eps=1e-12))
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn, dropout) for _ in range(layers))
        self.transform = nn.Linear(hidden, hidden)
        self.transform_norm = Fp32(nn.LayerNorm(hidden, eps=1e-12))
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))

    def forward(self, ids, masked):
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.words(ids) + self.positions(positions) + self.types(torch.zeros_like(ids)))
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            x = layer(x)
        h = x[masked]  # (M, hidden): the masked positions only
        h = self.transform_norm(F.gelu(self.transform(h)))
        with fp32(h):
            return F.linear(h.float(), self.words.weight, self.decoder_bias)


LLAMA_SIZES = {  # mpt's presets: hidden, intermediate, layers, heads, key/value heads
    "llama-tiny": (256, 768, 4, 4, 2),
    "llama-135m": (576, 1536, 30, 9, 3),
}


class CausalLm(nn.Module):
    """transformers' LlamaForCausalLM as a user runs it (SDPA attention, its RMSNorm in FP32, the head in the compute
    dtype under autocast), returning logits at every position."""

    def __init__(self, name, vocab):
        super().__init__()
        import transformers
        hidden, intermediate, layers, heads, kv_heads = LLAMA_SIZES[name]
        config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
                                          num_hidden_layers=layers, num_attention_heads=heads,
                                          num_key_value_heads=kv_heads, max_position_embeddings=2048,
                                          rms_norm_eps=1e-5, tie_word_embeddings=True, use_cache=False,
                                          attn_implementation="sdpa")
        self.model = transformers.LlamaForCausalLM(config)

    def forward(self, ids, _unused):
        return self.model(input_ids=ids, use_cache=False).logits.flatten(0, 1)


def build(args):
    if args.model in LLAMA_SIZES:
        return CausalLm(args.model, args.vocab), "causal"
    if args.model == "mlp":
        return Mlp(args.channels * args.size * args.size, args.hidden, 10), (args.channels, args.size, args.size)
    if args.model == "bert-base":
        return BertMlm(dropout=args.dropout), None
    if args.model.startswith("vit-"):  # torchvision's ViT, its stem taking the data's channels, its head FP32
        from torchvision.models.vision_transformer import VisionTransformer

        hidden, heads = {"vit-tiny": (192, 3), "vit-small": (384, 6), "vit-b16": (768, 12)}[args.model]
        model = VisionTransformer(args.size, args.patch, 12, heads, hidden, 4 * hidden, num_classes=10)
        model.conv_proj = nn.Conv2d(args.channels, hidden, args.patch, args.patch)
        model.heads = Fp32(model.heads)
        return model, (args.channels, args.size, args.size)
    import torchvision

    model = getattr(torchvision.models, args.model)(num_classes=10)
    if args.small_input:  # mpt's small-image stem: 3x3 stride 1, no max-pool
        model.conv1 = nn.Conv2d(args.channels, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    model.fc = Fp32(model.fc)  # the output layer FP32 (mpt: precision.fp32_modules=[fc])
    return model, (args.channels, args.size, args.size)


def make_batches(args, shape):
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(8):
        if shape == "causal":  # token ids; every position predicts the next one
            window = torch.randint(1000, args.vocab, (args.batch, args.seq_len + 1), generator=generator)
            batches.append((window[:, :-1].contiguous(), torch.zeros(0), window[:, 1:].flatten()))
        elif shape is None:  # token ids; 15% of positions predicted
            ids = torch.randint(1000, 30522, (args.batch, args.seq_len), generator=generator)
            masked = torch.rand(args.batch, args.seq_len, generator=generator) < 0.15
            batches.append((ids, masked, ids[masked]))
        else:
            images = torch.randint(0, 256, (args.batch,) + shape, dtype=torch.uint8, generator=generator)
            batches.append((images, None, torch.randint(0, 10, (args.batch,), generator=generator)))
    return batches


def make_optimizer(name, parameters, cuda):
    """The fastest form a user reaches for: the fused kernels on a GPU (a torch too old for fused SGD gets foreach)."""
    parameters = list(parameters)
    make = (lambda **kw: torch.optim.Adam(parameters, lr=1e-3, **kw)) if name == "adam" else \
           (lambda **kw: torch.optim.SGD(parameters, lr=0.1, momentum=0.9, **kw))
    if not cuda:
        return make()
    try:
        return make(fused=True)
    except (TypeError, RuntimeError):
        return make(foreach=True)


def main():
    global DEVICE
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="mlp",
                        help="mlp, a torchvision resnet name, bert-base, vit-tiny|small|b16, or llama-tiny|135m")
    parser.add_argument("--vocab", type=int, default=8192, help="Llama: vocabulary size (mpt's: the tokenizer's)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (inductor, default mode)")
    parser.add_argument("--patch", type=int, default=16, help="ViT: patch side (mpt's model.patch_size)")
    parser.add_argument("--hidden", type=int, nargs="*", default=[512])
    parser.add_argument("--precision", choices=["fp32", "tf32", "fp16", "bf16"], default="bf16")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--dropout", type=float, default=0.1, help="BERT's hidden and attention dropout (mpt's model.dropout)")
    parser.add_argument("--small-input", action="store_true")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam",
                        help="Adam (lr 1e-3), or SGD with momentum 0.9 (lr 0.1, DeepLearningExamples' ResNet recipe)")
    parser.add_argument("--loss-scale", type=float, default=32768.0, help="dynamic scaling as mpt's mixed spec; 0: none (a spec without loss scaling)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    DEVICE = args.device

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cuda = DEVICE == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    model, shape = build(args)
    model = model.to(DEVICE)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = make_optimizer(args.optimizer, model.parameters(), cuda)
    if args.compile:
        model = torch.compile(model)
    batches = make_batches(args, shape)
    if cuda:
        batches = [tuple(t.pin_memory() if t is not None else None for t in b) for b in batches]
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(args.precision)
    mixed = dtype is not None
    # FP16 on a GPU, and the CPU's mixed step (mpt's shipped mixed specs scale BF16's loss too), take the GradScaler
    # a user writes; BF16 on a GPU needs none.
    scaler = None
    if mixed and (not cuda or args.precision == "fp16") and args.loss_scale > 0:
        scaler = torch.amp.GradScaler(DEVICE, init_scale=args.loss_scale)

    def step(i):
        inputs, masked, targets = batches[i % len(batches)]
        inputs = inputs.to(DEVICE, non_blocking=True)
        targets = targets.to(DEVICE, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(DEVICE, dtype=dtype or torch.bfloat16, enabled=mixed):
            if masked is not None:
                logits = model(inputs, masked.to(DEVICE, non_blocking=True))
            else:
                x = inputs.float().div_(255).sub_(0.5).div_(0.29)
                if args.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                logits = model(x)
        loss = F.cross_entropy(logits.float(), targets)
        if scaler is not None:  # scaled backward, unscale, one overflow check, skip on Inf/NaN, scale update
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            return
        loss.backward()
        optimizer.step()

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    for i in range(args.warmup):
        step(i)
    synchronize()
    # As mpt bench times them: on a GPU the steps run without a sync of their own (the scaler's overflow check has
    # one) and the total includes the last step's kernels; a step's time there is the host's.
    times = []
    timed_start = time.perf_counter()
    for i in range(args.steps):
        start = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - start)
    synchronize()
    total = time.perf_counter() - timed_start
    print(json.dumps({"framework": "pytorch-eager " + torch.__version__, "model": args.model,
                      "precision": args.precision, "device": DEVICE, "batch": args.batch,
                      "threads": torch.get_num_threads(), "samples_per_sec": args.steps * args.batch / total,
                      "median_step_ms": 1000 * statistics.median(times)}))


if __name__ == "__main__":
    main()

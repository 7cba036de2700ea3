"""The Python side of mpt's torchvision interop test (tests/interop/test_torchvision.cpp), run with Debian's
python3-torch 1.13 and python3-torchvision 0.14.

  save DIR         a seeded torchvision resnet50 (BN running stats randomised, eval mode): DIR/torchvision.pt
                   (its state dict, torch.save) and DIR/io.pt ({"input", "logits"} for a 2 x 3 x 64 x 64 batch)
  check DIR FILE   loads FILE (written by mpt: torch zip or safetensors) into a fresh resnet50 with strict=True and
                   prints the largest logit difference from DIR/io.pt; exits 1 above 1e-4
"""
import json
import struct
import sys

import torch
import torchvision

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


def read_safetensors(path):
    """A minimal reader written from the format description, independent of mpt's."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        flat = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[info["dtype"]])
        tensors[name] = flat.reshape(info["shape"])
    return tensors


def main():
    torch.set_num_threads(1)
    mode, folder = sys.argv[1], sys.argv[2]
    if mode == "save":
        torch.manual_seed(0)
        model = torchvision.models.resnet50()
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(7)
        model.eval()
        inputs = torch.randn(2, 3, 64, 64)
        with torch.no_grad():
            logits = model(inputs)
        torch.save(model.state_dict(), folder + "/torchvision.pt")
        torch.save({"input": inputs, "logits": logits}, folder + "/io.pt")
        return 0
    path = sys.argv[3]
    state = read_safetensors(path) if path.endswith(".safetensors") else torch.load(path)
    model = torchvision.models.resnet50()
    model.load_state_dict(state, strict=True)
    model.eval()
    reference = torch.load(folder + "/io.pt")
    with torch.no_grad():
        logits = model(reference["input"])
    difference = (logits - reference["logits"]).abs().max().item()
    print(f"{path}: {len(state)} tensors loaded strictly; max |logit difference| {difference:.3g}")
    return 0 if difference <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())

"""The Python side of mpt's torchvision interop test (tests/interop/test_torchvision.cpp), run with the torch
environment's torch, torchvision and safetensors.

  save DIR [MODEL]       a seeded torchvision MODEL (resnet50, the default, with BN running stats randomised; or
                         vit_b_16, its zero-initialised head randomised), in eval mode: DIR/torchvision.pt (its
                         state dict, torch.save), DIR/torchvision.safetensors (safetensors' save_file) and DIR/io.pt
                         ({"input", "logits"} for a batch of 2: 64 x 64 px for resnet50, 224 x 224 for vit_b_16)
  check DIR FILE [MODEL] loads FILE (written by mpt: torch zip or safetensors) with torch.load(weights_only=True) or
                         safetensors' load_file into a fresh MODEL with strict=True and prints the largest logit
                         difference from DIR/io.pt; exits 1 above 1e-4 of the logits' scale
"""
import sys

import safetensors.torch
import torch
import torchvision


def main():
    torch.set_num_threads(1)
    mode, folder = sys.argv[1], sys.argv[2]
    name = sys.argv[3 if mode == "save" else 4] if len(sys.argv) > (3 if mode == "save" else 4) else "resnet50"
    if mode == "save":
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)()
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
                module.num_batches_tracked.fill_(7)
        if name.startswith("vit"):
            with torch.no_grad():
                model.heads.head.weight.normal_(0, 0.02)
                model.heads.head.bias.normal_(0, 0.02)
        model.eval()
        inputs = torch.randn(2, 3, 224 if name.startswith("vit") else 64, 224 if name.startswith("vit") else 64)
        with torch.no_grad():
            logits = model(inputs)
        torch.save(model.state_dict(), folder + "/torchvision.pt")
        safetensors.torch.save_file(model.state_dict(), folder + "/torchvision.safetensors")
        torch.save({"input": inputs, "logits": logits}, folder + "/io.pt")
        return 0
    path = sys.argv[3]
    if path.endswith(".safetensors"):
        state = safetensors.torch.load_file(path)
    else:
        state = torch.load(path, weights_only=True)
    model = getattr(torchvision.models, name)()
    model.load_state_dict(state, strict=True)
    model.eval()
    reference = torch.load(folder + "/io.pt", weights_only=True)
    with torch.no_grad():
        logits = model(reference["input"])
    difference = (logits - reference["logits"]).abs().max().item()
    scale = max(1.0, reference["logits"].abs().max().item())
    print(f"{path}: {len(state)} tensors ({sum(t.numel() for t in state.values())} values) loaded strictly; max |logit difference| {difference:.3g} "
          f"(max |logit| {scale:.3g})")
    return 0 if difference <= 1e-4 * scale else 1


if __name__ == "__main__":
    sys.exit(main())

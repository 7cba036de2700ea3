"""Writes the checkpoint shapes PyTorch users bring to mpt's model.init_from (tests/interop/test_torch_checkpoints.cpp).

    torch_checkpoints_reference.py DIR

A two-layer net ("body": Linear 4->8, "fc": Linear 8->1000, an ImageNet-sized head) saved as DDP does
(module.*), as torch.compile does (_orig_mod.*), as a training script does ({"model", "args": Namespace,
"optimizer", "epoch"}), in the legacy pre-1.6 format, and a pickle whose object would run a shell command if
anything called it.
"""
import argparse
import os
import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(4, 8)
        self.fc = torch.nn.Linear(8, 1000)


class Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def main(out):
    torch.manual_seed(0)
    net = Net()
    state = net.state_dict()
    torch.save(state, f"{out}/plain.pt")
    torch.save({f"module.{k}": v for k, v in state.items()}, f"{out}/ddp.pt")
    torch.save({f"_orig_mod.{k}": v for k, v in state.items()}, f"{out}/compiled.pt")
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    torch.save({"model": state, "args": argparse.Namespace(lr=0.1, arch="net"), "optimizer": optimizer.state_dict(),
                "epoch": 3}, f"{out}/training.pt")
    torch.save(state, f"{out}/legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"body.weight": state["body.weight"], "payload": Evil(f"{out}/EXECUTED")}, f"{out}/evil.pt")
    torch.save(state["body.weight"], f"{out}/body_weight.pt")  # for the C++ side to compare against
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

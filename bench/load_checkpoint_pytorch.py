#!/usr/bin/env python3
"""Loads an accel checkpoint's weights and optimizer state in PyTorch, as a comparison only (never a
dependency of accel or its tests): python bench/load_checkpoint_pytorch.py CHECKPOINT_DIR [MODEL_SCRIPT]

Prints each tensor of model.safetensors and optimizer.safetensors with its dtype, shape and a
checksum. Needs `pip install torch safetensors`.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file


def describe(path):
    tensors = load_file(path)
    print(f"{os.path.basename(path)}: {len(tensors)} tensors")
    for name, t in tensors.items():
        print(f"  {name:40s} {str(t.dtype):16s} {list(t.shape)!s:18s} sum {t.double().sum().item():.9g}")
    return tensors


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ckpt = sys.argv[1]
    with open(os.path.join(ckpt, "accelerator_state.json")) as f:
        state = json.load(f)
    print(f"accel {state['accel_version']}, format {state['format']}, saved by {state['world_size']} rank(s), "
          f"strategy {state['strategy']}, mixed_precision {state['mixed_precision']}")
    model = describe(os.path.join(ckpt, "model.safetensors"))
    optimizer = os.path.join(ckpt, "optimizer.safetensors")
    if os.path.exists(optimizer):
        describe(optimizer)
    # The weights are plain tensors with the model's parameter names: a module of the same shape takes
    # them with load_state_dict, e.g. torch.nn.Linear for a checkpoint of an nn::Linear.
    if set(model) == {"weight", "bias"}:
        w = model["weight"]
        linear = torch.nn.Linear(w.shape[1], w.shape[0])
        linear.load_state_dict(model)
        print(f"torch.nn.Linear({w.shape[1]}, {w.shape[0]}) loaded it: weight sum {linear.weight.sum().item():.9g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

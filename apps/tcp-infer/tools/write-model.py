#!/usr/bin/env python3
"""Writes a tcp-infer model folder (README: A model repository) from numpy arrays:
DIR/config.json and DIR/model.safetensors, with layer i's weight (shape [out, in]) as
"layers.i.weight" and its bias ([out]) as "layers.i.bias", float32, as tcp-infer's
--model-dir reads them.

As a program it writes a model of random weights (numpy's default generator, from --seed):
  write-model.py DIR --layers 64,128,16 [--activation relu|none] [--max-batch N] [--seed N]
As a module: write_model(dir, weights, biases, activation="relu", max_batch=256), and
safetensors_bytes(tensors) for the file alone (an ordered list of (name, array))."""
import argparse
import json
import os
import struct
import sys

import numpy as np


def safetensors_bytes(tensors, metadata=None):
    """The safetensors file of tensors, a list of (name, array): an 8-byte little-endian
    header length, the JSON header (padded with spaces to 8 bytes, as the safetensors library
    does), then each tensor's float32 bytes in order."""
    header, data, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, array in tensors:
        raw = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data)


def write_model(folder, weights, biases, activation="relu", max_batch=256):
    """folder/config.json and folder/model.safetensors for the dense layers weights[i]
    ([out, in]) and biases[i] ([out])."""
    if len(weights) != len(biases) or not weights:
        raise ValueError("one bias per weight, one layer at least")
    layers = [int(weights[0].shape[1])] + [int(w.shape[0]) for w in weights]
    for i, (w, b) in enumerate(zip(weights, biases)):
        if w.shape != (layers[i + 1], layers[i]) or b.shape != (layers[i + 1],):
            raise ValueError(f"layer {i}: weight {w.shape}, bias {b.shape} do not chain")
    os.makedirs(folder, exist_ok=True)
    config = {"layers": layers, "activation": activation, "max_batch": max_batch}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    tensors = []
    for i, (w, b) in enumerate(zip(weights, biases)):
        tensors += [(f"layers.{i}.weight", w), (f"layers.{i}.bias", b)]
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(safetensors_bytes(tensors, {"format": "pt"}))


def random_layers(layers, seed):
    """Weights and biases uniform in +-1/sqrt(fan-in), float32."""
    rng = np.random.default_rng(seed)
    weights, biases = [], []
    for fan_in, fan_out in zip(layers, layers[1:]):
        scale = 1.0 / np.sqrt(fan_in)
        weights.append(rng.uniform(-scale, scale, (fan_out, fan_in)).astype(np.float32))
        biases.append(rng.uniform(-scale, scale, fan_out).astype(np.float32))
    return weights, biases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the model's folder (its name is the model's)")
    ap.add_argument("--layers", required=True, help="widths, inputs first: 64,128,16")
    ap.add_argument("--activation", default="relu", choices=["relu", "none"])
    ap.add_argument("--max-batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--version", action="version", version="write-model.py (tcp-infer)")
    args = ap.parse_args()
    try:
        layers = [int(x) for x in args.layers.split(",")]
    except ValueError:
        ap.error(f"--layers: '{args.layers}' is not a list of widths")
    if len(layers) < 2 or min(layers) < 1:
        ap.error("--layers: two widths at least, each 1 or more")
    weights, biases = random_layers(layers, args.seed)
    write_model(args.dir, weights, biases, args.activation, args.max_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())

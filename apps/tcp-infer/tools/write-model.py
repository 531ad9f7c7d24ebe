#!/usr/bin/env python3
"""Writes a tcp-infer model folder (README: A model repository): DIR/config.json and
DIR/model.safetensors, with layer i's weight (shape [out, in]) as "layers.i.weight" and its bias
([out]) as "layers.i.bias", float32, as tcp-infer's --model-dir reads them.

A tensor is a numpy array where numpy is installed, or, with or without numpy, a plain sequence:
a list or array('f') of numbers is a vector, a list of those (one per row) a matrix. Both write
the same bytes for the same values (numpy is optional: a machine without it writes models too).

As a program it writes a model of random weights (Python's random module, from --seed: the same
file with or without numpy):
  write-model.py DIR --layers 64,128,16 [--activation relu|none] [--max-batch N] [--seed N]
As a module: write_model(dir, weights, biases, activation="relu", max_batch=256), and
safetensors_bytes(tensors) for the file alone (an ordered list of (name, tensor))."""
import argparse
import json
import math
import numbers
import os
import random
import struct
import sys
from array import array

try:
    import numpy as np
except ImportError:  # the sequences' path below needs nothing but the standard library
    np = None


def is_numpy(tensor):
    return np is not None and isinstance(tensor, np.ndarray)


def shape_of(tensor):
    """The tensor's shape as a tuple of ints; a sequence's rows must all have one shape."""
    if is_numpy(tensor):
        return tuple(int(n) for n in tensor.shape)
    if isinstance(tensor, numbers.Real):
        return ()
    if isinstance(tensor, (str, bytes)):
        raise TypeError(f"a tensor of text: {tensor[:20]!r}")
    shapes = {shape_of(row) for row in tensor}
    if len(shapes) > 1:
        raise ValueError(f"rows of different shapes: {sorted(shapes)}")
    return (len(tensor),) + (shapes.pop() if shapes else ())


def flat_values(tensor):
    """A sequence's numbers, rows in order (C order, as numpy's tobytes)."""
    if isinstance(tensor, numbers.Real):
        yield tensor
        return
    for row in tensor:
        yield from flat_values(row)


def f32_bytes(tensor):
    """The tensor's values as little-endian float32, each rounded to nearest (numpy's astype and
    array('f') both convert a double to float by the C cast)."""
    if is_numpy(tensor):
        return np.ascontiguousarray(tensor, dtype="<f4").tobytes()
    values = array("f", flat_values(tensor))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def safetensors_bytes(tensors, metadata=None):
    """The safetensors file of tensors, a list of (name, tensor): an 8-byte little-endian
    header length, the JSON header (padded with spaces to 8 bytes, as the safetensors library
    does), then each tensor's float32 bytes in order."""
    header, data, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, tensor in tensors:
        shape = list(shape_of(tensor))  # first: it refuses what is no tensor
        raw = f32_bytes(tensor)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [offset, offset + len(raw)]}
        data.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(data)


def chained_widths(weights, biases):
    """The model's widths, inputs first, from its layers' shapes (ValueError unless they
    chain)."""
    if len(weights) != len(biases) or not weights:
        raise ValueError("one bias per weight, one layer at least")
    shapes = [(shape_of(w), shape_of(b)) for w, b in zip(weights, biases)]
    if len(shapes[0][0]) != 2:
        raise ValueError(f"layer 0: weight {shapes[0][0]} is not a matrix")
    layers = [shapes[0][0][1]] + [w[0] if w else 0 for w, _ in shapes]
    for i, (w, b) in enumerate(shapes):
        if w != (layers[i + 1], layers[i]) or b != (layers[i + 1],):
            raise ValueError(f"layer {i}: weight {w}, bias {b} do not chain")
    return layers


def write_model(folder, weights, biases, activation="relu", max_batch=256):
    """folder/config.json and folder/model.safetensors for the dense layers weights[i]
    ([out, in]) and biases[i] ([out])."""
    layers = chained_widths(weights, biases)
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


def random_values(layers, seed):
    """Weights (a list of array('f') rows each) and biases (array('f')) uniform in
    +-1/sqrt(fan-in), from random.Random(seed): plain sequences, with or without numpy."""
    rng = random.Random(seed)
    weights, biases = [], []
    for fan_in, fan_out in zip(layers, layers[1:]):
        scale = 1.0 / math.sqrt(fan_in)
        weights.append([array("f", (rng.uniform(-scale, scale) for _ in range(fan_in)))
                        for _ in range(fan_out)])
        biases.append(array("f", (rng.uniform(-scale, scale) for _ in range(fan_out))))
    return weights, biases


def random_layers(layers, seed):
    """random_values(layers, seed) as float32 numpy arrays where numpy is installed (the same
    values: they are float32 already), as its plain sequences where it is not."""
    weights, biases = random_values(layers, seed)
    if np is None:
        return weights, biases
    return ([np.array(w, dtype=np.float32) for w in weights],
            [np.array(b, dtype=np.float32) for b in biases])


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
    weights, biases = random_values(layers, args.seed)
    write_model(args.dir, weights, biases, args.activation, args.max_batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())

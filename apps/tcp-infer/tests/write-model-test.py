#!/usr/bin/env python3
"""tcp-infer-write-model: tools/write-model.py's files, with and without numpy.

  write-model-test.py WRITER

The sequences' path (lists, array('f')), always: the file read back by hand (header length,
JSON header padded to 8 bytes, each tensor's dtype, shape and offsets tiling the data, the values
as struct.pack('<f') rounds each one), config.json, the refusals of shapes that do not chain, and
the program's file for a seed the same whether its python has numpy or not (numpy hidden from a
second run). Where numpy is installed (and CUV_TEST_NO_NUMPY is not 1): numpy arrays and the same
values as sequences write the same bytes, float64 and float32, strided, with signed zeros,
subnormals, ties, infinities and NaN. Exit 0 when every check passed; the seed is printed."""
import json
import os
import random
import runpy
import struct
import subprocess
import sys
import tempfile
import types
from array import array

if os.environ.get("CUV_TEST_NO_NUMPY") == "1":
    sys.modules["numpy"] = None  # import numpy raises ImportError, as where it is not installed
try:
    import numpy as np
except ImportError:
    np = None

# Doubles that float32 rounds in each way: exact, to nearest, ties to even (1 + 2^-24 down to 1,
# 1 + 3 * 2^-24 up), to a subnormal, and the values a conversion must keep as they are.
SPECIAL = [0.0, -0.0, 1.0, 1 + 2 ** -24, 1 + 3 * 2 ** -24, 0.1, -1 / 3, 1e-40, -1e-45,
           3.4028234e38, float("inf"), float("-inf"), float("nan")]


class Checks:
    def __init__(self):
        self.count = 0
        self.failed = 0

    def check(self, ok, what):
        self.count += 1
        if not ok:
            self.failed += 1
            print(f"FAILED: {what}", flush=True)

    def raises(self, error, what, call, *args):
        try:
            call(*args)
        except error:
            self.check(True, what)
            return
        except Exception as e:  # the wrong error is a failure too
            self.check(False, f"{what}: {type(e).__name__} {e}")
            return
        self.check(False, f"{what}: accepted")


def random_matrix(rng, rows, cols):
    return [[rng.uniform(-2, 2) for _ in range(cols)] for _ in range(rows)]


def packed(values):
    """float32 bytes by struct, one value at a time: not the writer's array('f') path."""
    return b"".join(struct.pack("<f", v) for v in values)


def read_back(ck, raw, tensors):
    """raw, read by hand, holds tensors (a list of (name, shape, flat values)) in order."""
    size = struct.unpack("<Q", raw[:8])[0]
    ck.check(size % 8 == 0 and raw[8 + size - 1:8 + size] in (b"}", b" "),
             f"header of {size} bytes, padded to 8")
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    ck.check(header.pop("__metadata__", None) == {"format": "pt"}, "metadata")
    ck.check(list(header) == [t[0] for t in tensors], f"tensor order {list(header)}")
    offset = 0
    for name, shape, values in tensors:
        entry = header.get(name, {})
        want = [offset, offset + 4 * len(values)]
        ck.check(entry.get("dtype") == "F32" and entry.get("shape") == list(shape) and
                 entry.get("data_offsets") == want, f"{name}: {entry}, wants {shape} at {want}")
        ck.check(data[want[0]:want[1]] == packed(values), f"{name}: values")
        offset = want[1]
    ck.check(offset == len(data), f"{len(data)} bytes of data, {offset} described")


def check_sequences(ck, wm, rng):
    w = random_matrix(rng, 3, 5)
    b = array("f", (rng.uniform(-2, 2) for _ in range(4)))
    rows = [array("f", row) for row in random_matrix(rng, 2, 3)]
    raw = wm.safetensors_bytes([("w", w), ("special", SPECIAL), ("b", b), ("rows", rows)],
                               {"format": "pt"})
    read_back(ck, raw, [("w", (3, 5), sum(w, [])), ("special", (len(SPECIAL),), SPECIAL),
                        ("b", (4,), list(b)), ("rows", (2, 3), [v for row in rows for v in row])])
    # the ties by hand: 1 + 2^-24 is halfway from 1 to 1 + 2^-23 (down to the even 1), 1 + 3 *
    # 2^-24 halfway from 1 + 2^-23 to 1 + 2^-22 (up to the even one)
    size = struct.unpack("<Q", raw[:8])[0]
    start = 8 + size + json.loads(raw[8:8 + size])["special"]["data_offsets"][0] + 4 * 2
    ties = struct.unpack("<3f", raw[start:start + 12])  # SPECIAL[2:5]: 1, 1 + 2^-24, 1 + 3 * 2^-24
    ck.check(ties == (1.0, 1.0, 1 + 2 ** -22), f"ties to even: {ties}")
    ck.raises(ValueError, "ragged rows", wm.safetensors_bytes, [("x", [[1.0, 2.0], [3.0]])])
    ck.raises(TypeError, "a tensor of text", wm.safetensors_bytes, [("x", ["ab"])])


def check_model(ck, wm, rng, tmp):
    weights = [random_matrix(rng, 6, 4), random_matrix(rng, 2, 6)]
    biases = [[rng.uniform(-1, 1) for _ in range(6)], array("f", [0.5, -0.5])]
    folder = os.path.join(tmp, "m")
    wm.write_model(folder, weights, biases, "none", 12)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    ck.check(config == {"layers": [4, 6, 2], "activation": "none", "max_batch": 12},
             f"config.json {config}")
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        read_back(ck, f.read(), [("layers.0.weight", (6, 4), sum(weights[0], [])),
                                 ("layers.0.bias", (6,), biases[0]),
                                 ("layers.1.weight", (2, 6), sum(weights[1], [])),
                                 ("layers.1.bias", (2,), list(biases[1]))])
    bad = {"no layer": ([], []), "a bias short": (weights, biases[:1]),
           "widths that do not chain": ([weights[0], random_matrix(rng, 2, 5)], biases),
           "a bias of the wrong width": (weights, [biases[0], [0.0] * 3]),
           "a vector as weight": ([biases[0]], [biases[0]])}
    for what, (w, b) in bad.items():
        ck.raises(ValueError, what, wm.write_model, os.path.join(tmp, "bad"), w, b)


def run_program(path, folder, seed, hide_numpy):
    """write-model.py as a program, numpy hidden from it or not; its file's bytes."""
    hide = "sys.modules['numpy'] = None; " if hide_numpy else ""
    code = (f"import runpy, sys; {hide}sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    subprocess.run([sys.executable, "-c", code, path, folder, "--layers", "7,9,3", "--seed",
                    str(seed)], check=True)
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        return f.read()


def check_program(ck, wm, path, rng, tmp):
    seed = rng.randrange(1 << 30)
    plain = run_program(path, os.path.join(tmp, "plain"), seed, True)
    default = run_program(path, os.path.join(tmp, "default"), seed, False)
    ck.check(plain == default, "the program's file for a seed, with numpy and without")
    w, b = wm.random_values([7, 9, 3], seed)
    folder = os.path.join(tmp, "module")
    wm.write_model(folder, w, b)
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        ck.check(f.read() == plain, "the program's file is write_model's of random_values")
    other = run_program(path, os.path.join(tmp, "other"), seed + 1, True)
    ck.check(other != plain, "another seed, other weights")
    bounds = all(abs(v) <= 1 / 7 ** 0.5 for row in w[0] for v in row) and all(
        abs(v) <= 1 / 9 ** 0.5 for v in b[1])
    ck.check(bounds, "weights within 1/sqrt(fan-in)")


def check_numpy(ck, wm, rng):
    gen = np.random.default_rng(rng.randrange(1 << 30))
    w64 = gen.uniform(-2, 2, (7, 5))
    w64[3, :5] = SPECIAL[:5]
    w64[4, :5] = SPECIAL[5:10]
    w64[5, :3] = SPECIAL[10:]
    w32 = gen.uniform(-2, 2, (4, 6)).astype(np.float32)
    strided = gen.uniform(-2, 2, (6, 8))[::2, 1::3].T  # neither C- nor F-contiguous
    bias = gen.uniform(-2, 2, 7)
    arrays = wm.safetensors_bytes([("w64", w64), ("w32", w32), ("s", strided), ("b", bias)])
    as_lists = wm.safetensors_bytes([("w64", w64.tolist()), ("w32", w32.tolist()),
                                     ("s", strided.tolist()), ("b", bias.tolist())])
    as_rows = wm.safetensors_bytes([("w64", [array("d", r) for r in w64.tolist()]),
                                    ("w32", [array("f", r) for r in w32.tolist()]),
                                    ("s", [list(r) for r in strided]), ("b", array("d", bias))])
    ck.check(arrays == as_lists, "numpy arrays and lists: the same bytes")
    ck.check(arrays == as_rows, "numpy arrays and rows of array('d'/'f'): the same bytes")
    layers = [11, 7, 5, 3]
    seed = rng.randrange(1 << 30)
    w, b = wm.random_layers(layers, seed)
    ck.check(all(isinstance(t, np.ndarray) and t.dtype == np.float32 for t in w + b),
             "random_layers gives float32 arrays where numpy is")
    pw, pb = wm.random_values(layers, seed)
    model_bytes = [wm.safetensors_bytes([(str(i), t) for i, t in enumerate(ws + bs)])
                   for ws, bs in ((w, b), (pw, pb))]
    ck.check(model_bytes[0] == model_bytes[1], "random_layers and random_values: the same bytes")


def main(argv):
    if len(argv) > 1 and argv[1] in ("--help", "--version"):
        print(__doc__ if argv[1] == "--help" else "write-model-test.py (tcp-infer's tests)")
        return 0
    if len(argv) != 2:
        print("usage: write-model-test.py WRITER (--help)", file=sys.stderr)
        return 2
    wm = types.SimpleNamespace(**runpy.run_path(argv[1]))  # its functions, as a module's
    seed = int(os.environ.get("WRITE_MODEL_SEED", random.randrange(1 << 31)))
    print(f"write-model: seed {seed} (WRITE_MODEL_SEED={seed} runs it again)", flush=True)
    rng = random.Random(seed)
    ck = Checks()
    check_sequences(ck, wm, rng)
    with tempfile.TemporaryDirectory() as tmp:
        check_model(ck, wm, rng, tmp)
        check_program(ck, wm, argv[1], rng, tmp)
    if np is not None:
        check_numpy(ck, wm, rng)
    paths = "sequences and numpy" if np is not None else "sequences (no numpy here)"
    print(f"write-model: {ck.count - ck.failed} of {ck.count} checks passed ({paths})", flush=True)
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

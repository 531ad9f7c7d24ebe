#!/usr/bin/env python3
"""tcp-infer-model-repo: a model repository served and checked against a host forward pass.

  model-repo.py RUN SERVER WRITER [SERVER ARGS...]

writes a repository into a temporary folder with tools/write-model.py (WRITER): three models
of fresh random weights (two and three dense layers with ReLU, one without activation) and one
corrupt model per way a file can be wrong; starts the server on it through tcp-infer-run (RUN,
with --model_dir, KServe's spelling) and runs itself against it as the client (--client). The
client checks every good model's metadata and readiness, and its answers, JSON and binary, for
fresh random rows of every batch size up to its max batch against a float64 forward pass; that
each corrupt model is listed UNAVAILABLE with the reason its file deserves, is not ready and
runs nothing; that unknown models, POST /infer and wrong shapes are refused; and that GET
/metrics says the models run without CUDA graphs (the seeded MLP's). Exit 0 when
every check passed; the seed of the run is printed, to run it again.

numpy is optional: where it is installed, the writer gets numpy arrays and the reference is
numpy's, and the plain-Python reference is computed too and must agree with it; where it is
not (or CUV_TEST_NO_NUMPY=1 hides it, from the writer too), the writer gets plain sequences and
the reference is the plain-Python one alone."""
import http.client
import importlib.util
import json
import operator
import os
import random
import struct
import subprocess
import sys
import tempfile
from array import array

if os.environ.get("CUV_TEST_NO_NUMPY") == "1":
    sys.modules["numpy"] = None  # import numpy raises ImportError, as where it is not installed
try:
    import numpy as np
except ImportError:
    np = None

# An answer is right within 1e-4 of (1 + |reference|), whichever reference: the server computes
# in float32 (dot products of at most 64 terms, in an order and with fused multiply-adds of its
# own), rounding at 2^-24 relative per operation; the simulator's answers come within 1e-7,
# some 1000 times inside, while a wrong weight, bias or activation moves an output by about
# 1/sqrt(fan-in), far outside.
TOLERANCE = 1e-4
# The two references compute the same float64 sums, in orders of their own (numpy's matmul may
# block them): within 1e-16 of (1 + |reference|) when measured, and at most 64 terms of about
# 1/8 bound their difference near 64 x 8 x 2^-53 (6e-14); 1e-10 is far above that and a million
# times inside TOLERANCE.
AGREEMENT = 1e-10

GOOD = {  # name: (layers, activation, max batch)
    "small": ([8, 16, 4], "relu", 8),
    "deep": ([32, 64, 48, 10], "relu", 16),
    "linear": ([5, 3], "none", 4),
}


def writer(path):
    spec = importlib.util.spec_from_file_location("write_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def corrupt_models(wm, repo, rng):
    """Each corrupt model's folder, and the words its reason must hold."""
    w, b = wm.random_layers([8, 16, 4], rng.randrange(1 << 30))
    cases = {}

    def model(name, words, data=None, layers=(8, 16, 4)):
        wm.write_model(os.path.join(repo, name), w, b, "relu", 8)
        path = os.path.join(repo, name, "model.safetensors")
        if data is not None:
            with open(path, "wb") as f:
                f.write(data)
        if list(layers) != [8, 16, 4]:
            with open(os.path.join(repo, name, "config.json"), "w") as f:
                json.dump({"layers": list(layers), "activation": "relu", "max_batch": 8}, f)
        cases[name] = words

    tensors = [("layers.0.weight", w[0]), ("layers.0.bias", b[0]), ("layers.1.weight", w[1]),
               ("layers.1.bias", b[1])]
    good = wm.safetensors_bytes(tensors)
    model("truncated", ["out of range", "truncated"], good[:-12])
    model("short-header", ["truncated or corrupt"], struct.pack("<Q", 1 << 20) + good[8:])
    model("wrong-shape", ["layers.0.weight", "shape [16, 8]", "wants [12, 8]"], None, (8, 12, 4))
    text = b'{"layers.0.weight": {"dtype": "F32", '
    model("bad-header", ["bad JSON header"], struct.pack("<Q", len(text)) + text + good[8 + 256:])
    header = json.loads(good[8:8 + struct.unpack("<Q", good[:8])[0]])
    data = good[8 + struct.unpack("<Q", good[:8])[0]:]

    def with_header(h):
        t = json.dumps(h).encode()
        return struct.pack("<Q", len(t)) + t + data

    far = json.loads(json.dumps(header))
    far["layers.1.bias"]["data_offsets"] = [len(data) - 16, len(data) + 48]
    model("offsets-out-of-range", ["layers.1.bias", "out of range"], with_header(far))
    twice = json.loads(json.dumps(header))
    twice["layers.0.bias"]["data_offsets"] = twice["layers.0.weight"]["data_offsets"][:1] + [
        twice["layers.0.weight"]["data_offsets"][0] + 64]
    model("overlap", ["overlap"], with_header(twice))
    half = json.loads(json.dumps(header))
    half["layers.0.weight"]["dtype"] = "F16"
    model("f16", ["dtype F16", "only F32"], with_header(half))
    nan = bytearray(good)
    nan[-4:] = struct.pack("<f", float("nan"))
    model("nan", ["layers.1.bias", "not finite"], bytes(nan))
    os.makedirs(os.path.join(repo, "no-config"))
    with open(os.path.join(repo, "no-config", "model.safetensors"), "wb") as f:
        f.write(good)
    cases["no-config"] = ["config.json"]
    return cases


def forward_plain(rows, weights, biases, relu):
    """The model's outputs for rows (lists of floats) in plain Python, whose floats are IEEE
    doubles: numpy's float64 arithmetic, each dot product summed in order."""
    for i, (w, b) in enumerate(zip(weights, biases)):
        rows = [[sum(map(operator.mul, x, wr)) + bj for wr, bj in zip(w, b)] for x in rows]
        if relu and i + 1 < len(weights):
            rows = [[max(y, 0.0) for y in r] for r in rows]
    return rows


def forward_numpy(rows, weights, biases, relu):
    x = np.array(rows, dtype=np.float64)
    for i, (w, b) in enumerate(zip(weights, biases)):
        x = x @ np.array(w, dtype=np.float64).T + np.array(b, dtype=np.float64)
        if relu and i + 1 < len(weights):
            x = np.maximum(x, 0.0)
    return x.tolist()


def close(got, want, tolerance):
    """got and want, lists of rows, of one shape and each value within tolerance of want's."""
    return len(got) == len(want) and all(
        len(g) == len(w) and all(abs(a - b) <= tolerance * (1 + abs(b)) for a, b in zip(g, w))
        for g, w in zip(got, want))


def reference(cl, rows, model, what):
    """The model's outputs for rows: numpy's where it is installed (the plain-Python pass checked
    against it), the plain-Python pass's where it is not."""
    want = forward_plain(rows, *model)
    if np is not None:
        numpy_want = forward_numpy(rows, *model)
        cl.check(close(want, numpy_want, AGREEMENT), f"{what}: plain-Python and numpy references")
        want = numpy_want
    return want


def random_rows(rng, rows, width):
    """rows of width float32 values (as Python floats) uniform in [-1, 1)."""
    flat = array("f", (rng.uniform(-1, 1) for _ in range(rows * width)))
    return [flat[i * width:(i + 1) * width].tolist() for i in range(rows)]


def split_rows(values, width):
    return [list(values[i:i + width]) for i in range(0, len(values), width)]


def f32_bytes(values):
    """A flat list as little-endian float32 bytes (KServe's binary tensors)."""
    out = array("f", values)
    if sys.byteorder == "big":
        out.byteswap()
    return out.tobytes()


def f32_values(raw):
    """Little-endian float32 bytes as an array('f')."""
    out = array("f")
    out.frombytes(raw)
    if sys.byteorder == "big":
        out.byteswap()
    return out


def plain(tensor):
    """A tensor (numpy array, array('f') or lists of them) as nested lists of floats."""
    if hasattr(tensor, "tolist"):
        return tensor.tolist()
    return [plain(row) for row in tensor]


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.failed = 0
        self.checks = 0

    def request(self, method, path, body=None, headers=None):
        self.c.request(method, path, body=body, headers=headers or {})
        r = self.c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()

    def json(self, method, path, body=None):
        status, _, raw = self.request(method, path, None if body is None else json.dumps(body))
        return status, json.loads(raw) if raw else None

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.failed += 1
            print(f"FAILED: {what}", flush=True)


def check_good(cl, name, model, rng):
    layers, activation, max_batch = GOOD[name]
    model = model + (activation == "relu",)
    status, meta = cl.json("GET", f"/v2/models/{name}")
    cl.check(status == 200 and meta["name"] == name and meta["state"] == "READY" and
             meta["inputs"][0]["shape"] == [-1, layers[0]] and
             meta["outputs"][0]["shape"] == [-1, layers[-1]] and
             meta["max_batch_size"] == max_batch, f"{name}: metadata {status} {meta}")
    status, _, _ = cl.request("GET", f"/v2/models/{name}/versions/1/ready")
    cl.check(status == 200, f"{name}: ready {status}")
    for rows in range(1, max_batch + 1):
        x = random_rows(rng, rows, layers[0])
        want = reference(cl, x, model, f"{name}: {rows} rows")
        req = {"id": f"{name}-{rows}", "inputs": [{"name": "INPUT0", "datatype": "FP32",
                                                   "shape": [rows, layers[0]],
                                                   "data": sum(x, [])}]}
        status, out = cl.json("POST", f"/v2/models/{name}/infer", req)
        ok = status == 200 and out["model_name"] == name and out["id"] == req["id"] and (
            out["outputs"][0]["shape"] == [rows, layers[-1]])
        got = split_rows(array("f", out["outputs"][0]["data"]), layers[-1]) if ok else None
        cl.check(ok and close(got, want, TOLERANCE),
                 f"{name}: {rows} rows: {status} {str(out)[:200]}")
    # binary output, from binary input: the bytes after the JSON part
    rows = max_batch
    x = random_rows(rng, rows, layers[0])
    body = f32_bytes(sum(x, []))
    head = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [rows, layers[0]],
                                   "parameters": {"binary_data_size": len(body)}}],
                       "parameters": {"binary_data_output": True}}).encode()
    status, _, raw = cl.request("POST", f"/v2/models/{name}/infer", head + body,
                                {"Inference-Header-Content-Length": str(len(head))})
    want = reference(cl, x, model, f"{name}: binary")
    size = rows * layers[-1] * 4
    got = split_rows(f32_values(raw[-size:]), layers[-1]) if len(raw) > size else None
    cl.check(status == 200 and got is not None and close(got, want, TOLERANCE),
             f"{name}: binary {status} {len(raw)} bytes")
    # its shape and batch are its own
    for shape in ([1, layers[0] + 1], [max_batch + 1, layers[0]]):
        req = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
                           "data": [0.5] * (shape[0] * shape[1])}]}
        status, out = cl.json("POST", f"/v2/models/{name}/infer", req)
        cl.check(status == 400 and f"[N, {layers[0]}]" in out["error"] and
                 f"1 to {max_batch}" in out["error"], f"{name}: shape {shape}: {status} {out}")


def check_corrupt(cl, name, words):
    status, meta = cl.json("GET", f"/v2/models/{name}")
    ok = status == 200 and meta["state"] == "UNAVAILABLE" and meta["inputs"] == []
    cl.check(ok and all(w in meta["reason"] for w in words),
             f"{name}: metadata {status} {meta} (wants {words})")
    status, out = cl.json("GET", f"/v2/models/{name}/ready")
    cl.check(status == 400 and "not ready" in out["error"], f"{name}: ready {status} {out}")
    req = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 8], "data": [0] * 8}]}
    status, out = cl.json("POST", f"/v2/models/{name}/infer", req)
    cl.check(status == 400 and "not ready" in out["error"] and words[0] in out["error"],
             f"{name}: infer {status} {out}")


def client(port, state_path):
    with open(state_path) as f:
        state = json.load(f)
    cl = Client(port)
    rng = random.Random(state["seed"])
    for name in GOOD:
        check_good(cl, name, tuple(state["models"][name]), rng)
    for name, words in state["corrupt"].items():
        check_corrupt(cl, name, words)
    for path in ("/v2/models/mlp", "/v2/models/nosuch/ready", "/v2/models/small/versions/2"):
        status, out = cl.json("GET", path)
        cl.check(status == 404 and "unknown model" in out["error"], f"{path}: {status} {out}")
    status, _, raw = cl.request("POST", "/infer", b"\0" * 256)
    cl.check(status == 404 and b"/v2/models/{name}/infer" in raw,
             f"POST /infer with a repository: {status} {raw[:200]}")
    status, _, _ = cl.request("GET", "/v2/health/ready")
    cl.check(status == 200, f"server ready: {status}")
    # a repository's models run without graphs (the seeded MLP's): off by default, silently
    status, _, raw = cl.request("GET", "/metrics")
    lines = raw.decode().splitlines()
    mode = f'cuv_infer_mode{{mode="{state["mode"]}"}} 1'
    cl.check(status == 200 and mode in lines and "cuv_infer_graphs 0" in lines,
             f"GET /metrics: {status}, wants {mode} and cuv_infer_graphs 0")
    print(f"model-repo: {cl.checks - cl.failed} of {cl.checks} checks passed", flush=True)
    return 1 if cl.failed else 0


def main(argv):
    if len(argv) > 1 and argv[1] in ("--help", "--version"):
        print(__doc__ if argv[1] == "--help" else "model-repo.py (tcp-infer's tests)")
        return 0
    if len(argv) == 5 and argv[1] == "--client":
        return client(int(argv[2]), argv[4])
    if len(argv) < 4:
        print("usage: model-repo.py RUN SERVER WRITER [SERVER ARGS...] (--help)", file=sys.stderr)
        return 2
    run, server, wm = argv[1], argv[2], writer(argv[3])
    seed = int(os.environ.get("MODEL_REPO_SEED", random.randrange(1 << 31)))
    print(f"model-repo: seed {seed} (MODEL_REPO_SEED={seed} runs it again)", flush=True)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "repo")
        state = {"seed": seed, "models": {}}
        for name, (layers, activation, max_batch) in GOOD.items():
            w, b = wm.random_layers(layers, rng.randrange(1 << 30))
            wm.write_model(os.path.join(repo, name), w, b, activation, max_batch)
            state["models"][name] = [[plain(t) for t in w], [plain(t) for t in b]]
        state["corrupt"] = corrupt_models(wm, repo, rng)
        state["mode"] = "baseline" if "--baseline" in argv[4:] else "cuv"
        state_path = os.path.join(tmp, "state.json")
        with open(state_path, "w") as f:
            json.dump(state, f)
        cmd = [run, server, "--model_dir", repo] + argv[4:] + [
            "--", sys.executable, os.path.abspath(__file__), "--client", "{port}", "--state",
            state_path]
        return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

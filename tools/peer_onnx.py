#!/usr/bin/env python3
"""ONNX Runtime as a peer on the CPU: the same .onnx file, the same thread count, the same sizes.

  .venv/bin/python3 tools/peer_onnx.py --build build [--threads 2] [--sizes 480x360,1920x1080]
                                      [--models weights/camvid-reference.h5,...] [--runs 25]

Each model file is exported by tools/export_onnx.py (the network to its class scores, the
preprocessing as the scenelab functions, whose bodies ONNX Runtime runs) and that one file is run
by ONNX Runtime's CPU provider (intra-op threads = --threads, one inter-op thread, every graph
optimisation) and by our engine (tools/bench_gops --model FILE.onnx: median ms after warm-up; it
times the whole graph to the label map, a little more than the scores ORT returns), in five
alternating rounds (the medians of the rounds' medians: this 2-core machine's timings drift).
Before timing, both score one random image: the table reports the largest relative error of
ORT's scores against ours (scenelab_infer on the same file), which must stay under 1e-4. ONNX
Runtime comes from PyPI (the version tools/setup_debian.sh pins, into .venv); onnx, PyTorch and
h5py from Debian.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import h5py
    import onnxruntime as ort
    import torch
except ImportError as e:
    print(f"peer_onnx: {e}; run tools/setup_debian.sh and use .venv/bin/python3")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_onnx import export  # noqa: E402
from peer_torch import alternate_cpu  # noqa: E402

REL_BOUND = 1e-4
ROUNDS = 5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="480x360,1920x1080")
    ap.add_argument("--models", default="weights/camvid-reference.h5,weights/camvid-multiscale.h5")
    ap.add_argument("--runs", type=int, default=25)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# peer_onnx: onnxruntime {ort.__version__} (CPU provider), {a.threads} threads each, "
          f"{ROUNDS} alternating rounds of {max(3, a.runs // ROUNDS)} runs, medians; {time.strftime('%Y-%m-%d')}")
    print("| model | size | GOp | scenelab ms | ONNX Runtime ms | ONNX Runtime / scenelab | ORT scores vs ours |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            path = os.path.join(tmp, os.path.basename(model) + ".onnx")
            export(model, path)
            for size in a.sizes.split(","):
                w, h = map(int, size.split("x"))
                x = np.random.RandomState(w * h).rand(1, 3, h, w).astype(np.float32)
                so = ort.SessionOptions()
                so.add_session_config_entry("session.intra_op.allow_spinning", "0")
                so.intra_op_num_threads = a.threads
                so.inter_op_num_threads = 1
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {"image": x}
                theirs = sess.run(None, feed)[0]
                # Our scores on the same image, from the same file.
                inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
                with h5py.File(inp, "w") as f:
                    f.create_dataset("input", data=x)
                subprocess.check_call([os.path.join(a.build, "tools", "scenelab_infer"), "--model", path, "--input",
                                       inp, "--out", out, "--nodes", "scores", "--threads", str(a.threads)])
                with h5py.File(out, "r") as f:
                    ours = np.asarray(f["scores"])
                rel = float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(ours)), 1e-30))
                ok &= rel < REL_BOUND
                for _ in range(3):
                    sess.run(None, feed)
                gop, our_ms, ort_ms = alternate_cpu(a.build, path, size, a.threads, a.runs,
                                                    lambda: sess.run(None, feed), ROUNDS)
                sess = None  # its threads gone before the next size
                print(f"| {os.path.basename(model)} | {size} | {gop:.2f} | {our_ms:.2f} | {ort_ms:.2f} | "
                      f"{ort_ms / our_ms:.2f}x | {rel:.1e} |", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

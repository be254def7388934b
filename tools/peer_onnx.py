#!/usr/bin/env python3
"""ONNX Runtime as a peer on the CPU: the same network, the same thread count, the same sizes.

  .venv/bin/python3 tools/peer_onnx.py --build build [--threads 2] [--sizes 480x360,1920x1080]
                                      [--models weights/camvid-reference.h5,...] [--runs 5]

Each model file's network (tools/scenelab_torch.py's TorchNet with its weights, from RGB to the
class scores, preprocessing included) is exported by torch.onnx (opset 17, the size fixed per
run) and run by ONNX Runtime's CPU provider (intra-op threads = --threads, one inter-op thread,
every graph optimisation); ours is tools/bench_gops on the model file (median ms after warm-up;
bench_gops times the whole graph to the label map, a little more than the scores ORT returns).
Before timing, both score one random image: the table reports the largest relative error of
ORT's scores against ours (scenelab_infer), which must stay under 1e-4. ONNX Runtime comes from
PyPI (the version tools/setup_debian.sh pins, into .venv); PyTorch and h5py from Debian.
Our engine does not read these .onnx files yet (their contrast normalisation is exported as
element-wise arithmetic the importer does not map): it runs the model file the export came from.
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
import scenelab_torch as st  # noqa: E402
from peer_torch import ours_ms  # noqa: E402

REL_BOUND = 1e-4


class Scores(torch.nn.Module):
    """The net to its class scores only (the nodes `scores` depends on)."""

    def __init__(self, net):
        super().__init__()
        need, by_name = {"scores"}, {n[0]: n for n in net.nodes}
        for name, _, ins, _ in reversed(net.nodes):
            if name in need:
                need.update(i for i in ins if i in by_name)
        net.nodes = [n for n in net.nodes if n[0] in need]
        self.net = net

    def forward(self, x):
        return self.net(x, ["scores"])["scores"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="480x360,1920x1080")
    ap.add_argument("--models", default="weights/camvid-reference.h5,weights/camvid-multiscale.h5")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# peer_onnx: onnxruntime {ort.__version__} (CPU provider), {a.threads} threads each, "
          f"median of {a.runs} runs after 3 warm-up; {time.strftime('%Y-%m-%d')}")
    print("| model | size | GOp | scenelab ms | ONNX Runtime ms | ONNX Runtime / scenelab | ORT scores vs ours |")
    print("|---|---|---|---|---|---|---|")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            net, _, _, _ = st.load_model(model)
            wrapped = Scores(net.eval())
            for size in a.sizes.split(","):
                w, h = map(int, size.split("x"))
                x = torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(w * h))
                path = os.path.join(tmp, "net.onnx")
                with torch.no_grad():
                    torch.onnx.export(wrapped, x, path, opset_version=17, input_names=["image"],
                                      output_names=["scores"])
                # Ours first, alone: ORT's worker threads spin between runs and would share the cores.
                gop, our_ms, _ = ours_ms(a.build, model, size, a.threads, a.runs)
                so = ort.SessionOptions()
                so.add_session_config_entry("session.intra_op.allow_spinning", "0")
                so.intra_op_num_threads = a.threads
                so.inter_op_num_threads = 1
                so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                feed = {"image": x.numpy()}
                theirs = sess.run(None, feed)[0]
                # Our scores on the same image.
                inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
                with h5py.File(inp, "w") as f:
                    f.create_dataset("input", data=x.numpy())
                subprocess.check_call([os.path.join(a.build, "tools", "scenelab_infer"), "--model", model, "--input",
                                       inp, "--out", out, "--nodes", "scores", "--threads", str(a.threads)])
                with h5py.File(out, "r") as f:
                    ours = np.asarray(f["scores"])
                rel = float(np.max(np.abs(ours - theirs)) / max(np.max(np.abs(ours)), 1e-30))
                ok &= rel < REL_BOUND
                for _ in range(3):
                    sess.run(None, feed)
                ts = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    sess.run(None, feed)
                    ts.append((time.perf_counter() - t0) * 1e3)
                ort_ms = float(np.median(ts))
                del sess
                print(f"| {os.path.basename(model)} | {size} | {gop:.2f} | {our_ms:.2f} | {ort_ms:.2f} | "
                      f"{ort_ms / our_ms:.2f}x | {rel:.1e} |", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

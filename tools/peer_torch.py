#!/usr/bin/env python3
"""Times our engine and PyTorch on the same HDF5 model, same sizes, same thread count.

  /usr/bin/python3 tools/peer_torch.py --build build [--threads 2] [--sizes 320x240,640x480,1920x1080]
                                      [--nets reference,multiscale] [--runs 5] [--model FILE.h5]

Ours: tools/bench_gops --model (median ms after warm-up). PyTorch: tools/scenelab_torch.py's
TorchNet on the same file (torch.no_grad, median ms after warm-up), the whole graph from RGB to
the label map, as ours. Prints a markdown table with both times and the ratio.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402


def ours_ms(build, model, size, threads, runs):
    out = subprocess.check_output([os.path.join(build, "tools", "bench_gops"), "--model", model,
                                   "--sizes", size, "--threads", str(threads), "--runs", str(runs),
                                   "--warmup", "2"], text=True)
    row = [l for l in out.splitlines() if l.startswith("| ") and size in l][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    return float(cells[2]), float(cells[3])  # GOp, median ms


def torch_ms(net, w, h, runs):
    x = torch.rand(1, 3, h, w)
    with torch.no_grad():
        for _ in range(2):
            net(x)
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            net(x)
            ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sizes", default="320x240,640x480,1920x1080")
    ap.add_argument("--nets", default="reference,multiscale")
    ap.add_argument("--model", help="one model file instead of generated --nets")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"# peer_torch: PyTorch {torch.__version__} vs scenelab, {a.threads} threads, "
          f"median of {a.runs} runs after 2 warm-up")
    print("| model | size | GOp | scenelab ms | GOp/s | PyTorch ms | GOp/s | PyTorch / scenelab |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        models = []
        if a.model:
            models.append((os.path.basename(a.model), a.model))
        else:
            for n in a.nets.split(","):
                p = os.path.join(tmp, n + ".h5")
                subprocess.check_call([os.path.join(a.build, "tools", "make_model"), "--network", n,
                                       "--classes", "8", "--out", p])
                models.append((n, p))
        for label, path in models:
            net, _, _, _ = st.load_model(path)
            net.eval()
            for size in a.sizes.split(","):
                w, h = map(int, size.split("x"))
                gop, ours = ours_ms(a.build, path, size, a.threads, a.runs)
                theirs = torch_ms(net, w, h, a.runs)
                print(f"| {label} | {size} | {gop:.2f} | {ours:.1f} | {gop / ours * 1e3:.1f} | "
                      f"{theirs:.1f} | {gop / theirs * 1e3:.1f} | {theirs / ours:.2f} |", flush=True)


if __name__ == "__main__":
    main()

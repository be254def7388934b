#!/usr/bin/env python3
"""Times our engine and PyTorch on the same HDF5 model, same sizes, same thread count.

  /usr/bin/python3 tools/peer_torch.py --build build [--threads 2] [--sizes 320x240,640x480,1920x1080]
                                      [--nets reference,multiscale] [--runs 5] [--model FILE.h5]

Ours: tools/bench_gops --model (median ms after warm-up). PyTorch: tools/scenelab_torch.py's
TorchNet on the same file (torch.no_grad, median ms after warm-up), the whole graph from RGB to
the label map, as ours. Prints a markdown table with both times and the ratio.

--device cuda: PyTorch with cudnn.benchmark, the pass captured as a CUDA graph, the same
precision (tf32 switches; fp16: the model and input in half precision, channels_last). Before
timing, both run one random image (scenelab_infer for ours): the table reports the maximum
relative error of our scores against PyTorch's and the label agreement.
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


def ours_ms(build, model, size, threads, runs, device="cpu", precision="fp32", conv="auto"):
    out = subprocess.check_output([os.path.join(build, "tools", "bench_gops"), "--model", model,
                                   "--sizes", size, "--threads", str(threads), "--runs", str(runs),
                                   "--warmup", "3", "--device", device, "--precision", precision,
                                   "--conv", conv], text=True)
    row = [l for l in out.splitlines() if l.startswith("| ") and size in l][0]
    cells = [c.strip() for c in row.strip("|").split("|")]
    return float(cells[2]), float(cells[3])  # GOp, median ms


def agreement_cuda(build, model, net, w, h, precision, conv, dtype, tmp):
    """Our scores and labels vs PyTorch's on one random image: (max rel. error, label agreement)."""
    import h5py
    x = np.random.RandomState(w * 7 + h).rand(1, 3, h, w).astype(np.float32)
    inp, out = os.path.join(tmp, "x.h5"), os.path.join(tmp, "y.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("input", data=x)
    subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", model,
                           "--input", inp, "--out", out, "--nodes", "scores,labels_full",
                           "--device", "cuda", "--precision", precision, "--conv", conv])
    with h5py.File(out, "r") as f:
        scores, labels = np.asarray(f["scores"]), np.asarray(f["labels_full"])
    xt = torch.from_numpy(x).cuda().to(dtype)
    if dtype == torch.float16:
        xt = xt.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        r = net(xt, ["scores", "labels_full"])
    ts = r["scores"].float().cpu().numpy()
    tl = r["labels_full"].float().cpu().numpy()
    rel = float(np.max(np.abs(scores - ts)) / max(float(np.max(np.abs(ts))), 1e-30))
    return rel, float(np.mean(labels == tl))


def torch_ms_cuda(net, w, h, runs, dtype=torch.float32):
    """CUDA: cudnn.benchmark, the whole graph captured once as a CUDA graph and replayed."""
    x = torch.rand(1, 3, h, w, device="cuda").to(dtype)
    if dtype == torch.float16:
        x = x.contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        for _ in range(3):
            net(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            net(x)
        for _ in range(3):
            g.replay()
        ts = []
        for _ in range(runs):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1))
    return float(np.median(ts))


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
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16"])
    ap.add_argument("--conv", default="auto", help="our GPU convolution algorithm")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.device == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    where = (f"{torch.cuda.get_device_name()}, {a.precision}, our conv {a.conv}" if a.device == "cuda"
             else f"{a.threads} threads")
    print(f"# peer_torch: PyTorch {torch.__version__} vs scenelab, {where}, "
          f"median of {a.runs} runs after warm-up")
    cuda = a.device == "cuda"
    dtype = torch.float16 if a.precision == "fp16" else torch.float32
    extra = " max rel. error | labels agree |" if cuda else ""
    print("| model | size | GOp | scenelab ms | GOp/s | PyTorch ms | GOp/s | PyTorch / scenelab |" + extra)
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if cuda else ""))
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
            if cuda:
                net = net.cuda().to(dtype)
                if dtype == torch.float16:
                    net = net.to(memory_format=torch.channels_last)
            for size in a.sizes.split(","):
                w, h = map(int, size.split("x"))
                check = ""
                if cuda:
                    rel, agree = agreement_cuda(a.build, path, net, w, h, a.precision, a.conv, dtype, tmp)
                    check = f" {rel:.1e} | {100 * agree:.2f}% |"
                gop, ours = ours_ms(a.build, path, size, a.threads, a.runs, a.device, a.precision, a.conv)
                theirs = torch_ms_cuda(net, w, h, a.runs, dtype) if cuda else torch_ms(net, w, h, a.runs)
                print(f"| {label} | {size} | {gop:.2f} | {ours:.2f} | {gop / ours * 1e3:.1f} | "
                      f"{theirs:.2f} | {gop / theirs * 1e3:.1f} | {theirs / ours:.2f} |" + check, flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU's ceiling for tools/train.py: one training step of a network (forward to the 'full'
scores, cross-entropy, backward, AdamW) on a fixed batch already on the device, no batches made,
timed by CUDA events after warm-up, median of 5 rounds of 20 steps, for each way of running it:
eager fp32 with TF32 (train.py --compile off), channels_last, bf16 autocast, both, and
torch.compile (train.py's default on a GPU); with --lovasz W, also torch.compile with train.py's
Lovasz-softmax term added to the loss (train.py --lovasz W), to show what that term costs.

  python3 tools/bench_train_step.py [--network multiscale] [--batch 8] [--crop 360x480] [--lovasz 0.5]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402
from train import DEFAULT_CROP, lovasz_softmax  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="multiscale", choices=["reference", "multiscale"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--crop", default=DEFAULT_CROP, help="HxW (default: train.py's recipe)")
    ap.add_argument("--lovasz", type=float, default=0.0, metavar="W",
                    help="also time the compiled step with W times the Lovasz-softmax loss added")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_train_step: needs a CUDA GPU")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    h, w = map(int, a.crop.split("x"))
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.rand(a.batch, 3, h, w, device=dev, generator=gen)
    y = torch.randint(0, 11, (a.batch, h, w), device=dev, generator=gen)
    print(f"{a.network}, batch {a.batch} of {h}x{w}; PyTorch {torch.__version__}, {torch.cuda.get_device_name()}",
          flush=True)

    def run(name, channels_last=False, bf16=False, compiled=False, lovasz=0.0):
        net = st.TorchNet(st.network_text(a.network, 11)).to(dev)
        opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-4)
        xx = x
        if channels_last:
            net = net.to(memory_format=torch.channels_last)
            xx = x.contiguous(memory_format=torch.channels_last)
        fwd = torch.compile(net) if compiled else net

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                out = fwd(xx, ["full"])["full"]
            loss = F.cross_entropy(out.float(), y)
            if lovasz:
                loss = loss + lovasz * lovasz_softmax(out, y)  # eager, as in train.py
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        t = time.time()
        for _ in range(10):  # warm-up: cuDNN's choices, the compilation
            step()
        torch.cuda.synchronize()
        warm = time.time() - t
        times = []
        for _ in range(5):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                step()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 20)
        ms = sorted(times)[2]
        print(f"{name:28s} {ms:7.2f} ms a step  {1000 * a.batch / ms:6.0f} images/s  (warm-up {warm:.0f} s)",
              flush=True)
        return ms

    base = run("eager fp32/TF32")
    run("channels_last", channels_last=True)
    run("bf16 autocast", bf16=True)
    run("bf16 + channels_last", channels_last=True, bf16=True)
    if hasattr(torch, "compile"):
        ms = run("torch.compile", compiled=True)
        print(f"torch.compile: {base / ms:.2f}x the eager step rate")
        if a.lovasz:
            lms = run(f"torch.compile + Lovasz {a.lovasz:g}", compiled=True, lovasz=a.lovasz)
            print(f"Lovasz-softmax term: {lms / ms:.2f}x the compiled step's time")
    else:
        print(f"torch.compile: not in PyTorch {torch.__version__}")


if __name__ == "__main__":
    main()

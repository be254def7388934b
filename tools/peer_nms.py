#!/usr/bin/env python3
"""torchvision.ops.nms on the same boxes as tools/bench_nms, on the GPU machine: checks that our
exact greedy keeps the same boxes (index for index) and prints both medians and the ratio.

  python3 tools/peer_nms.py --build build [--sizes 200,1000,3000,10000,30000,100000] [--runs 20]
  python3 tools/peer_nms.py --build build --sparse [--sizes 3000,...,1000000] [--sets clustered,uniform,large]
          [--batch 16x10000]   (the sparse path; torchvision where its n^2 / 8 bytes fit, batched_nms too)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="200,1000,3000,10000,30000,100000")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sparse", action="store_true")
    ap.add_argument("--sets", default="clustered,uniform,large")
    ap.add_argument("--batch", default="16x10000")
    ap.add_argument("--max-peer", type=int, default=300000, help="torchvision up to this many boxes")
    a = ap.parse_args()
    if a.sparse:
        sys.exit(sparse(a))
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.check_output([os.path.join(a.build, "tools", "bench_nms"), "--sizes", a.sizes,
                                       "--runs", str(a.runs), "--dump", tmp], text=True)
        print(out)
        ours = {}
        for line in out.splitlines():
            m = re.match(r"\| (\d+) \| (\d+) \| [\d.]+ \| ([\d.]+) \|", line)
            if m:
                ours[int(m.group(1))] = float(m.group(3))
        print(f"# peer_nms: torchvision {torchvision.__version__} ({torch.cuda.get_device_name()}), "
              f"median of {a.runs} runs (CUDA events) after 3 warm-up; IoU > 0.5")
        print("| n | kept | same boxes | scenelab greedy ms | torchvision ms | torchvision / scenelab |")
        print("|---|---|---|---|---|---|")
        ok = True
        for n in map(int, a.sizes.split(",")):
            p = os.path.join(tmp, f"n{n}")
            boxes = torch.from_numpy(np.fromfile(p + "_boxes.f32", dtype=np.float32).reshape(-1, 4)).cuda()
            scores = torch.from_numpy(np.fromfile(p + "_scores.f32", dtype=np.float32)).cuda()
            keep_ours = np.fromfile(p + "_keep.i32", dtype=np.int32)
            for _ in range(3):
                keep = torchvision.ops.nms(boxes, scores, 0.5)
            ts = []
            for _ in range(a.runs):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                keep = torchvision.ops.nms(boxes, scores, 0.5)
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1))
            tv = float(np.median(ts))
            same = np.array_equal(keep.cpu().numpy(), keep_ours)
            ok &= same
            print(f"| {n} | {len(keep_ours)} | {'yes' if same else 'NO'} | {ours[n]:.3f} | {tv:.3f} | {tv / ours[n]:.1f} |")
        sys.exit(0 if ok else 1)


def time_cuda(f, runs):
    for _ in range(3):
        out = f()
    ts = []
    for _ in range(runs):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        out = f()
        e1.record()
        torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1))
    return out, float(np.median(ts))


def sparse(a):
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.check_output([os.path.join(a.build, "tools", "bench_nms"), "--sparse", "--sizes", a.sizes,
                                       "--sets", a.sets, "--batch", a.batch, "--runs", str(a.runs), "--dump", tmp],
                                      text=True)
        print(out)
        print(f"# peer_nms --sparse: torchvision {torchvision.__version__} ({torch.cuda.get_device_name()}), "
              f"median of {a.runs} runs (CUDA events) after 3 warm-up; IoU > 0.5")
        print("| set | n | kept | same boxes | scenelab ms (nms_on_device's path) | torchvision ms | torchvision / scenelab |")
        print("|---|---|---|---|---|---|---|")
        ok = True
        names = [f"{k}_{n}" for k in a.sets.split(",") for n in map(int, a.sizes.split(","))]
        if a.batch and not a.batch.startswith("0"):
            names.append("batched")
        for name in names:
            p = os.path.join(tmp, name)
            boxes = torch.from_numpy(np.fromfile(p + "_boxes.f32", dtype=np.float32).reshape(-1, 4)).cuda()
            scores = torch.from_numpy(np.fromfile(p + "_scores.f32", dtype=np.float32)).cuda()
            ours = np.fromfile(p + "_keep.i32", dtype=np.int32)
            ms = float(open(p + "_ms.txt").read())
            n = boxes.shape[0]
            if n > a.max_peer:
                print(f"| {name} | {n} | {len(ours)} | - | {ms:.3f} | not run (n^2 / 8 bytes) | |")
                continue
            if name == "batched":
                groups = torch.from_numpy(np.fromfile(p + "_groups.i32", dtype=np.int32)).long().cuda()
                keep, tv = time_cuda(lambda: torchvision.ops.batched_nms(boxes, scores, groups, 0.5), a.runs)
                same = set(keep.cpu().tolist()) == set(ours.tolist())
            else:
                keep, tv = time_cuda(lambda: torchvision.ops.nms(boxes, scores, 0.5), a.runs)
                same = np.array_equal(keep.cpu().numpy(), ours)
            ok &= same
            print(f"| {name} | {n} | {len(ours)} | {'yes' if same else 'NO'} | {ms:.3f} | {tv:.3f} | {tv / ms:.1f} |")
        return 0 if ok else 1


if __name__ == "__main__":
    main()

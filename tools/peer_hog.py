#!/usr/bin/env python3
"""Times OpenCV's HOGDescriptor.detectMultiScale (default people detector, scale 1.05, stride 8x8,
padding 0, grouping as its default: groupThreshold 2) on the same frames as tools/bench_hog, all
of the machine's cores for OpenCV (cv2.setNumThreads), then runs bench_hog in the same run and
prints both with the ratio. Frames: one CamVid val image resized (INTER_LINEAR_EXACT, as bench_hog
resizes) to each size.

usage: peer_hog.py --bench build/tools/bench_hog [--device cpu] [--threads N]
                   [--sizes 640x480,1920x1080,3840x2160] [--runs 10] [--image FILE]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import cv2
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--sizes", default="640x480,1920x1080,3840x2160")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--image", default=os.path.join(here, "..", "..", "shared", "data", "camvid", "val", "images",
                                                    "0016E5_07959.jpg"))
    a = ap.parse_args()
    cv2.setNumThreads(a.threads)
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    base = cv2.imread(a.image)
    if base is None:
        sys.exit(f"peer_hog: cannot read {a.image}")
    theirs = {}
    for size in a.sizes.split(","):
        w, h = map(int, size.split("x"))
        img = cv2.resize(base, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)
        times, found = [], None
        for r in range(a.warmup + a.runs):
            t0 = time.perf_counter()
            found, _ = hog.detectMultiScale(img, hitThreshold=0, winStride=(8, 8), padding=(0, 0), scale=1.05)
            if r >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        theirs[size] = (statistics.median(times), len(found))
        print(f"# OpenCV {cv2.__version__} ({a.threads} threads) {size}: {theirs[size][0]:.2f} ms, "
              f"{len(found)} boxes", flush=True)
    out = subprocess.run([a.bench, "--device", a.device, "--sizes", a.sizes, "--runs", str(a.runs),
                          "--warmup", str(a.warmup), "--image", a.image, "--fusion", "group"]
                         + (["--threads", str(a.threads)] if a.device == "cpu" else []),
                         check=True, capture_output=True, text=True).stdout
    print(out, end="")
    ours = {}
    for line in out.splitlines():
        m = re.match(r"\| (\d+x\d+) \| (\d+) \| \d+ \| \d+ \| (\d+) \| ([\d.]+) \|", line)
        if m:
            ours[m.group(1)] = (float(m.group(4)), int(m.group(3)))
    print(f"\n| size | OpenCV {cv2.__version__} ms ({a.threads} threads) | OpenCV boxes | scenelab {a.device} ms "
          f"| scenelab boxes | OpenCV / scenelab |")
    print("|---|---|---|---|---|---|")
    for size, (t, n) in theirs.items():
        o = ours.get(size)
        if o:
            print(f"| {size} | {t:.2f} | {n} | {o[0]:.2f} | {o[1]} | {t / o[0]:.2f}x |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Python overhead: scenelab.Model.label against the same call from C++ (build/tools/bench_api),
same device, size and runs, in the same run; medians of host wall time per call.

    python3 tools/bench_python.py --build build --device cpu --size 480x360 --runs 30
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--size", default="480x360")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()
    sys.path.insert(0, os.path.join(a.build, "python"))
    import scenelab

    w, h = map(int, a.size.split("x"))
    cpp = subprocess.run([os.path.join(a.build, "tools", "bench_api"), "--device", a.device, "--precision",
                          a.precision, "--size", a.size, "--batch", str(a.batch), "--runs", str(a.runs),
                          "--warmup", str(a.warmup)], check=True, capture_output=True, text=True)
    c = json.loads(cpp.stdout)
    m = scenelab.Model(device=a.device, precision=a.precision)
    rng = np.random.default_rng(1)
    shape = (h, w, 3) if a.batch == 1 else (a.batch, h, w, 3)
    img = rng.integers(0, 256, size=shape, dtype=np.uint8)
    for _ in range(a.warmup):
        m.label(img)
    ms = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        m.label(img)
        ms.append((time.perf_counter() - t0) * 1e3)
    py = statistics.median(ms)
    print(f"| device | size | batch | C++ median ms | Python median ms | overhead |")
    print(f"|---|---|---|---|---|---|")
    print(f"| {m.device} | {a.size} | {a.batch} | {c['median_ms']:.3f} | {py:.3f} | "
          f"{py - c['median_ms']:+.3f} ms ({(py / c['median_ms'] - 1) * 100:+.1f}%) |")


if __name__ == "__main__":
    main()

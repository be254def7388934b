#!/usr/bin/env python3
"""How fast tools/train.py makes its training batches on the CPU (train.Batches: the recipe's
augmentation by default, one torch and OpenCV thread, as each of train.py's batch workers runs),
in images a second, the median of --rounds rounds of --batches batches each, after one batch of
warm-up; with --peer OTHER/train.py, that file's Batches too, in alternate rounds of the same run
(e.g. an earlier commit's, `git show REV:tools/train.py > /tmp/train_rev.py`), and whether the two
make the same batches bit for bit. Training runs are bound by their batches where the GPU's
steps outrun them (docs/BENCHMARKS.md at fb0dc9a, "Training speed").

  python3 tools/bench_batches.py --data ../shared/data/camvid [--peer /tmp/train_rev.py]
         [--images 96] [--batches 24] [--rounds 5] [--batch 8] [--crop 360x480] [-- TRAIN.PY ARGS]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402


def load_peer(path):
    if not os.path.isfile(path):
        raise SystemExit(f"bench_batches: {path}: no such file (a train.py to compare with)")
    # The peer's own train_* modules where it has them (its folder first, this run's set aside
    # while it loads), else this tree's.
    ours = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith("train_")}
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec = importlib.util.spec_from_file_location("train_peer", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
        for k in [k for k in sys.modules if k.startswith("train_")]:
            sys.modules["peer_" + k] = sys.modules.pop(k)
        sys.modules.update(ours)
    if not hasattr(mod, "Batches"):
        raise SystemExit(f"bench_batches: {path}: no Batches class (not a tools/train.py)")
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--peer", help="another tools/train.py whose Batches to time beside this one's")
    ap.add_argument("--images", type=int, default=96, help="training images loaded (the first N of train)")
    ap.add_argument("--batches", type=int, default=24, help="batches a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--crop", default=train.DEFAULT_CROP, help="HxW (default: train.py's recipe)")
    ap.add_argument("extra", nargs="*", help="after --: train.py's augmentation arguments (e.g. --exposure 0.2,1.2)")
    a = ap.parse_args()
    if a.images < a.batch or a.batches < 1 or a.rounds < 1:
        raise SystemExit("bench_batches: need --images >= --batch, --batches >= 1 and --rounds >= 1")
    torch.set_num_threads(1)
    import cv2
    cv2.setNumThreads(1)
    # train.py's own parser gives the recipe's defaults (and its checks) for the augmentation
    args = train.parse_args(["--data", a.data, "--out", os.devnull, "--batch", str(a.batch),
                             "--crop", a.crop] + a.extra)
    _, x, y = train.load_split(a.data, "train", limit=a.images)
    crop_h, crop_w = map(int, a.crop.split("x"))
    steps = x.shape[0] // a.batch
    makers = {"train.py": train.Batches(x, y, args, crop_h, crop_w, steps)}
    if a.peer:
        makers["peer " + a.peer] = load_peer(a.peer).Batches(x, y, args, crop_h, crop_w, steps)
    for m in makers.values():
        m[0]  # warm-up
    same = None
    if a.peer:
        mine, theirs = makers.values()
        same = all(torch.equal(p, q) for k in range(1, 1 + a.batches) for p, q in zip(mine[k], theirs[k]))
    rates = {name: [] for name in makers}
    for r in range(a.rounds):
        for name, m in makers.items():
            first = 1 + (r + 1) * a.batches  # batches not made before in this run
            t = time.perf_counter()
            for k in range(first, first + a.batches):
                m[k]
            rates[name].append(a.batches * a.batch / (time.perf_counter() - t))
    print(f"bench_batches: {x.shape[0]} images of {a.data}/train, batch {a.batch}, crops {a.crop}, one thread, "
          f"{a.rounds} rounds of {a.batches} batches, augmentation {' '.join(a.extra) or 'the recipe'}")
    for name, v in rates.items():
        print(f"  {name:40s} median {statistics.median(v):7.1f} images/s  (rounds {', '.join(f'{r:.1f}' for r in v)})")
    if a.peer:
        mine, theirs = (statistics.median(v) for v in rates.values())
        print(f"  ratio {mine / theirs:.2f}x; batches bit-identical to the peer's: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

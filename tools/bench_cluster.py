#!/usr/bin/env python3
"""scenelab.cluster on a local Dask cluster against one GPU's label_image, on the same frames.

  python3 tools/bench_cluster.py --build build --images DIR [--repeat 100]
        [--workers 1,2] [--precision fp16] [--save classes] [--runs 2] [--device cuda]

--repeat links each image of DIR N times under new names (a few thousand frames from the val set).
The peer: `label_image --device cuda:0` (cpu with --device cpu) on the same folder, run once to
fill its plan cache and the page cache, then timed (its JSON's pipeline rate, first file to last
output). Then, for each worker count, a local cluster of that many worker processes (worker i on
cuda:i), each warmed up by scenelab.cluster before its clock starts, timed --runs times. Prints
every rate, the ratios to label_image and to one worker, and how many outputs are byte-identical
to label_image's.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--images", required=True, help="folder of images (e.g. the CamVid val images)")
    ap.add_argument("--repeat", type=int, default=100)
    ap.add_argument("--workers", default="1,2", help="worker counts to time, comma-separated")
    ap.add_argument("--device", default="cuda", help="cuda (worker i on cuda:i) or cpu")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--save", default="classes")
    ap.add_argument("--runs", type=int, default=2, help="timed runs per worker count")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(a.build), "python"))  # the built module

    from distributed import Client
    from scenelab import cluster

    src = cluster.expand_inputs([a.images])
    if not src:
        print(f"bench_cluster: no images in {a.images}", file=sys.stderr)
        return 2
    gpu = a.device != "cpu"
    ncpu = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        frames = os.path.join(tmp, "frames")
        os.makedirs(frames)
        for r in range(a.repeat):
            for p in src:
                stem, ext = os.path.splitext(os.path.basename(p))
                os.symlink(os.path.abspath(p), os.path.join(frames, f"{stem}_r{r}{ext}"))
        files = cluster.expand_inputs([frames])
        n = len(files)
        print(f"{n} frames ({len(src)} images x {a.repeat}), device {a.device}, "
              f"{a.precision if gpu else 'fp32'}, outputs {a.save}, {ncpu} cores")

        # The peer: one GPU's (or the whole CPU's) label_image.
        ref = os.path.join(tmp, "ref")
        cmd = [os.path.join(a.build, "tools", "label_image"), "--device", "cuda:0" if gpu else "cpu",
               "--save", a.save, "--quiet", "--json", os.path.join(tmp, "li.json"), frames]
        if gpu:
            cmd += ["--precision", a.precision]
        subprocess.run(cmd + ["--out", os.path.join(tmp, "ref-warm")], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(cmd + ["--out", ref], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(tmp, "li.json")) as f:
            li = json.load(f)
        one = li["images_per_s"]
        print(f"label_image (one {'GPU' if gpu else 'process'}): {li['wall_s']:.2f} s = {one:.1f} images/s")

        save = a.save.split(",")
        rates = {}
        for w in (int(x) for x in a.workers.split(",")):
            with cluster.local_cluster(w) as lc, \
                    Client(lc) as client:
                for k in range(a.runs):
                    out = os.path.join(tmp, f"cluster{w}-{k}")
                    t0 = time.perf_counter()
                    s = cluster.run(files, out, client, device=a.device, precision=a.precision, save=save,
                                    threads=0 if gpu else max(1, ncpu // w), io_threads=max(1, ncpu // w),
                                    device_per_worker=gpu)
                    wall = time.perf_counter() - t0
                    same = sum(1 for f in os.listdir(ref)
                               if open(os.path.join(ref, f), "rb").read() == open(os.path.join(out, f), "rb").read())
                    rates.setdefault(w, []).append(s["images_per_s"])
                    print(f"cluster, {w} worker(s), run {k + 1}: {s['images']} images, {s['failed']} failed, "
                          f"{s['seconds']:.2f} s = {s['images_per_s']:.1f} images/s ({s['chunks']} tasks of "
                          f"up to {s['chunk']}; start-up {s['startup_s']:.2f} s before, {wall:.2f} s in all); "
                          f"{same} of {len(os.listdir(ref))} outputs byte-identical to label_image's")
        for w, r in rates.items():
            best = max(r)
            line = f"{w} worker(s): best {best:.1f} images/s = {best / one:.2f}x label_image"
            if 1 in rates and w != 1:
                line += f", {best / max(rates[1]):.2f}x one worker"
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

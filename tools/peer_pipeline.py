#!/usr/bin/env python3
"""label_image against the PyTorch script a user would write, on the same files, in one run.

  python3 tools/peer_pipeline.py --build build --images DIR_OR_FILES... [--repeat 10]
        [--device cuda|cpu] [--precision fp16|fp32] [--save classes,labels,overlay]
        [--model FILE.h5] [--threads N] [--size WxH] [-- extra label_image options]

The peer: OpenCV decoding on a thread pool, the same model file through tools/scenelab_torch.py
(fp16 and channels_last on the GPU when asked, cudnn.benchmark), argmax on the device, and the
same PNGs (class indices, colour labels, overlay) written by the thread pool. --repeat links
each image N times under new names (the issue's 1010 = 101 val images x 10); --size resizes
them first (e.g. 1920x1080 frames). Prints both rates, their ratio and the fraction of label
pixels on which the two agree.
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import cv2
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402


def peer(files, out, model, device, precision, threads, save):
    """The plain PyTorch pipeline; returns its wall time in seconds."""
    torch.backends.cudnn.benchmark = True
    net, _, palette, _ = st.load_model(model)
    net = net.to(device).eval()
    dtype = torch.float16 if precision == "fp16" else torch.float32
    if precision == "fp16":
        net = net.half().to(memory_format=torch.channels_last)
    if device == "cpu":
        torch.set_num_threads(threads)
    pal_bgr = np.ascontiguousarray(palette[:, ::-1])

    def load(path):
        img = cv2.imread(path, cv2.IMREAD_COLOR)
        if img is None:
            raise RuntimeError(f"{path}: cannot read")
        return img

    def write(stem, bgr, labels):
        if "classes" in save:
            cv2.imwrite(os.path.join(out, stem + "_classes.png"), labels)
        colour = pal_bgr[labels]
        if "labels" in save:
            cv2.imwrite(os.path.join(out, stem + "_labels.png"), colour)
        if "overlay" in save:
            over = cv2.addWeighted(bgr, 0.5, colour, 0.5, 0)
            cv2.imwrite(os.path.join(out, stem + "_overlay.png"), over)

    t0 = time.perf_counter()
    pending = []
    with cf.ThreadPoolExecutor(threads) as pool, torch.inference_mode():
        for path, bgr in zip(files, pool.map(load, files)):
            rgb = torch.from_numpy(bgr).to(device)[..., [2, 1, 0]]
            x = rgb.permute(2, 0, 1)[None].to(dtype) / 255
            if precision == "fp16":
                x = x.contiguous(memory_format=torch.channels_last)
            lab = net(x, want=["labels_full"])["labels_full"][0, 0].to(torch.uint8).cpu().numpy()
            stem = os.path.splitext(os.path.basename(path))[0]
            pending.append(pool.submit(write, stem, bgr, lab))
        for p in pending:
            p.result()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--images", nargs="+", required=True)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--size", default="")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--save", default="classes,labels,overlay")
    ap.add_argument("--model", default="")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("extra", nargs="*", help="more label_image options (after --)")
    a = ap.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model = a.model or os.path.join(here, "weights", "camvid-multiscale.h5")
    src = []
    for p in a.images:
        src += sorted(glob.glob(os.path.join(p, "*.jpg")) + glob.glob(os.path.join(p, "*.png"))) \
            if os.path.isdir(p) else [p]
    precision = a.precision if a.device != "cpu" else "fp32"
    save = a.save.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in")
        os.makedirs(inp)
        files = []
        for r in range(a.repeat):
            for p in src:
                stem, ext = os.path.splitext(os.path.basename(p))
                dst = os.path.join(inp, f"{stem}_r{r}{ext}")
                if a.size:
                    w, h = map(int, a.size.split("x"))
                    if r == 0:
                        cv2.imwrite(dst, cv2.resize(cv2.imread(p), (w, h), interpolation=cv2.INTER_LINEAR),
                                    [cv2.IMWRITE_JPEG_QUALITY, 90])
                    else:
                        os.symlink(os.path.join(inp, f"{stem}_r0{ext}"), dst)
                else:
                    os.symlink(os.path.abspath(p), dst)
                files.append(dst)
        ours_out, peer_out = os.path.join(tmp, "ours"), os.path.join(tmp, "peer")
        os.makedirs(peer_out)
        dev = "cpu" if a.device == "cpu" else a.device
        cmd = [os.path.join(a.build, "tools", "label_image"), "--model", model, "--out", ours_out,
               "--device", dev, "--save", a.save, "--quiet", "--plan-cache", os.path.join(tmp, "pc"),
               "--json", os.path.join(tmp, "report.json")]
        if dev != "cpu":
            cmd += ["--precision", precision]
        cmd += a.extra + [inp]
        # The first run of each fills its caches (our plan cache, cuDNN's autotuner, the page
        # cache); the second is timed, writing into a fresh folder as the peer does (replacing
        # existing files costs more on some file systems: ext4 flushes a file renamed over
        # another).
        warm = list(cmd)
        warm[warm.index("--out") + 1] = os.path.join(tmp, "ours-warm-up")
        subprocess.run(warm, check=True, stdout=subprocess.DEVNULL)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        process = time.perf_counter() - t0
        with open(os.path.join(tmp, "report.json")) as f:
            rep = json.load(f)
        # Like the peer's (timed after its model and CUDA are up), ours is the pipeline's run;
        # the process's start (CUDA context, handles, model file) is printed beside it.
        ours = rep["wall_s"]
        n = len(files)
        print(f"{n} files, device {a.device}, {precision}, outputs {a.save}")
        print(f"label_image: {ours:.2f} s = {n / ours:.1f} images/s (process {process:.2f} s = "
              f"{n / process:.1f} images/s with its start); per image ms: "
              + ", ".join(f"{k} {v:.3f}" for k, v in rep["stage_ms_per_image"].items())
              + f" (of finish: encode {rep['encode_ms_per_image']:.3f}, write {rep['write_ms_per_image']:.3f}); "
              f"planning {rep['planning_ms']:.0f} ms, first pass {rep['first_pass_ms']:.0f} ms")
        if a.skip_peer:
            return
        peer(files[: min(n, 8)], peer_out, model, a.device, precision, a.threads, save)  # warm-up
        t = peer(files, peer_out, model, a.device, precision, a.threads, save)
        print(f"PyTorch script: {t:.2f} s = {n / t:.1f} images/s")
        print(f"ratio (ours / PyTorch, images/s): {t / ours:.2f}x")
        agree = total = 0
        for p in files:
            stem = os.path.splitext(os.path.basename(p))[0]
            x = cv2.imread(os.path.join(ours_out, stem + "_classes.png"), cv2.IMREAD_UNCHANGED)
            y = cv2.imread(os.path.join(peer_out, stem + "_classes.png"), cv2.IMREAD_UNCHANGED)
            if x is None or y is None or x.shape != y.shape:
                total += 1
                continue
            agree += int((x == y).sum())
            total += x.size
        print(f"label agreement: {100.0 * agree / max(1, total):.3f}% of pixels")


if __name__ == "__main__":
    main()

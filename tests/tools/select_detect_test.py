#!/usr/bin/env python3
"""tools/select_detect.py on hand-made eval_detections results: the rule (best mean AP50 among the
settings within the boxes-per-object limits, on every set and on average), settings missing from a
set left out, the leave-one-set-out check of the rule, the exit status when nothing is within the
limits, the refusal of a file that is no result, and --write merging the pick into a model file's
detect attribute (weights untouched). Exit 77 (skipped) without h5py or torch (Debian's
python3-h5py, python3-torch).
    select_detect_test.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch  # noqa: F401 (scenelab_torch, which --write uses, needs it)
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

src = sys.argv[1]
TOOL = os.path.join(src, "tools", "select_detect.py")


def result(path, rows):
    """An eval_detections --json file: rows of (class, setting, ap50, detections, objects)."""
    with open(path, "w") as f:
        json.dump({"model": "m.h5", "method": "head", "images": 10, "min_area": 300,
                   "results": [{"class": c, "setting": s, "ap50": ap, "ap50_11pt": ap, "ap": ap / 2,
                                "ap75": ap / 3, "recall50": ap, "detections": d, "objects": o}
                               for c, s, ap, d, o in rows]}, f)


def detect_attr(model):
    """The model file's detect attribute as text, read here with h5py (not through the tool)."""
    with h5py.File(model, "r") as f:
        text = f.attrs["detect"]
    return text.decode() if isinstance(text, bytes) else text


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=120)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        a, b, c = (os.path.join(tmp, n + ".json") for n in ("a", "b", "c"))
        # 'threshold=0.2' has the best mean AP50 but 16 boxes for 10 objects on set b: out.
        # 'threshold=0.3' is best within the limit; 'threshold=0.35' only in two files: ignored
        # even though its AP50 is higher. Pedestrian: nothing within 1.5 unless the limit is raised.
        result(a, [("Car", "threshold=0.2", 0.60, 12, 10), ("Car", "threshold=0.3", 0.50, 11, 10),
                   ("Car", "threshold=0.4", 0.45, 8, 10), ("Car", "threshold=0.35", 0.90, 5, 10)])
        result(b, [("Car", "threshold=0.2", 0.58, 16, 10), ("Car", "threshold=0.3", 0.52, 15, 10),
                   ("Car", "threshold=0.4", 0.40, 9, 10), ("Car", "threshold=0.35", 0.90, 5, 10)])
        result(c, [("Car", "threshold=0.2", 0.62, 13, 10), ("Car", "threshold=0.3", 0.48, 14, 10),
                   ("Car", "threshold=0.4", 0.47, 7, 10)])
        # defaults: at most 1.5 on every set and 1.0 on average. 'threshold=0.3' keeps 1.5 on every
        # set but averages 1.33: out too, so the pick is 'threshold=0.4'.
        r = run(a, b, c)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "Car: 3 settings on 3 sets" in r.stdout, r.stdout
        assert "Car: pick 'threshold=0.4' (mean AP50 0.4400, at most 0.90 boxes per object)" in r.stdout, r.stdout
        assert "| threshold=0.2 | 0.6000 | 0.600 @ 1.20 | 0.580 @ 1.60 | 0.620 @ 1.30 | no |" in r.stdout, r.stdout
        assert "| threshold=0.3 | 0.5000 | 0.500 @ 1.10 | 0.520 @ 1.50 | 0.480 @ 1.40 | no |" in r.stdout, r.stdout
        assert "Car: the limit of 1.5 held on 3 of 3 sets left out" in r.stdout, r.stdout
        # a looser average: 'threshold=0.3' is best within the limits. Leaving b out, the others pick
        # 'threshold=0.2' (1.2 and 1.3 there), which gives 1.6 on b: the check says so.
        r = run(a, b, c, "--max-mean-boxes", "1.5")
        assert r.returncode == 0 and "Car: pick 'threshold=0.3' (mean AP50 0.5000, at most 1.50 boxes per object)" \
            in r.stdout, r.stdout
        assert "| b.json | threshold=0.2 | 0.580 | 1.60 | no |" in r.stdout, r.stdout
        assert "| a.json | threshold=0.3 | 0.500 | 1.10 | yes |" in r.stdout, r.stdout
        assert "Car: the limit of 1.5 held on 2 of 3 sets left out" in r.stdout, r.stdout
        # a tighter limit on every set moves the pick to the higher threshold
        r = run(a, b, c, "--max-boxes", "1.0", "--max-mean-boxes", "1.5")
        assert r.returncode == 0 and "Car: pick 'threshold=0.4'" in r.stdout, r.stdout
        # nothing within the limit: exit 1, says the fewest, writes nothing
        r = run(a, b, c, "--max-boxes", "0.5")
        assert r.returncode == 1 and "no setting within 0.5 boxes per object on every set and 1 on average " \
            "(the fewest at worst: 0.90)" in r.stdout, r.stdout
        assert "| a.json | none within the limits |" in r.stdout, r.stdout
        # two sets: no leave-one-out check
        r = run(a, b)
        assert r.returncode == 0 and "leaving each set out" not in r.stdout, r.stdout
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"images": 3}')
        r = run(a, bad)
        assert r.returncode != 0 and f"{bad}: not an eval_detections --json result" in r.stderr, r.stderr

        # --write: the pick's keys replace the class's own, the others stay, other classes untouched
        model = os.path.join(tmp, "m.h5")
        with h5py.File(model, "w") as f:
            f.create_dataset("meta/class_names", data=np.array([b"Car", b"Pedestrian"]))
            f.create_dataset("params/w", data=np.arange(6, dtype=np.float32))
            f.attrs["detect"] = "Car: heights=3,4 threshold=0.25 nms=0.2\nPedestrian: threshold=0.5\n"
        r = run(a, b, c, "--write", model)
        assert r.returncode == 0, r.stdout + r.stderr
        text = detect_attr(model)
        assert text == "Car: heights=3,4 threshold=0.4 nms=0.2\nPedestrian: threshold=0.5\n", text
        with h5py.File(model, "r") as f:
            assert np.array_equal(f["params/w"][()], np.arange(6, dtype=np.float32))
        r = run(a, b, c, "--max-boxes", "0.5", "--write", model)
        text = detect_attr(model)
        assert r.returncode == 1 and "threshold=0.4 nms" in text, text
    print("select_detect test passed")


if __name__ == "__main__":
    main()

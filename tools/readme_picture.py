#!/usr/bin/env python3
"""The README's picture: an image beside its labels and overlay, as label_image writes them with
the shipped model, side by side in one JPEG.

  /usr/bin/python3 tools/readme_picture.py --build build IMAGE OUT.jpg [--width 960]

docs/images/street.jpg is made from the sample (build/samples/street.png, drawn by
tools/make_sample_image: ours). Made from a CamVid frame (e.g. $SCENELAB_CAMVID/val/images/
0016E5_07959.jpg) it shows the model on a real street; CamVid's frames are not ours to commit
(../shared/data/camvid/README.md), so that picture stays out of the tree.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import cv2
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("image")
    ap.add_argument("out")
    ap.add_argument("--build", default="build")
    ap.add_argument("--width", type=int, default=960, help="the picture's width in pixels (default 960)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([os.path.join(a.build, "tools", "label_image"), a.image, "--out", tmp, "--quiet",
                        "--device", "cpu", "--save", "labels,overlay"], check=True)
        stem = os.path.splitext(os.path.basename(a.image))[0]
        panels = [cv2.imread(p, cv2.IMREAD_COLOR) for p in
                  (a.image, os.path.join(tmp, stem + "_labels.png"), os.path.join(tmp, stem + "_overlay.png"))]
    for p, name in zip(panels, ("image", "labels", "overlay")):
        if p is None:
            sys.exit(f"readme_picture: could not read the {name}")
    row = np.hstack(panels)
    h = round(row.shape[0] * a.width / row.shape[1])
    row = cv2.resize(row, (a.width, h), interpolation=cv2.INTER_AREA)
    if not cv2.imwrite(a.out, row, [cv2.IMWRITE_JPEG_QUALITY, 85]):
        sys.exit(f"readme_picture: could not write {a.out}")
    print(f"readme_picture: {a.out} ({a.width}x{h})")


if __name__ == "__main__":
    main()

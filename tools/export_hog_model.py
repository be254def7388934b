#!/usr/bin/env python3
"""Export OpenCV's HOG people detector (Dalal and Triggs' linear SVM for 64x128 windows, as
cv2.HOGDescriptor_getDefaultPeopleDetector() returns it) into a scenelab model file: the HOG
stages as graph layers (hog_gradient, hog_blocks, linear_window), the SVM as the linear_window's
weights, the descriptor's parameters as attributes, OpenCV's licence notice in the file.

    python3 tools/export_hog_model.py --out weights/hog-people.h5

Needs OpenCV's Python module (Debian: python3-opencv) and h5py.
"""
import argparse
import sys

import numpy as np

LICENCE = (
    "The SVM coefficients are OpenCV's HOGDescriptor::getDefaultPeopleDetector() (the people "
    "detector of Dalal and Triggs, INRIA), exported from OpenCV {version} by "
    "tools/export_hog_model.py. OpenCV (modules/objdetect/src/hog.cpp): Copyright (C) 2000-2008, "
    "Intel Corporation; Copyright (C) 2009, Willow Garage Inc.; third party copyrights are "
    "property of their respective owners. Redistribution and use in source and binary forms, with "
    "or without modification, are permitted under the terms of OpenCV's licence (3-clause BSD for "
    "this file's code as published; OpenCV 4.5 and later are distributed under the Apache License "
    "2.0): https://opencv.org/license/. Provided by the copyright holders and contributors 'as is' "
    "without any express or implied warranties.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        import cv2
        import h5py
    except ImportError as e:
        sys.exit(f"export_hog_model: {e} (Debian: apt-get install python3-opencv python3-h5py)")
    hog = cv2.HOGDescriptor()
    w, h = hog.winSize
    bw, bh = hog.blockSize
    sx, sy = hog.blockStride
    cw, ch = hog.cellSize
    if (bw, bh) != (2 * cw, 2 * ch) or (sx, sy) != (cw, ch) or cw != ch:
        sys.exit("export_hog_model: expected OpenCV's default HOG geometry")
    nbins = hog.nbins
    det = np.asarray(cv2.HOGDescriptor_getDefaultPeopleDetector(), dtype=np.float32).ravel()
    nbx, nby = (w - bw) // sx + 1, (h - bh) // sy + 1
    block = 4 * nbins
    if det.size != nbx * nby * block + 1:
        sys.exit(f"export_hog_model: {det.size} coefficients, expected {nbx * nby * block + 1}")
    # OpenCV's descriptor: blocks column by column (x outer), each block's histogram in our
    # hog_blocks channel order. Our weight: [1, channels, kh = blocks down, kw = blocks across].
    weight = det[:-1].reshape(nbx, nby, block).transpose(2, 1, 0)[None].astype(np.float32)
    bias = det[-1:].astype(np.float32)
    sigma = hog.winSigma if hog.winSigma > 0 else (bw + bh) / 8.0
    graph = "\n".join([
        "input image channels=3",
        f"grad = hog_gradient(image) bins={nbins} gamma={int(bool(hog.gammaCorrection))} "
        f"signed={int(bool(hog.signedGradient))}",
        f"blocks = hog_blocks(grad) cell={cw} cells=2 stride={sx} bins={nbins} sigma={sigma:g} "
        f"clip={hog.L2HysThreshold:g}",
        f"scores = linear_window(blocks) kh={nby} kw={nbx} params=svm",
        "output scores",
        ""])
    with h5py.File(a.out, "w") as f:
        f.attrs["format_version"] = np.int32(1)
        f.attrs["name"] = f"hog-people (OpenCV {cv2.__version__} default people detector)"
        f.attrs["graph"] = graph
        f.attrs["pyramid"] = f"window={w}x{h} scale=1.05 levels={hog.nlevels} threshold=0"
        f.attrs["licence"] = LICENCE.format(version=cv2.__version__)
        f.create_dataset("params/svm/weight", data=weight)
        f.create_dataset("params/svm/bias", data=bias)
        f.create_dataset("meta/class_names", data=np.array(["person"], dtype=h5py.string_dtype()))
        f.create_dataset("meta/palette", data=np.array([[220, 20, 60]], dtype=np.uint8))
    print(f"export_hog_model: wrote {a.out} ({det.size} coefficients, OpenCV {cv2.__version__})")


if __name__ == "__main__":
    main()

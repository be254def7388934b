#!/usr/bin/env python3
"""CamVid's train + val regrouped by sequence, optionally re-encoded as JPEG of another quality.

  python3 tools/sequence_sets.py --data ../shared/data/camvid --out /tmp/seq [--quality 75]

Writes OUT/SEQ/images and OUT/SEQ/labels for each sequence (the prefix of the file names: 0001TP,
0006R0, 0016E5) - symbolic links to the originals, or, with --quality Q, the images decoded and
written again as baseline JPEG of quality Q with 4:2:0 chroma (OpenCV). eval_labels --data
OUT/SEQ then scores a model trained with `train.py --holdout SEQ` on what it never saw, at the
files' own quality or at Q. --only SEQ keeps one sequence; --split val keeps one split.
"""
import argparse
import glob
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quality", type=int, default=None)
    ap.add_argument("--only", default=None, help="one sequence")
    ap.add_argument("--split", default=None, choices=["train", "val"], help="one split")
    a = ap.parse_args()
    if a.quality is not None and not 1 <= a.quality <= 100:
        raise SystemExit(f"sequence_sets: --quality {a.quality}: must be 1-100")
    if a.quality is not None:
        import cv2
    images = sorted(p for s in ([a.split] if a.split else ["train", "val"])
                    for p in glob.glob(os.path.join(a.data, s, "images", "*.jpg")))
    if not images:
        raise SystemExit(f"sequence_sets: no JPEG images under {a.data}/{{train,val}}/images")
    count = {}
    for img in images:
        name = os.path.splitext(os.path.basename(img))[0]
        seq = name.split("_")[0]
        if a.only and seq != a.only:
            continue
        label = os.path.join(os.path.dirname(os.path.dirname(img)), "labels", name + ".png")
        if not os.path.exists(label):
            raise SystemExit(f"sequence_sets: {img} has no label {label}")
        di, dl = os.path.join(a.out, seq, "images"), os.path.join(a.out, seq, "labels")
        os.makedirs(di, exist_ok=True)
        os.makedirs(dl, exist_ok=True)
        for p in (os.path.join(di, name + ".jpg"), os.path.join(dl, name + ".png")):
            if os.path.lexists(p):
                os.remove(p)
        os.symlink(os.path.abspath(label), os.path.join(dl, name + ".png"))
        if a.quality is None:
            os.symlink(os.path.abspath(img), os.path.join(di, name + ".jpg"))
        else:
            im = cv2.imread(img, cv2.IMREAD_COLOR)
            if im is None:
                raise SystemExit(f"sequence_sets: cannot read {img}")
            params = [cv2.IMWRITE_JPEG_QUALITY, a.quality]
            if hasattr(cv2, "IMWRITE_JPEG_SAMPLING_FACTOR"):  # libjpeg's default is 4:2:0 anyway
                params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
            if not cv2.imwrite(os.path.join(di, name + ".jpg"), im, params):
                raise SystemExit(f"sequence_sets: cannot write {di}/{name}.jpg")
        count[seq] = count.get(seq, 0) + 1
    if a.only and not count:
        raise SystemExit(f"sequence_sets: no image of sequence {a.only}")
    for seq, n in sorted(count.items()):
        print(f"{seq}: {n} images -> {os.path.join(a.out, seq)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What test-time mirroring would gain: a model's labelling figures on labelled sets with and
without averaging its class probabilities over the image and its horizontal mirror.

  python3 tools/mirror_gain.py --model M.h5 --data SETS/0001TP SETS/0006R0 [--limit N] [--json F]

Each --data folder holds images/ and labels/ (as eval_labels reads them; tools/sequence_sets.py
makes one a CamVid sequence). The model runs in PyTorch (tools/scenelab_torch.py: the engine's
graph, fp32, CPU; it labels CamVid frames as the engine does, tests/tools/camvid_agreement_test.py),
once on the image and once on its mirror. "plain" is the argmax of the class scores at the input
resolution (the graph's 'full' node, what label_image writes); "mirrored" the argmax of softmax(full
of the image) + mirror(softmax(full of the mirrored image)). Figures as eval_labels gives them:
global accuracy, class-average accuracy and mean IoU over the classes present, per-class IoU, void
pixels not counted; per folder and their mean. The engine does not mirror (it would double the
work of a frame); this measures what an accuracy mode that did would buy (weights/MODELS.md).
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenelab_torch as st  # noqa: E402
import train  # noqa: E402  (its metrics and image readers)


def figures(conf, names):
    """eval_labels' figures (and its names for them) from a confusion matrix (rows ground truth,
    columns prediction), by train.py's count, which agrees with eval_labels (weights/MODELS.md)."""
    m = train.metrics(torch.from_numpy(conf))
    return {"global_accuracy": m["global_acc"], "class_accuracy": m["class_acc"], "mean_iou": m["mean_iou"],
            "classes": [{"name": n, "iou": v} for n, v in zip(names, m["iou"])]}


def label_pairs(folder, limit=None):
    """(image path, label path) of a folder's images/ and labels/ (same stem, labels .png)."""
    images = sorted(glob.glob(os.path.join(folder, "images", "*")))
    if not images:
        raise SystemExit(f"mirror_gain: no images under {os.path.join(folder, 'images')}")
    pairs = []
    for p in images[:limit]:
        lab = os.path.join(folder, "labels", os.path.splitext(os.path.basename(p))[0] + ".png")
        if not os.path.exists(lab):
            raise SystemExit(f"mirror_gain: {p} has no label image {lab}")
        pairs.append((p, lab))
    return pairs


def confusions(net, pairs, classes):
    """(plain, mirrored) confusion matrices (classes x classes, int64) over the pairs."""
    plain = np.zeros((classes, classes), np.int64)
    mirrored = plain.copy()
    for img, lab in pairs:
        rgb = train.read_rgb(img)  # train.py's readers: a clear error naming an unreadable file
        y = train.read_label(lab)
        if y.shape != rgb.shape[:2]:
            raise SystemExit(f"mirror_gain: {lab} is not a map of {img}'s size")
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            full = net(torch.cat([x, x.flip(3)]), ["full"])["full"]
            p = full.softmax(1)
            avg = p[0] + p[1].flip(2)
        keep = y < classes  # void (and any value past the classes) not counted
        truth = y[keep].astype(np.int64)
        for conf, pred in ((plain, full[0].argmax(0)), (mirrored, avg.argmax(0))):
            conf += np.bincount(truth * classes + pred.numpy()[keep], minlength=classes * classes
                                ).reshape(classes, classes)
    return plain, mirrored


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, nargs="+", metavar="DIR")
    ap.add_argument("--limit", type=int, default=None, help="images per folder")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.limit is not None and a.limit < 1:
        ap.error(f"--limit {a.limit}: at least 1")
    if not os.path.exists(a.model):
        raise SystemExit(f"mirror_gain: no model file {a.model}")
    try:
        net, names, _, _ = st.load_model(a.model)
    except (OSError, KeyError, ValueError) as e:
        raise SystemExit(f"mirror_gain: {a.model} is not a scenelab model file ({e})")
    net.eval()
    result = {"model": a.model, "sets": {}}
    for folder in a.data:
        plain, mirrored = confusions(net, label_pairs(folder, a.limit), len(names))
        result["sets"][folder] = {"plain": figures(plain, names), "mirrored": figures(mirrored, names),
                                  "plain_confusion": plain.tolist(), "mirrored_confusion": mirrored.tolist()}
    keys = ("global_accuracy", "class_accuracy", "mean_iou")
    print(f"{'set':32s} {'plain: global':>14s} {'class':>6s} {'mIoU':>6s}   {'mirrored: global':>17s} {'class':>6s} {'mIoU':>6s}")
    for way in ("plain", "mirrored"):
        result[way + "_mean"] = {k: float(np.mean([s[way][k] for s in result["sets"].values()])) for k in keys}
    rows = [(f, s["plain"], s["mirrored"]) for f, s in result["sets"].items()]
    rows.append(("mean", result["plain_mean"], result["mirrored_mean"]))
    for f, p, m in rows:
        print(f"{f[-32:]:32s} {100 * p['global_accuracy']:14.2f} {100 * p['class_accuracy']:6.2f} "
              f"{100 * p['mean_iou']:6.2f}   {100 * m['global_accuracy']:17.2f} "
              f"{100 * m['class_accuracy']:6.2f} {100 * m['mean_iou']:6.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

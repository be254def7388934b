#!/usr/bin/env python3
"""What test-time mirroring and ensembles would gain: a model's labelling figures on labelled sets
with and without averaging its class probabilities over the image and its horizontal mirror, and,
given several models, those of the mean of their probabilities, plain and mirrored.

  python3 tools/mirror_gain.py --model M.h5 [M2.h5 ...] --data SETS/0001TP SETS/0006R0 [--every K]
         [--limit N] [--json F]

Each --data folder holds images/ and labels/ (as eval_labels reads them; tools/sequence_sets.py
makes one a CamVid sequence). The models run in PyTorch (tools/scenelab_torch.py: the engine's
graph, fp32, CPU; it labels CamVid frames as the engine does, tests/tools/camvid_agreement_test.py),
once on the image and once on its mirror. "plain" is the argmax of the first model's class scores
at the input resolution (the graph's 'full' node, what label_image writes); "mirrored" the argmax
of softmax(full of the image) + mirror(softmax(full of the mirrored image)); with several models
"ensemble" is the argmax of the sum of their softmax(full) and "ensemble_mirrored" that sum over
both passes. Figures as eval_labels gives them: global accuracy, class-average accuracy and mean IoU
over the classes present, per-class IoU, void pixels not counted; per folder and their mean.
--every K scores every Kth image of a folder (a sequence's neighbouring frames are much alike).
The engine neither mirrors nor ensembles (either multiplies the work of a frame); this measures
what an accuracy mode that did would buy (weights/MODELS.md at fb0dc9a).
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
import train  # noqa: E402  (its metrics, image readers and probability averaging)


def figures(conf, names):
    """eval_labels' figures (and its names for them) from a confusion matrix (rows ground truth,
    columns prediction), by train.py's count, which agrees with eval_labels (weights/MODELS.md at fb0dc9a)."""
    m = train.metrics(torch.from_numpy(conf))
    return {"global_accuracy": m["global_acc"], "class_accuracy": m["class_acc"], "mean_iou": m["mean_iou"],
            "classes": [{"name": n, "iou": v} for n, v in zip(names, m["iou"])]}


def label_pairs(folder, limit=None, every=1):
    """(image path, label path) of a folder's images/ and labels/ (same stem, labels .png): every
    `every`th image, at most `limit`."""
    images = sorted(glob.glob(os.path.join(folder, "images", "*")))
    if not images:
        raise SystemExit(f"mirror_gain: no images under {os.path.join(folder, 'images')}")
    pairs = []
    for p in images[::every][:limit]:
        lab = os.path.join(folder, "labels", os.path.splitext(os.path.basename(p))[0] + ".png")
        if not os.path.exists(lab):
            raise SystemExit(f"mirror_gain: {p} has no label image {lab}")
        pairs.append((p, lab))
    return pairs


def ways(n_models):
    """The labellings scored for n_models models."""
    return ("plain", "mirrored") + (("ensemble", "ensemble_mirrored") if n_models > 1 else ())


def confusions(nets, pairs, classes):
    """{way: confusion matrix (classes x classes, int64)} over the pairs, for ways(len(nets))."""
    conf = {w: np.zeros((classes, classes), np.int64) for w in ways(len(nets))}
    for img, lab in pairs:
        rgb = train.read_rgb(img)  # train.py's readers: a clear error naming an unreadable file
        y = train.read_label(lab)
        if y.shape != rgb.shape[:2]:
            raise SystemExit(f"mirror_gain: {lab} is not a map of {img}'s size")
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            fulls = [net(torch.cat([x, x.flip(3)]), ["full"])["full"] for net in nets]  # image, mirror
            pred = {"plain": fulls[0][0].argmax(0),
                    "mirrored": train.mean_probabilities(fulls[:1], mirror=True)[0].argmax(0)}
            if len(nets) > 1:
                pred["ensemble"] = train.mean_probabilities([f[:1] for f in fulls], mirror=False)[0].argmax(0)
                pred["ensemble_mirrored"] = train.mean_probabilities(fulls, mirror=True)[0].argmax(0)
        keep = y < classes  # void (and any value past the classes) not counted
        truth = y[keep].astype(np.int64)
        for w, c in conf.items():
            c += np.bincount(truth * classes + pred[w].numpy()[keep], minlength=classes * classes
                             ).reshape(classes, classes)
    return conf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, nargs="+", metavar="M.h5")
    ap.add_argument("--data", required=True, nargs="+", metavar="DIR")
    ap.add_argument("--every", type=int, default=1, metavar="K", help="every Kth image of a folder")
    ap.add_argument("--limit", type=int, default=None, help="images per folder")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.limit is not None and a.limit < 1:
        ap.error(f"--limit {a.limit}: at least 1")
    if a.every < 1:
        ap.error(f"--every {a.every}: at least 1")
    nets, names = [], None
    for path in a.model:  # every model's classes those of the first
        net, names = st.open_model(path, "mirror_gain: --model", names)[:2]
        nets.append(net.eval())
    result = {"model": a.model[0], "models": a.model, "every": a.every, "sets": {}}
    for folder in a.data:
        conf = confusions(nets, label_pairs(folder, a.limit, a.every), len(names))
        result["sets"][folder] = {**{w: figures(c, names) for w, c in conf.items()},
                                  **{w + "_confusion": c.tolist() for w, c in conf.items()}}
    keys = ("global_accuracy", "class_accuracy", "mean_iou")
    shown = ways(len(nets))
    for way in shown:
        result[way + "_mean"] = {k: float(np.mean([s[way][k] for s in result["sets"].values()])) for k in keys}
    print(f"{'set':32s}" + "".join(f" {w + ': global':>24s} {'class':>6s} {'mIoU':>6s}" for w in shown))
    rows = [(f, [s[w] for w in shown]) for f, s in result["sets"].items()]
    rows.append(("mean", [result[w + "_mean"] for w in shown]))
    for f, figs in rows:
        print(f"{f[-32:]:32s}" + "".join(f" {100 * v['global_accuracy']:24.2f} {100 * v['class_accuracy']:6.2f} "
                                         f"{100 * v['mean_iou']:6.2f}" for v in figs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()

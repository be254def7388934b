"""CamVid for tools/train.py: the classes, their colours and void; the recipe's defaults; reading a
split (images and label maps); the confusion-matrix metrics and evaluating a net on a set."""

import glob
import os

import numpy as np
import torch


CLASSES = ["Sky", "Building", "Pole", "Road", "Pavement", "Tree", "SignSymbol", "Fence", "Car",
           "Pedestrian", "Bicyclist"]


PALETTE = [[128, 128, 128], [128, 0, 0], [192, 192, 128], [128, 64, 128], [60, 40, 222],
           [128, 128, 0], [192, 128, 128], [64, 64, 128], [64, 0, 128], [64, 64, 0], [0, 128, 192]]


VOID = 11


# The classes a net of these widths separates worst at 480x360 (16-27% IoU across sequences,
# weights/MODELS.md at fb0dc9a): --paste's default.
THIN_CLASSES = ["Pole", "SignSymbol", "Fence", "Pedestrian", "Bicyclist"]


# --aug full's exposure range (weights/MODELS.md at fb0dc9a): chosen across sequences, where it lifted the
# dusk sequence 0001TP held out by 2.5 points and the mean by 1.1.
DEFAULT_EXPOSURE = "0.3,1.2"


# --aug full's range of random scales, drawn log-uniformly (the recipe since 2026-11-23).
DEFAULT_SCALE = (0.5, 2.0)


DEFAULT_CROP = "360x480"  # HxW, the whole CamVid frame (the recipe since 2026-11-29; 288x384 before)


# The classifier's dropout and --aug full's illumination field (weights/MODELS.md at fb0dc9a, 2026-11-27),
# each chosen across sequences over two seeds: dropout lifted the multiscale net by 0.45 points of
# global accuracy and 0.86 of mean IoU, the field then by 2.41 and 1.44 more (the dusk sequence
# by 6.9 points of global accuracy).
DEFAULT_SHADING = 0.3


DEFAULT_DROPOUT = 0.5


# The detection head's settings written into the models (weights/MODELS.md at fb0dc9a). Car: denser heights
# (1.25x apart) at the head's default aspects (docs/BENCHMARKS.md at fb0dc9a, "Car windows"). Pedestrian:
# narrow windows (width/height 0.25-0.6: CamVid's pedestrians are about 0.3), chosen with the
# model trained on train only, on sequences 0001TP and 0006R0 (docs/BENCHMARKS.md at fb0dc9a, "Detection").
# Threshold, NMS and min_area of both chosen on the three held-out sequences with the 480-epoch
# recipe's held-out models by tools/select_detect.py's rule (docs/BENCHMARKS.md at fb0dc9a, "480 epochs");
# Pedestrian's threshold again with the --balance 0.5 recipe's (docs/BENCHMARKS.md at fb0dc9a, "milder
# class weights"); both thresholds again with the dropout and illumination-field recipe's, two
# seeds (docs/BENCHMARKS.md at fb0dc9a, "Detection with the dropout and illumination-field models");
# Pedestrian's min_area, threshold and NMS again with the batch-normalised recipe's six held-out
# models (docs/BENCHMARKS.md at fb0dc9a, "Detection with the batch-normalised held-out models").
CAMVID_DETECT = ("Car: heights=3,4,5,7,9,11,14,17,21,26,32,40 threshold=0.3 nms=0.2 min_area=1000; "
                 "Pedestrian: heights=3,4,5,6,7,8,10,12,14,17,20,24,29,35,42 aspects=0.25,0.33,0.45,0.6 "
                 "min_area=600 threshold=0.33 size_weight=0.03 nms=0.4")


def read_rgb(path):
    import cv2
    im = cv2.imread(path, cv2.IMREAD_COLOR)
    if im is None:
        raise SystemExit(f"train: cannot read image {path}")
    return im[:, :, ::-1].copy()


def read_label(path):
    import cv2
    lab = cv2.imread(path, cv2.IMREAD_UNCHANGED)
    if lab is None or lab.ndim != 2:
        raise SystemExit(f"train: {path} is not an 8-bit single-channel label image")
    return lab


def load_split(root, split, limit=None):
    names = sorted(os.path.splitext(os.path.basename(p))[0]
                   for p in glob.glob(os.path.join(root, split, "images", "*.jpg")))
    if not names:
        raise SystemExit(f"train: {os.path.join(root, split, 'images')}: no .jpg images (expected "
                         f"DATA/{split}/images/*.jpg with labels in DATA/{split}/labels/*.png)")
    if limit:
        names = names[:limit]
    imgs, labs = [], []
    for n in names:
        im = read_rgb(os.path.join(root, split, "images", n + ".jpg"))
        lab = read_label(os.path.join(root, split, "labels", n + ".png"))
        if im.shape[:2] != lab.shape:
            raise SystemExit(f"train: {n}: image {im.shape[:2]} and label {lab.shape} differ")
        imgs.append(im)
        labs.append(lab)
    x = torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2).contiguous()  # N,3,H,W uint8
    y = torch.from_numpy(np.stack(labs)).long()                               # N,H,W
    return names, x, y


def metrics(conf):
    conf = conf.double()
    tp = conf.diag()
    gt = conf.sum(1)
    pred = conf.sum(0)
    valid = gt > 0
    glob_acc = (tp.sum() / conf.sum()).item()
    cls_acc = (tp[valid] / gt[valid]).mean().item()
    iou = tp / (gt + pred - tp).clamp(min=1)
    return {"global_acc": glob_acc, "class_acc": cls_acc, "mean_iou": iou[valid].mean().item(),
            "iou": iou.tolist()}


def evaluate(net, x, y, dev, batch=8):
    conf = torch.zeros(11, 11, dtype=torch.long, device=dev)
    net.eval()
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            xb = x[i:i + batch].to(dev).float() / 255
            yb = y[i:i + batch].to(dev)
            pred = net(xb, ["labels_full"])["labels_full"][:, 0].long()
            m = yb != VOID
            conf += torch.bincount(yb[m] * 11 + pred[m], minlength=121).view(11, 11)
    net.train()
    return conf

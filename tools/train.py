#!/usr/bin/env python3
"""Train the paper's scene-labelling nets on CamVid (11 classes, void ignored) and export them.

  python3 tools/train.py --data ../shared/data/camvid --network multiscale --out weights/camvid-multiscale.h5
         [--epochs 480] [--minutes 120] [--batch 8] [--crop 360x480] [--seed 0]

The defaults are the shipped models' recipe (weights/MODELS.md) except the split and the network:
they were trained with --final, the reference model with --network reference --crop 288x384 (the
recipe of its day; the multiscale models were trained again with full frames). The batches are
made by --workers processes (default: one per core but one); with them the multiscale net's 480 epochs on train (288x384 crops) took 10 minutes on an H100 (0.9 s an
epoch, 1.6 s with one batch-making thread), the reference net's 6; on a GPU the steps run
through torch.compile (--compile; 0.7 s an epoch, docs/BENCHMARKS.md "Training speed").
--minutes is a safety stop (the one-cycle schedule is laid out for --epochs, so a run cut short
ends before its rate has decayed). The exported file's name attribute gives the network, the
recipe options given other than their defaults, the seed and the epoch, e.g. "camvid-multiscale
(tools/train.py --paste 0.5, seed 1, epoch 480)".

The network is tools/scenelab_torch.py's TorchNet on the engine's own graph text, so training runs
the engine's preprocessing (RGB->YUV, 13x13 contrast normalisation, standardisation with
statistics measured on the training set) and the engine's score resampling ('full' node).
Loss: cross-entropy on every input pixel, void ignored, with the square roots of SegNet's
median-frequency class weights (--balance 0.5; 1 the weights themselves, the recipe until
2026-11-27; 0 none), plus --lovasz W times the Lovasz-softmax loss (an option outside the
recipe: 0.5 lost across sequences, weights/MODELS.md), or --ohem F, the loss over the hardest
fraction F of each batch's labelled pixels only (outside the recipe: 0.3 lost across sequences);
AdamW, weight decay --weight-decay;
dropout 0.5 on the pixel-wise classifier's inputs while training (--dropout).
Batch normalisation after the convolutions that feed a ReLU while training, folded into their
weights at export (the model file unchanged; the recipe since 2026-11-28: it gained on the thin
classes across sequences, weights/MODELS.md; --no-batchnorm leaves it out, and --init, whose file
holds no batch statistics, fine-tunes without it).
Training uses TF32 tensor cores. Augmentation (--aug full, the default): random scale 0.5-2.0
(--scale; 0.75-1.5 lost across sequences) with random crops (padding with void where the scaled
image is smaller than the crop), horizontal flips, rotations of up to 5 degrees, brightness,
contrast and per-channel colour jitter, mild blur or noise, an exposure factor 0.3-1.2
(--exposure; `--exposure none` leaves it out, 0.2,1.2 was level across sequences; --gamma is an
option outside the recipe), a smooth random illumination field on half the images (--shading 0.3;
`--shading none` leaves it out), and JPEG re-compression at a random quality 50-95 with 4:2:0
chroma (OpenCV's encoder on the CPU); --aug basic is the earlier scale 1-1.35, flip and crop.
--rare P (an option outside the recipe: level across sequences, weights/MODELS.md) places the
crop of a share P of the images about a pixel of one of the rarer classes the image shows.
--paste P (outside the recipe: across sequences it traded 1.36 points of global accuracy for 2.30
of class average at 0.5 over two seeds, was level with --balance 0.25, and at 1.0 bought no more
class average and lost 0.88 more global accuracy, weights/MODELS.md; the shipped accurate file's second
member is --paste 0.5) pastes the thin classes' pixels (--paste-classes) of the next image of the
batch onto a share P of the images.
--crop 360x480, the default since 2026-11-29, trains on crops the size of a whole CamVid frame
(across sequences +0.14 / +0.84 / +0.31 over two seeds against 288x384, the recipe before, for 1.4
times the batch-making; weights/MODELS.md, "Full-frame crops").
Fixed seed. Logs loss and metrics each eval; keeps the epoch with the best mean IoU on the
selection set and exports it.

Selection: by default train on `train`, select on `val`. `--holdout SEQ` pools train and val and
holds out one sequence (file names start with it: 0001TP, 0006R0, 0016E5) for selection - the
cross-sequence figure; `--final` trains on train + val for --epochs and exports the last epoch;
`--last` trains on `train` and exports the last epoch (val takes no part: its figures are honest).
`--init MODEL.h5` starts from a trained model of the same network instead of He initialisation,
keeping its standardisation statistics (fine-tuning; give a lower --lr).

Distillation (an option outside the recipe: from three of the multiscale net's own models it was
level to 2.3 points below across sequences, weights/MODELS.md): `--teacher A.h5,B.h5,...` runs those
trained models (any of the engine's networks, CamVid's classes) on every training batch, and the
loss becomes the class-weighted cross-entropy against (1 - --distill) x the one-hot label +
--distill x the mean of the teachers' class probabilities (--teacher-mirror: averaged over the
batch's mirror too), still over the labelled pixels and normalised as the plain loss is (--distill
0 is that loss exactly). `{seq}` in a teacher's path becomes the --holdout sequence (`final` with
--final, `train` with neither), so one crossval.py argument gives each held-out run teachers that
never saw its sequence. On a GPU the teachers run under bfloat16 autocast.
"""
import argparse
import contextlib
import copy
import functools
import glob
import hashlib
import json
import math
import os
import queue
import sys
import threading
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402

CLASSES = ["Sky", "Building", "Pole", "Road", "Pavement", "Tree", "SignSymbol", "Fence", "Car",
           "Pedestrian", "Bicyclist"]
PALETTE = [[128, 128, 128], [128, 0, 0], [192, 192, 128], [128, 64, 128], [60, 40, 222],
           [128, 128, 0], [192, 128, 128], [64, 64, 128], [64, 0, 128], [64, 64, 0], [0, 128, 192]]
VOID = 11
# The classes a net of these widths separates worst at 480x360 (16-27% IoU across sequences,
# weights/MODELS.md): --paste's default.
THIN_CLASSES = ["Pole", "SignSymbol", "Fence", "Pedestrian", "Bicyclist"]
# --aug full's exposure range (weights/MODELS.md): chosen across sequences, where it lifted the
# dusk sequence 0001TP held out by 2.5 points and the mean by 1.1.
DEFAULT_EXPOSURE = "0.3,1.2"
# --aug full's range of random scales, drawn log-uniformly (the recipe since 2026-11-23).
DEFAULT_SCALE = (0.5, 2.0)
DEFAULT_CROP = "360x480"  # HxW, the whole CamVid frame (the recipe since 2026-11-29; 288x384 before)
# The classifier's dropout and --aug full's illumination field (weights/MODELS.md, 2026-11-27),
# each chosen across sequences over two seeds: dropout lifted the multiscale net by 0.45 points of
# global accuracy and 0.86 of mean IoU, the field then by 2.41 and 1.44 more (the dusk sequence
# by 6.9 points of global accuracy).
DEFAULT_SHADING = 0.3
DEFAULT_DROPOUT = 0.5
# The detection head's settings written into the models (weights/MODELS.md). Car: denser heights
# (1.25x apart) at the head's default aspects (docs/BENCHMARKS.md, "Car windows"). Pedestrian:
# narrow windows (width/height 0.25-0.6: CamVid's pedestrians are about 0.3), chosen with the
# model trained on train only, on sequences 0001TP and 0006R0 (docs/BENCHMARKS.md, "Detection").
# Threshold, NMS and min_area of both chosen on the three held-out sequences with the 480-epoch
# recipe's held-out models by tools/select_detect.py's rule (docs/BENCHMARKS.md, "480 epochs");
# Pedestrian's threshold again with the --balance 0.5 recipe's (docs/BENCHMARKS.md, "milder
# class weights"); both thresholds again with the dropout and illumination-field recipe's, two
# seeds (docs/BENCHMARKS.md, "Detection with the dropout and illumination-field models");
# Pedestrian's min_area, threshold and NMS again with the batch-normalised recipe's six held-out
# models (docs/BENCHMARKS.md, "Detection with the batch-normalised held-out models").
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


def lovasz_softmax(logits, labels, ignore=VOID):
    """The Lovasz-softmax loss (Berman, Rannen Triki, Blaschko, CVPR 2018) over a batch: for each
    class c present in the labels, the Lovasz extension of its Jaccard loss 1 - IoU evaluated at
    the pixels' errors |[label = c] - p_c| (p the softmax of logits N,C,H,W), averaged over those
    classes; pixels labelled `ignore` take no part. With one-hot probabilities it is the mean of
    1 - IoU over the classes present, and it is piecewise linear in the errors, so its gradient
    pushes on the pixels that cost IoU most. The extension: errors sorted in decreasing order
    e_1 >= e_2 >= ..., sum_k e_k (J(k) - J(k - 1)), J(k) the Jaccard loss |M| / |fg u M| of the
    set M of the k largest. All classes at once and no host sync: ignored pixels get error 0, so
    they sort last and add nothing; absent classes are weighted 0."""
    c = logits.shape[1]
    probs = logits.float().softmax(1).permute(1, 0, 2, 3).reshape(c, -1)        # C, pixels
    lab = labels.reshape(-1)
    keep = (lab != ignore).float()
    fg = (lab[None, :] == torch.arange(c, device=lab.device)[:, None]).float()  # C, pixels
    err = (fg - probs).abs() * keep
    err_sorted, order = torch.sort(err, dim=1, descending=True)
    fg_sorted = torch.gather(fg, 1, order)
    gts = fg_sorted.sum(1, keepdim=True)
    inter = gts - fg_sorted.cumsum(1)                 # foreground not yet in M
    union = gts + (1 - fg_sorted).cumsum(1)           # |fg u M| (ignored pixels come after e = 0)
    jac = 1 - inter / union.clamp(min=1)
    grad = torch.cat([jac[:, :1], jac[:, 1:] - jac[:, :-1]], 1)
    per_class = (err_sorted * grad).sum(1)
    present = (gts[:, 0] > 0).float()
    return (per_class * present).sum() / present.sum().clamp(min=1)


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


def augment(x, y, crop_h, crop_w, gen, dev, full=True, exposure=None, gamma=None, shading=None,
            scale=DEFAULT_SCALE, rare=None):
    """A batch for training: x uint8 N,3,H,W, y N,H,W -> float N,3,crop_h,crop_w in [0, 1] and
    labels N,crop_h,crop_w, on x's device (the training loop runs it on the CPU in a thread while
    the GPU trains). basic: scale so the crop fits up to 1.35x, flip, crop. full: scale (below)
    (void around an image smaller than the crop), flip, rotation, photometric jitter, blur or
    noise, then JPEG re-compression (see the module's text). Scale, rotation, flip and crop are
    one resampling per image (one grid_sample for the batch), so the work is the crop's size
    whatever the scale. Draws come from gen only, in a fixed order. exposure (lo, hi), full only:
    each image's intensities also multiplied by a factor drawn log-uniformly from [lo, hi] before
    the clamp (darker scenes such as CamVid's dusk sequence 0001TP, whose mean luma is 58 against
    99-138 for the others); None draws nothing, so the default batches are unchanged. gamma (lo,
    hi), full only: before that, intensities raised to a power drawn log-uniformly from [lo, hi]
    (above 1 darkens the mid-tones and keeps the highlights: the dusk frames' sky is 3-5x their
    median, daylight's 2-3x); None draws nothing. shading AMP, full only: after those, shade()
    (a smooth random illumination field on half the images); None draws nothing. (dev: unused,
    kept for callers.) scale (lo, hi), full only: the range of the random scale, drawn
    log-uniformly (default 0.5-2.0). rare (P, class weights), full only: crops placed by
    rare_anchors() about a pixel of a rarer class; None draws nothing."""
    n = x.shape[0]
    u = functools.partial(uniform, gen)
    anchors = rare_anchors(y, *rare, gen) if full and rare is not None else None
    grid = sampling_grid(affine_maps(x.shape, crop_h, crop_w, gen, full, scale, anchors),
                         crop_h, crop_w).to(x.device)
    # Outside the image: its mean colour and void labels. Resampling is linear, so the image less
    # its mean, resampled with zeros outside, plus the mean, is that; in 0-255 until the end.
    xf = x.float()
    mean = xf.mean((2, 3), keepdim=True)
    xb = F.grid_sample(xf.sub_(mean), grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    yb = F.grid_sample(y[:, None].float() + 1, grid, mode="nearest", padding_mode="zeros",
                       align_corners=False)[:, 0].round().long() - 1
    yb[yb < 0] = VOID
    if not full:
        return xb.add_(mean).div_(255), yb
    out = torch.empty_like(xb)
    for i in range(n):
        # Brightness, contrast and colour as one multiply-add a channel on the resampled pixels
        # v = (xb + mean) / 255: ((v - level) * contrast + level + brightness) * gain [* exposure],
        # level the image's mean.
        level = (xb[i].mean() + mean[i].mean()).item() / 255
        gain = torch.tensor([u(0.9, 1.1) for _ in range(3)])
        contrast, bright = u(0.7, 1.3), u(-0.12, 0.12)
        g = math.exp(u(math.log(gamma[0]), math.log(gamma[1]))) if gamma is not None else None
        e = math.exp(u(math.log(exposure[0]), math.log(exposure[1]))) if exposure is not None else 1.0
        k = gain * (e if g is None else 1.0)  # the exposure factor folded in where no gamma follows
        offset = (mean[i, :, 0, 0] / 255 * contrast + (1 - contrast) * level + bright) * k
        xi = torch.addcmul(offset.view(3, 1, 1), xb[i], (k * contrast / 255).view(3, 1, 1))[None]
        if g is not None:
            xi = xi.clamp_(0, 1).pow_(g).mul_(e)
        if shading is not None:
            xi = shade(xi, gen, shading)
        out[i] = degrade(xi, gen)[0]
    return out, yb


def uniform(gen, lo, hi):
    """One draw from gen, uniform in [lo, hi)."""
    return lo + (hi - lo) * torch.rand(1, generator=gen).item()


def sampling_grid(maps, crop_h, crop_w):
    """Each output pixel's place in the source image (N,crop_h,crop_w,2, grid_sample's order x, y)
    from one affine map an image (N,2,3, affine_maps()): coordinate j = (pc * m[j,0] + pr * m[j,1])
    + m[j,2] at the pixel centres (pc, pr). One coordinate at a time, in rows of crop_w: a sixth of
    the time a broadcast over the interleaved pair took (14 against 2.4 ms for 8 crops of 288x384
    on one core), the same floats bit for bit (the same operations in the same order)."""
    n = maps.shape[0]
    pc = (torch.arange(crop_w, dtype=torch.float32) + 0.5).view(1, 1, crop_w)
    pr = (torch.arange(crop_h, dtype=torch.float32) + 0.5).view(1, crop_h, 1)
    grid = torch.empty(n, crop_h, crop_w, 2)
    for j in range(2):
        m = maps[:, j].float().view(n, 3, 1, 1)
        grid[..., j] = (pc * m[:, 0] + pr * m[:, 1]).add_(m[:, 2])
    return grid


def rare_anchors(y, p, weights, gen):
    """--rare's draws for a batch's labels y (N,H,W), from gen in a fixed order: for each image, with
    probability p, a class among those it shows (16 pixels or more) drawn in proportion to weights
    (a weight a class: the training set's median-frequency weights, so the thin and rare classes
    come most often), then one of that class's pixels, uniformly: (row, col); else None."""
    anchors = []
    for i in range(y.shape[0]):
        if uniform(gen, 0, 1) >= p:
            anchors.append(None)
            continue
        counts = torch.bincount(y[i].flatten().long(), minlength=len(weights) + 1)[:len(weights)]
        w = torch.where(counts >= 16, weights, torch.zeros_like(weights))
        if w.sum() <= 0:
            anchors.append(None)
            continue
        c = int(torch.multinomial(w.double(), 1, generator=gen))
        k = int(torch.randint(0, int(counts[c]), (1,), generator=gen))
        where = torch.nonzero(y[i].flatten() == c)[k, 0].item()
        anchors.append(divmod(where, y.shape[2]))
    return anchors


def affine_maps(shape, crop_h, crop_w, gen, full, scale=DEFAULT_SCALE, anchors=None):
    """augment()'s geometry, drawn from gen in a fixed order: for each of the batch's images (shape
    N,C,H,W) the map (2,3) from an output pixel centre (col, row, 1) to grid_sample's [-1, 1]
    source coordinates (x, y) (align_corners=False): scaled, rotated, flipped and cropped.
    anchors (augment() gives them with full only): None, or a (row, col) or None an image; where
    given, the crop is placed so that the source pixel (row, col) lands at a place drawn uniformly
    from the crop's middle half (scale, rotation and flip as drawn), the crop then moved as little
    as keeps it on the scaled image (or, where that image is smaller than the crop, the image
    inside the crop)."""
    n, _, h, w = shape
    u = functools.partial(uniform, gen)
    maps = []
    for i in range(n):
        if full:
            s = math.exp(u(math.log(scale[0]), math.log(scale[1])))
        else:
            s = u(max(crop_h / h, crop_w / w), 1.35)
        nh, nw = max(1, round(h * s)), max(1, round(w * s))
        if not full:
            nh, nw = max(crop_h, nh), max(crop_w, nw)
        flip = u(0, 1) < 0.5
        a = math.radians(u(-5, 5)) if full and u(0, 1) < 0.5 else 0.0
        ca, sa = math.cos(a), math.sin(a)
        anchor = anchors[i] if anchors is not None else None
        if anchor is None:
            # The crop's top-left corner in the scaled image: negative where the scaled image is
            # smaller than the crop (it then lies at a random place on void).
            oy = -int(u(0, crop_h - nh + 1 - 1e-9)) if nh < crop_h else \
                int(torch.randint(0, nh - crop_h + 1, (1,), generator=gen))
            ox = -int(u(0, crop_w - nw + 1 - 1e-9)) if nw < crop_w else \
                int(torch.randint(0, nw - crop_w + 1, (1,), generator=gen))
        else:
            # The anchor's centre in the scaled image (mirrored back if flipped), taken through the
            # inverse rotation to the crop's frame, less its drawn place in the crop.
            tx = (anchor[1] + 0.5) * nw / w
            ty = (anchor[0] + 0.5) * nh / h
            if flip:
                tx = nw - tx
            px, py = u(0.25, 0.75) * crop_w, u(0.25, 0.75) * crop_h
            ex, ey = tx - nw / 2, ty - nh / 2
            ox = round(ca * ex + sa * ey + nw / 2 - px)
            oy = round(-sa * ex + ca * ey + nh / 2 - py)
            ox = min(max(ox, min(0, nw - crop_w)), max(0, nw - crop_w))
            oy = min(max(oy, min(0, nh - crop_h)), max(0, nh - crop_h))
        # output pixel (pc, pr) -> scaled image (pc + ox, pr + oy) -> rotated by a about the
        # scaled image's centre -> mirrored if flip -> grid_sample's [-1, 1] (align_corners=False)
        dx, dy = ox - nw / 2, oy - nh / 2
        cx = [ca, -sa, ca * dx - sa * dy + nw / 2]
        if flip:
            cx = [-cx[0], -cx[1], nw - cx[2]]
        cy = [sa, ca, sa * dx + ca * dy + nh / 2]
        maps.append([[2 / nw * v for v in cx[:2]] + [2 / nw * cx[2] - 1],
                     [2 / nh * v for v in cy[:2]] + [2 / nh * cy[2] - 1]])
    return torch.tensor(maps)


def shade(xi, gen, amp):
    """augment()'s illumination field on one image (1,3,H,W): with probability 0.5 the image is
    multiplied by exp(a * f), a drawn uniformly from [0, amp] and f a smooth field of zero mean and
    unit standard deviation, the same for the three channels: Gaussian noise on grids of about a
    32nd, 16th and 8th of the image's size, resampled bilinearly to it and summed with weights 1,
    1/2 and 1/4. Uneven light and shadow, and texture where the frame is flat (CamVid's daylight
    sky is saturated white, its dusk sky textured cloud: weights/MODELS.md). Draws from gen."""
    if uniform(gen, 0, 1) >= 0.5:
        return xi
    a = uniform(gen, 0, amp)
    _, _, h, w = xi.shape
    f = torch.zeros(1, 1, h, w)
    for weight, div in ((1.0, 32), (0.5, 16), (0.25, 8)):
        coarse = torch.randn(1, 1, max(2, h // div), max(2, w // div), generator=gen)
        f += weight * F.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)
    f = (f - f.mean()) / f.std().clamp_min(1e-6)
    return xi * torch.exp(a * f).to(xi.device)


def degrade(xi, gen):
    """augment()'s last steps on one image (1,3,H,W): mild blur (15%) or sensor noise (15%), the
    clamp to [0, 1], then JPEG re-compression (50%, quality 50-95), drawn from gen."""
    r = uniform(gen, 0, 1)
    if r < 0.15:  # mild blur: a 3x3 binomial filter
        k = torch.tensor([1.0, 2.0, 1.0], device=xi.device)
        k = (k[:, None] * k[None, :] / 16).expand(3, 1, 3, 3)
        xi = F.conv2d(F.pad(xi, (1, 1, 1, 1), mode="replicate"), k, groups=3)
    elif r < 0.3:  # sensor noise
        noise = torch.randn(xi.shape, generator=gen).to(xi.device)
        xi = xi + noise * uniform(gen, 0.005, 0.02)
    xi = xi.clamp(0, 1)
    if uniform(gen, 0, 1) < 0.5:
        xi = jpeg_recompress(xi, int(uniform(gen, 50, 96)))
    return xi


def class_mix(xb, yb, p, gen, classes=None):
    """ClassMix (Olsson et al., WACV 2021) on an augmented batch: with probability p, image i gets
    the pixels of half the classes present in the next image of the batch (i+1 mod N, as it was
    before mixing), image and labels alike, pasted onto it. Objects then appear on backgrounds
    they were never filmed on, so the net cannot lean on a sequence's scenery to label them. With
    classes (a list of class ids; --paste) the pixels pasted are those of these classes instead,
    wherever the next image has them: copy-paste of the thin classes (Ghiasi et al., CVPR 2021,
    without their own scale jitter: each image of the batch was scaled and cropped by its own
    draws). Draws from gen alone, in a fixed order; p None or 0 draws nothing (the batch is
    returned as it is)."""
    if not p:
        return xb, yb
    n = xb.shape[0]
    xs, ys = xb.clone(), yb.clone()
    fixed = torch.tensor(classes, dtype=yb.dtype) if classes is not None else None
    for i in range(n):
        if n < 2 or torch.rand(1, generator=gen).item() >= p:
            continue
        j = (i + 1) % n
        if fixed is not None:
            chosen = fixed
        else:
            present = torch.unique(yb[j])
            present = present[present != VOID]
            if present.numel() == 0:
                continue
            order = torch.randperm(present.numel(), generator=gen)
            chosen = present[order[:(present.numel() + 1) // 2]]
        m = torch.isin(yb[j], chosen)
        xs[i][:, m] = xb[j][:, m]
        ys[i][m] = yb[j][m]
    return xs, ys


def median_frequency_weights(y, power):
    """SegNet's median-frequency class weights of labels y (median class frequency / the class's
    frequency, void left out) raised to power; a class y lacks weighs 0. float64, one a class."""
    counts = torch.bincount(y[y != VOID].flatten().long(), minlength=VOID).double()
    freq = counts / counts.sum()
    present = freq > 0
    return torch.where(present, (freq[present].median() / freq.clamp(min=1e-12)) ** power,
                       torch.zeros_like(freq))


def batch_seed(seed, *key):
    """A seed for one batch's draws, from the run's seed and the batch's place (e.g. "batch", epoch,
    step): the batches are the same whichever process makes them and in whatever order."""
    digest = hashlib.blake2b(repr((seed,) + key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # torch's manual_seed takes up to 2^63 - 1


class Batches(torch.utils.data.Dataset):
    """The run's training batches, item k = epoch k // steps_per_epoch, step k % steps_per_epoch:
    that epoch's permutation of the images, then augment() and class_mix() on the step's images,
    every draw from a generator seeded by batch_seed(seed, ...) of that epoch and step alone, so
    a batch does not depend on which process made it, when, or what was made before it."""

    def __init__(self, x, y, a, crop_h, crop_w, steps_per_epoch):
        self.x, self.y, self.crop = x, y, (crop_h, crop_w)
        self.seed, self.batch, self.epochs, self.steps = a.seed, a.batch, a.epochs, steps_per_epoch
        self.aug = dict(full=a.aug == "full", exposure=a.exposure, gamma=a.gamma, shading=a.shading,
                        scale=a.scale)
        if getattr(a, "rare", None) is not None:
            self.aug["rare"] = (a.rare, median_frequency_weights(y, 1.0))
        self.mix = a.mix
        self.paste = getattr(a, "paste", None)
        self.paste_ids = getattr(a, "paste_ids", None)
        self.perm_epoch, self.perm = None, None

    def __len__(self):
        return self.epochs * self.steps

    def __getitem__(self, k):
        epoch, step = divmod(k, self.steps)
        if epoch != self.perm_epoch:  # one permutation an epoch, kept for its steps
            order = torch.Generator().manual_seed(batch_seed(self.seed, "order", epoch))
            self.perm, self.perm_epoch = torch.randperm(self.x.shape[0], generator=order), epoch
        idx = self.perm[step * self.batch:(step + 1) * self.batch]
        gen = torch.Generator().manual_seed(batch_seed(self.seed, "batch", epoch, step))
        xb, yb = augment(self.x[idx], self.y[idx], *self.crop, gen, "cpu", **self.aug)
        xb, yb = class_mix(xb, yb, self.mix, gen)
        return class_mix(xb, yb, self.paste, gen, self.paste_ids)


def set_batch_threads(threads, _worker_id=None):
    """The torch and OpenCV threads of a process that makes batches (a DataLoader worker's init)."""
    torch.set_num_threads(threads)
    import cv2
    cv2.setNumThreads(threads)


class BatchMaker:
    """Batches (above) in order, made on the CPU ahead of the GPU: by `workers` processes (a
    DataLoader; each with `threads` torch and OpenCV threads), or with workers 0 by a thread of
    this process (a queue of a few). One process's thread made about 230 CamVid images a second on
    the H100 machine's 16 cores, so the small reference net trained no faster than the multiscale
    one (weights/MODELS.md). The batches come out the same either way, bit for bit, for the same
    threads (a float sum split over more threads rounds differently). They go to the device from
    pinned memory without a host sync."""

    def __init__(self, batches, workers, threads, dev):
        self.dev = dev
        self.error = None
        self.thread = self.loader = None
        if workers > 0:
            self.loader = iter(torch.utils.data.DataLoader(
                batches, batch_size=None, shuffle=False, num_workers=workers, pin_memory=dev.type == "cuda",
                prefetch_factor=4, worker_init_fn=functools.partial(set_batch_threads, threads)))
            return
        self.q = queue.Queue(maxsize=4)
        self.halt = threading.Event()

        def run():
            try:
                for k in range(len(batches)):
                    xb, yb = batches[k]
                    if dev.type == "cuda":
                        xb, yb = xb.pin_memory(), yb.pin_memory()
                    while not self.halt.is_set():
                        try:
                            self.q.put((xb, yb), timeout=0.5)
                            break
                        except queue.Full:
                            pass
                    if self.halt.is_set():
                        return
            except BaseException as e:  # surfaced by next()
                self.error = e
                self.q.put(None)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def next(self):
        if self.loader is not None:
            try:
                xb, yb = next(self.loader)
            except Exception as e:  # a worker's error, re-raised here with its traceback's text
                raise SystemExit(f"train: making a batch failed: {e}")
        else:
            item = self.q.get()
            if item is None:
                raise SystemExit(f"train: making a batch failed: {self.error!r}")
            xb, yb = item
        return xb.to(self.dev, non_blocking=True), yb.to(self.dev, non_blocking=True)

    def stop(self):
        if self.loader is not None:
            # the workers end with the iterator (its finaliser); torch's own call for it, where it
            # has one, ends them now, so that none outlive a run stopped early
            getattr(self.loader, "_shutdown_workers", lambda: None)()
            self.loader = None
        else:
            self.halt.set()
            self.thread.join()


def jpeg_recompress(xi, quality):
    """One image (1,3,H,W float in [0, 1]) through a JPEG of this quality with 4:2:0 chroma."""
    import cv2
    planes = (xi[0].clamp(0, 1) * 255 + 0.5).byte().cpu().numpy()  # 3,H,W: R, G, B
    params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    if hasattr(cv2, "IMWRITE_JPEG_SAMPLING_FACTOR"):  # OpenCV >= 4.5.5; libjpeg's default is 4:2:0
        params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
    # OpenCV's own merge and split interleave and de-interleave the planes as BGR (faster than
    # numpy's strided copies; the bytes are the same)
    ok, buf = cv2.imencode(".jpg", cv2.merge([planes[2], planes[1], planes[0]]), params)
    if not ok:
        raise SystemExit("train: JPEG re-compression failed")
    b, g, r = cv2.split(cv2.imdecode(buf, cv2.IMREAD_COLOR))
    return torch.from_numpy(np.stack([r, g, b])).to(xi.device)[None].float() / 255


def init_weights(net, path, classes):
    """Copies a model file's parameters into net (tools/train.py --init), after checking that the
    file holds the same network (graph text) for the same classes; errors name the file."""
    src = st.open_model(path, "train: --init", classes)[0]
    if src.text.strip() != net.text.strip():
        raise SystemExit(f"train: --init {path}: its graph is not this --network's "
                         "(the layers or their sizes differ)")
    with torch.no_grad():
        mine = dict(net.param_items())
        for key, t in src.param_items():
            mine[key].copy_(t.to(mine[key].device))


def mean_probabilities(fulls, mirror):
    """The mean of softmax(scores) over a list of score batches (N x C x H x W, one a model); with
    mirror the second half of each batch holds the first half's images mirrored, whose
    probabilities are flipped back and averaged in (the result has half the batch). --teacher's
    target, and tools/mirror_gain.py's mirrored and ensemble labellings."""
    p = sum(f.float().softmax(1) for f in fulls) / len(fulls)
    if mirror:
        n = p.shape[0] // 2
        p = (p[:n] + p[n:].flip(3)) / 2
    return p


class Teachers(torch.nn.Module):
    """--teacher's models: the mean of their class probabilities at the input resolution (the
    'full' node), over the image and, with mirror, its horizontal mirror (flipped back)."""

    def __init__(self, nets, mirror):
        super().__init__()
        self.nets = torch.nn.ModuleList(nets)
        self.mirror = mirror

    def forward(self, x):
        xs = torch.cat([x, x.flip(3)]) if self.mirror else x
        # On a GPU the teachers' convolutions run in bfloat16 (autocast): their probabilities are
        # targets, where a relative error of 1e-2 is nothing, and the teachers cost less of a step.
        with torch.autocast("cuda", dtype=torch.bfloat16) if x.is_cuda else contextlib.nullcontext():
            fulls = [net(xs, ["full"])["full"] for net in self.nets]
        return mean_probabilities(fulls, self.mirror)


def teacher_paths(spec, holdout, final):
    """--teacher's comma-separated files, `{seq}` replaced by the held-out sequence ('final' with
    --final, 'train' with neither)."""
    tag = holdout or ("final" if final else "train")
    return [p.strip().replace("{seq}", tag) for p in spec.split(",") if p.strip()]


def load_teachers(paths, classes, dev, mirror):
    """The teachers in evaluation mode (no dropout; the step runs them without gradients); errors
    name the file."""
    nets = [st.open_model(path, "train: --teacher", classes)[0] for path in paths]
    return Teachers(nets, mirror).to(dev).eval()


def he_init_(t, gen):
    """He initialisation of a convolution's weight t in place (normal, variance 2 / fan-in), drawn
    from gen: the net's weights and --aux's heads."""
    t.copy_(torch.randn(t.shape, generator=gen) * math.sqrt(2.0 / t[0].numel()))


def weighted_ce(scores, labels, weights):
    """The recipe's loss: the class-weighted cross-entropy of scores (N x C x H x W) against labels,
    void ignored, in fp32 (the net's scores and --aux's heads' alike)."""
    return F.cross_entropy(scores.float(), labels, weight=weights, ignore_index=VOID)


def soft_target_loss(full, labels, weights, soft, alpha):
    """Class-weighted cross-entropy of the scores `full` (N x C x H x W) against (1 - alpha) x the
    one-hot labels + alpha x the probabilities `soft` (N x C x H x W), over the labelled pixels
    (void ignored), each weighted by its label's class weight and normalised by their sum, as
    F.cross_entropy's weighted mean: alpha 0 is F.cross_entropy(full, labels, weight=weights,
    ignore_index=VOID)."""
    logp = full.float().log_softmax(1)
    valid = labels != VOID
    y = torch.where(valid, labels, torch.zeros_like(labels))
    w = weights[y] * valid
    hard = logp.gather(1, y[:, None])[:, 0]
    per_pixel = (1 - alpha) * hard + alpha * (soft * logp).sum(1)
    return -(w * per_pixel).sum() / w.sum().clamp_min(1e-12)


def hard_pixel_loss(full, labels, weights, fraction):
    """Hard-pixel mining (OHEM for segmentation): the class-weighted cross-entropy of the scores
    `full` (N x C x H x W) over the fraction of the labelled pixels (void ignored) whose
    cross-entropy is largest, each weighted by its label's class weight and normalised by the sum
    of the kept pixels' weights, as F.cross_entropy's weighted mean; fraction 1 keeps every
    labelled pixel and is that mean. The easy pixels (most of the road and sky once learnt) then
    give no gradient. An option outside the recipe: 0.3 lost on every figure across sequences
    (weights/MODELS.md)."""
    ce = F.cross_entropy(full.float(), labels, reduction="none", ignore_index=VOID).flatten()
    flat = labels.flatten()
    valid = flat != VOID
    y = torch.where(valid, flat, torch.zeros_like(flat))
    k = (valid.sum() * fraction).ceil().long().clamp_min(1)
    # The k-th largest cross-entropy among the labelled pixels, without a host sync: sort the
    # labelled pixels' losses (void ones as -1) and read the threshold on the device.
    ranked = torch.where(valid, ce, torch.full_like(ce, -1.0)).sort(descending=True).values
    threshold = ranked.gather(0, (k - 1).view(1))
    kept = valid & (ce >= threshold)
    w = weights[y] * kept
    return (w * ce).sum() / w.sum().clamp_min(1e-12)


class AuxHeads(torch.nn.Module):
    """--aux: deep supervision (Lee et al., AISTATS 2015; PSPNet's auxiliary loss, Zhao et al., CVPR
    2017): a 1x1 convolution to the class scores on each feature map that the classifier's concat
    joins (the multiscale net's three scales, 256 channels each), so that every scale's features
    must separate the classes by themselves. Trained beside the net and dropped at export: the
    model file and the engine are unchanged."""

    def __init__(self, net, classes):
        super().__init__()
        concats = [ins for _, typ, ins, _ in net.nodes if typ == "concat"]
        if not concats:
            raise ValueError("deep supervision needs a net whose classifier reads a concat of feature "
                             "maps (the multiscale net; the reference net's reads one)")
        self.inputs = concats[-1]
        self.heads = torch.nn.ModuleList(torch.nn.Conv2d(net.channels[i], classes, 1) for i in self.inputs)
        gen = torch.Generator().manual_seed(12345)  # He init as the net's, from a generator of its own
        with torch.no_grad():
            for h in self.heads:
                he_init_(h.weight, gen)
                h.bias.zero_()

    def forward(self, vals, size, dropout=0.0):
        """Each head's scores on its feature map (vals: the net's outputs by name), resampled
        bilinearly to size (H, W), the input's; dropout on the heads' inputs as on the classifier's."""
        return [F.interpolate(h(F.dropout(vals[i], dropout, training=self.training) if dropout else vals[i]),
                              size=size, mode="bilinear", align_corners=False)
                for h, i in zip(self.heads, self.inputs)]


class TrainStep(torch.nn.Module):
    """One training forward pass: the net's full-resolution scores and, with aux heads, theirs."""

    def __init__(self, net, aux=None):
        super().__init__()
        self.net, self.aux = net, aux

    def forward(self, x):
        want = ["full"] + (list(self.aux.inputs) if self.aux is not None else [])
        vals = self.net(x, want)
        aux = self.aux(vals, x.shape[2:], self.net.dropout) if self.aux is not None else []
        return vals["full"], aux


def sequence_of(name):
    """CamVid file names start with their sequence: 0016E5_07959 -> 0016E5."""
    return name.split("_")[0]


# The options that make the recipe: those given other than their defaults name the exported model
# (departures()), and main()'s SUMMARY line gives every one of them (tests/tools/train_smoke_test.py).
RECIPE_OPTIONS = ("epochs", "batch", "crop", "optimizer", "lr", "aug", "exposure", "scale", "gamma", "shading",
                  "mix", "paste", "paste_classes", "rare", "ema", "dropout", "batchnorm", "ohem", "lovasz", "aux",
                  "teacher", "distill", "init", "weight_decay", "balance")


def departures(a, ap):
    """The recipe options of the parsed arguments `a` given other than their defaults in `ap`, as a
    command line ('' for the recipe); model files by their names alone."""
    out = []
    for dest in RECIPE_OPTIONS:
        v, flag = getattr(a, dest), "--" + dest.replace("_", "-")
        if v is None or v == ap.get_default(dest):
            continue
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + flag[2:])
        elif dest in ("teacher", "init"):
            out.append(f"{flag} {','.join(os.path.basename(f) for f in v.split(','))}")
        else:
            out.append(f"{flag} {v:g}" if isinstance(v, float) else f"{flag} {v}")
    return " ".join(out)


def parse_args(argv=None):
    """train.py's arguments (argv, default the command line's), checked, with the recipe's defaults
    filled in: the ranges as (lo, hi) or None, --shading an amplitude or None, --detect parsed
    into .detect_settings. Errors exit naming the option, as argparse does."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--network", default="multiscale", choices=["reference", "multiscale"])
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=480)
    ap.add_argument("--minutes", type=float, default=120.0, help="stop training after this long")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--crop", default=DEFAULT_CROP, help=f"HxW (default {DEFAULT_CROP}, the recipe since 2026-11-29; 288x384 before)")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"],
                    help="adamw (the shipped recipe's) or sgd: SGD with Nesterov momentum 0.9 (cycled "
                         "0.85-0.95 by the one-cycle schedule, as AdamW's first beta is) and L2 weight decay, "
                         "as SegNet trained on CamVid")
    ap.add_argument("--lr", type=float, default=None,
                    help="the peak learning rate in the one-cycle schedule (default 2e-3 with adamw, the "
                         "shipped recipe's, whose decay step is lr x --weight-decay; 0.05 with sgd)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None, help="images per split (smoke tests)")
    ap.add_argument("--log", default=None, help="JSON lines log file")
    ap.add_argument("--aug", default="full", choices=["full", "basic"])
    ap.add_argument("--exposure", default=None, metavar="LO,HI",
                    help="with --aug full: also scale each image's intensities by a factor in [LO, HI] "
                         "(log-uniform); default 0.3,1.2 with --aug full (the shipped recipe), "
                         "'none' for no such factor (0.2,1.2 was level over two seeds across "
                         "sequences, weights/MODELS.md)")
    ap.add_argument("--scale", default=None, metavar="LO,HI",
                    help="with --aug full: the range of the random scale, drawn log-uniformly "
                         f"(default {DEFAULT_SCALE[0]:g},{DEFAULT_SCALE[1]:g}, the shipped recipe; 0.75,1.5 lost "
                         "across sequences, weights/MODELS.md)")
    ap.add_argument("--gamma", default=None, metavar="LO,HI",
                    help="with --aug full: also raise each image's intensities to a power in [LO, HI] "
                         "(log-uniform) before --exposure, e.g. 1,2 (weights/MODELS.md)")
    ap.add_argument("--shading", default=None, metavar="AMP",
                    help="with --aug full: also multiply half the images by a smooth random illumination "
                         "field exp(a * f), a uniform in [0, AMP], f of unit standard deviation; default "
                         f"{DEFAULT_SHADING:g} with --aug full (the shipped recipe), 'none' or 0 for no field "
                         "(uneven light, texture on flat regions; weights/MODELS.md)")
    ap.add_argument("--mix", type=float, default=None, metavar="P",
                    help="ClassMix: with probability P an image also gets half the classes of the next "
                         "image of its batch pasted onto it, pixels and labels (weights/MODELS.md)")
    ap.add_argument("--paste", type=float, default=None, metavar="P",
                    help="copy-paste: with probability P an image also gets the next image's pixels of "
                         "the --paste-classes pasted onto it, pixels and labels (after --mix); none by "
                         "default (weights/MODELS.md)")
    ap.add_argument("--paste-classes", default=None, metavar="A,B",
                    help="the classes --paste pastes, by name (default the thin ones: "
                         f"{','.join(THIN_CLASSES)})")
    ap.add_argument("--rare", type=float, default=None, metavar="P",
                    help="rare-class crops: with probability P an image's crop is placed about one of its "
                         "pixels of a class drawn in proportion to the classes' median-frequency weights "
                         "(Pole, SignSymbol, Pedestrian, Bicyclist and Fence most often), that pixel in the "
                         "crop's middle half; none by default, the recipe (0.5 and 1 were level across "
                         "sequences, weights/MODELS.md)")
    ap.add_argument("--ema", type=float, default=None, metavar="DECAY",
                    help="keep an exponential moving average of the weights (e.g. 0.999); it is what is "
                         "evaluated, selected and exported (the raw weights' figures are logged beside it)")
    ap.add_argument("--dropout", type=float, default=DEFAULT_DROPOUT, metavar="P",
                    help="dropout on the pixel-wise classifier's inputs (every 1x1 convolution's: the "
                         "features and the hidden layer) with probability P while training; evaluation "
                         f"and the exported model are unaffected (default {DEFAULT_DROPOUT:g}, the shipped "
                         "recipe; 0 for none)")
    ap.add_argument("--batchnorm", action=argparse.BooleanOptionalAction, default=None,
                    help="train with batch normalisation after every convolution that feeds a ReLU (one a "
                         "parameter group: the multiscale extractor's three scales share the full-resolution "
                         "pass's batch statistics), folded into the weights and biases at export, so the "
                         "model file and the engine are unchanged (default: on, the shipped recipe since "
                         "2026-11-28, weights/MODELS.md; off with --init, whose file holds no batch statistics)")
    ap.add_argument("--ohem", type=float, default=1.0, metavar="F",
                    help="hard-pixel mining: the loss over the hardest fraction F of each batch's labelled "
                         "pixels (by their cross-entropy), class-weighted as the plain loss (default 1: "
                         "every pixel, the shipped recipe; 0.3 lost across sequences, weights/MODELS.md)")
    ap.add_argument("--lovasz", type=float, default=0.0, metavar="W",
                    help="add W times the Lovasz-softmax loss (a surrogate of 1 - mean IoU, Berman et al. "
                         "2018) to the cross-entropy (default 0: none; 0.5 lost across sequences, weights/MODELS.md)")
    ap.add_argument("--aux", type=float, default=0.0, metavar="W",
                    help="deep supervision: add W times the mean cross-entropy (class-weighted) of a 1x1 "
                         "classifier on each scale's features (the multiscale net's concat inputs), trained "
                         "beside the net and dropped at export (default 0: none; 0.4 was level across "
                         "sequences, weights/MODELS.md)")
    ap.add_argument("--teacher", default=None, metavar="A.h5,B.h5",
                    help="distil from these trained models (comma-separated; `{seq}` in a path becomes the "
                         "--holdout sequence, 'final' with --final, 'train' with neither): the loss's "
                         "target mixes their mean class probabilities into the labels (--distill); outside "
                         "the recipe (weights/MODELS.md)")
    ap.add_argument("--distill", type=float, default=0.5, metavar="ALPHA",
                    help="with --teacher: the teachers' share of the target, (1 - ALPHA) x one-hot label "
                         "+ ALPHA x their probabilities (default 0.5)")
    ap.add_argument("--teacher-mirror", action="store_true",
                    help="with --teacher: average the teachers over each image and its mirror")
    ap.add_argument("--init", default=None, metavar="MODEL.h5",
                    help="start from this model file's weights and standardisation statistics (fine-tuning; "
                         "its graph must be --network's), not from He initialisation; use a lower --lr")
    ap.add_argument("--holdout", default=None,
                    help="pool train and val, select on this sequence (e.g. 0001TP), train on the rest")
    ap.add_argument("--final", action="store_true",
                    help="train on train + val for --epochs, export the last epoch (no selection)")
    ap.add_argument("--last", action="store_true",
                    help="export the last epoch instead of the best on the selection set (val then "
                         "takes no part: e.g. a model whose val figures are honest)")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="processes making the training batches (default: the CPU cores this process may "
                         "use, less one for the training loop, at most 32; 0: a thread of this process); "
                         "the batches are the same for any N")
    ap.add_argument("--threads", type=int, default=None, metavar="N",
                    help="torch and OpenCV threads of each batch-making process (default 1), or with "
                         "--workers 0 of this process (default: torch's own, a thread per core)")
    ap.add_argument("--compile", default="auto", choices=["auto", "on", "off"],
                    help="run the training steps through torch.compile (PyTorch 2): the same fp32 arithmetic "
                         "with fused kernels, 2.4x the multiscale net's step rate on an H100 (docs/BENCHMARKS.md); "
                         "auto: on a GPU where torch has it")
    ap.add_argument("--weight-decay", type=float, default=None, metavar="WD",
                    help="AdamW's decoupled weight decay on every trainable tensor (default 0.05, the "
                         "shipped recipe since 2026-11-27, chosen across sequences over 1e-4; "
                         "weights/MODELS.md has the figures), or with --optimizer sgd the L2 penalty's "
                         "factor (default 5e-4)")
    ap.add_argument("--balance", type=float, default=0.5, metavar="POWER",
                    help="class weights (median frequency / frequency) ** POWER: 0.5 (both shipped "
                         "models' recipe) their square roots, 1 SegNet's median-frequency "
                         "balancing (the recipe before 2026-11-27), 0 none; 0.25 and 0 cost the thin "
                         "classes more than they gain (weights/MODELS.md)")
    ap.add_argument("--detect", default=CAMVID_DETECT,
                    help="detection head settings written into the model, 'CLASS: key=value ...; ...' "
                         "('' for none; default: those chosen for CamVid, weights/MODELS.md)")
    a = ap.parse_args(argv)
    # the exported model's name carries these, so that a file trained off the recipe says so
    a.departures = departures(a, ap)
    try:
        a.detect_settings = st.parse_detect(a.detect)
        st.detect_text(a.detect_settings, CLASSES)
    except ValueError as e:
        ap.error(f"--detect: {e}")
    if a.exposure is None and a.aug == "full":
        a.exposure = DEFAULT_EXPOSURE
    if a.scale is None and a.aug == "full":  # --aug basic draws its own scales
        a.scale = "%g,%g" % DEFAULT_SCALE
    # --aug full's ranges, LO,HI: what a valid pair is, and an example ('none': no such draw,
    # where the option allows it)
    ranges = (("exposure", "0.3,1.2", "0 < LO <= HI < 100", lambda lo, hi: 0 < lo <= hi < 100, True),
              ("gamma", "1,2", "0 < LO <= HI < 100", lambda lo, hi: 0 < lo <= hi < 100, True),
              ("scale", "0.5,2", "0.1 <= LO <= HI <= 10", lambda lo, hi: 0.1 <= lo <= hi <= 10, False))
    for name, example, valid, ok, can_be_none in ranges:
        text = getattr(a, name)
        if text is None or (can_be_none and text == "none"):
            setattr(a, name, None)
            continue
        try:
            lo, hi = (float(v) for v in text.split(","))
        except ValueError:
            ap.error(f"--{name} {text}: expected LO,HI, e.g. {example}")
        if not ok(lo, hi) or a.aug != "full":
            ap.error(f"--{name} {text}: needs {valid} and --aug full")
        setattr(a, name, (lo, hi))
    if not (math.isfinite(a.ohem) and 0 < a.ohem <= 1):
        ap.error(f"--ohem {a.ohem:g}: the fraction of pixels kept, 0 < F <= 1 (1: all)")
    if a.ohem < 1 and a.teacher:
        ap.error("--ohem with --teacher: not supported (the distillation loss takes every pixel)")
    if a.shading is None:  # the recipe's field with --aug full, none with --aug basic
        a.shading = str(DEFAULT_SHADING) if a.aug == "full" else "none"
    try:
        amp = 0.0 if a.shading == "none" else float(a.shading)
    except ValueError:
        ap.error(f"--shading {a.shading}: expected an amplitude such as 0.3, or none")
    if amp and not (0 < amp <= 2 and a.aug == "full"):  # (NaN fails here too)
        ap.error(f"--shading {a.shading}: needs 0 <= AMP <= 2 (0: none) and --aug full")
    a.shading = amp or None
    if not 0 <= a.dropout < 1:
        ap.error(f"--dropout {a.dropout:g}: a probability in [0, 1)")
    if a.rare is not None and not (0 <= a.rare <= 1 and a.aug == "full"):
        ap.error(f"--rare {a.rare:g}: a probability, 0-1, and --aug full")
    if a.rare == 0:
        a.rare = None
    if a.mix is not None and not 0 <= a.mix <= 1:
        ap.error(f"--mix {a.mix:g}: a probability, 0-1")
    if a.paste is not None and not 0 <= a.paste <= 1:
        ap.error(f"--paste {a.paste:g}: a probability, 0-1")
    if a.paste_classes is not None and not a.paste:
        ap.error("--paste-classes needs --paste P (the share of the images that get them)")
    names = [c.strip() for c in (a.paste_classes or ",".join(THIN_CLASSES)).split(",") if c.strip()]
    if not names or any(c not in CLASSES for c in names):
        ap.error(f"--paste-classes {a.paste_classes}: expected names from {', '.join(CLASSES)}")
    a.paste_ids = [CLASSES.index(c) for c in names]
    if not (math.isfinite(a.lovasz) and 0 <= a.lovasz <= 10):
        ap.error(f"--lovasz {a.lovasz:g}: a weight from 0 (none) to 10")
    if not (math.isfinite(a.aux) and 0 <= a.aux <= 10):
        ap.error(f"--aux {a.aux:g}: a weight from 0 (none) to 10")
    if a.aux and a.network != "multiscale":
        ap.error(f"--aux {a.aux:g}: deep supervision needs --network multiscale (the reference net's "
                 "classifier reads one feature map)")
    if a.ema is not None and not 0 < a.ema < 1:
        ap.error(f"--ema {a.ema:g}: a decay between 0 and 1 (exclusive), e.g. 0.999")
    if a.lr is None:
        a.lr = 0.05 if a.optimizer == "sgd" else 2e-3
    if not (math.isfinite(a.lr) and 0 < a.lr <= 10):
        ap.error(f"--lr {a.lr:g}: expected a rate above 0, e.g. 2e-3")
    if a.weight_decay is None:
        a.weight_decay = 5e-4 if a.optimizer == "sgd" else 0.05
    if not (math.isfinite(a.weight_decay) and 0 <= a.weight_decay < 1):
        ap.error(f"--weight-decay {a.weight_decay:g}: expected 0 <= WD < 1, e.g. 1e-4 or 0.05")
    if not (math.isfinite(a.balance) and 0 <= a.balance <= 2):
        ap.error(f"--balance {a.balance:g}: expected a power from 0 (no balancing) to 2; 1 is median frequency")
    if a.holdout and a.final:
        raise SystemExit("train: --holdout and --final exclude each other")
    if not (math.isfinite(a.distill) and 0 <= a.distill <= 1):
        ap.error(f"--distill {a.distill:g}: the teachers' share of the target, 0 to 1")
    if a.teacher_mirror and not a.teacher:
        ap.error("--teacher-mirror needs --teacher")
    if a.batchnorm and a.init:
        ap.error("--batchnorm with --init: a model file holds no batch statistics (they were folded into "
                 "its weights), so fine-tuning with batch normalisation would not start from the model")
    if a.batchnorm is None:  # the recipe's, except when fine-tuning a file (no statistics to start from)
        a.batchnorm = not a.init
    a.teacher = teacher_paths(a.teacher, a.holdout, a.final) if a.teacher else None
    if a.teacher == []:
        ap.error("--teacher: no file given")
    if a.workers is None:
        a.workers = min(32, max(1, len(os.sched_getaffinity(0)) - 1))
    if a.workers < 0:
        ap.error(f"--workers {a.workers}: 0 or more")
    if a.threads is not None and a.threads < 1:
        ap.error(f"--threads {a.threads}: at least 1")
    if a.workers > 0 and a.threads is None:
        a.threads = 1
    if a.compile == "on" and not hasattr(torch, "compile"):
        ap.error(f"--compile on: needs torch.compile (PyTorch 2); this is PyTorch {torch.__version__}")
    return a


def main():
    a = parse_args()
    if a.workers == 0 and a.threads is not None:
        # Several runs on one machine, each with a thread per core, oversubscribe it: OpenMP's
        # waiting threads spin, and on the 2-core machine two processes of two threads each made
        # 7.8 augmented images a second each instead of 96 with one thread each (weights/MODELS.md).
        set_batch_threads(a.threads)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    a.compile = a.compile == "on" or (a.compile == "auto" and dev.type == "cuda" and hasattr(torch, "compile"))
    torch.backends.cudnn.benchmark = True
    # TF32 tensor cores for training speed; the exported weights run in fp32 in the engine, and the
    # reported metrics come from the engine (tools/eval_labels), not from this process.
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    crop_h, crop_w = map(int, a.crop.split("x"))
    t_start = time.time()
    ntr, xtr, ytr = load_split(a.data, "train", a.limit)
    nva, xva, yva = load_split(a.data, "val", a.limit)
    selection = "val"
    if a.holdout or a.final:
        names = ntr + nva
        x_all, y_all = torch.cat([xtr, xva]), torch.cat([ytr, yva])
        held = torch.tensor([a.holdout is not None and sequence_of(n) == a.holdout for n in names])
        if a.holdout and not held.any():
            raise SystemExit(f"train: no image of sequence {a.holdout} "
                             f"(sequences: {sorted({sequence_of(n) for n in names})})")
        if held.all():
            raise SystemExit(f"train: every image is of sequence {a.holdout}: nothing left to train on")
        xtr, ytr = x_all[~held], y_all[~held]
        xva, yva = (x_all[held], y_all[held]) if a.holdout else (xva, yva)
        selection = f"sequence {a.holdout}" if a.holdout else "none (--final; val shown, not used)"
    if a.last and not a.final:
        selection += " shown, not used (--last)"
    print(f"train {tuple(xtr.shape)}  selection set {tuple(xva.shape)} ({selection})  device {dev}",
          flush=True)

    net = st.TorchNet(st.network_text(a.network, 11))
    if a.batchnorm:
        net.add_batchnorm()
    net = net.to(dev)
    net.dropout = a.dropout
    aux = AuxHeads(net, len(CLASSES)).to(dev) if a.aux else None
    if a.init:  # the file's weights and standardisation statistics (its weights were trained on them)
        init_weights(net, a.init, CLASSES)
    else:
        with torch.no_grad():
            # He init for convs, zero biases (the batches draw from a generator of their own).
            gen = torch.Generator().manual_seed(a.seed)
            for key, p in net.param_items():
                if key.endswith("/weight"):
                    he_init_(p, gen)
                elif key.endswith("/bias"):
                    p.zero_()
            # Standardisation statistics of the contrast-normalised YUV training images.
            acc = torch.zeros(3, dtype=torch.float64, device=dev)
            acc2 = torch.zeros(3, dtype=torch.float64, device=dev)
            cnt = 0
            for i in range(0, xtr.shape[0], 16):
                z = st.contrast_norm(st.rgb_to_yuv(xtr[i:i + 16].to(dev).float() / 255))
                acc += z.double().sum((0, 2, 3))
                acc2 += (z.double() ** 2).sum((0, 2, 3))
                cnt += z.shape[0] * z.shape[2] * z.shape[3]
            mean = acc / cnt
            net.p("pre", "mean").copy_(mean.float())
            net.p("pre", "std").copy_((acc2 / cnt - mean ** 2).sqrt().float())
    print(f"standardisation mean {net.p('pre', 'mean').tolist()} std {net.p('pre', 'std').tolist()}"
          + (f" (from {a.init})" if a.init else ""), flush=True)
    # Median-frequency class weights (SegNet's), to the power --balance; absent classes weigh 0.
    weights = median_frequency_weights(ytr, a.balance).float().to(dev)
    print("class weights", [round(v, 3) for v in weights.tolist()], flush=True)

    teachers = load_teachers(a.teacher, CLASSES, dev, a.teacher_mirror) if a.teacher else None
    if teachers is not None:
        print(f"teachers {a.teacher}" + (" and their mirrors" if a.teacher_mirror else "")
              + f", share {a.distill:g}", flush=True)

    trainable = [p for p in net.parameters() if p.requires_grad]
    if aux is not None:
        trainable += list(aux.parameters())
    # --ema: a second net holding the moving average of every floating-point tensor of the first
    # (state_dict's tensors share the nets' storage), updated after each step by two fused calls;
    # the decay ramps up from 0.1 over the first steps, as is usual, so early weights fade fast.
    ema_net = None
    if a.ema:
        ema_net = copy.deepcopy(net)
        for p in ema_net.parameters():
            p.requires_grad_(False)
        ema_src = [t for t in net.state_dict().values() if t.is_floating_point()]
        ema_dst = [t for t in ema_net.state_dict().values() if t.is_floating_point()]
    model = ema_net if ema_net is not None else net  # what is evaluated, selected and exported
    # Batch normalisation's scales and shifts are not decayed (as is usual: decay would pull each
    # channel's scale towards 0 while the convolution before it is free to grow).
    norm_ids = {id(p) for p in net.norms.parameters()}
    groups = [{"params": [p for p in trainable if id(p) not in norm_ids]}]
    if norm_ids:
        groups.append({"params": [p for p in trainable if id(p) in norm_ids], "weight_decay": 0.0})
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(groups, lr=a.lr, momentum=0.9, nesterov=True, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(groups, lr=a.lr, weight_decay=a.weight_decay)
    steps_per_epoch = math.ceil(xtr.shape[0] / a.batch)
    total_steps = a.epochs * steps_per_epoch
    if total_steps >= 4:  # one cycle: warm-up over 10% of the steps (at least 2), then cosine decay
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=total_steps,
                                                    pct_start=max(0.1, 2.0 / total_steps))
    else:  # too short a run for a cycle (smoke tests)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    batches = BatchMaker(Batches(xtr, ytr, a, crop_h, crop_w, steps_per_epoch), a.workers, a.threads, dev)
    # The training steps' forward pass, compiled for the crop's shape (the first steps wait for
    # it; an epoch's shorter last batch compiles once more); evaluation and export use net itself,
    # whose parameters it shares.
    step_net = TrainStep(net, aux)
    step_net = torch.compile(step_net) if a.compile else step_net
    teacher_step = (torch.compile(teachers) if a.compile else teachers) if teachers is not None else None
    best, best_state, best_epoch = -1.0, None, -1
    log = open(a.log, "w") if a.log else None
    budget_s = a.minutes * 60
    t_train = time.time()
    step = 0
    for epoch in range(1, a.epochs + 1):
        loss_sum = torch.zeros((), device=dev)
        for _ in range(steps_per_epoch):
            xb, yb = batches.next()
            full, aux_scores = step_net(xb)
            if teacher_step is not None:
                with torch.no_grad():
                    soft = teacher_step(xb)
                loss = soft_target_loss(full, yb, weights, soft, a.distill)
            elif a.ohem < 1:
                loss = hard_pixel_loss(full, yb, weights, a.ohem)
            else:
                loss = weighted_ce(full, yb, weights)
            if a.lovasz:
                loss = loss + a.lovasz * lovasz_softmax(full, yb)
            if aux_scores:
                loss = loss + a.aux * sum(weighted_ce(v, yb, weights) for v in aux_scores) / len(aux_scores)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if step < total_steps - 1:
                sched.step()
            if ema_net is not None:
                d = min(a.ema, (1 + step) / (10 + step))
                torch._foreach_mul_(ema_dst, d)
                torch._foreach_add_(ema_dst, ema_src, alpha=1 - d)
            step += 1
            loss_sum += loss.detach()  # read once an epoch: no host sync per step
        elapsed = time.time() - t_train
        last = elapsed > budget_s or epoch == a.epochs
        rec = {"epoch": epoch, "loss": loss_sum.item() / steps_per_epoch, "time_s": round(elapsed, 1)}
        if epoch % a.eval_every == 0 or last:
            m = metrics(evaluate(model, xva, yva, dev))
            rec.update({k: round(v, 4) for k, v in m.items() if k != "iou"})
            if ema_net is not None:
                raw = metrics(evaluate(net, xva, yva, dev))
                rec.update({"raw_" + k: round(v, 4) for k, v in raw.items() if k != "iou"})
            if a.final or a.last or m["mean_iou"] > best:  # --final and --last keep the last epoch
                best, best_epoch = m["mean_iou"], epoch
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        print(json.dumps(rec), flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()  # an epoch a line: a run's progress can be read while it trains
        if last:
            break
    batches.stop()
    if epoch < a.epochs:
        print(f"train.py: warning: stopped by --minutes {a.minutes:g} after epoch {epoch} of {a.epochs}; "
              "the one-cycle learning rate had not finished its decay (raise --minutes or lower --epochs)",
              file=sys.stderr, flush=True)
    raw = metrics(evaluate(net, xva, yva, dev)) if ema_net is not None else None  # the last epoch's
    model.load_state_dict(best_state)
    m = metrics(evaluate(model, xva, yva, dev))
    summary = {"network": a.network, "best_epoch": best_epoch, "epochs_run": epoch, "seed": a.seed,
               "selection": selection, "epochs": a.epochs, "init": a.init, "batch": a.batch, "crop": a.crop, "aug": a.aug, "exposure": a.exposure, "gamma": a.gamma, "shading": a.shading,
               "scale": list(a.scale) if a.scale else None, "ohem": a.ohem,
               "mix": a.mix, "ema": a.ema, "rare": a.rare, "paste": a.paste, "paste_classes": [CLASSES[i] for i in a.paste_ids] if a.paste else None, "dropout": a.dropout, "batchnorm": a.batchnorm, "lovasz": a.lovasz, "aux": a.aux, "optimizer": a.optimizer, "lr": a.lr, "weight_decay": a.weight_decay, "balance": a.balance,
               "teacher": a.teacher, "distill": a.distill if a.teacher else None,
               "teacher_mirror": a.teacher_mirror,
               "compile": a.compile, "workers": a.workers,
               "threads": a.threads if a.workers else torch.get_num_threads(),
               "train_minutes": round((time.time() - t_train) / 60, 2),
               "total_minutes": round((time.time() - t_start) / 60, 2), "device": str(
                   torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"),
               "val": {k: (round(v, 4) if not isinstance(v, list) else [round(x, 4) for x in v])
                       for k, v in m.items()}}
    if raw is not None:
        summary["val_raw_last"] = {k: round(v, 4) for k, v in raw.items() if k != "iou"}
    print("SUMMARY " + json.dumps(summary), flush=True)
    if log:
        log.write("SUMMARY " + json.dumps(summary) + "\n")
    # The folded net: the graph's own parameters, nothing more (with --batchnorm its normalisation
    # in the weights and biases; without, a copy).
    st.save_model(a.out, model.cpu().folded(), CLASSES, PALETTE,
                  f"camvid-{a.network} (tools/train.py {a.departures + ', ' if a.departures else ''}seed {a.seed}, "
                  f"epoch {best_epoch})", a.detect_settings)
    print(f"exported {a.out}", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Train the paper's scene-labelling nets on CamVid (11 classes, void ignored) and export them.

  python3 tools/train.py --data ../shared/data/camvid --network multiscale --out weights/camvid-multiscale.h5
         [--epochs 480] [--minutes 120] [--batch 8] [--crop 360x480] [--seed 0]

Beside it: tools/train_data.py (CamVid, the defaults, the metrics), tools/train_augment.py (the
batches and their augmentation), tools/train_losses.py (the losses, distillation, the step).

The defaults are the shipped models' recipe (weights/MODELS.md at fb0dc9a) except the split and the network:
they were trained with --final, the reference model with --network reference --crop 288x384 (the
recipe of its day; the multiscale models were trained again with full frames). The batches are
made by --workers processes (default: one per core but one); with them the multiscale net's 480 epochs on train (288x384 crops) took 10 minutes on an H100 (0.9 s an
epoch, 1.6 s with one batch-making thread), the reference net's 6; on a GPU the steps run
through torch.compile (--compile; 0.7 s an epoch, docs/BENCHMARKS.md at fb0dc9a "Training speed").
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
recipe: 0.5 lost across sequences, weights/MODELS.md at fb0dc9a), or --ohem F, the loss over the hardest
fraction F of each batch's labelled pixels only (outside the recipe: 0.3 lost across sequences);
AdamW, weight decay --weight-decay;
dropout 0.5 on the pixel-wise classifier's inputs while training (--dropout).
Batch normalisation after the convolutions that feed a ReLU while training, folded into their
weights at export (the model file unchanged; the recipe since 2026-11-28: it gained on the thin
classes across sequences, weights/MODELS.md at fb0dc9a; --no-batchnorm leaves it out, and --init, whose file
holds no batch statistics, fine-tunes without it).
Training uses TF32 tensor cores. Augmentation (--aug full, the default): random scale 0.5-2.0
(--scale; 0.75-1.5 lost across sequences) with random crops (padding with void where the scaled
image is smaller than the crop), horizontal flips, rotations of up to 5 degrees, brightness,
contrast and per-channel colour jitter, mild blur or noise, an exposure factor 0.3-1.2
(--exposure; `--exposure none` leaves it out, 0.2,1.2 was level across sequences; --gamma is an
option outside the recipe), a smooth random illumination field on half the images (--shading 0.3;
`--shading none` leaves it out), and JPEG re-compression at a random quality 50-95 with 4:2:0
chroma (OpenCV's encoder on the CPU); --aug basic is the earlier scale 1-1.35, flip and crop.
--rare P (an option outside the recipe: level across sequences, weights/MODELS.md at fb0dc9a) places the
crop of a share P of the images about a pixel of one of the rarer classes the image shows.
--paste P (outside the recipe: across sequences it traded 1.36 points of global accuracy for 2.30
of class average at 0.5 over two seeds, was level with --balance 0.25, and at 1.0 bought no more
class average and lost 0.88 more global accuracy, weights/MODELS.md at fb0dc9a; the shipped accurate file's second
member is --paste 0.5) pastes the thin classes' pixels (--paste-classes) of the next image of the
batch onto a share P of the images.
--crop 360x480, the default since 2026-11-29, trains on crops the size of a whole CamVid frame
(across sequences +0.14 / +0.84 / +0.31 over two seeds against 288x384, the recipe before, for 1.4
times the batch-making; weights/MODELS.md at fb0dc9a, "Full-frame crops").
Fixed seed. Logs loss and metrics each eval; keeps the epoch with the best mean IoU on the
selection set and exports it.

Selection: by default train on `train`, select on `val`. `--holdout SEQ` pools train and val and
holds out one sequence (file names start with it: 0001TP, 0006R0, 0016E5) for selection - the
cross-sequence figure; `--final` trains on train + val for --epochs and exports the last epoch;
`--last` trains on `train` and exports the last epoch (val takes no part: its figures are honest).
`--init MODEL.h5` starts from a trained model of the same network instead of He initialisation,
keeping its standardisation statistics (fine-tuning; give a lower --lr).

Distillation (an option outside the recipe: from three of the multiscale net's own models it was
level to 2.3 points below across sequences, weights/MODELS.md at fb0dc9a): `--teacher A.h5,B.h5,...` runs those
trained models (any of the engine's networks, CamVid's classes) on every training batch, and the
loss becomes the class-weighted cross-entropy against (1 - --distill) x the one-hot label +
--distill x the mean of the teachers' class probabilities (--teacher-mirror: averaged over the
batch's mirror too), still over the labelled pixels and normalised as the plain loss is (--distill
0 is that loss exactly). `{seq}` in a teacher's path becomes the --holdout sequence (`final` with
--final, `train` with neither), so one crossval.py argument gives each held-out run teachers that
never saw its sequence. On a GPU the teachers run under bfloat16 autocast.
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenelab_torch as st  # noqa: E402
# What the other tools and the tests use as train.NAME, from the modules that hold them.
from train_data import (  # noqa: E402,F401
    CAMVID_DETECT, CLASSES, DEFAULT_CROP, DEFAULT_DROPOUT, DEFAULT_EXPOSURE, DEFAULT_SCALE,
    DEFAULT_SHADING, PALETTE, THIN_CLASSES, VOID, evaluate, load_split,
    metrics, read_label, read_rgb)
from train_augment import (  # noqa: E402,F401
    BatchMaker, Batches, affine_maps, augment, batch_seed, class_mix,
    degrade, jpeg_recompress, median_frequency_weights, rare_anchors, sampling_grid, set_batch_threads,
    shade, uniform)
from train_losses import (  # noqa: E402,F401
    AuxHeads, Teachers, TrainStep, hard_pixel_loss, he_init_, init_weights,
    load_teachers, lovasz_softmax, mean_probabilities, soft_target_loss, teacher_paths, weighted_ce)


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
                         "sequences, weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--scale", default=None, metavar="LO,HI",
                    help="with --aug full: the range of the random scale, drawn log-uniformly "
                         f"(default {DEFAULT_SCALE[0]:g},{DEFAULT_SCALE[1]:g}, the shipped recipe; 0.75,1.5 lost "
                         "across sequences, weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--gamma", default=None, metavar="LO,HI",
                    help="with --aug full: also raise each image's intensities to a power in [LO, HI] "
                         "(log-uniform) before --exposure, e.g. 1,2 (weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--shading", default=None, metavar="AMP",
                    help="with --aug full: also multiply half the images by a smooth random illumination "
                         "field exp(a * f), a uniform in [0, AMP], f of unit standard deviation; default "
                         f"{DEFAULT_SHADING:g} with --aug full (the shipped recipe), 'none' or 0 for no field "
                         "(uneven light, texture on flat regions; weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--mix", type=float, default=None, metavar="P",
                    help="ClassMix: with probability P an image also gets half the classes of the next "
                         "image of its batch pasted onto it, pixels and labels (weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--paste", type=float, default=None, metavar="P",
                    help="copy-paste: with probability P an image also gets the next image's pixels of "
                         "the --paste-classes pasted onto it, pixels and labels (after --mix); none by "
                         "default (weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--paste-classes", default=None, metavar="A,B",
                    help="the classes --paste pastes, by name (default the thin ones: "
                         f"{','.join(THIN_CLASSES)})")
    ap.add_argument("--rare", type=float, default=None, metavar="P",
                    help="rare-class crops: with probability P an image's crop is placed about one of its "
                         "pixels of a class drawn in proportion to the classes' median-frequency weights "
                         "(Pole, SignSymbol, Pedestrian, Bicyclist and Fence most often), that pixel in the "
                         "crop's middle half; none by default, the recipe (0.5 and 1 were level across "
                         "sequences, weights/MODELS.md at fb0dc9a)")
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
                         "2026-11-28, weights/MODELS.md at fb0dc9a; off with --init, whose file holds no batch statistics)")
    ap.add_argument("--ohem", type=float, default=1.0, metavar="F",
                    help="hard-pixel mining: the loss over the hardest fraction F of each batch's labelled "
                         "pixels (by their cross-entropy), class-weighted as the plain loss (default 1: "
                         "every pixel, the shipped recipe; 0.3 lost across sequences, weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--lovasz", type=float, default=0.0, metavar="W",
                    help="add W times the Lovasz-softmax loss (a surrogate of 1 - mean IoU, Berman et al. "
                         "2018) to the cross-entropy (default 0: none; 0.5 lost across sequences, weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--aux", type=float, default=0.0, metavar="W",
                    help="deep supervision: add W times the mean cross-entropy (class-weighted) of a 1x1 "
                         "classifier on each scale's features (the multiscale net's concat inputs), trained "
                         "beside the net and dropped at export (default 0: none; 0.4 was level across "
                         "sequences, weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--teacher", default=None, metavar="A.h5,B.h5",
                    help="distil from these trained models (comma-separated; `{seq}` in a path becomes the "
                         "--holdout sequence, 'final' with --final, 'train' with neither): the loss's "
                         "target mixes their mean class probabilities into the labels (--distill); outside "
                         "the recipe (weights/MODELS.md at fb0dc9a)")
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
                         "with fused kernels, 2.4x the multiscale net's step rate on an H100 (docs/BENCHMARKS.md at fb0dc9a); "
                         "auto: on a GPU where torch has it")
    ap.add_argument("--weight-decay", type=float, default=None, metavar="WD",
                    help="AdamW's decoupled weight decay on every trainable tensor (default 0.05, the "
                         "shipped recipe since 2026-11-27, chosen across sequences over 1e-4; "
                         "weights/MODELS.md at fb0dc9a has the figures), or with --optimizer sgd the L2 penalty's "
                         "factor (default 5e-4)")
    ap.add_argument("--balance", type=float, default=0.5, metavar="POWER",
                    help="class weights (median frequency / frequency) ** POWER: 0.5 (both shipped "
                         "models' recipe) their square roots, 1 SegNet's median-frequency "
                         "balancing (the recipe before 2026-11-27), 0 none; 0.25 and 0 cost the thin "
                         "classes more than they gain (weights/MODELS.md at fb0dc9a)")
    ap.add_argument("--detect", default=CAMVID_DETECT,
                    help="detection head settings written into the model, 'CLASS: key=value ...; ...' "
                         "('' for none; default: those chosen for CamVid, weights/MODELS.md at fb0dc9a)")
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
        # 7.8 augmented images a second each instead of 96 with one thread each (weights/MODELS.md at fb0dc9a).
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

#!/usr/bin/env python3
"""tools/mirror_gain.py: its mirrored labelling against a float64 reference written here, its
figures against eval_labels' on the same images, and the mirror-averaged labels' symmetry.

usage: mirror_gain_test.py BUILD_DIR SOURCE_DIR
1. Small networks that are not mirror-symmetric (random 5x5 convolutions to 4 classes, so the
   image and its mirror are labelled differently) on random images of odd sizes: the plain and
   mirrored confusion matrices of one, and with two the ensemble's plain and mirrored, equal ones
   computed here in float64 with NumPy alone (softmax of each pass, the mirror's flipped back,
   summed over passes and nets, argmax), void and out-of-range labels not counted; --every K.
2. The shipped multiscale model on three CamVid val images (skipped without ../shared/data):
   the plain figures equal eval_labels' (the engine, CPU) to 0.05 points; on the same images
   mirrored (lossless PNGs of the decoded pixels, labels mirrored too) the mirror-averaged
   labelling counts the same confusion to 0.5% of the pixels (the average of a pass and its
   mirror is symmetric up to the network's sampling grid), while the plain labelling is not
   symmetric (so the check could fail), and mirroring changes the labels of some pixels. The
   engine's mirrored labelling (eval_labels --mirror) gives the mirrored figures to 0.05 points,
   and the file make_model --combine --mirror writes, run in PyTorch (scenelab_torch), labels 99.99%
   of an image's pixels as the mirror average here; the mirrored reference net's scores (whose
   mirrored map is resampled onto the plain one's grid) agree between the engine and PyTorch, and
   so do the multiscale model's scores, both resolutions, mirrored at four scales, and its
   probabilities refined along the image's edges (make_model --combine --refine).
Skips (77) without PyTorch, h5py or OpenCV.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import cv2
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"SKIPPED: PyTorch/h5py/OpenCV not importable ({e})")
    sys.exit(77)

build, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tools"))
import mirror_gain as mg  # noqa: E402

torch.set_num_threads(2)
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


class ConvNet:
    """A stand-in for TorchNet: 'full' = a 5x5 convolution of the image to `classes` scores."""

    def __init__(self, classes, gen):
        self.w = torch.randn(classes, 3, 5, 5, generator=gen, dtype=torch.float64)
        self.b = torch.randn(classes, generator=gen, dtype=torch.float64)

    def __call__(self, x, want):
        return {"full": F.conv2d(x.double(), self.w, self.b, padding=2).float()}


def softmax64(s):
    e = np.exp(s - s.max(0, keepdims=True))
    return e / e.sum(0, keepdims=True)


def reference(nets, pairs, classes):
    """Every labelling's confusion in float64, NumPy only (the convolutions by explicit sums):
    plain and mirrored of the first net, and with several the ensemble's, plain and mirrored."""
    ways = ("plain", "mirrored") + (("ensemble", "ensemble_mirrored") if len(nets) > 1 else ())
    conf = {w: np.zeros((classes, classes), np.int64) for w in ways}
    for img, lab in pairs:
        x = cv2.imread(img, cv2.IMREAD_COLOR)[:, :, ::-1].astype(np.float64).transpose(2, 0, 1) / 255
        y = cv2.imread(lab, cv2.IMREAD_UNCHANGED)

        def scores(net, v):
            w, b = net.w.numpy(), net.b.numpy()
            h, wd = v.shape[1:]
            p = np.pad(v, ((0, 0), (2, 2), (2, 2)))
            out = np.empty((classes, h, wd))
            for c in range(classes):
                acc = np.full((h, wd), b[c])
                for ci in range(3):
                    for dy in range(5):
                        for dx in range(5):
                            acc += w[c, ci, dy, dx] * p[ci, dy:dy + h, dx:dx + wd]
                out[c] = acc
            return out
        plain = [softmax64(scores(n, x)) for n in nets]
        flipped = [softmax64(scores(n, x[:, :, ::-1]))[:, :, ::-1] for n in nets]
        pred = {"plain": scores(nets[0], x).argmax(0), "mirrored": (plain[0] + flipped[0]).argmax(0)}
        if len(nets) > 1:
            pred["ensemble"] = sum(plain).argmax(0)
            pred["ensemble_mirrored"] = (sum(plain) + sum(flipped)).argmax(0)
        for w in ways:
            for t, q in zip(y.ravel(), pred[w].ravel()):
                if t < classes:
                    conf[w][t, q] += 1
    return conf


# 1. against the reference, on synthetic images of odd sizes
gen = torch.Generator().manual_seed(7)
rng = np.random.default_rng(7)
classes = 4
nets = [ConvNet(classes, gen), ConvNet(classes, gen)]
with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "images"))
    os.makedirs(os.path.join(tmp, "labels"))
    for i, (h, w) in enumerate(((23, 37), (31, 19), (17, 29))):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        lab = rng.integers(0, classes + 2, (h, w), dtype=np.uint8)  # classes, classes + 1: not counted
        cv2.imwrite(os.path.join(tmp, "images", f"im{i}.png"), img)
        cv2.imwrite(os.path.join(tmp, "labels", f"im{i}.png"), lab)
    pairs = mg.label_pairs(tmp)
    check([os.path.basename(p) for p, _ in mg.label_pairs(tmp, every=2)] == ["im0.png", "im2.png"],
          "--every 2: the first and third images")
    one = mg.confusions(nets[:1], pairs, classes)
    ref1 = reference(nets[:1], pairs, classes)
    ours = mg.confusions(nets, pairs, classes)
    ref = reference(nets, pairs, classes)
    counted = sum(int((cv2.imread(lab, cv2.IMREAD_UNCHANGED) < classes).sum()) for _, lab in pairs)
    check(sorted(one) == ["mirrored", "plain"] and all(np.array_equal(one[w], ref1[w]) for w in ref1),
          f"synthetic, one model: plain and mirrored confusion equal the float64 reference ({counted} pixels counted)")
    check(sorted(ours) == sorted(ref) and all(np.array_equal(ours[w], ref[w]) for w in ref),
          "synthetic, two models: plain, mirrored, ensemble and ensemble mirrored equal the float64 reference")
    check(all(int(c.sum()) == counted for c in ours.values()),
          "synthetic: void and out-of-range labels are not counted")
    check(not np.array_equal(ref["plain"], ref["mirrored"]), "synthetic: mirroring changes the labelling (the check can fail)")
    check(not np.array_equal(ref["plain"], ref["ensemble"]) and not np.array_equal(ref["ensemble"], ref["ensemble_mirrored"]),
          "synthetic: the ensemble changes the labelling, and mirroring it too")
    # bad input: a clear error naming the file or the option, no traceback
    tool = os.path.join(src, "tools", "mirror_gain.py")
    missing = os.path.join(tmp, "none.h5")
    for args, why in ((["--model", missing, "--data", tmp], f"mirror_gain: --model {missing}: no such file"),
                      (["--model", missing, "--data", tmp, "--every", "0"], "--every 0: at least 1")):
        r = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, timeout=120)
        check(r.returncode != 0 and why in r.stderr and "Traceback" not in r.stderr,
              f"bad input refused: {why}")
    f = mg.figures(ref["plain"], [f"c{i}" for i in range(classes)])
    tp, gt = np.diag(ref["plain"]), ref["plain"].sum(1)
    check(abs(f["global_accuracy"] - tp.sum() / ref["plain"].sum()) < 1e-12 and
          abs(f["class_accuracy"] - np.mean(tp / gt)) < 1e-12, "synthetic: global and class-average accuracy")

# 2. the shipped model against the engine, and the symmetry of the mirror average
data = os.path.abspath(os.environ.get("SCENELAB_CAMVID", os.path.join(src, "..", "shared", "data", "camvid")))
val = sorted(os.listdir(os.path.join(data, "val", "images"))) if os.path.isdir(os.path.join(data, "val", "images")) else []
eval_labels = os.path.join(build, "tools", "eval_labels")
if not val or not os.path.exists(eval_labels):
    print(f"(CamVid val under {data} (SCENELAB_CAMVID; tools/get_camvid.sh) or {eval_labels} absent: the shipped-model checks skipped)")
else:
    model = os.path.join(src, "weights", "camvid-multiscale.h5")
    tnet, names, _, _ = mg.st.load_model(model)
    tnet.eval()
    with tempfile.TemporaryDirectory() as tmp:
        a, m = os.path.join(tmp, "a"), os.path.join(tmp, "m")
        for d in (a, m):
            os.makedirs(os.path.join(d, "images"))
            os.makedirs(os.path.join(d, "labels"))
        for name in val[:: len(val) // 3][:3]:
            stem = os.path.splitext(name)[0]
            rgb = cv2.imread(os.path.join(data, "val", "images", name), cv2.IMREAD_COLOR)
            lab = cv2.imread(os.path.join(data, "val", "labels", stem + ".png"), cv2.IMREAD_UNCHANGED)
            os.symlink(os.path.join(data, "val", "images", name), os.path.join(a, "images", name))
            os.symlink(os.path.join(data, "val", "labels", stem + ".png"), os.path.join(a, "labels", stem + ".png"))
            cv2.imwrite(os.path.join(m, "images", stem + ".png"), rgb[:, ::-1])
            cv2.imwrite(os.path.join(m, "labels", stem + ".png"), lab[:, ::-1])
        out = os.path.join(tmp, "e.json")
        subprocess.check_call([eval_labels, "--data", a, "--model", model, "--device", "cpu",
                               "--threads", "2", "--json", out], stdout=subprocess.DEVNULL)
        with open(out) as fh:
            engine = json.load(fh)
        ca, cm = (mg.confusions([tnet], mg.label_pairs(d), len(names)) for d in (a, m))
        pa, ma, pm, mm = ca["plain"], ca["mirrored"], cm["plain"], cm["mirrored"]
        fa = mg.figures(pa, names)
        worst = max(abs(fa[k] - engine[k]) for k in ("global_accuracy", "class_accuracy", "mean_iou"))
        check(worst <= 5e-4, f"multiscale: plain figures match eval_labels' (largest difference "
                             f"{100 * worst:.3f} points, bound 0.05)")
        total = int(pa.sum())
        sym = int(np.abs(ma - mm).sum()) // 2
        asym = int(np.abs(pa - pm).sum()) // 2
        check(sym <= 0.005 * total, f"multiscale: mirror-averaged labels symmetric ({sym} of {total} "
                                    f"pixels counted differently, bound 0.5%)")
        check(asym > sym, f"multiscale: plain labels are not ({asym} pixels counted differently)")
        check(not np.array_equal(pa, ma), "multiscale: mirroring changes the labels of some pixels")
        # the engine's mirrored labelling (eval_labels --mirror, job/combine.h) against this one
        subprocess.check_call([eval_labels, "--data", a, "--model", model, "--device", "cpu", "--mirror",
                               "--threads", "2", "--json", out], stdout=subprocess.DEVNULL)
        with open(out) as fh:
            engine_m = json.load(fh)
        fm = mg.figures(ma, names)
        worst = max(abs(fm[k] - engine_m[k]) for k in ("global_accuracy", "class_accuracy", "mean_iou"))
        check(worst <= 5e-4, f"multiscale: mirrored figures match eval_labels --mirror's (largest difference "
                             f"{100 * worst:.3f} points, bound 0.05)")
        check(abs(fm["global_accuracy"] - fa["global_accuracy"]) > 1e-6,
              "multiscale: the mirrored figures are not the plain ones (so the check could fail)")
        # the combined file (make_model --combine --mirror) run in PyTorch labels as the average here
        make_model = os.path.join(build, "tools", "make_model")
        combined = os.path.join(tmp, "mirrored.h5")
        subprocess.check_call([make_model, "--combine", model, "--mirror", "--out", combined])
        cnet, cnames, _, _ = mg.st.load_model(combined)
        img, _ = mg.label_pairs(a)[0]
        rgb = mg.train.read_rgb(img)
        x = torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255
        with torch.no_grad():
            full = tnet(torch.cat([x, x.flip(3)]), ["full"])["full"]
            want = mg.train.mean_probabilities([full], mirror=True)[0].argmax(0)
            got = cnet(x, ["labels_full"])["labels_full"][0, 0].long()
        same = float((want == got).double().mean())
        check(cnames == names and same >= 0.9999, f"multiscale: the combined file in PyTorch labels as the "
                                                  f"mirror average ({100 * same:.3f}% of pixels, bound 99.99%)")
        # the mirrored reference net's class scores at feature resolution (its mirrored pass's map
        # lies two pixels aside at width 480 and is resampled onto the plain one's grid): the
        # engine (scenelab_infer) and PyTorch (scenelab_torch) within 1e-4 relative
        ref_model = os.path.join(src, "weights", "camvid-reference.h5")
        ref_combined = os.path.join(tmp, "reference-mirrored.h5")
        subprocess.check_call([make_model, "--combine", ref_model, "--mirror", "--out", ref_combined])
        got_h5 = os.path.join(tmp, "scores.h5")
        subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", ref_combined, "--image", img,
                               "--out", got_h5, "--nodes", "scores", "--threads", "2"])
        with h5py.File(got_h5, "r") as f:
            engine_scores = np.asarray(f["scores"], dtype=np.float64)
        rnet, _, _, _ = mg.st.load_model(ref_combined)
        with torch.no_grad():
            torch_scores = rnet(x, ["scores"])["scores"].double().numpy()
        err = float(np.abs(engine_scores - torch_scores).max() / np.abs(torch_scores).max()) \
            if engine_scores.shape == torch_scores.shape else float("inf")
        check(err < 1e-4, f"reference, mirrored: scores of the engine and PyTorch agree ({err:.2e} relative, bound 1e-4)")
        # test-time scaling (make_model --combine --mirror --scales): the multiscale model's
        # full-resolution and feature-resolution scores of the engine and PyTorch within 1e-4
        scaled = os.path.join(tmp, "scaled.h5")
        subprocess.check_call([make_model, "--combine", model, "--mirror", "--scales", "0.5,0.75,1,1.25",
                               "--out", scaled])
        subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", scaled, "--image", img,
                               "--out", got_h5, "--nodes", "scores,full", "--threads", "2"])
        snet, _, _, _ = mg.st.load_model(scaled)
        with torch.no_grad():
            torch_out = snet(x, ["scores", "full"])
        with h5py.File(got_h5, "r") as f:
            for node in ("scores", "full"):
                e = np.asarray(f[node], dtype=np.float64)
                t = torch_out[node].double().numpy()
                err = float(np.abs(e - t).max() / np.abs(t).max()) if e.shape == t.shape else float("inf")
                check(err < 1e-4, f"multiscale at scales 0.5,0.75,1,1.25, mirrored: {node} of the engine and "
                                  f"PyTorch agree ({err:.2e} relative, bound 1e-4)")
        # edge-aware refinement (make_model --combine --refine: the refine layer on full): the
        # engine's and PyTorch's refined probabilities within 1e-5, and the refinement changes some labels
        refined = os.path.join(tmp, "refined.h5")
        subprocess.check_call([make_model, "--combine", model, "--refine", "--out", refined])
        subprocess.check_call([os.path.join(build, "tools", "scenelab_infer"), "--model", refined, "--image", img,
                               "--out", got_h5, "--nodes", "full,full_unrefined", "--threads", "2"])
        fnet, _, _, _ = mg.st.load_model(refined)
        with torch.no_grad():
            torch_full = fnet(x, ["full"])["full"].double().numpy()
        with h5py.File(got_h5, "r") as f:
            e = np.asarray(f["full"], dtype=np.float64)
            unrefined = np.asarray(f["full_unrefined"], dtype=np.float64)
        err = float(np.abs(np.exp(e) - np.exp(torch_full)).max()) if e.shape == torch_full.shape else float("inf")
        check(err < 1e-5, f"multiscale, refined: the probabilities of the engine and PyTorch agree ({err:.2e}, bound 1e-5)")
        moved = float((e.argmax(1) != unrefined.argmax(1)).mean())
        check(moved > 0, f"multiscale, refined: the refinement moves {100 * moved:.2f}% of the labels")

print("mirror_gain_test:", "passed" if not failures else f"FAILED ({len(failures)})")
sys.exit(1 if failures else 0)

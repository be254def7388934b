#!/usr/bin/env python3
"""tools/train.py on a tiny synthetic CamVid-like set (two sequences), on the CPU with Debian's
PyTorch: the augmentation's output (shapes, labels in range, void where the scaled image does not
cover the crop, repeatable from its seed) and two short runs: --holdout SEQ (cross-sequence
selection) and --final, each exporting a model file, a fine-tuning run (--init) and a run stopped by
--minutes. Exit 77 (skipped) without torch or OpenCV.
    train_smoke_test.py SOURCE_DIR
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import cv2
    import numpy as np
    import torch
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "tools"))
import train  # noqa: E402


def check_augment():
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(0, 256, (4, 3, 72, 96), dtype=torch.uint8, generator=gen)
    y = torch.randint(0, 11, (4, 72, 96), generator=gen)
    saw_void = False
    for k in range(12):
        xb, yb = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True)
        assert xb.shape == (4, 3, 64, 80) and yb.shape == (4, 64, 80), (xb.shape, yb.shape)
        assert xb.min() >= 0 and xb.max() <= 1, (xb.min(), xb.max())
        assert yb.min() >= 0 and yb.max() <= train.VOID
        saw_void |= bool((yb == train.VOID).any())
        xc, yc = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True)
        assert torch.equal(xb, xc) and torch.equal(yb, yc), "augmentation not repeatable from its seed"
    assert saw_void, "scales below 1 never left void around the image"
    xb, yb = train.augment(x, y, 64, 80, torch.Generator().manual_seed(0), "cpu", full=False)
    assert xb.shape == (4, 3, 64, 80) and not (yb == train.VOID).any()
    assert train.sequence_of("0016E5_07959") == "0016E5"
    # --exposure darkens (a fixed factor of 0.3 here) and stays repeatable; without it, nothing changes
    xb, yb = train.augment(x, y, 64, 80, torch.Generator().manual_seed(5), "cpu", full=True)
    xd, yd = train.augment(x, y, 64, 80, torch.Generator().manual_seed(5), "cpu", full=True, exposure=(0.3, 0.3))
    assert torch.equal(yb, yd) and xd.mean() < 0.5 * xb.mean(), (xd.mean(), xb.mean())
    xe, _ = train.augment(x, y, 64, 80, torch.Generator().manual_seed(5), "cpu", full=True, exposure=(0.3, 0.3))
    assert torch.equal(xd, xe), "exposure augmentation not repeatable from its seed"
    # --gamma above 1 darkens the mid-tones and leaves white white; repeatable too
    x[0, :, :8] = 255
    xb, _ = train.augment(x, y, 64, 80, torch.Generator().manual_seed(6), "cpu", full=True)
    xg, _ = train.augment(x, y, 64, 80, torch.Generator().manual_seed(6), "cpu", full=True, gamma=(2.0, 2.0))
    xh, _ = train.augment(x, y, 64, 80, torch.Generator().manual_seed(6), "cpu", full=True, gamma=(2.0, 2.0))
    assert torch.equal(xg, xh), "gamma augmentation not repeatable from its seed"
    assert xg.median() < 0.8 * xb.median() and xg.max() > 0.8 * xb.max(), (xg.median(), xb.median(), xg.max(), xb.max())
    # --scale: at a fixed 0.5 the 36x48 image always leaves void around most of the 64x80 crop; from
    # 1.0 up the crop fits (void only where a rotation of at most 5 degrees turns a corner out);
    # repeatable from its seed
    for k in range(6):
        _, ys = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True, scale=(0.5, 0.5))
        assert (ys == train.VOID).float().mean() > 0.5, "a half-size image filled the crop"
        xl, yl = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True, scale=(1.0, 1.4))
        assert (yl == train.VOID).float().mean() < 0.05, "an image of at least its size left void in the crop"
        xm, ym = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True, scale=(1.0, 1.4))
        assert torch.equal(xl, xm) and torch.equal(yl, ym), "scale augmentation not repeatable from its seed"


def check_shading():
    """shade(): half the images untouched, the others multiplied by exp(a * f), f the same for the
    three channels, smooth (neighbouring pixels' factors close) and of zero mean and unit standard
    deviation in log terms, a at most AMP; a flat image gains texture; repeatable from its seed;
    augment() without it draws nothing more (its batches unchanged)."""
    flat = torch.full((1, 3, 96, 128), 0.5)
    shaded, factors = 0, []
    for k in range(40):
        a = train.shade(flat, torch.Generator().manual_seed(k), 0.3)
        b = train.shade(flat, torch.Generator().manual_seed(k), 0.3)
        assert torch.equal(a, b), "shading not repeatable from its seed"
        if torch.equal(a, flat):
            continue
        shaded += 1
        lf = torch.log(a / flat)
        assert torch.allclose(lf[:, 0], lf[:, 1]) and torch.allclose(lf[:, 0], lf[:, 2]), "channels shaded differently"
        amp = lf.std().item()  # a, as f has unit standard deviation
        assert 0 <= amp <= 0.3 + 1e-4 and abs(lf.mean().item()) < 1e-4, (amp, lf.mean())  # f of zero mean
        if amp > 0.05:  # smooth: a step to the next pixel is a small part of the field's range
            step = (lf[..., 1:] - lf[..., :-1]).abs().max().item()
            assert step < 0.2 * (lf.max() - lf.min()).item(), (step, lf.max(), lf.min())
        factors.append(amp)
    assert 10 <= shaded <= 30, f"{shaded} of 40 flat images shaded, expected about half"
    assert max(factors) > 0.2, factors
    gen = torch.Generator().manual_seed(2)
    x = torch.randint(0, 256, (2, 3, 72, 96), dtype=torch.uint8, generator=gen)
    y = torch.randint(0, 11, (2, 72, 96), generator=gen)
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    train.augment(x, y, 64, 80, g1, "cpu", full=True)
    train.augment(x, y, 64, 80, g2, "cpu", full=True, shading=None)
    assert torch.equal(g1.get_state(), g2.get_state()), "shading=None drew from the generator"
    changed = False
    for k in range(6):
        xa, ya = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True, shading=0.5)
        assert xa.min() >= 0 and xa.max() <= 1 and ya.shape == (2, 64, 80)
        xb, yb = train.augment(x, y, 64, 80, torch.Generator().manual_seed(k), "cpu", full=True)
        assert torch.equal(ya, yb), "shading moved labels"
        changed |= not torch.equal(xa, xb)
    assert changed, "--shading never changed a batch"
    assert math.isfinite(float(xa.sum()))


def augment_reference(x, y, crop_h, crop_w, gen, full=True, exposure=None, gamma=None, shading=None):
    """augment() written plainly (its geometry and last steps are train's own): the sampling grid
    by a matrix product a pixel, the image scaled to [0, 1] and its mean taken out before
    resampling, the photometric jitter one operation at a time, a torch.cat at the end."""
    import torch.nn.functional as F
    n = x.shape[0]
    rows = torch.arange(crop_h, dtype=torch.float32) + 0.5
    cols = torch.arange(crop_w, dtype=torch.float32) + 0.5
    pr, pc = torch.meshgrid(rows, cols, indexing="ij")
    base = torch.stack([pc.flatten(), pr.flatten(), torch.ones(crop_h * crop_w)], 1)
    maps = train.affine_maps(x.shape, crop_h, crop_w, gen, full)
    grid = (base @ maps.transpose(1, 2)).view(n, crop_h, crop_w, 2)
    xf = x.double() / 255
    mean = xf.mean((2, 3), keepdim=True)
    xb = F.grid_sample(xf - mean, grid.double(), mode="bilinear", padding_mode="zeros", align_corners=False) + mean
    yb = F.grid_sample(y[:, None].double() + 1, grid.double(), mode="nearest", padding_mode="zeros",
                       align_corners=False)[:, 0].round().long() - 1
    yb[yb < 0] = train.VOID
    if not full:
        return xb.float(), yb
    out = []
    for i in range(n):
        xi = xb[i:i + 1]
        m = xi.mean()
        gain = torch.tensor([train.uniform(gen, 0.9, 1.1) for _ in range(3)], dtype=torch.float64).view(1, 3, 1, 1)
        contrast = train.uniform(gen, 0.7, 1.3)
        xi = ((xi - m) * contrast + m + train.uniform(gen, -0.12, 0.12)) * gain
        if gamma is not None:
            xi = xi.clamp(0, 1) ** math.exp(train.uniform(gen, math.log(gamma[0]), math.log(gamma[1])))
        if exposure is not None:
            xi = xi * math.exp(train.uniform(gen, math.log(exposure[0]), math.log(exposure[1])))
        if shading is not None:
            xi = train.shade(xi.float(), gen, shading).double()
        out.append(train.degrade(xi.float(), gen))
    return torch.cat(out), yb


def check_augment_against_reference():
    """augment() (the sampling grid by broadcasting, the photometric jitter as one multiply-add a
    channel, in float32) gives the plain float64 reference's batches from the same draws: the same
    labels and pixels within 1e-5, on odd sizes, every option, both augmentation kinds. JPEG
    re-compression is left out here (an identity in its place, its draws still made), since a
    rounding step apart before it moves a whole block; with it, the mean difference stays tiny."""
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(9)
    x = F.avg_pool2d(torch.randint(0, 256, (3, 3, 75, 101), generator=gen).float(), 5, 1, 2).round().byte()
    y = torch.randint(0, 12, (3, 75, 101), generator=gen)
    jpeg = train.jpeg_recompress
    for k in range(8):
        for kw in ({}, {"exposure": (0.3, 1.2)}, {"exposure": (0.5, 0.9), "gamma": (1.0, 2.0)}, {"full": False},
                   {"exposure": (0.3, 1.2), "shading": 0.4}):
            for with_jpeg in (False, True):
                train.jpeg_recompress = jpeg if with_jpeg else (lambda xi, quality: xi)
                try:
                    a = train.augment(x, y, 61, 83, torch.Generator().manual_seed(k), "cpu", **kw)
                    b = augment_reference(x, y, 61, 83, torch.Generator().manual_seed(k), **kw)
                finally:
                    train.jpeg_recompress = jpeg
                assert torch.equal(a[1], b[1]), (k, kw, "labels differ")
                assert a[0].dtype == torch.float32 and a[0].shape == b[0].shape, (a[0].dtype, a[0].shape)
                d = (a[0] - b[0]).abs()
                if with_jpeg:
                    assert d.mean() < 1e-3, (k, kw, d.mean())
                else:
                    assert d.max() < 1e-5, (k, kw, d.max())


def check_grid_and_jpeg_bit_exact():
    """The two faster forms in augment() give the floats of the plain forms they replaced, bit for
    bit (so the recipe's batches are unchanged): sampling_grid() against the broadcast over the
    interleaved (x, y) pair, and jpeg_recompress() (OpenCV's merge and split) against numpy's
    channel reversal and copies; odd sizes, three images, JPEG at four qualities."""
    import cv2
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(11)
    for full, shape in ((True, (3, 3, 75, 101)), (False, (3, 3, 97, 131)), (True, (3, 3, 61, 83))):
        maps = train.affine_maps(shape, 61, 83, gen, full)
        pr = (torch.arange(61, dtype=torch.float32) + 0.5).view(1, 61, 1, 1)
        pc = (torch.arange(83, dtype=torch.float32) + 0.5).view(1, 1, 83, 1)
        m = maps.permute(0, 2, 1).reshape(3, 3, 1, 1, 2)
        plain = pc * m[:, 0] + pr * m[:, 1] + m[:, 2]
        fast = train.sampling_grid(maps, 61, 83)
        assert fast.shape == plain.shape and torch.equal(fast, plain), (full, (fast - plain).abs().max())
    # a smooth image (JPEG keeps it), some values outside [0, 1]
    xi = F.avg_pool2d(torch.rand(1, 3, 61, 83, generator=gen), 7, 1, 3) * 1.6 - 0.3
    for quality in (50, 67, 90, 95):
        rgb = (xi[0].permute(1, 2, 0).clamp(0, 1) * 255 + 0.5).byte().numpy()
        params = [cv2.IMWRITE_JPEG_QUALITY, quality]
        if hasattr(cv2, "IMWRITE_JPEG_SAMPLING_FACTOR"):
            params += [cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420]
        ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), params)
        assert ok
        back = cv2.imdecode(buf, cv2.IMREAD_COLOR)[:, :, ::-1].copy()
        plain = torch.from_numpy(back).permute(2, 0, 1)[None].float() / 255
        fast = train.jpeg_recompress(xi, quality)
        assert fast.shape == plain.shape and torch.equal(fast, plain), (quality, (fast - plain).abs().max())
        assert (fast - xi.clamp(0, 1)).abs().mean() < 0.05, "the JPEG round trip lost the image"


class FailingBatches(train.Batches):
    def __getitem__(self, k):
        if k == 3:
            raise ValueError("batch 3 is broken")
        return super().__getitem__(k)


def check_batches():
    """The batches are the same made by worker processes or by a thread, bit for bit (one thread
    each), and the same made alone (a batch depends on its seed, epoch and step only); a worker's
    error stops the run naming its cause."""
    import types
    gen = torch.Generator().manual_seed(4)
    x = torch.randint(0, 256, (10, 3, 72, 96), dtype=torch.uint8, generator=gen)
    y = torch.randint(0, 12, (10, 72, 96), generator=gen)
    a = types.SimpleNamespace(seed=7, batch=4, epochs=2, aug="full", scale=train.DEFAULT_SCALE, exposure=(0.3, 1.2), gamma=None, mix=0.5,
                              shading=0.3)
    dev = torch.device("cpu")
    ds = train.Batches(x, y, a, 64, 80, 3)
    made = {}
    torch.set_num_threads(1)
    for workers in (0, 2):
        maker = train.BatchMaker(ds, workers, 1, dev)
        made[workers] = [maker.next() for _ in range(len(ds))]
        maker.stop()
    for k, ((x0, y0), (x2, y2)) in enumerate(zip(made[0], made[2])):
        assert torch.equal(x0, x2) and torch.equal(y0, y2), f"batch {k} differs between a thread and workers"
    x5, y5 = train.Batches(x, y, a, 64, 80, 3)[5]
    assert torch.equal(x5, made[0][5][0]) and torch.equal(y5, made[0][5][1]), "batch 5 made alone differs"
    assert not torch.equal(made[0][0][0][:2], made[0][3][0][:2]), "two epochs began with the same batch"
    a.seed = 8
    assert not torch.equal(train.Batches(x, y, a, 64, 80, 3)[0][0], made[0][0][0]), "the seed changed nothing"
    for workers in (0, 2):
        maker = train.BatchMaker(FailingBatches(x, y, a, 64, 80, 3), workers, 1, dev)
        try:
            for _ in range(6):
                maker.next()
            raise AssertionError("a failing batch went unnoticed")
        except SystemExit as e:
            assert "making a batch failed" in str(e) and "batch 3 is broken" in str(e), str(e)
        maker.stop()


def check_class_mix():
    """--mix: every pixel of a mixed image is its own or the next image's, image and label together;
    the pasted labels are half the classes of the next image (rounded up), void never pasted;
    repeatable from the seed; p 0 leaves the batch as it is."""
    gen = torch.Generator().manual_seed(7)
    n, h, w = 3, 20, 24
    y = torch.randint(0, 6, (n, h, w), generator=gen)
    y[:, :2] = train.VOID
    x = (y[:, None].float() / 20 + torch.arange(n).view(n, 1, 1, 1) * 0.3).expand(n, 3, h, w).contiguous()
    xm, ym = train.class_mix(x, y, 1.0, torch.Generator().manual_seed(1))
    xr, yr = train.class_mix(x, y, 1.0, torch.Generator().manual_seed(1))
    assert torch.equal(xm, xr) and torch.equal(ym, yr), "ClassMix not repeatable from its seed"
    x0, y0 = train.class_mix(x, y, 0.0, torch.Generator().manual_seed(1))
    assert torch.equal(x0, x) and torch.equal(y0, y)
    for i in range(n):
        j = (i + 1) % n
        pasted = ~(xm[i] == x[i]).all(0)
        assert torch.equal(xm[i][:, pasted], x[j][:, pasted]) and torch.equal(ym[i][pasted], y[j][pasted])
        assert torch.equal(ym[i][~pasted], y[i][~pasted])
        classes = set(torch.unique(y[j][pasted]).tolist())
        assert train.VOID not in classes and len(classes) == 3, classes  # 6 classes present -> 3
        # a class of the next image is pasted whole, wherever it lies
        for c in classes:
            assert pasted[y[j] == c].all(), c


def check_paste():
    """--paste: image i gets exactly the next image's pixels of the given classes (image and label),
    every other pixel its own; void and the other classes never pasted; repeatable from the seed."""
    gen = torch.Generator().manual_seed(11)
    n, h, w = 4, 18, 22
    y = torch.randint(0, 6, (n, h, w), generator=gen)
    y[:, :, :3] = train.VOID
    x = torch.rand(n, 3, h, w, generator=gen)
    classes = [1, 4]
    xm, ym = train.class_mix(x, y, 1.0, torch.Generator().manual_seed(2), classes)
    xr, yr = train.class_mix(x, y, 1.0, torch.Generator().manual_seed(2), classes)
    assert torch.equal(xm, xr) and torch.equal(ym, yr), "copy-paste not repeatable from its seed"
    for i in range(n):
        j = (i + 1) % n
        m = (y[j] == 1) | (y[j] == 4)
        assert m.any() and (~m).any()
        assert torch.equal(xm[i][:, m], x[j][:, m]) and torch.equal(ym[i][m], y[j][m]), i
        assert torch.equal(xm[i][:, ~m], x[i][:, ~m]) and torch.equal(ym[i][~m], y[i][~m]), i
    x0, y0 = train.class_mix(x, y, None, torch.Generator().manual_seed(2), classes)
    assert torch.equal(x0, x) and torch.equal(y0, y)


def check_rare():
    """--rare: the anchor is a pixel of a class the image shows (16 pixels or more), drawn in
    proportion to the weights; crops placed about it show it (a 5x5 block in a corner of 360x480:
    in at least 95% of 160 crops, where random crops show it in under 80%); where the crop is not
    held back by the image's edge, the block lands in the crop's middle half through the drawn
    scale, rotation and flip (3 pixels of slack: the anchor is any pixel of the 5x5 block, plus
    rounding); repeatable from the seed; p 0 draws nothing."""
    y = torch.full((4, 360, 480), 3, dtype=torch.long)
    y[:, :50] = 0                 # Sky
    y[:, 300:305, 20:25] = 2      # a Pole block near the bottom-left corner
    y[:, 100:103, 200:203] = 6    # 9 pixels of SignSymbol: too few to be drawn
    y[:, 200:240, 200:260] = train.VOID
    weights = train.median_frequency_weights(y, 1.0)
    assert weights[6] > weights[2] > weights[0] > weights[3] > 0, weights
    g = torch.Generator().manual_seed(3)
    drawn = [train.rare_anchors(y, 1.0, weights, g) for _ in range(50)]
    for anchors in drawn:
        for i, (r, c) in enumerate(anchors):
            assert y[i, r, c] in (0, 2, 3), (r, c)  # never SignSymbol (9 pixels) nor void
    share = sum(y[0, r, c] == 2 for a in drawn for r, c in a) / 200
    assert share > 0.9, share  # Pole's weight dwarfs Sky's and Road's
    assert train.rare_anchors(y, 0.0, weights, g) == [None] * 4
    x = torch.randint(0, 256, (4, 3, 360, 480), dtype=torch.uint8, generator=g)
    shown = {"plain": 0, "rare": 0}
    for seed in range(40):
        for kind, rare in (("plain", None), ("rare", (1.0, weights))):
            _, yb = train.augment(x, y, 288, 384, torch.Generator().manual_seed(seed), "cpu", rare=rare)
            shown[kind] += sum(bool((yb[i] == 2).any()) for i in range(4))
    assert shown["rare"] >= 152 and shown["plain"] < 128, shown
    import torch.nn.functional as F
    # A block far from the centre (rotation moves it most there) that a 96x128 crop reaches
    # without being held back by the image's edge: its centroid lands within the drawn place's
    # +-2 pixels (a random pixel of the block is the anchor), plus rounding.
    y2 = torch.full((2, 360, 480), 3, dtype=torch.long)
    y2[:, 90:95, 120:125] = 2
    w2 = train.median_frequency_weights(y2, 1.0)
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        anchors = train.rare_anchors(y2, 1.0, w2, g)
        grid = train.sampling_grid(train.affine_maps(y2[:, None].shape, 96, 128, g, True, (1.0, 2.0), anchors),
                                   96, 128)
        yb = F.grid_sample(y2[:, None].float(), grid, mode="nearest", align_corners=False)[:, 0]
        for i in range(2):
            rows, cols = torch.nonzero(yb[i] == 2, as_tuple=True)
            assert rows.numel() > 0, (seed, i)
            r, c = rows.float().mean() + 0.5, cols.float().mean() + 0.5  # pixel centres
            assert 0.25 * 96 - 3 <= r <= 0.75 * 96 + 3 and 0.25 * 128 - 3 <= c <= 0.75 * 128 + 3, (seed, i, r, c)
    a1 = train.augment(x, y, 96, 128, torch.Generator().manual_seed(5), "cpu", rare=(0.5, weights))
    a2 = train.augment(x, y, 96, 128, torch.Generator().manual_seed(5), "cpu", rare=(0.5, weights))
    assert torch.equal(a1[0], a2[0]) and torch.equal(a1[1], a2[1]), "--rare not repeatable from its seed"


def lovasz_reference(probs, labels, ignore):
    """The Lovasz-softmax loss from its definition, float64 and plain Python: for each class present,
    the errors sorted in decreasing order and sum_k e_k (J(S_k) - J(S_{k-1})), J(S) = |S| / |fg u S|
    over the set S_k of the k pixels of largest error, sets as Python sets; the mean over the classes
    present. probs: C,P (float64), labels: P."""
    c, npix = probs.shape
    pix = [i for i in range(npix) if labels[i] != ignore]
    total, classes = 0.0, 0
    for k in range(c):
        fg = {i for i in pix if labels[i] == k}
        if not fg:
            continue
        err = {i: abs((1.0 if i in fg else 0.0) - float(probs[k, i])) for i in pix}
        order = sorted(pix, key=lambda i: -err[i])
        jac = lambda chosen: len(chosen) / len(fg | chosen) if chosen else 0.0
        loss, chosen = 0.0, set()
        for i in order:
            before = jac(chosen)
            chosen.add(i)
            loss += err[i] * (jac(chosen) - before)
        total, classes = total + loss, classes + 1
    return total / classes


def check_lovasz():
    """train.lovasz_softmax: against the definition (float64, sets) on random soft probabilities with
    ignored pixels and an absent class, batch 2, odd sizes (relative error < 1e-5); with one-hot
    probabilities it is the mean over the classes present of 1 - IoU; ignored pixels neither count
    nor get a gradient; its gradient is finite and not zero."""
    gen = torch.Generator().manual_seed(11)
    for trial in range(3):
        logits = torch.randn(2, 4, 5, 7, generator=gen, dtype=torch.float64) * (1 + 2 * trial)
        labels = torch.randint(0, 3, (2, 5, 7), generator=gen)  # class 3 absent
        labels[torch.rand(2, 5, 7, generator=gen) < 0.2] = 11
        got = train.lovasz_softmax(logits, labels, ignore=11).item()
        probs = logits.softmax(1).permute(1, 0, 2, 3).reshape(4, -1)
        want = lovasz_reference(probs, labels.reshape(-1).tolist(), 11)
        assert abs(got - want) <= 1e-5 * abs(want), (trial, got, want)
    # one-hot predictions: 1 - IoU a class, the mean over the classes in the labels
    pred = torch.randint(0, 4, (2, 5, 7), generator=gen)
    logits = torch.nn.functional.one_hot(pred, 4).permute(0, 3, 1, 2).double() * 60.0
    got = train.lovasz_softmax(logits, labels, ignore=11).item()
    keep = labels != 11
    ious = [((pred == k) & (labels == k) & keep).sum().item() / (((pred == k) | (labels == k)) & keep).sum().item()
            for k in range(4) if ((labels == k) & keep).any()]
    want = sum(1 - v for v in ious) / len(ious)
    assert abs(got - want) < 1e-6, (got, want)
    # ignored pixels: their logits change nothing and get no gradient
    logits = torch.randn(2, 4, 5, 7, generator=gen, requires_grad=True)
    loss = train.lovasz_softmax(logits, labels, ignore=11)
    loss.backward()
    moved = logits.detach().clone().permute(0, 2, 3, 1)
    moved[~keep] = torch.randn(int((~keep).sum()), 4, generator=gen) * 5
    moved = moved.permute(0, 3, 1, 2)
    assert train.lovasz_softmax(moved, labels, ignore=11).item() == loss.item(), "ignored pixels counted"
    g = logits.grad.permute(0, 2, 3, 1)
    assert torch.isfinite(g).all() and g[~keep].abs().max() == 0 and g[keep].abs().max() > 0, g


def labelled_pixels(full, labels):
    """Each labelled pixel (void skipped) of scores `full` (N x C x H x W), in float64 one at a time:
    (position (b, i, j), label y, the scores z as a list, their log-sum-exp)."""
    n, c, h, w = full.shape
    for b in range(n):
        for i in range(h):
            for j in range(w):
                y = int(labels[b, i, j])
                if y == train.VOID:
                    continue
                z = [float(full[b, k, i, j]) for k in range(c)]
                top = max(z)
                yield (b, i, j), y, z, top + math.log(sum(math.exp(v - top) for v in z))


def soft_target_reference(full, labels, weights, soft, alpha):
    """The distillation loss by its definition, float64, pixel by pixel."""
    num = den = 0.0
    for (b, i, j), y, z, lse in labelled_pixels(full, labels):
        target = [(1 - alpha) * (k == y) + alpha * float(soft[b, k, i, j]) for k in range(len(z))]
        num += float(weights[y]) * sum(t * (lse - v) for t, v in zip(target, z))
        den += float(weights[y])
    return num / den


def hard_pixel_reference(full, labels, weights, fraction):
    """Hard-pixel mining by its definition, float64: every labelled pixel's cross-entropy, the
    ceil(fraction x count) largest kept, their class-weighted mean."""
    losses = sorted(((lse - z[y], y) for _, y, z, lse in labelled_pixels(full, labels)), key=lambda t: -t[0])
    kept = losses[:math.ceil(len(losses) * fraction)]
    return sum(float(weights[y]) * l for l, y in kept) / sum(float(weights[y]) for _, y in kept)


def check_ohem():
    """train.hard_pixel_loss (--ohem) against its definition (float64) on random scores and labels
    with void pixels, batch 2, odd sizes, relative error < 1e-5; fraction 1 is F.cross_entropy's
    weighted mean; only the kept (hardest) pixels get a gradient, void ones none."""
    gen = torch.Generator().manual_seed(23)
    weights = torch.rand(11, generator=gen, dtype=torch.float64) + 0.2
    for trial, fraction in enumerate((1.0, 0.5, 0.3, 0.01)):
        full = torch.randn(2, 11, 5, 7, generator=gen, dtype=torch.float64) * (1 + trial)
        labels = torch.randint(0, 11, (2, 5, 7), generator=gen)
        labels[torch.rand(2, 5, 7, generator=gen) < 0.2] = train.VOID
        got = train.hard_pixel_loss(full.float(), labels, weights.float(), fraction).item()
        want = hard_pixel_reference(full, labels, weights, fraction)
        assert abs(got - want) <= 1e-5 * abs(want), (fraction, got, want)
    ce = torch.nn.functional.cross_entropy(full.float(), labels, weight=weights.float(), ignore_index=train.VOID)
    got = train.hard_pixel_loss(full.float(), labels, weights.float(), 1.0)
    assert abs(got.item() - ce.item()) <= 1e-6 * ce.item(), (got.item(), ce.item())
    x = full.float().clone().requires_grad_(True)
    train.hard_pixel_loss(x, labels, weights.float(), 0.3).backward()
    touched = (x.grad.abs().sum(1) > 0)
    valid = labels != train.VOID
    assert not touched[~valid].any(), "void pixels got a gradient"
    assert touched.sum() == math.ceil(int(valid.sum()) * 0.3), (int(touched.sum()), int(valid.sum()))


def check_distill():
    """train.soft_target_loss against its definition (float64) on random scores, labels with void
    pixels and random soft targets, batch 2, odd sizes (relative error < 1e-5); share 0 is
    F.cross_entropy's weighted mean (the plain loss) and share 1 with one-hot targets too; void
    pixels get no gradient. train.Teachers: the mean of the nets' probabilities, mirrored and flipped
    back with mirror; train.teacher_paths replaces {seq}."""
    gen = torch.Generator().manual_seed(17)
    weights = torch.rand(11, generator=gen, dtype=torch.float64) + 0.2
    for trial, alpha in enumerate((0.0, 0.3, 1.0)):
        full = torch.randn(2, 11, 5, 7, generator=gen, dtype=torch.float64) * (1 + trial)
        labels = torch.randint(0, 11, (2, 5, 7), generator=gen)
        labels[torch.rand(2, 5, 7, generator=gen) < 0.2] = train.VOID
        soft = torch.rand(2, 11, 5, 7, generator=gen, dtype=torch.float64)
        soft /= soft.sum(1, keepdim=True)
        got = train.soft_target_loss(full, labels, weights.float(), soft.float(), alpha).item()
        want = soft_target_reference(full, labels, weights, soft, alpha)
        assert abs(got - want) <= 1e-5 * abs(want), (alpha, got, want)
    ce = torch.nn.functional.cross_entropy(full.float(), labels, weight=weights.float(), ignore_index=train.VOID)
    got = train.soft_target_loss(full, labels, weights.float(), soft.float(), 0.0)
    assert abs(got.item() - ce.item()) <= 1e-6 * ce.item(), (got.item(), ce.item())
    onehot = torch.nn.functional.one_hot(labels.clamp(max=10), 11).permute(0, 3, 1, 2).float()
    got = train.soft_target_loss(full, labels, weights.float(), onehot, 1.0)
    assert abs(got.item() - ce.item()) <= 1e-6 * ce.item(), (got.item(), ce.item())
    x = full.float().clone().requires_grad_(True)
    train.soft_target_loss(x, labels, weights.float(), soft.float(), 0.5).backward()
    g = x.grad.permute(0, 2, 3, 1)
    void = labels == train.VOID
    assert g[void].abs().max() == 0 and g[~void].abs().max() > 0, "void pixels got a gradient"

    class Net(torch.nn.Module):  # a stand-in with TorchNet's call: scores that differ under mirroring
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, xb, want):
            ramp = torch.arange(xb.shape[3], dtype=xb.dtype).expand(xb.shape[0], 1, xb.shape[2], -1)
            return {"full": torch.cat([xb * self.k, ramp * 0.1 * self.k], 1)}
    xb = torch.rand(2, 3, 5, 7, generator=gen)
    p1, p2 = (Net(k)(xb, ["full"])["full"].softmax(1) for k in (1.0, 2.0))
    got = train.Teachers([Net(1.0), Net(2.0)], mirror=False)(xb)
    assert torch.allclose(got, (p1 + p2) / 2, atol=1e-6), "Teachers: not the mean of the nets' probabilities"
    m1, m2 = (Net(k)(xb.flip(3), ["full"])["full"].softmax(1).flip(3) for k in (1.0, 2.0))
    got = train.Teachers([Net(1.0), Net(2.0)], mirror=True)(xb)
    assert torch.allclose(got, (p1 + p2 + m1 + m2) / 4, atol=1e-6) and not torch.allclose(got, (p1 + p2) / 2, atol=1e-3)
    assert torch.allclose(got.sum(1), torch.ones(2, 5, 7), atol=1e-5)
    assert train.teacher_paths("t/a-{seq}.h5, t/b.h5,", "0001TP", False) == ["t/a-0001TP.h5", "t/b.h5"]
    assert train.teacher_paths("t/a-{seq}.h5", None, True) == ["t/a-final.h5"]
    assert train.teacher_paths("t/a-{seq}.h5", None, False) == ["t/a-train.h5"]


def check_dropout():
    """--dropout: in training mode each input element of a 1x1 convolution (the classifier's) is
    zeroed with probability P and the rest scaled by 1 / (1 - P); the 7x7 layers' inputs are those of
    the net without dropout; in evaluation mode the outputs are the net's without dropout."""
    import scenelab_torch as st
    torch.manual_seed(3)
    net = st.TorchNet(st.network_text("reference", 11))
    for t in net.params.values():
        if t.requires_grad:
            torch.nn.init.normal_(t, std=0.1)
    x = torch.rand(2, 3, 61, 53)
    orig = st.F.conv2d

    def inputs(p):  # (kernel size, input) of each of the net's convolutions, in order
        seen = []

        def spy(v, w, *rest, **kw):
            if w.shape[-1] == w.shape[-2]:  # not the contrast normalisation's 1x13 and 13x1 blurs
                seen.append((w.shape[-1], v.detach().clone()))
            return orig(v, w, *rest, **kw)

        net.dropout = p
        st.F.conv2d = spy
        try:
            out = net(x, ["scores"])["scores"]
        finally:
            st.F.conv2d = orig
        return seen, out

    net.train()
    plain, plain_out = inputs(0.0)
    dropped, dropped_out = inputs(0.5)
    assert [k for k, _ in plain] == [7, 7, 7, 1, 1], [k for k, _ in plain]
    assert not torch.equal(dropped_out, plain_out), "dropout changed nothing in training mode"
    for i in range(3):
        assert torch.equal(plain[i][1], dropped[i][1]), f"the input of 7x7 layer {i + 1} changed"
    a, b = plain[3][1], dropped[3][1]  # the first 1x1's input: nothing before it was dropped
    kept = b != 0
    assert torch.allclose(b[kept], 2 * a[kept]), "kept elements not scaled by 1 / (1 - P)"
    frac = 1 - kept.float().sum().item() / (a != 0).float().sum().item()
    assert 0.4 < frac < 0.6, frac  # about half of the non-zero elements dropped
    assert (dropped[4][1] == 0).float().mean() > (plain[4][1] == 0).float().mean(), "the second 1x1's input"
    net.eval()
    net.dropout = 0.5
    evaluated = net(x, ["scores"])["scores"]
    assert torch.equal(evaluated, plain_out), "dropout changed the evaluation-mode output"


def check_aux():
    """--aux: one 1x1 head a scale on the multiscale net's concat inputs (256 channels each), its
    scores resampled to the input's size as F.interpolate would; TrainStep's full scores are the
    net's; the heads' loss alone reaches the extractor and not the classifier; the reference net
    has no concat to supervise."""
    import torch.nn.functional as F
    import scenelab_torch as st
    torch.manual_seed(7)
    net = st.TorchNet(st.network_text("multiscale", 11))
    for t in net.params.values():
        if t.requires_grad:
            torch.nn.init.normal_(t, std=0.05)
    aux = train.AuxHeads(net, 11)
    assert list(aux.inputs) == ["s1r3", "s2up", "s4up"], aux.inputs
    assert [tuple(h.weight.shape) for h in aux.heads] == [(11, 256, 1, 1)] * 3
    x = torch.rand(2, 3, 45, 61)
    full, scores = train.TrainStep(net, aux)(x)
    assert torch.equal(full, net(x, ["full"])["full"]), "TrainStep's full scores are not the net's"
    assert len(scores) == 3 and all(tuple(v.shape) == (2, 11, 45, 61) for v in scores)
    feats = net(x, ["s2up"])["s2up"]
    h = aux.heads[1]
    want = F.interpolate(F.conv2d(feats, h.weight, h.bias), size=(45, 61), mode="bilinear", align_corners=False)
    assert torch.allclose(scores[1], want, atol=1e-5), (scores[1] - want).abs().max()
    y = torch.randint(0, 11, (2, 45, 61))
    sum(F.cross_entropy(v, y) for v in scores).backward()
    assert net.p("conv1", "weight").grad is not None and net.p("conv1", "weight").grad.abs().sum() > 0
    assert net.p("fc1", "weight").grad is None, "the heads' loss reached the classifier"
    full0, none = train.TrainStep(net)(x)
    assert none == [] and torch.equal(full0, full)
    try:
        train.AuxHeads(st.TorchNet(st.network_text("reference", 11)), 11)
        raise AssertionError("AuxHeads accepted the reference net")
    except ValueError as e:
        assert "concat" in str(e), e


def check_batchnorm():
    """--batchnorm: in training mode a normalised convolution's output is (conv - batch mean) /
    sqrt(batch var + eps) x gamma + beta, with the statistics of the group's first use in the pass
    (the multiscale extractor's full-resolution one) applied at every scale, and the running
    statistics move towards them by the momentum; in evaluation mode the net equals its folded()
    copy, a net of the plain graph, within 1e-5 of the largest score (float64 folding)."""
    import scenelab_torch as st
    torch.manual_seed(5)
    net = st.TorchNet(st.network_text("multiscale", 11)).add_batchnorm()
    plain = st.TorchNet(st.network_text("multiscale", 11))
    assert sorted(net.norms.keys()) == ["conv1", "conv2", "conv3", "fc1"], list(net.norms.keys())
    with torch.no_grad():
        for key, t in net.params.items():
            if t.requires_grad:
                t.normal_(std=0.1)
            plain.params[key].copy_(t)
        for bn in net.norms.values():
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(std=0.2)
    x = torch.rand(3, 3, 45, 61)
    ref = plain(x, ["s1c1", "s2c1"])  # the first layer's convolutions, before any normalisation
    net.train()
    out = net(x, ["s1c1", "s2c1"])
    bn = net.norms["conv1"]
    c1 = ref["s1c1"].double()
    mean, var = c1.mean((0, 2, 3)), c1.var((0, 2, 3), unbiased=False)
    for node in ("s1c1", "s2c1"):  # both scales normalised by the full resolution's statistics
        want = ((ref[node].double() - mean.view(1, -1, 1, 1)) / (var + bn.eps).sqrt().view(1, -1, 1, 1)
                * bn.weight.double().view(1, -1, 1, 1) + bn.bias.double().view(1, -1, 1, 1))
        err = (out[node].double() - want).abs().max() / want.abs().max()
        assert err < 1e-5, (node, err.item())
    own = ref["s2c1"].double().mean((0, 2, 3))  # the half scale's own statistics differ: not used
    assert (own - mean).abs().max() > 1e-3, "the test cannot tell the scales' statistics apart"
    n = c1.numel() // c1.shape[1]
    assert torch.allclose(bn.running_mean.double(), 0.1 * mean, atol=1e-6), "running mean"
    assert torch.allclose(bn.running_var.double(), 0.9 + 0.1 * var * n / (n - 1), atol=1e-5), "running var"
    net(x)  # a second pass moves the running statistics again: fold non-trivial statistics
    net.eval()
    folded = net.folded()
    assert not folded.norms and [k for k, _ in folded.param_items()] == [k for k, _ in plain.param_items()]
    y = torch.rand(2, 3, 53, 47)
    a, b = net(y, ["full"])["full"], folded(y, ["full"])["full"]
    err = ((a - b).abs().max() / a.abs().max()).item()
    assert err < 1e-5, err
    assert not torch.allclose(a, plain(y, ["full"])["full"], atol=1e-3), "normalisation changed nothing"
    ref_net = st.TorchNet(st.network_text("reference", 11)).add_batchnorm()
    assert sorted(ref_net.norms.keys()) == ["conv1", "conv2", "conv3", "fc1"], list(ref_net.norms.keys())


def make_set(root):
    rng = np.random.default_rng(0)
    for split, seqs in (("train", ["AAA1", "BBB2"]), ("val", ["CCC3"])):
        os.makedirs(os.path.join(root, split, "images"))
        os.makedirs(os.path.join(root, split, "labels"))
        for seq in seqs:
            for i in range(3):
                lab = np.zeros((72, 96), np.uint8)
                lab[:36] = 0  # sky above, road below, a car box: learnable from colour
                lab[36:] = 3
                lab[40:60, 20 + 10 * i:50 + 10 * i] = 8
                img = np.array(train.PALETTE, np.uint8)[lab][:, :, ::-1].copy()
                img = np.clip(img.astype(int) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
                name = f"{seq}_{i:05d}"
                cv2.imwrite(os.path.join(root, split, "images", name + ".jpg"), img)
                cv2.imwrite(os.path.join(root, split, "labels", name + ".png"), lab)


def run(root, out, *extra):
    cmd = [sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network", "reference",
           "--out", out, "--epochs", "2", "--batch", "2", "--crop", "64x80", "--eval-every", "1", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = [l for l in r.stdout.splitlines() if l.startswith("SUMMARY ")]
    assert summary and os.path.getsize(out) > 0, r.stdout[-2000:]
    return summary[0]


def check_bench_batches(root, tmp):
    """tools/bench_batches.py runs on a set, reports images a second for this train.py and a peer
    (here a copy of itself: bit-identical batches), and refuses a peer that is not a train.py."""
    peer = os.path.join(tmp, "peer_train.py")
    shutil.copy(os.path.join(src, "tools", "train.py"), peer)
    bench = [sys.executable, os.path.join(src, "tools", "bench_batches.py"), "--data", root, "--images", "4",
             "--batch", "2", "--batches", "2", "--rounds", "2", "--crop", "64x80"]
    r = subprocess.run(bench + ["--peer", peer], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.count(" images/s ") == 2 and "bit-identical to the peer's: yes" in r.stdout, r.stdout
    # train.py's own checks apply to the augmentation arguments
    r = subprocess.run(bench + ["--", "--exposure", "none"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "augmentation --exposure none" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(bench + ["--", "--scale", "9,1"], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "--scale 9,1: needs" in r.stderr, r.stderr[-2000:]
    r = subprocess.run(bench + ["--peer", os.path.join(src, "tools", "crossval.py")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode != 0 and "no Batches class" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]


def check_crossval(root, work):
    """tools/crossval.py: one run per held-out sequence plus the final and the train-only run, a
    table of the three, the gap between val and their mean; spread over two GPUs by image count."""
    cmd = [sys.executable, os.path.join(src, "tools", "crossval.py"), "--data", root, "--networks",
           "reference", "--epochs", "1", "--work", work, "--final", "--trainonly", "reference",
           "--jobs", "3", "--gpus", "0,1", "--workers", "2", "--", "--batch", "2", "--crop", "64x80",
           "--eval-every", "1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cv = json.load(open(os.path.join(work, "crossval.json")))
    # without --workers: the cores less one a run, shared by the runs' images where all run at once
    # (largest remainders get the cores left by rounding down), equally where runs wait their turn
    import crossval
    assert crossval.share_workers(32, [406, 367, 163], 3) == [13, 11, 5]
    assert crossval.share_workers(16, [406, 367, 163], 3) == [6, 5, 2]
    assert crossval.share_workers(16, [406, 367, 163], 2) == [7, 7, 7]
    assert crossval.share_workers(2, [406, 367, 163], 3) == [1, 1, 1]
    assert cv["sequences"] == ["AAA1", "BBB2", "CCC3"], cv
    assert sorted(cv["runs"]) == ["camvid-reference", "reference-full-AAA1", "reference-full-BBB2",
                                  "reference-full-CCC3", "reference-full-trainonly"], cv["runs"]
    mean = cv["means"]["reference-full"]["global_acc"]
    runs = [cv["runs"]["reference-full-" + s]["global_acc"] for s in cv["sequences"]]
    assert abs(mean - sum(runs) / 3) < 1e-9, (mean, runs)
    gap = cv["gaps"]["reference-full"]["global_acc"]
    assert abs(gap - (cv["runs"]["reference-full-trainonly"]["global_acc"] - mean)) < 1e-9, cv["gaps"]
    assert "val (train only) - mean reference-full" in r.stdout, r.stdout
    # --workers reaches every run, each worker with one thread (train.py's default)
    assert "5 runs, 3 at once, 2 batch workers each" in r.stdout, r.stdout
    for name in cv["runs"]:
        with open(os.path.join(work, name + ".out")) as f:
            s = json.loads([l for l in f if l.startswith("SUMMARY ")][0][len("SUMMARY "):])
        assert (s["workers"], s["threads"]) == (2, 1), (name, s["workers"], s["threads"])
    # longest first, each to the GPU with fewer images running: train + val 9 images, 3 a sequence
    # (make_set), so the final starts on GPU 0, then two held-out runs (6 each) on GPU 1 (6 < 9, 6 < 9)
    placed = [l for l in r.stdout.splitlines() if ": GPU " in l]
    assert placed[:3] == ["camvid-reference: GPU 0, 9 images an epoch", "reference-full-AAA1: GPU 1, 6 images an epoch",
                          "reference-full-BBB2: GPU 1, 6 images an epoch"], placed
    assert os.path.getsize(os.path.join(work, "camvid-reference.h5")) > 0
    assert "mean reference-full" in r.stdout, r.stdout
    assert cv["pending"] == [], cv["pending"]
    # as each run ends crossval.json is rewritten with the figures so far and the runs pending (a
    # batch cut short keeps what it finished): report() on this batch's logs, two runs pending
    import types
    a = types.SimpleNamespace(work=work, epochs=1)
    runs = [(n, [], 0) for n in sorted(cv["runs"])]
    plan = crossval.Plan(["reference"], ["full"], [0], cv["sequences"], ["reference"], runs)
    pending = {"reference-full-CCC3", "camvid-reference"}
    failed = crossval.report(a, plan, pending=pending, show=False)
    part = json.load(open(os.path.join(work, "crossval.json")))
    assert not failed and part["pending"] == sorted(pending), part["pending"]
    assert sorted(part["runs"]) == ["reference-full-AAA1", "reference-full-BBB2", "reference-full-trainonly"], part
    assert part["runs"]["reference-full-AAA1"] == cv["runs"]["reference-full-AAA1"], part["runs"]
    assert part["means"] == {} and part["gaps"] == {}, part  # no mean until every sequence is in
    # --progress: a running run's epoch and time left at its pace since its first epoch (which
    # holds the start-up), from its log, a line being written skipped; nothing before two epochs
    log = os.path.join(work, "progress.log")
    with open(log, "w") as f:
        f.write('{"epoch": 1, "loss": 2.5, "time_s": 60.0}\n{"epoch": 2, "loss": 2.0, "time_s": 62.0}\n'
                '{"epoch": 11, "loss": 1.0, "time_s": 80.0, "global_acc": 0.5}\n{"epoch": 12, "lo')
    assert crossval.progress_of(log, 100) == (11, 80.0, 178.0), crossval.progress_of(log, 100)
    with open(log, "w") as f:
        f.write('{"epoch": 1, "loss": 2.5, "time_s": 60.0}\n')
    assert crossval.progress_of(log, 100) is None and crossval.progress_of(log + ".none", 100) is None
    # a run that ended without a summary is reported (and fails the batch); pending ones are not
    assert crossval.report(a, crossval.Plan(["reference"], ["full"], [0], cv["sequences"], [],
                                            runs + [("reference-full-ZZZ9", [], 0)]), show=False)


def check_crossval_seeds(root, work):
    """crossval.py --seeds 0,1: every held-out sequence once a seed, each run given its seed; each
    seed's mean over the sequences, the mean over all runs and the spread between the seeds."""
    base = [sys.executable, os.path.join(src, "tools", "crossval.py"), "--data", root, "--networks",
            "reference", "--epochs", "1", "--work", work, "--jobs", "3", "--workers", "0"]
    tail = ["--", "--batch", "2", "--crop", "64x80", "--eval-every", "1", "--threads", "1"]
    for bad, why in ((["--seeds", "0,x"], "expected seeds"), (["--seeds", "1,1"], "named twice")):
        r = subprocess.run(base + bad + tail, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
    r = subprocess.run(base + ["--seeds", "3,1"] + tail[:-2] + ["--seed", "2"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "not train.py's --seed" in r.stderr, r.stderr
    r = subprocess.run(base + ["--seeds", "3,1"] + tail, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cv = json.load(open(os.path.join(work, "crossval.json")))
    assert cv["seeds"] == [3, 1], cv["seeds"]
    names = [f"reference-full-{q}-seed{k}" for k in (3, 1) for q in cv["sequences"]]
    assert sorted(cv["runs"]) == sorted(names), cv["runs"]
    for name in names:
        with open(os.path.join(work, name + ".out")) as f:
            s = json.loads([l for l in f if l.startswith("SUMMARY ")][0][len("SUMMARY "):])
        assert s["seed"] == int(name[-1]), (name, s["seed"])
    per_seed = cv["seed_means"]["reference-full"]
    for k in ("3", "1"):
        runs = [cv["runs"][f"reference-full-{q}-seed{k}"]["mean_iou"] for q in cv["sequences"]]
        assert abs(per_seed[k]["mean_iou"] - sum(runs) / 3) < 1e-9, (k, per_seed, runs)
    every = [cv["runs"][n]["global_acc"] for n in names]
    assert abs(cv["means"]["reference-full"]["global_acc"] - sum(every) / 6) < 1e-9, cv["means"]
    spread = cv["spread"]["reference-full"]["class_acc"]
    assert abs(spread - abs(per_seed["3"]["class_acc"] - per_seed["1"]["class_acc"])) < 1e-9, cv["spread"]
    assert "mean reference-full seed 3" in r.stdout and "spread reference-full (2 seeds)" in r.stdout, r.stdout


def check_set_detect(model):
    """train.py writes CamVid's detection settings; tools/set_detect.py shows, replaces and
    clears them in place, and refuses an unknown class or key leaving the file as it was."""
    import h5py

    def attr(path=model):
        with h5py.File(path, "r") as f:
            v = f.attrs.get("detect", None)
        return v.decode() if isinstance(v, bytes) else v

    def tool(*args):
        return subprocess.run([sys.executable, os.path.join(src, "tools", "set_detect.py"), model, *args],
                              capture_output=True, text=True, timeout=120)

    shipped = train.st.detect_text(train.st.parse_detect(train.CAMVID_DETECT), train.CLASSES)
    assert shipped.startswith("Car: ") and "\nPedestrian: " in shipped, shipped  # one line a class
    assert attr() == shipped, attr()
    for name in ("camvid-multiscale.h5", "camvid-reference.h5"):  # the shipped files carry the same
        v = attr(os.path.join(src, "weights", name))
        assert v == shipped, f"weights/{name}: detect attribute {v!r}, train.py's --detect gives {shipped!r}"
    r = tool()
    assert r.returncode == 0 and r.stdout.strip() == shipped.strip(), r.stdout + r.stderr
    with open(model, "rb") as f:
        params = f.read()
    for bad, why in (("Bus: threshold=0.3", "unknown classes ['Bus']"), ("Car: treshold=0.3", "'treshold=0.3'"),
                     ("Car threshold=0.3", "is not 'CLASS: key=value ...'")):
        r = tool("--set", bad)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
        assert attr() == shipped, attr()
    r = tool("--set", "Car: threshold=0.35; Pedestrian: aspects=0.3,0.5")
    assert r.returncode == 0 and attr() == "Car: threshold=0.35\nPedestrian: aspects=0.3,0.5\n", attr()
    # --update: only the keys and classes named change (a key replaced in place, a new one appended)
    r = tool("--update", "Pedestrian: threshold=0.2 aspects=0.4")
    assert r.returncode == 0 and attr() == "Car: threshold=0.35\nPedestrian: aspects=0.4 threshold=0.2\n", attr()
    for bad, why in (("Bus: threshold=0.3", "unknown classes ['Bus']"), ("Car: nms", "'nms' is not key=value"),
                     ("Car: treshold=0.3", "'treshold=0.3'")):
        r = tool("--update", bad)
        assert r.returncode != 0 and why in r.stderr, (bad, r.stderr)
        assert attr() == "Car: threshold=0.35\nPedestrian: aspects=0.4 threshold=0.2\n", attr()
    r = tool("--clear")
    assert r.returncode == 0 and attr() is None and "no detection settings" in r.stdout, r.stdout
    with open(model, "rb") as f:
        assert len(f.read()) <= len(params) + 4096  # attributes only: the weights are not rewritten


def main():
    check_augment()
    check_shading()
    check_augment_against_reference()
    check_grid_and_jpeg_bit_exact()
    check_batches()
    check_class_mix()
    check_paste()
    check_rare()
    check_dropout()
    check_batchnorm()
    check_aux()
    check_lovasz()
    check_distill()
    check_ohem()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "camvid")
        make_set(root)
        check_bench_batches(root, tmp)
        s = run(root, os.path.join(tmp, "holdout.h5"), "--holdout", "BBB2")
        assert '"selection": "sequence BBB2"' in s and '"exposure": [0.3, 1.2], "gamma": null' in s, s
        # the recipe's defaults: the illumination field with --aug full, dropout on the classifier,
        # batch normalisation (folded at export)
        assert '"shading": 0.3,' in s and '"dropout": 0.5,' in s and '"batchnorm": true,' in s, s
        assert '"scale": [0.5, 2.0], "ohem": 1.0,' in s, s  # the recipe: scale 0.5-2, every pixel
        check_crossval(root, os.path.join(tmp, "cv"))
        check_crossval_seeds(root, os.path.join(tmp, "cv-seeds"))
        s = run(root, os.path.join(tmp, "final.h5"), "--final", "--aug", "basic")
        assert '"best_epoch": 2' in s and "--final" in s and '"exposure": null' in s and '"shading": null' in s, s
        assert '"scale": null,' in s, s  # --aug basic draws its own scales
        s = run(root, os.path.join(tmp, "plain.h5"), "--last", "--exposure", "none", "--gamma", "1,2", "--epochs", "1",
                "--threads", "2", "--workers", "0")
        assert '"exposure": null, "gamma": [1.0, 2.0]' in s and '"workers": 0, "threads": 2,' in s, s
        assert '"compile": false' in s, s  # --compile auto compiles on a GPU only
        # --ema exports the moving average and logs the raw weights' figures beside it; --mix is recorded
        s = run(root, os.path.join(tmp, "ema.h5"), "--last", "--mix", "0.5", "--ema", "0.9")
        assert '"mix": 0.5, "ema": 0.9' in s and '"val_raw_last": {' in s, s
        s = run(root, os.path.join(tmp, "paste.h5"), "--last", "--paste", "0.5", "--paste-classes", "Car,Pole",
                "--epochs", "1")
        assert '"paste": 0.5, "paste_classes": ["Car", "Pole"],' in s, s
        # the exported model's name gives the recipe options given (here run()'s and the paste's),
        # so a file trained off the recipe says so; the recipe's own options name none
        import h5py
        with h5py.File(os.path.join(tmp, "paste.h5"), "r") as f:
            got = f.attrs["name"]
        got = got.decode() if isinstance(got, bytes) else str(got)
        assert got == ("camvid-reference (tools/train.py --epochs 1 --batch 2 --crop 64x80 --paste 0.5 "
                       "--paste-classes Car,Pole, seed 0, epoch 1)"), got
        assert train.parse_args(["--data", "d", "--out", "o"]).departures == ""
        assert train.parse_args(["--data", "d", "--out", "o", "--no-batchnorm", "--balance", "1",
                                 "--shading", "none"]).departures == "--shading none --no-batchnorm --balance 1"
        assert train.parse_args(["--data", "d", "--out", "o", "--init", "/x/a.h5", "--teacher", "/y/t-{seq}.h5,u.h5"]
                                ).departures == "--teacher t-{seq}.h5,u.h5 --init a.h5"  # model files by name
        s = run(root, os.path.join(tmp, "dropout.h5"), "--last", "--dropout", "0.3", "--epochs", "1")
        assert '"dropout": 0.3' in s, s
        s = run(root, os.path.join(tmp, "noshade.h5"), "--last", "--dropout", "0", "--shading", "none", "--epochs", "1",
                "--no-batchnorm")
        assert '"shading": null' in s and '"dropout": 0.0' in s and '"batchnorm": false,' in s, s
        # --batchnorm: the file holds the plain graph's parameters (folded), and labels as trained
        s = run(root, os.path.join(tmp, "bn.h5"), "--last", "--batchnorm", "--epochs", "2")
        assert '"batchnorm": true,' in s, s
        import scenelab_torch as st
        bn_net = st.load_model(os.path.join(tmp, "bn.h5"))[0]
        assert [k for k, _ in bn_net.param_items()] == [k for k, _ in st.TorchNet(bn_net.text).param_items()]
        summary = json.loads(s[len("SUMMARY "):])  # run() returns the SUMMARY line
        _, xv, yv = train.load_split(root, "val")
        m = train.metrics(train.evaluate(bn_net, xv, yv, torch.device("cpu")))
        assert abs(m["global_acc"] - summary["val"]["global_acc"]) < 1e-3, (m, summary["val"])
        s = run(root, os.path.join(tmp, "ohem.h5"), "--last", "--scale", "0.75,1.5", "--ohem", "0.3", "--epochs", "1")
        assert '"scale": [0.75, 1.5], "ohem": 0.3,' in s, s
        assert '"batch": 2, "crop": "64x80",' in s, s  # run()'s --batch and --crop, as given
        missing = set(train.RECIPE_OPTIONS) - set(json.loads(s[len("SUMMARY "):]))
        assert not missing, f"SUMMARY leaves out recipe options {sorted(missing)}: {s}"
        s = run(root, os.path.join(tmp, "shade.h5"), "--last", "--shading", "0.5", "--rare", "0.5", "--epochs", "1")
        assert '"shading": 0.5,' in s and '"rare": 0.5,' in s, s
        # --aux: the heads train beside the multiscale net; the file holds the plain graph's parameters
        s = run(root, os.path.join(tmp, "aux.h5"), "--network", "multiscale", "--last", "--aux", "0.4", "--epochs", "1")
        assert '"aux": 0.4, "optimizer": "adamw", "lr": 0.002, "weight_decay": 0.05,' in s, s  # the recipe's
        # --optimizer sgd: its own defaults for the rate and the L2 factor, recorded
        s = run(root, os.path.join(tmp, "sgd.h5"), "--last", "--optimizer", "sgd", "--epochs", "1")
        assert '"optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0005,' in s, s
        aux_net = st.load_model(os.path.join(tmp, "aux.h5"))[0]
        assert [k for k, _ in aux_net.param_items()] == [k for k, _ in st.TorchNet(st.network_text("multiscale", 11)).param_items()]
        s = run(root, os.path.join(tmp, "lovasz.h5"), "--last", "--lovasz", "0.5", "--lr", "0.001", "--epochs", "1")
        assert '"lovasz": 0.5,' in s and '"lr": 0.001,' in s, s  # the summary records the rate
        # --balance: the median-frequency weights to a power (0.5 their square roots, 0 none);
        # --weight-decay reaches the optimiser (recorded in the summary; 0.01, not the default 0.05)
        weights = {}
        for power in ("1", "0.5", "0"):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                                "reference", "--out", os.path.join(tmp, "b.h5"), "--epochs", "1", "--batch", "2",
                                "--crop", "64x80", "--last", "--balance", power, "--weight-decay", "0.01"],
                               capture_output=True, text=True, timeout=600)
            assert r.returncode == 0 and '"weight_decay": 0.01' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
            line = [l for l in r.stdout.splitlines() if l.startswith("class weights ")][0]
            weights[power] = np.array(json.loads(line[len("class weights "):]))
        w1, w5, w0 = weights["1"], weights["0.5"], weights["0"]
        present = w1 > 0  # the synthetic set has Sky, Road and Car only
        assert present.sum() == 3 and not np.allclose(w1[present], 1), w1
        assert np.allclose(w5, np.sqrt(w1), rtol=2e-3, atol=2e-3), (w5, w1)
        assert np.array_equal(w0, present.astype(float)), w0
        for bad, why in (("--mix=1.5", "a probability"), ("--paste=2", "--paste 2: a probability, 0-1"),
                         (["--paste", "1", "--paste-classes", "Pole,Lamp"], "--paste-classes Pole,Lamp: expected names from Sky, "),
                         ("--paste-classes=Pole", "--paste-classes needs --paste P"), ("--balance=-1", "--balance -1: expected a power"),
                         ("--weight-decay=nan", "--weight-decay nan: expected 0 <= WD < 1"), ("--ema=1", "a decay between 0 and 1"),
                         ("--threads=0", "--threads 0: at least 1"),
                         ("--shading=-1", "--shading -1: needs 0 <= AMP <= 2"),
                         ("--shading=x", "--shading x: expected an amplitude"),
                         ("--dropout=1", "--dropout 1: a probability in [0, 1)"),
                         ("--rare=2", "--rare 2: a probability, 0-1, and --aug full"),
                         (["--aug", "basic", "--rare", "0.5"], "--rare 0.5: a probability, 0-1, and --aug full"),
                         ("--scale=0,1", "--scale 0,1: needs 0.1 <= LO <= HI <= 10"),
                         ("--scale=2", "--scale 2: expected LO,HI"),
                         ("--scale=none", "--scale none: expected LO,HI, e.g. 0.5,2"),
                         ("--gamma=x", "--gamma x: expected LO,HI, e.g. 1,2"),
                         (["--aug", "basic", "--scale", "1,2"], "--scale 1,2: needs 0.1 <= LO <= HI <= 10 and --aug full"),
                         ("--ohem=0", "--ohem 0: the fraction of pixels kept"),
                         ("--ohem=nan", "--ohem nan: the fraction of pixels kept"),
                         (["--ohem", "0.5", "--teacher", "t.h5"], "--ohem with --teacher: not supported"),
                         (["--batchnorm", "--init", "x.h5"], "--batchnorm with --init: a model file holds no batch"),
                         ("--aux=-1", "--aux -1: a weight from 0 (none) to 10"),
                         ("--lr=0", "--lr 0: expected a rate above 0"),
                         (["--network", "reference", "--aux", "0.4"], "--aux 0.4: deep supervision needs --network multiscale"),
                         ("--lovasz=-1", "--lovasz -1: a weight from 0 (none) to 10"), ("--workers=-1", "--workers -1: 0 or more"),
                         *((("--compile=on", "--compile on: needs torch.compile (PyTorch 2)"),)
                           if not hasattr(torch, "compile") else ())):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                                os.path.join(tmp, "z.h5"), *([bad] if isinstance(bad, str) else bad)],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode != 0 and why in r.stderr, (bad, r.stderr[-2000:])
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                            os.path.join(tmp, "z.h5"), "--aug", "basic", "--exposure", "0.3,1.2"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "needs 0 < LO <= HI < 100 and --aug full" in r.stderr, r.stderr[-2000:]
        missing = os.path.join(tmp, "no-such-set")
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", missing, "--out",
                            os.path.join(tmp, "z.h5")], capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and os.path.join(missing, "train", "images") + ": no .jpg images" in r.stderr \
            and "Traceback" not in r.stderr, r.stderr[-2000:]
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                            os.path.join(tmp, "z.h5"), "--aug", "basic", "--shading", "0.3"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "needs 0 <= AMP <= 2 (0: none) and --aug full" in r.stderr, r.stderr[-2000:]
        check_set_detect(os.path.join(tmp, "final.h5"))
        # --teacher: {seq} becomes the held-out sequence; the summary records the files and share;
        # a missing teacher is refused naming the file, before any training
        os.makedirs(os.path.join(tmp, "teachers"))
        shutil.copy(os.path.join(tmp, "final.h5"), os.path.join(tmp, "teachers", "t-BBB2.h5"))
        s = run(root, os.path.join(tmp, "student.h5"), "--holdout", "BBB2", "--epochs", "1", "--teacher",
                os.path.join(tmp, "teachers", "t-{seq}.h5") + "," + os.path.join(tmp, "holdout.h5"),
                "--distill", "0.7", "--teacher-mirror")
        assert ('"teacher": ["%s", "%s"], "distill": 0.7, "teacher_mirror": true' % (
            os.path.join(tmp, "teachers", "t-BBB2.h5"), os.path.join(tmp, "holdout.h5"))) in s, s
        for extra, why in ((["--holdout", "AAA1", "--teacher", os.path.join(tmp, "teachers", "t-{seq}.h5")],
                            "--teacher " + os.path.join(tmp, "teachers", "t-AAA1.h5") + ": no such file"),
                           (["--teacher", os.path.join(tmp, "holdout.h5"), "--distill", "1.5"],
                            "--distill 1.5: the teachers' share of the target, 0 to 1"),
                           (["--teacher-mirror"], "--teacher-mirror needs --teacher")):
            r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--out",
                                os.path.join(tmp, "z.h5"), *extra], capture_output=True, text=True, timeout=300)
            assert r.returncode != 0 and why in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr[-2000:])
        # --init: fine-tuning starts from the file's weights and statistics; a file of another network is refused
        s = run(root, os.path.join(tmp, "tuned.h5"), "--final", "--init", os.path.join(tmp, "final.h5"), "--lr", "1e-4")
        assert '"batchnorm": false,' in s, s  # a file holds no batch statistics: fine-tuned without them
        import h5py
        with h5py.File(os.path.join(tmp, "final.h5"), "r") as f0, h5py.File(os.path.join(tmp, "tuned.h5"), "r") as f1:
            assert np.array_equal(f0["params/pre/mean"][()], f1["params/pre/mean"][()]), "statistics not kept"
            w0, w1 = f0["params/conv1/weight"][()], f1["params/conv1/weight"][()]
            # trained on, not reinitialised: close to the start, not equal to it
            assert not np.array_equal(w0, w1) and np.abs(w1 - w0).max() < 0.1 * np.abs(w0).max(), np.abs(w1 - w0).max()
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                            "multiscale", "--out", os.path.join(tmp, "y.h5"), "--init", os.path.join(tmp, "final.h5")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "its graph is not this --network's" in r.stderr + r.stdout, r.stderr[-2000:]
        # a run cut short by --minutes says so (its one-cycle rate had not decayed) and keeps its last epoch
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root, "--network",
                            "reference", "--out", os.path.join(tmp, "short.h5"), "--epochs", "3", "--batch", "2",
                            "--crop", "64x80", "--final", "--minutes", "0"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "stopped by --minutes 0 after epoch 1 of 3" in r.stderr, r.stderr[-2000:]
        assert '"epochs_run": 1' in r.stdout and os.path.getsize(os.path.join(tmp, "short.h5")) > 0, r.stdout[-2000:]
        r = subprocess.run([sys.executable, os.path.join(src, "tools", "train.py"), "--data", root,
                            "--out", os.path.join(tmp, "x.h5"), "--holdout", "ZZZ9"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and "no image of sequence ZZZ9" in r.stderr + r.stdout, r.stderr
    print("train.py smoke test passed")


if __name__ == "__main__":
    main()

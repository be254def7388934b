#!/usr/bin/env python3
"""tools/train_augment.py through train.py's names: the augmentation's output (shapes, labels in
range, void where the scaled image does not cover the crop, repeatable from its seed) against
float64 references, the illumination field, JPEG re-compression, the batches made by worker
processes, class mixing, thin-class pastes and rare-class crops. Exit 77 (skipped) without torch or
OpenCV.
    train_augment_test.py SOURCE_DIR
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tool_test_env  # noqa: E402

src = tool_test_env.setup('cv2', 'numpy', 'torch')
import numpy as np  # noqa: E402
import torch  # noqa: E402
import train  # noqa: E402
import train_augment  # noqa: E402  (where augment() looks up jpeg_recompress)


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
    jpeg = train_augment.jpeg_recompress
    for k in range(8):
        for kw in ({}, {"exposure": (0.3, 1.2)}, {"exposure": (0.5, 0.9), "gamma": (1.0, 2.0)}, {"full": False},
                   {"exposure": (0.3, 1.2), "shading": 0.4}):
            for with_jpeg in (False, True):
                train_augment.jpeg_recompress = jpeg if with_jpeg else (lambda xi, quality: xi)
                try:
                    a = train.augment(x, y, 61, 83, torch.Generator().manual_seed(k), "cpu", **kw)
                    b = augment_reference(x, y, 61, 83, torch.Generator().manual_seed(k), **kw)
                finally:
                    train_augment.jpeg_recompress = jpeg
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


def main():
    check_augment()
    check_shading()
    check_augment_against_reference()
    check_grid_and_jpeg_bit_exact()
    check_batches()
    check_class_mix()
    check_paste()
    check_rare()
    print("train_augment: ok")


if __name__ == "__main__":
    main()

"""tools/train.py's batches: the augmentation (scale, crop, flip, rotation, colour, exposure,
illumination field, blur and noise, JPEG re-compression, rare-class crops, thin-class pastes),
its random numbers drawn from per-batch seeds so a batch is the same whichever process makes it,
and the worker processes that make them (Batches, BatchMaker)."""

import functools
import hashlib
import math
import queue
import threading

import numpy as np
import torch
import torch.nn.functional as F

from train_data import DEFAULT_SCALE, VOID


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
    sky is saturated white, its dusk sky textured cloud: weights/MODELS.md at fb0dc9a). Draws from gen."""
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
    one (weights/MODELS.md at fb0dc9a). The batches come out the same either way, bit for bit, for the same
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

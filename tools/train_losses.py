"""tools/train.py's losses and training step: class-weighted cross-entropy, Lovasz-softmax, the
hardest-pixel loss, distillation from teacher models (Teachers), auxiliary heads, and the
weights' initialisation (He, or a trained model's)."""

import contextlib
import math

import torch
import torch.nn.functional as F

import scenelab_torch as st
from train_data import VOID


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
    (weights/MODELS.md at fb0dc9a)."""
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

#!/usr/bin/env python3
"""tools/train_losses.py through train.py's names: Lovasz-softmax, the hardest-pixel loss and
distillation against plain references, dropout, the auxiliary heads and batch normalisation
(folded at export). Exit 77 (skipped) without torch or OpenCV.
    train_losses_test.py SOURCE_DIR
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tool_test_env  # noqa: E402

src = tool_test_env.setup('cv2', 'torch')
import torch  # noqa: E402
import train  # noqa: E402


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


def main():
    check_lovasz()
    check_ohem()
    check_distill()
    check_dropout()
    check_aux()
    check_batchnorm()
    print("train_losses: ok")


if __name__ == "__main__":
    main()

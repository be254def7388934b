"""The Python module against label_image, against itself (batches, lists, views, torch tensors)
and against a plain NMS written here; errors carry the engine's message; the GIL is released."""
import json
import subprocess
import threading

import numpy as np
import pytest

import scenelab


def run_label_image(label_image, inputs, out, *extra):
    cmd = [str(label_image), *map(str, inputs), "--device", "cpu", "--out", str(out), "--quiet",
           "--plan-cache", "off", *extra]
    subprocess.run(cmd, check=True)


def test_package_ships_stubs_and_version():
    from pathlib import Path
    here = Path(scenelab.__file__).parent
    assert (here / "_scenelab.pyi").is_file()
    assert (here / "py.typed").is_file()
    assert "class NativeModel" in (here / "_scenelab.pyi").read_text()
    assert scenelab.__version__.count(".") == 2


def test_label_equals_label_image(cpu_model, sample, label_image, tmp_path):
    run_label_image(label_image, [sample], tmp_path, "--save", "classes,labels", "--detect", "Car",
                    "--json", tmp_path / "r.json")
    img = scenelab.load_image(sample)
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    labels = cpu_model.label(img)
    assert labels.shape == img.shape[:2] and labels.dtype == np.uint8
    ref = scenelab.load_image(tmp_path / "street_classes.png")[:, :, 0]
    np.testing.assert_array_equal(labels, ref)
    colours = scenelab.load_image(tmp_path / "street_labels.png")
    np.testing.assert_array_equal(cpu_model.colorize(labels), colours)
    # The detection head: the boxes label_image reports, in its order.
    report = json.loads((tmp_path / "r.json").read_text())
    dets = [d for d in report["images"][0]["detections"] if d["class"] == "Car"]
    boxes, scores = cpu_model.detect(img, "Car")
    assert boxes.shape == (len(dets), 4) and scores.shape == (len(dets),)
    for d, b, s in zip(dets, boxes, scores):
        np.testing.assert_allclose(b, d["box"], rtol=0, atol=1e-3)
        assert abs(s - d["score"]) < 1e-5


def random_image(rng, h, w):
    return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_batch_list_and_views_equal_one_by_one(cpu_model):
    rng = np.random.default_rng(7)
    a, b, c = random_image(rng, 37, 45), random_image(rng, 29, 61), random_image(rng, 37, 45)
    one = [cpu_model.label(x) for x in (a, b, c)]
    batch = cpu_model.label(np.stack([a, c]))
    assert batch.shape == (2, 37, 45)
    np.testing.assert_array_equal(batch[0], one[0])
    np.testing.assert_array_equal(batch[1], one[2])
    listed = cpu_model.label([a, b, c])
    for x, y in zip(listed, one):
        np.testing.assert_array_equal(x, y)
    # A view that is not contiguous (BGR -> RGB) labels as its contiguous copy does.
    bgr = np.ascontiguousarray(a[:, :, ::-1])
    np.testing.assert_array_equal(cpu_model.label(bgr[:, :, ::-1]), one[0])


def test_mirror_equals_label_image_mirror_and_is_symmetric(cpu_model, sample, label_image, tmp_path):
    """mirror=True labels as label_image --mirror does; its labels of the mirrored image are the
    mirror of its labels (it averages the same two passes), where the plain model's are not."""
    run_label_image(label_image, [sample], tmp_path, "--save", "classes", "--mirror")
    img = scenelab.load_image(sample)
    m = scenelab.Model(device="cpu", threads=2, mirror=True)
    labels = m.label(img)
    np.testing.assert_array_equal(labels, scenelab.load_image(tmp_path / "street_classes.png")[:, :, 0])
    flipped = np.ascontiguousarray(img[:, ::-1])
    np.testing.assert_array_equal(m.label(flipped)[:, ::-1], labels)
    plain = cpu_model.label(img)
    assert (cpu_model.label(flipped)[:, ::-1] != plain).any()
    assert (plain != labels).any()


def test_scales_equal_label_image_scales(cpu_model, sample, label_image, tmp_path):
    """scales= labels as label_image --scales does, and differs from the plain model."""
    run_label_image(label_image, [sample], tmp_path, "--save", "classes", "--scales", "0.5,1.25")
    img = scenelab.load_image(sample)
    labels = scenelab.Model(device="cpu", threads=2, scales=[0.5, 1.25]).label(img)
    np.testing.assert_array_equal(labels, scenelab.load_image(tmp_path / "street_classes.png")[:, :, 0])
    assert (cpu_model.label(img) != labels).any()
    with pytest.raises(Exception, match="scale 9 is not in"):
        scenelab.Model(device="cpu", threads=2, scales=[9])


def test_refine_equals_label_image_refine(cpu_model, sample, label_image, tmp_path):
    """refine= labels as label_image --refine does (True: its default settings; a tuple: those),
    and differs from the plain model; bad settings name themselves."""
    img = scenelab.load_image(sample)
    for arg, flag in ((True, "--refine"), ((12, 0.05, 2), "--refine=12,0.05,2")):
        out = tmp_path / flag.strip("-").replace("=", "_").replace(",", "_")
        run_label_image(label_image, [sample], out, "--save", "classes", flag)
        labels = scenelab.Model(device="cpu", threads=2, refine=arg).label(img)
        np.testing.assert_array_equal(labels, scenelab.load_image(out / "street_classes.png")[:, :, 0])
        assert (cpu_model.label(img) != labels).any()
    with pytest.raises(Exception, match="sigma_r must be in"):
        scenelab.Model(device="cpu", threads=2, refine=(10, 0))
    with pytest.raises(ValueError, match="refine: True"):
        scenelab.Model(device="cpu", threads=2, refine=(10,))


def test_ensemble_equals_label_image_model_list(sample, label_image, tmp_path):
    """A list of model files labels as label_image --model A,B does, and differs from A alone."""
    from pathlib import Path
    import subprocess as sp
    a = tmp_path / "a.h5"
    b = tmp_path / "b.h5"
    make_model = Path(label_image).parent / "make_model"
    for path, seed in ((a, 1), (b, 2)):
        sp.run([str(make_model), "--network", "multiscale", "--classes", "11", "--seed", str(seed),
                "--out", str(path)], check=True)
    run_label_image(label_image, [sample], tmp_path, "--save", "classes", "--model", f"{a},{b}")
    img = scenelab.load_image(sample)
    ens = scenelab.Model([a, b], device="cpu", threads=2)
    labels = ens.label(img)
    np.testing.assert_array_equal(labels, scenelab.load_image(tmp_path / "street_classes.png")[:, :, 0])
    assert (scenelab.Model(a, device="cpu", threads=2).label(img) != labels).any()
    with pytest.raises(ValueError, match="empty list"):
        scenelab.Model([], device="cpu")


def test_contiguous_input_is_not_copied():
    a = np.zeros((5, 7, 3), np.uint8)
    assert scenelab._pixels(a, "t") is a


def test_torch_cpu_tensor_in(cpu_model):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a = random_image(rng, 33, 41)
    np.testing.assert_array_equal(cpu_model.label(torch.from_numpy(a)), cpu_model.label(a))


def test_scores_shape_and_geometry(cpu_model):
    rng = np.random.default_rng(5)
    s, geo = cpu_model.scores(random_image(rng, 53, 67), with_geometry=True)
    assert s.dtype == np.float32 and s.shape[0] == len(cpu_model.classes)
    assert np.isfinite(s).all()
    sy, sx = geo["stride"]
    oy, ox = geo["offset"]
    assert sy > 0 and sx > 0
    assert oy + sy * (s.shape[1] - 1) < 53 + sy and ox + sx * (s.shape[2] - 1) < 67 + sx


def test_label_files_and_failures(cpu_model, sample, label_image, tmp_path):
    run_label_image(label_image, [sample], tmp_path / "ref", "--save", "classes,labels")
    (tmp_path / "broken.jpg").write_bytes(b"not a jpeg")
    out = tmp_path / "out"
    out.mkdir()
    r = cpu_model.label_files([sample, tmp_path / "broken.jpg", sample], out, plan_cache=None)
    assert r["images"] == 2
    assert [f for f, _ in r["failures"]] == [str(tmp_path / "broken.jpg")]
    assert "broken.jpg" in r["failures"][0][1]
    assert sum(r["histogram"]) == 2 * 480 * 360
    for name in ("street", "street_2"):  # label_image's names for a repeated stem
        for kind in ("_classes.png", "_labels.png"):
            assert (out / (name + kind)).read_bytes() == (tmp_path / "ref" / ("street" + kind)).read_bytes()


def test_label_files_makes_its_folder_and_writes_label_images_outputs(cpu_model, sample, label_image, tmp_path):
    # The folder did not exist (every file had failed: "cannot write"); the overlay is
    # label_image's file.
    run_label_image(label_image, [sample], tmp_path / "ref")
    out = tmp_path / "new" / "folder"
    r = cpu_model.label_files([sample], out, save=("classes", "labels", "overlay"), plan_cache=None)
    assert r["images"] == 1 and not r["failures"], r
    for kind in ("_classes.png", "_labels.png", "_overlay.png"):
        assert (out / ("street" + kind)).read_bytes() == (tmp_path / "ref" / ("street" + kind)).read_bytes()
    with pytest.raises(ValueError, match="overlay"):
        cpu_model.label_files([sample], out, save=("classes", "video"))


def test_errors_carry_the_message(cpu_model, tmp_path):
    img = np.zeros((20, 30, 3), np.uint8)
    with pytest.raises(TypeError, match="uint8"):
        cpu_model.label(img.astype(np.float32))
    with pytest.raises(ValueError, match=r"\(20, 30, 2\)"):
        cpu_model.label(np.zeros((20, 30, 2), np.uint8))
    with pytest.raises(RuntimeError, match="Zeppelin"):
        cpu_model.detect(img, "Zeppelin")
    with pytest.raises(RuntimeError, match="nonexistent.h5"):
        scenelab.Model(tmp_path / "nonexistent.h5", device="cpu")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(RuntimeError, match="bad.h5"):
        scenelab.Model(bad, device="cpu")
    with pytest.raises(RuntimeError, match="missing.png"):
        scenelab.load_image(tmp_path / "missing.png")
    with pytest.raises(RuntimeError, match="too small"):
        cpu_model.label(np.zeros((3, 3, 3), np.uint8))
    # The model still works after the errors.
    assert cpu_model.label(np.zeros((29, 23, 3), np.uint8)).shape == (29, 23)


def test_gil_is_released_during_inference(cpu_model):
    img = np.zeros((360, 480, 3), np.uint8)
    cpu_model.label(img)  # planned
    done = threading.Event()
    ticks = 0

    def work():
        for _ in range(3):
            cpu_model.label(img)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    while not done.is_set():
        ticks += 1
    t.join()
    # Held, this thread would wait for each whole pass; released, it spins through them.
    assert ticks > 10000


def greedy_reference(boxes, scores, iou, classes=None):
    order = sorted((i for i in range(len(scores)) if not np.isnan(scores[i])), key=lambda i: (-scores[i], i))
    keep = []
    def overlap(a, b):
        ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = ix * iy
        area = lambda r: max(0.0, r[2] - r[0]) * max(0.0, r[3] - r[1])
        union = area(a) + area(b) - inter
        return inter / union if union > 0 else 0.0
    for i in order:
        if all((classes is not None and classes[i] != classes[k]) or overlap(boxes[i].astype(np.float64), boxes[k].astype(np.float64)) <= iou for k in keep):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nms_equals_plain_greedy(seed):
    rng = np.random.default_rng(seed)
    n = 157
    xy = rng.uniform(0, 100, size=(n, 2))
    wh = rng.uniform(2, 30, size=(n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    scores = rng.uniform(0, 1, size=n).astype(np.float32)
    scores[5] = np.nan
    classes = rng.integers(0, 3, size=n)
    ref = greedy_reference(boxes, scores, 0.4)
    assert scenelab.nms(boxes, scores, iou=0.4).tolist() == ref
    assert scenelab.nms(boxes, scores, iou=0.4, method="cluster").tolist() == ref
    oro = scenelab.nms(boxes, scores, iou=0.4, method="oro").tolist()
    assert set(oro) <= set(ref) and oro == [i for i in ref if i in set(oro)]
    per_class = scenelab.nms(boxes, scores, iou=0.4, classes=classes).tolist()
    assert per_class == greedy_reference(boxes, scores, 0.4, classes)
    assert scenelab.nms(boxes, scores, iou=0.4, max_outputs=3).tolist() == ref[:3]


def test_nms_torch_and_torchvision():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    xy = rng.uniform(0, 50, size=(64, 2))
    boxes = torch.from_numpy(np.concatenate([xy, xy + 10], axis=1).astype(np.float32))
    scores = torch.from_numpy(rng.uniform(0, 1, size=64).astype(np.float32))
    keep = scenelab.nms(boxes, scores, iou=0.3)
    assert isinstance(keep, torch.Tensor) and keep.dtype == torch.int64
    try:
        import torchvision
    except ImportError:
        return
    assert keep.tolist() == torchvision.ops.nms(boxes, scores, 0.3).tolist()


def test_nms_batched_equals_each_image_alone():
    """(B, N, 4) boxes and (B, N) scores give a list of B index arrays, each the single-image
    call's on that image (its first valid[b] boxes), numpy and torch alike, every method; a large
    image (the sparse path) included."""
    rng = np.random.default_rng(31)
    b, n = 4, 3000
    xy = rng.uniform(0, 1000, size=(b, n, 2))
    wh = rng.uniform(5, 80, size=(b, n, 2))
    boxes = np.concatenate([xy, xy + wh], axis=2).astype(np.float32)
    scores = np.round(rng.uniform(0, 1, size=(b, n)), 2).astype(np.float32)
    classes = rng.integers(0, 3, size=(b, n))
    valid = np.array([n, 0, 41, 2500])
    for kw in ({}, {"classes": classes}, {"valid": valid}, {"classes": classes, "valid": valid}):
        got = scenelab.nms(boxes, scores, 0.5, **kw)
        assert isinstance(got, list) and len(got) == b
        for i in range(b):
            m = n if "valid" not in kw else int(valid[i])
            one = scenelab.nms(boxes[i, :m], scores[i, :m], 0.5,
                               classes=None if "classes" not in kw else classes[i, :m])
            assert got[i].tolist() == one.tolist(), (kw, i)
    assert scenelab.nms(boxes[:, :60], scores[:, :60], 0.5, "cluster")[2].tolist() == \
        scenelab.nms(boxes[2, :60], scores[2, :60], 0.5).tolist()
    torch = pytest.importorskip("torch")
    t = scenelab.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.5)
    assert all(isinstance(k, torch.Tensor) for k in t)
    assert [k.tolist() for k in t] == [k.tolist() for k in scenelab.nms(boxes, scores, 0.5)]
    with pytest.raises(ValueError, match="valid"):
        scenelab.nms(boxes, scores, valid=np.array([1, 2, n + 1, 0]))
    with pytest.raises(ValueError, match=r"scores must have shape \(4, 3000\)"):
        scenelab.nms(boxes, scores[:, :5])
    with pytest.raises(ValueError, match="valid goes with batched"):
        scenelab.nms(boxes[0], scores[0], valid=[3])


def test_nms_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"\(N, 4\)"):
        scenelab.nms(np.zeros((3, 3), np.float32), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="scores"):
        scenelab.nms(np.zeros((3, 4), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="method"):
        scenelab.nms(np.zeros((3, 4), np.float32), np.zeros(3, np.float32), method="fastest")


def test_gpu_model_agrees_with_cpu(cpu_model):
    """On a GPU: fp32 labels equal the CPU's but for rare ties (skipped without a GPU)."""
    try:
        gpu = scenelab.Model(device="cuda")
    except RuntimeError as e:
        pytest.skip(f"no GPU: {e}")
    rng = np.random.default_rng(13)
    batch = np.stack([random_image(rng, 121, 163) for _ in range(3)])
    a, b = gpu.label(batch), cpu_model.label(batch)
    assert (a == b).mean() > 0.999
    assert gpu.device.startswith("cuda")


@pytest.fixture(scope="session")
def gpu_model():
    try:
        import torch
    except ImportError:
        pytest.skip("no torch: the CUDA tensor cases need it")
    if not torch.cuda.is_available():
        pytest.skip("no GPU: the CUDA tensor cases run on the GPU machine")
    return scenelab.Model(device="cuda")


def test_gpu_label_torch_cuda_tensors_in_place(gpu_model):
    """A torch CUDA uint8 image is labelled on its GPU, the labels a CUDA tensor there equal to the
    host path's (same model, same device), single and batched, after work queued on a side stream;
    nothing goes through the host (the result never left the device: its pointer is on it)."""
    import torch
    rng = np.random.default_rng(21)
    imgs = np.stack([random_image(rng, 97, 131) for _ in range(3)])
    want = gpu_model.label(imgs)
    x = torch.from_numpy(imgs).cuda()
    poisoned = torch.full(x.shape[:-1], 255, dtype=torch.uint8, device=x.device)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.zeros_like(x)
        y.copy_(x)  # queued on the side stream: the labeller must wait for it
        out = gpu_model.label(y)
        poisoned.copy_(out)
    torch.cuda.synchronize()
    assert out.is_cuda and out.dtype == torch.uint8 and out.device == x.device and out.shape == (3, 97, 131)
    np.testing.assert_array_equal(poisoned.cpu().numpy(), want)
    one = gpu_model.label(x[1])
    assert one.shape == (97, 131)
    np.testing.assert_array_equal(one.cpu().numpy(), want[1])
    # Not contiguous: made so; not uint8: rejected by name.
    np.testing.assert_array_equal(gpu_model.label(x.permute(0, 2, 1, 3).transpose(1, 2)).cpu().numpy(), want)
    with pytest.raises(TypeError, match="uint8"):
        gpu_model.label(x.float())


def test_gpu_label_rejects_a_cpu_model_and_bad_shapes(gpu_model, cpu_model):
    import torch
    x = torch.zeros((40, 50, 3), dtype=torch.uint8, device="cuda")
    with pytest.raises(RuntimeError, match="not a GPU"):
        cpu_model.label(x)
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        gpu_model.label(torch.zeros((40, 50, 4), dtype=torch.uint8, device="cuda"))


def test_gpu_label_cupy(gpu_model):
    """CuPy arrays (__cuda_array_interface__ / DLPack) the same way."""
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(22)
    img = random_image(rng, 61, 77)
    out = gpu_model.label(cupy.asarray(img))
    assert isinstance(out, cupy.ndarray) and out.shape == (61, 77)
    np.testing.assert_array_equal(cupy.asnumpy(out), gpu_model.label(img))


def test_gpu_nms_torch_cuda_equals_cpu(gpu_model):
    """scenelab.nms on torch CUDA tensors runs the GPU kernels and gives the CPU's indices, for
    every method, per class, with a score threshold and a cap; the indices stay on the GPU."""
    import torch
    rng = np.random.default_rng(23)
    n = 700
    xy = rng.uniform(0, 300, size=(n, 2)).astype(np.float32)
    wh = rng.uniform(5, 60, size=(n, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=1)
    scores = rng.uniform(0, 1, size=n).astype(np.float32)
    scores[::50] = np.nan
    scores[1::97] = scores[2::97][: len(scores[1::97])]  # ties
    classes = rng.integers(0, 4, size=n)
    for method in ("greedy", "oro", "cluster"):
        for kw in ({}, {"classes": classes}, {"score_threshold": 0.3, "max_outputs": 40},
                   {"criterion": "over_candidate"}):
            cpu = scenelab.nms(boxes, scores, 0.4, method, **kw)
            gkw = {k: (torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
            gpu = scenelab.nms(torch.from_numpy(boxes).cuda(), torch.from_numpy(scores).cuda(), 0.4, method, **gkw)
            assert gpu.is_cuda and gpu.dtype == torch.int64, (method, kw)
            assert gpu.cpu().tolist() == cpu.tolist(), (method, kw)
    empty = scenelab.nms(torch.zeros((0, 4), device="cuda"), torch.zeros(0, device="cuda"))
    assert empty.is_cuda and empty.numel() == 0
    # batched (B, N, 4) on the GPU: per image the host's batched indices, on the GPU
    bb, ss = np.stack([boxes[:300], boxes[300:600]]), np.stack([scores[:300], scores[300:600]])
    got = scenelab.nms(torch.from_numpy(bb).cuda(), torch.from_numpy(ss).cuda(), 0.4, valid=[300, 120])
    want = scenelab.nms(bb, ss, 0.4, valid=np.array([300, 120]))
    assert all(g.is_cuda for g in got) and [g.cpu().tolist() for g in got] == [w.tolist() for w in want]
    # one call over more boxes than the dense path takes (3 x 12,000: the sparse one), classes and a cap
    xy = rng.uniform(0, 1500, size=(3, 12000, 2)).astype(np.float32)
    wh = rng.uniform(5, 90, size=(3, 12000, 2)).astype(np.float32)
    bb = np.concatenate([xy, xy + wh], axis=2)
    ss = rng.uniform(0, 1, size=(3, 12000)).astype(np.float32)
    cc = rng.integers(0, 3, size=(3, 12000))
    for kw in ({}, {"classes": cc, "max_outputs": 500}):
        gkw = {k: (torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        got = scenelab.nms(torch.from_numpy(bb).cuda(), torch.from_numpy(ss).cuda(), 0.5, valid=[12000, 7000, 0], **gkw)
        want = scenelab.nms(bb, ss, 0.5, valid=np.array([12000, 7000, 0]), **kw)
        assert [g.cpu().tolist() for g in got] == [w.tolist() for w in want], kw


def test_window_detector_equals_label_image(sample, label_image, tmp_path):
    """The HOG pedestrian detector: label_image --detector hog's boxes; grey, RGBA and small images;
    bad specs raise with the engine's message."""
    people = scenelab.WindowDetector(device="cpu", spec="threshold=-1")
    assert people.class_name == "person"
    img = scenelab.load_image(sample)
    subprocess.run([str(label_image), "--detector", "hog", "--detect", "person", "--det-threshold", "-1",
                    "--detect-only", "--device", "cpu", "--quiet", "--out", str(tmp_path), "--json",
                    str(tmp_path / "r.json"), str(sample)], check=True)
    dets = json.loads((tmp_path / "r.json").read_text())["images"][0]["detections"]
    boxes, scores = people.detect(img)
    assert boxes.shape == (len(dets), 4) and boxes.dtype == np.float32 and len(dets) > 0
    for d, b, s in zip(dets, boxes, scores):
        np.testing.assert_allclose(b, d["box"], rtol=0, atol=1e-3)
        assert abs(s - d["score"]) < 1e-4
    rgba = np.concatenate([img, np.full(img.shape[:2] + (1,), 7, np.uint8)], axis=2)
    np.testing.assert_array_equal(people.detect(rgba)[0], boxes)
    grey = img[:, :, 1].copy()
    np.testing.assert_array_equal(people.detect(grey)[0], people.detect(np.repeat(grey[:, :, None], 3, 2))[0])
    small = people.detect(np.zeros((100, 50, 3), np.uint8))
    assert small[0].shape == (0, 4) and small[1].shape == (0,)
    with pytest.raises(Exception, match="fusion"):
        scenelab.WindowDetector(device="cpu", spec="fusion=mean")
    with pytest.raises(ValueError, match="uint8 pixels"):
        people.detect(np.zeros((10, 10, 2), np.uint8))

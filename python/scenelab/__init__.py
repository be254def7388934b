"""scenelab: ConvNet scene labelling on the CPU and CUDA GPUs, sliding-window detection and NMS.

    import scenelab
    m = scenelab.Model()                      # the shipped CamVid model; device "auto"
    labels = m.label(rgb)                     # (H, W, 3) uint8 -> (H, W) uint8 class indices
    labels = m.label(batch)                   # (N, H, W, 3) or a list of images
    colours = m.colorize(labels)              # (H, W, 3) in the model's palette
    boxes, scores = m.detect(rgb, "Car")      # the sliding-window head, fused by NMS
    keep = scenelab.nms(boxes, scores, iou=0.5, method="greedy")
    people = scenelab.WindowDetector()       # HOG + linear SVM pedestrians (OpenCV's detector)
    boxes, scores = people.detect(rgb)        # every position and scale, fused

Arrays are numpy arrays, or anything numpy can read (torch CPU tensors included). Errors are
raised as exceptions carrying the engine's message (the file and what is wrong).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from . import _scenelab
from ._scenelab import load_image as _load_image, save_png as _save_png

__version__ = _scenelab.version
__all__ = ["Model", "WindowDetector", "nms", "load_image", "save_png", "default_model_path", "__version__"]


def default_model_path() -> str | None:
    """The model shipped inside this package (wheels), else None (the engine finds its own)."""
    here = Path(__file__).resolve().parent / "weights" / "camvid-multiscale.h5"
    return str(here) if here.is_file() else None


def default_detector_path() -> str | None:
    """The HOG pedestrian model shipped inside this package (wheels), else None."""
    here = Path(__file__).resolve().parent / "weights" / "hog-people.h5"
    return str(here) if here.is_file() else None


class WindowDetector:
    """A sliding-window detector over an image pyramid, planned once per image size.

    path: its model file (None: the shipped HOG pedestrian detector, OpenCV's people SVM).
    spec: overrides of the model's pyramid settings, e.g. "threshold=0.5 fusion=group"
    (fusion: greedy (default), oro, group (OpenCV's grouping), none). device: "cpu", "cuda",
    "cuda:N" or "auto". Calls from several threads run one at a time.
    """

    def __init__(self, path: str | os.PathLike | None = None, device: str = "auto", threads: int = 0,
                 spec: str = ""):
        if path is None:
            path = default_detector_path() or ""
        self._d = _scenelab.NativeWindowDetector(os.fspath(path), device, int(threads), spec)

    @property
    def class_name(self) -> str:
        return self._d.class_name

    @property
    def device(self) -> str:
        return self._d.device

    def detect(self, image):
        """Boxes (N, 4) float32 x1 y1 x2 y2 in image pixels and scores (N,) of one (H, W),
        (H, W, 3) or (H, W, 4) uint8 image; an image smaller than the window gives none."""
        return self._d.detect(_pixels(image, "detect"))

    def __repr__(self) -> str:
        return f"scenelab.WindowDetector({self.class_name!r}, device={self.device!r})"


def _refine_settings(refine) -> list:
    """Model's refine argument as [sigma_s, sigma_r, iterations] ([] for none)."""
    if refine is False or refine is None:
        return []
    if refine is True:
        return [float(v) for v in _scenelab.default_refinement]
    values = [float(v) for v in refine]
    if len(values) not in (2, 3):
        raise ValueError(f"refine: True, (sigma_s, sigma_r) or (sigma_s, sigma_r, iterations), got {refine!r}")
    if len(values) == 2:
        values.append(3.0)
    if not values[2].is_integer():
        raise ValueError(f"refine: iterations must be a whole number, got {values[2]!r}")
    return values


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


def _on_gpu(x) -> bool:
    """A CUDA array: a torch CUDA tensor, or anything with __cuda_array_interface__ (CuPy...)."""
    if _is_torch(x):
        return x.device.type == "cuda"
    return hasattr(x, "__cuda_array_interface__")


def _pixels(x, what: str) -> np.ndarray:
    """A C-contiguous uint8 numpy view of x (copied only if it is not one already; GPU arrays
    are brought to the host)."""
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    elif hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):  # CuPy
        x = x.get()
    a = np.asarray(x)
    if a.dtype != np.uint8:
        raise TypeError(f"{what}: expected uint8 pixels, got {a.dtype}")
    return np.ascontiguousarray(a)


class Model:
    """A scene-labelling model on a device, planned once per image size.

    path: an HDF5 model file (None: the shipped model), or a sequence of them: an ensemble, their
    class probabilities averaged (the first one's palette and settings). device: "cpu", "cuda",
    "cuda:N" or "auto" (a GPU when there is one). precision: "fp32", "tf32", "fp16" or "bf16"
    (GPU). threads: CPU threads (0: all). mirror: label with the mean class probabilities of the
    image and its left-right mirror (twice the work; scores() and detect() read the mean too).
    scales: label with the mean class probabilities of the image resized by each factor, e.g.
    (0.5, 0.75, 1, 1.25) (3.4 times the work; with mirror, both passes at each).
    refine: refine the class probabilities along the image's edges (the domain transform guided by
    the image; label_image --refine): True for the settings chosen on CamVid's held-out sequences
    (sigma_s 40 pixels, sigma_r 0.2, 3 iterations), or (sigma_s, sigma_r) or (sigma_s, sigma_r,
    iterations); False (default) for none. scores() and detect() read the unrefined scores.
    Calls from several threads run one at a time.
    """

    def __init__(self, path: str | os.PathLike | Sequence[str | os.PathLike] | None = None,
                 device: str = "auto", precision: str = "fp32", threads: int = 0, mirror: bool = False,
                 scales: Sequence[float] = (1.0,), refine: bool | Sequence[float] = False):
        if path is None:
            path = default_model_path() or ""
        paths = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else [os.fspath(path)]
        if not paths:
            raise ValueError("Model: an empty list of model files")
        self._m = _scenelab.NativeModel(paths[0], device, precision, int(threads), bool(mirror), paths[1:],
                                        [float(s) for s in scales], _refine_settings(refine))
        self.classes: list[str] = list(self._m.classes)
        self.palette: np.ndarray = self._m.palette

    @property
    def device(self) -> str:
        return self._m.device

    @property
    def path(self) -> str:
        return self._m.path

    def __repr__(self) -> str:
        return f"scenelab.Model({self.path!r}, device={self.device!r})"

    def label(self, images):
        """Class indices per pixel.

        (H, W, 3) uint8 -> (H, W) uint8; (N, H, W, 3) -> (N, H, W); a list of (H, W, 3) arrays
        (sizes may differ) -> a list, images of one size run as one batch.
        """
        if isinstance(images, (list, tuple)):
            return self._label_list(images)
        if _on_gpu(images):
            return self._label_gpu(images)
        return self._m.label(_pixels(images, "label"))

    def _label_gpu(self, x):
        """A CUDA image (torch tensor or CuPy array) labelled where it is, on a model on its GPU:
        the labels come back as the same kind of array on the same device, ordered on the
        current stream of that device; nothing goes through the host."""
        if _is_torch(x):
            import torch
            if x.dtype != torch.uint8:
                raise TypeError(f"label: expected uint8 pixels, got {x.dtype}")
            x = x.detach().contiguous()
            out = torch.empty(x.shape[:-1], dtype=torch.uint8, device=x.device)
            stream = torch.cuda.current_stream(x.device).cuda_stream
        else:
            import cupy
            x = cupy.ascontiguousarray(x)
            if x.dtype != cupy.uint8:
                raise TypeError(f"label: expected uint8 pixels, got {x.dtype}")
            with cupy.cuda.Device(x.device.id):
                out = cupy.empty(x.shape[:-1], dtype=cupy.uint8)
                stream = cupy.cuda.get_current_stream().ptr
        self._m.label_cuda(x, out, stream)
        return out

    def _label_list(self, images: Sequence) -> list:
        arrays = [_pixels(a, "label") for a in images]
        for i, a in enumerate(arrays):
            if a.ndim != 3:
                raise ValueError(f"label: list item {i} has shape {a.shape}; expected (H, W, 3)")
        out: list = [None] * len(arrays)
        groups: dict[tuple, list[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.shape, []).append(i)
        for idx in groups.values():
            labels = self._m.label(np.stack([arrays[i] for i in idx]))
            for k, i in enumerate(idx):
                out[i] = labels[k]
        return out

    def scores(self, image, with_geometry: bool = False):
        """Class scores (C, h, w) float32 at the network's output resolution. with_geometry:
        also a dict {stride: (sy, sx), offset: (oy, ox)}: map pixel (y, x) lies at
        (oy + sy * y, ox + sx * x) on the image."""
        s, geometry = self._m.scores(_pixels(image, "scores"))
        return (s, geometry) if with_geometry else s

    def detect(self, image, cls: str):
        """The sliding-window head on class `cls`: boxes (N, 4) float32 x1, y1, x2, y2 in image
        pixels and scores (N,), after NMS, best first."""
        return self._m.detect(_pixels(image, "detect"), cls)

    def colorize(self, labels) -> np.ndarray:
        """(..., H, W) class indices -> (..., H, W, 3) colours of the model's palette."""
        labels = np.asarray(labels)
        if labels.dtype != np.uint8:
            raise TypeError(f"colorize: expected uint8 labels, got {labels.dtype}")
        if labels.size and int(labels.max()) >= len(self.palette):
            raise ValueError(f"colorize: label {int(labels.max())} but the model has "
                             f"{len(self.palette)} classes")
        return self.palette[labels]

    def label_files(self, inputs: Iterable[str | os.PathLike], out_dir: str | os.PathLike | None = None,
                    *, output_bases: Sequence[str] | None = None, save=("classes", "labels"),
                    batch: int = 0, io_threads: int = 0, plan_cache: str | None = "default") -> dict:
        """Labels image files through the job behind label_image and writes, for each, what
        `save` names: BASE_classes.png (class indices), BASE_labels.png (colours) and
        BASE_overlay.png (the labels over the photo), as label_image does. BASE is
        out_dir/STEM (STEM_2, STEM_3... for repeated stems; out_dir is made if missing) unless
        output_bases gives them. Returns {images, failures: [(file, error)], histogram, seconds,
        device}; a file that fails does not stop the others."""
        inputs = [os.fspath(p) for p in inputs]
        if output_bases is None:
            if out_dir is None:
                raise ValueError("label_files: give out_dir or output_bases")
            output_bases = output_bases_for(inputs, out_dir)
        unknown = set(save) - {"classes", "labels", "overlay"}
        if unknown:
            raise ValueError(f"label_files: save takes 'classes', 'labels' and 'overlay', got {sorted(unknown)}")
        return self._m.label_files(inputs, [os.fspath(b) for b in output_bases], "classes" in save,
                                   "labels" in save, "overlay" in save, int(batch), int(io_threads),
                                   "" if plan_cache is None else plan_cache)


def output_bases_for(inputs: Sequence[str], out_dir: str | os.PathLike) -> list[str]:
    """out_dir/STEM for each input, STEM_2, STEM_3... for repeated stems (label_image's names)."""
    used: set[str] = set()
    bases = []
    for f in inputs:
        stem = Path(f).stem
        name, k = stem, 2
        while name in used:
            name, k = f"{stem}_{k}", k + 1
        used.add(name)
        bases.append(os.path.join(os.fspath(out_dir), name))
    return bases


def nms(boxes, scores, iou: float = 0.5, method: str = "greedy", *, classes=None,
        criterion: str = "iou", score_threshold: float | None = None, max_outputs: int = -1,
        pixel_inclusive: bool = False, valid=None):
    """Non-maximum suppression: the indices kept, in rank order (as torchvision.ops.nms).

    boxes (N, 4) x1, y1, x2, y2; scores (N,). method: "greedy" (exact), "oro" (Oro et al.'s
    map/reduce, = Fast NMS: a box dies if any higher-ranked box overlaps it, suppressed or not)
    or "cluster" (Cluster-NMS, equal to greedy). classes (N,): only boxes of one class suppress
    each other. criterion: "iou" or "over_candidate" (intersection over the tested box's area).
    A box is suppressed when its overlap is > iou. NaN scores are dropped. Torch tensors in, a
    torch int64 tensor out; torch CUDA tensors run on their GPU (the GPU kernels: the bitmask
    kernel, Oro's map/reduce, Cluster-NMS), the indices a CUDA tensor there.

    Batched, per image: boxes (B, N, 4), scores (B, N), classes (B, N) and valid (B,) (image b's
    first valid[b] boxes count; default all N) give a list of B index arrays, each what the call
    on that image alone gives (greedy on the host: the images side by side; greedy on torch CUDA
    tensors: one call on their GPU, the images as groups of one NMS, each result a tensor there)."""
    if getattr(boxes, "ndim", None) == 3 or (not _is_torch(boxes) and np.ndim(boxes) == 3):
        return _nms_batched(boxes, scores, iou, method, classes, criterion, score_threshold, max_outputs,
                            pixel_inclusive, valid)
    if valid is not None:
        raise ValueError("nms: valid goes with batched boxes (B, N, 4)")
    torch_in = _is_torch(boxes)
    if torch_in and boxes.device.type == "cuda":
        return _nms_cuda(boxes, scores, iou, method, classes, criterion, score_threshold, max_outputs,
                         pixel_inclusive)
    keep = _scenelab.nms(_host_array(boxes, np.float32, "boxes"), _host_array(scores, np.float32, "scores"),
                         float(iou), method, criterion,
                         None if classes is None else _host_array(classes, np.int64, "classes"),
                         float("-inf") if score_threshold is None else float(score_threshold),
                         int(max_outputs), bool(pixel_inclusive))
    if torch_in:
        import torch
        return torch.from_numpy(keep)
    return keep


def _host_array(x, dtype, what):
    """An nms argument as a contiguous host array of dtype (torch CPU tensors without a copy)."""
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"nms: {what} on {x.device} but the boxes on the host: pass them on one device")
        x = x.detach().numpy()
    return np.ascontiguousarray(np.asarray(x, dtype=dtype))


def _nms_batched(boxes, scores, iou, method, classes, criterion, score_threshold, max_outputs, pixel_inclusive,
                 valid):
    torch_in = _is_torch(boxes)
    if torch_in and boxes.device.type == "cuda" and method == "greedy" and iou >= 0:
        return _nms_cuda_batched(boxes, scores, iou, classes, criterion, score_threshold, max_outputs,
                                 pixel_inclusive, valid)
    if (torch_in and boxes.device.type == "cuda") or method != "greedy":
        # each image by the single-image call (its device, its method)
        n = boxes.shape[1]
        out = []
        for b in range(boxes.shape[0]):
            m = n if valid is None else int(valid[b])
            if not 0 <= m <= n:
                raise ValueError(f"nms: valid[{b}] is {m}, expected 0..{n}")
            out.append(nms(boxes[b, :m], scores[b, :m], iou, method,
                           classes=None if classes is None else classes[b, :m], criterion=criterion,
                           score_threshold=score_threshold, max_outputs=max_outputs,
                           pixel_inclusive=pixel_inclusive))
        return out
    keep = _scenelab.nms_batched(_host_array(boxes, np.float32, "boxes"), _host_array(scores, np.float32, "scores"), float(iou),
                                 criterion, None if classes is None else _host_array(classes, np.int64, "classes"),
                                 None if valid is None else _host_array(valid, np.int64, "valid"),
                                 float("-inf") if score_threshold is None else float(score_threshold),
                                 int(max_outputs), bool(pixel_inclusive))
    if torch_in:
        import torch
        return [torch.from_numpy(k) for k in keep]
    return keep


def _cuda_inputs(boxes, scores, classes):
    """boxes, scores and classes (or None) as contiguous float32 / int64 tensors on the boxes' GPU."""
    import torch
    dev = boxes.device

    def on(x, dtype, what):
        if not _is_torch(x) or x.device != dev:
            raise ValueError(f"nms: {what} must be a torch tensor on {dev}, like the boxes")
        return x.detach().to(dtype).contiguous()
    return (on(boxes, torch.float32, "boxes"), on(scores, torch.float32, "scores"),
            None if classes is None else on(classes, torch.int64, "classes"))


def _nms_cuda_batched(boxes, scores, iou, classes, criterion, score_threshold, max_outputs, pixel_inclusive, valid):
    """Greedy NMS of each image of a (B, N, 4) CUDA batch in one call; a list of B index tensors there."""
    import torch
    b, s, c = _cuda_inputs(boxes, scores, classes)
    v = None if valid is None else _host_array(valid.cpu() if _is_torch(valid) else valid, np.int64, "valid")
    keep = torch.empty(tuple(b.shape[:2]), dtype=torch.int64, device=b.device)
    counts = _scenelab.nms_cuda_batched(b, s, float(iou), criterion, c, v,
                                        float("-inf") if score_threshold is None else float(score_threshold),
                                        int(max_outputs), bool(pixel_inclusive), keep,
                                        torch.cuda.current_stream(b.device).cuda_stream)
    return [keep[i, :k] for i, k in enumerate(counts)]


def _nms_cuda(boxes, scores, iou, method, classes, criterion, score_threshold, max_outputs, pixel_inclusive):
    import torch
    b, s, c = _cuda_inputs(boxes, scores, classes)
    keep = torch.empty(b.shape[0] if b.ndim == 2 else 0, dtype=torch.int64, device=b.device)
    count = _scenelab.nms_cuda(b, s, float(iou), method, criterion, c,
                               float("-inf") if score_threshold is None else float(score_threshold),
                               int(max_outputs), bool(pixel_inclusive), keep,
                               torch.cuda.current_stream(b.device).cuda_stream)
    return keep[:count]


def load_image(path: str | os.PathLike) -> np.ndarray:
    """An image file (JPEG, PNG, BMP...) as (H, W, 3) uint8 RGB."""
    return _load_image(os.fspath(path))


def save_png(path: str | os.PathLike, pixels) -> None:
    """Writes (H, W) grey or (H, W, 3) RGB uint8 pixels as a PNG (whole or not at all)."""
    _save_png(os.fspath(path), _pixels(pixels, "save_png"))

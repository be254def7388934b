"""The paper's networks exported to ONNX (tools/export_onnx.py) and loaded back: the same labels
as their HDF5 files, on odd sizes and a batch of 3; ONNX Runtime runs the same file (the
preprocessing functions' bodies) to the PyTorch oracle's scores within 1e-5 relative; a call of a
scenelab function the file does not define is refused by name."""
import sys
from pathlib import Path

import numpy as np
import pytest

import scenelab

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
onnx = pytest.importorskip("onnx")
import export_onnx  # noqa: E402
import scenelab_torch as st  # noqa: E402

NETS = ["reference", "multiscale"]


@pytest.fixture(scope="module", params=NETS)
def exported(request, tmp_path_factory):
    h5 = ROOT / "weights" / f"camvid-{request.param}.h5"
    out = tmp_path_factory.mktemp("onnx") / f"{request.param}.onnx"
    export_onnx.export(str(h5), str(out))
    return h5, out


def test_onnx_labels_equal_the_hdf5_models(exported):
    h5, path = exported
    rng = np.random.default_rng(17)
    batch = rng.integers(0, 256, size=(3, 97, 131, 3), dtype=np.uint8)
    a = scenelab.Model(str(path), device="cpu", threads=2)
    b = scenelab.Model(str(h5), device="cpu", threads=2)
    assert a.classes == b.classes and np.array_equal(a.palette, b.palette)
    la, lb = a.label(batch), b.label(batch)
    assert la.shape == (3, 97, 131)
    assert np.array_equal(la, lb), f"{(la != lb).sum()} of {la.size} labels differ"


def test_onnx_runtime_runs_the_functions(exported):
    ort = pytest.importorskip("onnxruntime")
    import torch
    h5, path = exported
    net, *_ = st.load_model(str(h5))
    x = np.random.default_rng(3).random((2, 3, 61, 83), dtype=np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x), want=["scores"])["scores"].numpy()
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    assert got.shape == want.shape
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert rel < 1e-5, rel


def test_an_undefined_function_is_refused_by_name(exported, tmp_path):
    _, path = exported
    m = onnx.load(str(path))
    del m.functions[:]
    bad = tmp_path / "no_functions.onnx"
    onnx.save(m, str(bad))
    with pytest.raises(Exception, match="no model-local function scenelab.RgbToYuv"):
        scenelab.Model(str(bad), device="cpu")

"""The Python suite runs against the module in the build tree: SCENELAB_BUILD_DIR (CTest sets it;
default ./build) puts BUILD/python first on sys.path."""
import os
import sys
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("SCENELAB_BUILD_DIR", Path(__file__).resolve().parents[2] / "build")).resolve()
sys.path.insert(0, str(BUILD / "python"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return BUILD


def _built(build_dir: Path, relative: str) -> Path:
    p = build_dir / relative
    if not p.is_file():
        pytest.skip(f"{p} missing: build the project first")
    return p


@pytest.fixture(scope="session")
def sample(build_dir) -> Path:
    return _built(build_dir, "samples/street.png")


@pytest.fixture(scope="session")
def label_image(build_dir) -> Path:
    return _built(build_dir, "tools/label_image")


@pytest.fixture(scope="session")
def cpu_model():
    import scenelab
    return scenelab.Model(device="cpu")

"""scenelab.cluster on a local Dask cluster of 2 CPU workers: the outputs equal label_image's, a
bad file is reported by name, and a worker killed mid-run has its files labelled by the other."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

distributed = pytest.importorskip("distributed")
import scenelab  # noqa: E402
from scenelab import cluster  # noqa: E402


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, sample, build_dir):
    """12 small images (crops of different sizes of the sample) and a broken one."""
    import numpy as np
    d = tmp_path_factory.mktemp("inputs")
    img = scenelab.load_image(sample)
    rng = np.random.default_rng(1)
    for i in range(12):
        h, w = (96, 128) if i % 3 else (80, 112)
        y, x = rng.integers(0, img.shape[0] - h), rng.integers(0, img.shape[1] - w)
        scenelab.save_png(d / f"frame_{i:02d}.png", np.ascontiguousarray(img[y:y + h, x:x + w]))
    (d / "frame_99.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    return d


@pytest.fixture(scope="module")
def reference(inputs, label_image, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    subprocess.run([str(label_image), str(inputs), "--device", "cpu", "--out", str(out), "--quiet",
                    "--save", "classes,labels", "--plan-cache", "off"], capture_output=True)
    assert len(list(out.glob("*_classes.png"))) == 12
    return out


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        with Client(lc) as c:
            yield c


def same_outputs(out, reference):
    names = sorted(p.name for p in reference.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    for n in names:
        assert (out / n).read_bytes() == (reference / n).read_bytes(), n


def test_equals_label_image_and_names_failures(client, inputs, reference, tmp_path):
    files = cluster.expand_inputs([str(inputs)])
    assert len(files) == 13
    s = cluster.run(files, str(tmp_path / "out"), client, device="cpu", threads=1, chunk=3)
    assert s["images"] == 12 and s["failed"] == 1
    assert s["failures"][0]["file"].endswith("frame_99.png")
    assert "frame_99.png" in s["failures"][0]["error"]
    assert sum(s["histogram"].values()) == 8 * 96 * 128 + 4 * 80 * 112
    assert s["workers"] == 2
    same_outputs(tmp_path / "out", reference)


def test_mirror_scales_and_refine_equal_label_image_mirror_scales_refine(client, inputs, label_image, tmp_path):
    """mirror=True, scales and refine reach the workers' models: the outputs are label_image
    --mirror --scales --refine's."""
    ref = tmp_path / "ref"
    subprocess.run([str(label_image), str(inputs), "--device", "cpu", "--out", str(ref), "--quiet", "--mirror",
                    "--scales", "0.5,1", "--refine=20,0.1", "--save", "classes,labels", "--plan-cache", "off"],
                   capture_output=True)
    assert len(list(ref.glob("*_classes.png"))) == 12
    files = cluster.expand_inputs([str(inputs)])
    s = cluster.run(files, str(tmp_path / "out"), client, device="cpu", threads=1, chunk=4, mirror=True,
                    scales=(0.5, 1), refine=(20, 0.1))
    assert s["images"] == 12 and s["failed"] == 1
    same_outputs(tmp_path / "out", ref)


def test_a_killed_worker_is_replaced_and_nothing_is_lost(client, inputs, reference, tmp_path):
    pids = client.run(os.getpid)
    killed = []

    def kill_one(result):
        if killed:
            return
        victim = next(a for a in pids if a != result["worker"]) if len(pids) > 1 else result["worker"]
        os.kill(pids[victim], signal.SIGKILL)
        killed.append(victim)

    files = cluster.expand_inputs([str(inputs)])
    s = cluster.run(files, str(tmp_path / "out"), client, device="cpu", threads=1, chunk=1, on_result=kill_one)
    assert killed
    assert s["images"] == 12 and s["failed"] == 1 and s["chunks"] == 13
    same_outputs(tmp_path / "out", reference)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no partial files


def test_command_line(inputs, reference, tmp_path):
    shutil.copytree(inputs, tmp_path / "in")
    (tmp_path / "in" / "frame_99.png").unlink()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-m", "scenelab.cluster", str(tmp_path / "in"), "--out",
                        str(tmp_path / "out"), "--device", "cpu", "--workers", "2", "--json",
                        str(tmp_path / "s.json")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "12 images labelled, 0 failed" in r.stdout
    same_outputs(tmp_path / "out", reference)


def test_default_chunk():
    assert cluster.default_chunk(12, 2) == 1
    assert cluster.default_chunk(100, 1) == 13
    assert cluster.default_chunk(200, 1) == 32  # 25 rounded up
    assert cluster.default_chunk(10201, 2) == 640  # 638 rounded up to a multiple of 16
    assert cluster.default_chunk(10**7, 2) == 4096
    assert cluster.default_chunk(0, 0) == 1


def test_warm_up_is_reported_apart(client, inputs, tmp_path):
    files = cluster.expand_inputs([str(inputs)])
    s = cluster.run(files[:4], str(tmp_path / "out"), client, device="cpu", threads=1)
    assert s["images"] == 4 and s["startup_s"] > 0 and s["seconds"] > 0
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith("w")]  # warm-up stays out


def test_local_cluster_workers_start_without_dasks_malloc_trim(tmp_path):
    # Dask's nannies set MALLOC_TRIM_THRESHOLD_ in workers (and in the process running them), so
    # this runs in a fresh interpreter.
    script = tmp_path / "probe.py"
    script.write_text("import os\nfrom distributed import Client\nfrom scenelab import cluster\n"
                      "if __name__ == '__main__':\n"
                      "    with cluster.local_cluster(1) as lc, Client(lc) as c:\n"
                      "        print(list(c.run(lambda: os.environ.get('MALLOC_TRIM_THRESHOLD_')).values()))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[None]"


def test_partial_outputs_of_this_run_are_removed(tmp_path):
    # what a worker killed while writing leaves (core/file_io.cpp: NAME.tmp.PID.N, then renamed)
    for n in ["frame_01_classes.png.tmp.5600.12", "frame_01_classes.png", "other_labels.png.tmp.7.1",
              "frame_01_labels.png.tmp.x"]:
        (tmp_path / n).write_bytes(b"x")
    cluster._remove_partial_outputs(str(tmp_path), [str(tmp_path / "frame_01"), str(tmp_path / "frame_02")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["frame_01_classes.png", "frame_01_labels.png.tmp.x",
                                                          "other_labels.png.tmp.7.1"]


def test_without_distributed_the_command_says_what_to_install(tmp_path):
    # A pip-installed package without its [cluster] extra: one line naming it, exit 2 (it had
    # been a traceback ending in "No module named 'distributed'").
    (tmp_path / "distributed.py").write_text("raise ImportError(\"No module named 'distributed'\")\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    r = subprocess.run([sys.executable, "-m", "scenelab.cluster", str(tmp_path), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "pip install 'scenelab[cluster]'" in r.stderr and "Traceback" not in r.stderr, r.stderr

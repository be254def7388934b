"""Labelling image archives on a Dask cluster.

    python3 -m scenelab.cluster FILES|DIRS|GLOBS... --out DIR [--scheduler tcp://HOST:8786]

Without --scheduler a local cluster is started: one worker per GPU (worker i labels on cuda:i),
or without GPUs one per CPU socket. With --scheduler the cluster's workers are used as they are:
start one worker per GPU, each seeing its GPU as device 0, e.g. on every machine

    dask scheduler                                         # on one machine: tcp://HOST:8786
    CUDA_VISIBLE_DEVICES=0 dask worker tcp://HOST:8786 --nthreads 1 --nworkers 1
    CUDA_VISIBLE_DEVICES=1 dask worker tcp://HOST:8786 --nthreads 1 --nworkers 1

(SCENELAB_DEVICE in a worker's environment overrides --device for that worker). Dask's nannies
start workers with MALLOC_TRIM_THRESHOLD_=65536, which slows the pipeline (see local_cluster);
on the workers' machines a Dask config file, e.g. ~/.config/dask/scenelab.yaml, turns it off:

    distributed:
      nanny:
        pre-spawn-environ:
          MALLOC_TRIM_THRESHOLD_: null    # unset (read so by Dask 2024.12; Debian 12's 2022.12 cannot unset it)

The files and the output folder must be reachable under the same paths from every worker (a
shared file system).

Before the clock starts, every worker loads the model and labels a few copies of the first file
(writing nothing), so that its plans (for the first size, at full batches) exist and the
figure measures labelling, not start-up (reported apart as startup_s). Chunks of about an eighth
of a worker's share, in multiples of 16 files, keep per-task costs small and batches full.

Each worker loads the model once and runs scenelab's streaming pipeline over its chunks of files,
writing BASE_classes.png and BASE_labels.png itself, with the names label_image gives (decided
here, for the whole list, before any work is sent). Files are written whole under their final
names, so a chunk run again after its worker was lost rewrites the same files: nothing is
labelled twice in the output. The summary (images, failures by file, class histogram, images/s)
is gathered here and printed; --json also writes it.
"""
from __future__ import annotations

import argparse
import atexit
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

IMAGE_EXTS = {".png", ".jpg", ".jpeg", ".bmp", ".tga", ".gif", ".ppm", ".pgm", ".pnm"}

# The model each worker process holds, by (path, device, precision, threads); released before
# the interpreter ends (a native object alive at the module's teardown is reported as a leak).
_MODELS: dict = {}


@atexit.register
def _release_models() -> None:
    import gc

    _MODELS.clear()
    gc.collect()


def _natural_key(s: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def expand_inputs(args: Sequence[str]) -> list[str]:
    """Files, the images of folders (natural order) and globs, as label_image expands them."""
    files: list[str] = []
    for a in args:
        if os.path.isdir(a):
            found = [str(p) for p in Path(a).iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTS]
            files += sorted(found, key=_natural_key)
        elif any(c in a for c in "*?[") and not os.path.exists(a):
            files += sorted(glob.glob(a), key=_natural_key) or [a]
        else:
            files.append(a)
    return files


def gpu_count() -> int:
    """GPUs this machine has (nvidia-smi, else the driver's /proc entries), 0 without."""
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            pass
    d = Path("/proc/driver/nvidia/gpus")
    return len(list(d.iterdir())) if d.is_dir() else 0


def cpu_sockets() -> int:
    try:
        ids = {line.split(":")[1].strip() for line in open("/proc/cpuinfo") if line.startswith("physical id")}
        return max(1, len(ids))
    except OSError:
        return 1


def default_chunk(files: int, workers: int) -> int:
    """Files per task: about eight tasks per worker (a lost worker's share is retried in pieces and
    the last tasks end close together), in multiples of 16 from 16 up so that batches of a one-size
    archive stay full, at most 4096."""
    chunk = max(1, math.ceil(files / (8 * max(1, workers))))
    return min(4096, 16 * math.ceil(chunk / 16)) if chunk > 16 else chunk


def local_cluster(workers: int):
    """A LocalCluster of `workers` processes, one thread each, no dashboard. Dask's nannies set
    MALLOC_TRIM_THRESHOLD_=65536 in their workers (to hand numpy memory back to the system); that
    also turns off glibc's adaptive mmap threshold, so every frame's buffers of 128 KiB or more
    are mapped and unmapped anew: label_image on the H100 ran 18% slower with it. The pipeline's
    memory is bounded by its queues, so these workers start without it."""
    import dask
    from distributed import LocalCluster

    env = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
           if k != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def _worker_model(settings: dict):
    """The model of this worker process for these settings, loaded on first use."""
    import scenelab
    from distributed import get_worker

    device = os.environ.get("SCENELAB_DEVICE") or settings["device"]
    if settings.get("device_per_worker"):
        device = f"cuda:{get_worker().name}"
    mirror = bool(settings.get("mirror", False))
    scales = tuple(settings.get("scales", (1.0,)))
    refine = settings.get("refine", False)
    refine = tuple(refine) if isinstance(refine, (list, tuple)) else bool(refine)
    key = (settings["model"], device, settings["precision"], settings["threads"], mirror, scales, refine)
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = scenelab.Model(settings["model"], device=device, precision=settings["precision"],
                                              threads=settings["threads"], mirror=mirror, scales=scales,
                                              refine=refine)
    return model


# Copies of the first file a worker labels before the clock starts: on a GPU enough for full
# batches on each of the pipeline's streams (the automatic batch is at most 16); the CPU runs
# frames one at a time.
WARM_FRAMES_GPU, WARM_FRAMES_CPU = 64, 2


def _warm(first: str, settings: dict) -> dict:
    """Runs on a worker before timing: loads the model and plans the first file's size by labelling
    copies of it, nothing written (planning does not depend on the outputs). A file that fails
    here fails again, named, in its chunk; the warm-up itself never fails the run."""
    from distributed import get_worker

    t0 = time.perf_counter()
    model = _worker_model(settings)
    frames = WARM_FRAMES_CPU if model.device.startswith("cpu") else WARM_FRAMES_GPU
    model.label_files([first] * frames, output_bases=[""] * frames, save=(),
                      batch=settings["batch"], io_threads=settings["io_threads"])
    return dict(worker=get_worker().address, seconds=time.perf_counter() - t0)


def _label_chunk(chunk: list[tuple[str, str]], settings: dict) -> dict:
    """Runs on a worker: labels a chunk of (input, output base) with the worker's model."""
    from distributed import get_worker

    model = _worker_model(settings)
    result = model.label_files([i for i, _ in chunk], output_bases=[b for _, b in chunk],
                               save=settings["save"], batch=settings["batch"],
                               io_threads=settings["io_threads"])
    result["worker"] = get_worker().address
    result["classes"] = model.classes
    result["inputs"] = len(chunk)
    return result


_PARTIAL = re.compile(r"^(.+)_[a-z]+\.png\.tmp\.\d+\.\d+$")


def _remove_partial_outputs(out_dir: str, bases: Sequence[str]) -> None:
    """Outputs are written to NAME.tmp.PID.N and renamed (core/file_io.cpp); a worker killed
    while writing leaves its temporary file, and Dask runs the task again elsewhere. Once every
    task is done, the temporary files of this run's outputs are such leftovers: removed (one pass
    over the folder)."""
    names = {os.path.basename(b) for b in bases}
    with os.scandir(out_dir) as it:
        for e in it:
            m = _PARTIAL.match(e.name)
            if m and m.group(1) in names:
                try:
                    os.remove(e.path)
                except FileNotFoundError:
                    pass


def run(files: Sequence[str], out_dir: str, client, *, model: str | None = None, device: str = "auto",
        precision: str = "fp32", save=("classes", "labels"), chunk: int = 0, batch: int = 0,
        threads: int = 0, io_threads: int = 0, device_per_worker: bool = False, warm_up: bool = True,
        on_result: Callable[[dict], None] | None = None, mirror: bool = False,
        scales: Sequence[float] = (1.0,), refine: bool | Sequence[float] = False) -> dict:
    """Labels `files` on the Dask cluster of `client`, writing into out_dir; returns the summary.

    chunk: files per task (0: about eight tasks per worker, a multiple of 16 files from 16 up, at
    most 4096). A chunk's last batch may be partial, and a partial batch is planned anew.
    io_threads: each worker's decoding and writing threads (0: all of its machine's).
    warm_up: each worker loads the model and plans the first file's size before the clock starts.
    device_per_worker: worker named i labels on cuda:i (local clusters).
    on_result: called here with each chunk's result as it arrives.
    mirror: label with the mean probabilities of each image and its mirror (scenelab.Model's mirror).
    scales: label with the mean probabilities of each image at these sizes (scenelab.Model's scales).
    refine: refine the probabilities along each image's edges (scenelab.Model's refine).
    The summary's seconds and images_per_s cover the labelling; startup_s the warm-up."""
    from distributed import as_completed
    import scenelab

    os.makedirs(out_dir, exist_ok=True)
    files = list(files)
    bases = scenelab.output_bases_for(files, out_dir)
    jobs = list(zip(files, bases))
    addresses = list(client.scheduler_info().get("workers", {}))
    workers = max(1, len(addresses))
    if chunk <= 0:
        chunk = default_chunk(len(jobs), workers)
    chunks = [jobs[i:i + chunk] for i in range(0, len(jobs), chunk)]
    settings = dict(model=os.path.abspath(model) if model else (scenelab.default_model_path() or ""),
                    device=device, precision=precision, save=tuple(save), batch=batch, threads=threads,
                    io_threads=io_threads, device_per_worker=device_per_worker, mirror=bool(mirror),
                    scales=tuple(float(s) for s in scales),
                    refine=tuple(float(v) for v in refine) if isinstance(refine, (list, tuple)) else bool(refine))
    t_start = time.perf_counter()
    if warm_up and jobs and addresses:
        warm = [client.submit(_warm, files[0], settings, workers=[a], allow_other_workers=False, pure=False)
                for a in addresses]
        for f in warm:
            try:
                f.result()
            except Exception:  # noqa: BLE001 - a lost worker or a bad first file: the run says
                pass
    start = time.perf_counter()
    futures = client.map(_label_chunk, chunks, settings=settings, pure=False)
    images, failures, histogram, used, classes = 0, [], None, set(), []
    for fut in as_completed(futures):
        r = fut.result()
        images += r["images"]
        failures += [tuple(f) for f in r["failures"]]
        h = r["histogram"]
        histogram = list(h) if histogram is None else [a + b for a, b in zip(histogram, h)]
        used.add(r["worker"])
        classes = r["classes"]
        if on_result:
            on_result(r)
    seconds = time.perf_counter() - start
    _remove_partial_outputs(out_dir, bases)
    order = {f: i for i, f in enumerate(files)}
    failures.sort(key=lambda f: order.get(f[0], 0))
    return dict(images=images, failed=len(failures), failures=[dict(file=f, error=e) for f, e in failures],
                histogram=dict(zip(classes, histogram or [])), seconds=seconds, images_per_s=images / seconds if seconds > 0 else 0.0,
                startup_s=start - t_start, chunks=len(chunks), chunk=chunk, workers=len(used))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m scenelab.cluster", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="image files, folders of images, or globs")
    p.add_argument("--out", required=True, help="output folder (reachable by every worker)")
    p.add_argument("--scheduler", help="a running Dask scheduler, e.g. tcp://HOST:8786 "
                   "(default: a local cluster, one worker per GPU or CPU socket)")
    p.add_argument("--workers", type=int, default=0, help="local cluster: workers (default: GPUs, else sockets)")
    p.add_argument("--model", help="model file (default: the shipped model)")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto (default auto)")
    p.add_argument("--precision", default="fp32", help="fp32 | tf32 | fp16 | bf16 (GPU)")
    p.add_argument("--save", default="classes,labels", help="outputs: classes,labels (default both)")
    p.add_argument("--mirror", action="store_true",
                   help="label with the mean probabilities of each image and its mirror (twice the work)")
    p.add_argument("--scales", default="1", metavar="LIST",
                   help="label with the mean probabilities of each image resized by each factor, "
                        "e.g. 0.5,0.75,1,1.25 (default 1)")
    p.add_argument("--refine", nargs="?", const="default", default=None, metavar="S,R[,K]",
                   help="refine the probabilities along each image's edges (label_image --refine; "
                        "alone: the chosen settings 40,0.2,3)")
    p.add_argument("--chunk", type=int, default=0, help="files per task (default: automatic)")
    p.add_argument("--batch", type=int, default=0, help="images of one size per pass (default: automatic)")
    p.add_argument("--io-threads", type=int, default=0,
                   help="decoding/writing threads per worker (default: a local cluster's workers share "
                   "the cores; with --scheduler, all of each worker's machine)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="start the clock at once (default: workers load the model and plan first)")
    p.add_argument("--json", help="write the summary here ('-' for stdout)")
    a = p.parse_args(argv)

    try:
        from distributed import Client
    except ImportError as e:  # the package's [cluster] extra, or Debian's python3-distributed
        print(f"scenelab.cluster: Dask's distributed is not installed ({e}); "
              "pip install 'scenelab[cluster]' (or apt-get install python3-distributed)", file=sys.stderr)
        return 2

    files = expand_inputs(a.inputs)
    if not files:
        print("scenelab.cluster: no image files found in the given paths", file=sys.stderr)
        return 2
    save = [s for s in a.save.split(",") if s]
    try:
        scales = [float(v) for v in a.scales.split(",")]
    except ValueError:
        print(f"scenelab.cluster: --scales {a.scales}: numbers separated by commas", file=sys.stderr)
        return 2
    refine = a.refine is not None
    if a.refine not in (None, "default"):
        try:
            refine = [float(v) for v in a.refine.split(",")]
        except ValueError:
            refine = None
        if refine is None or len(refine) not in (2, 3):
            print(f"scenelab.cluster: --refine {a.refine}: SIGMA_S,SIGMA_R[,ITERATIONS]", file=sys.stderr)
            return 2
    cluster = None
    per_worker = False
    threads = 0
    io_threads = a.io_threads
    if a.scheduler:
        client = Client(a.scheduler)
    else:
        gpus = gpu_count() if a.device != "cpu" else 0
        n = a.workers or (gpus if gpus else cpu_sockets())
        per_worker = gpus > 0 and a.device in ("auto", "cuda") and n <= gpus
        if not gpus:
            threads = max(1, (os.cpu_count() or 1) // n)
        if io_threads <= 0:
            io_threads = max(1, (os.cpu_count() or 1) // n)
        cluster = local_cluster(n)
        client = Client(cluster)
    try:
        s = run(files, a.out, client, model=a.model, device=a.device, precision=a.precision, save=save,
                chunk=a.chunk, batch=a.batch, threads=threads, io_threads=io_threads,
                device_per_worker=per_worker, warm_up=not a.no_warm_up, mirror=a.mirror,
                scales=scales, refine=refine)
    except Exception as e:  # noqa: BLE001 - the message is the report
        print(f"scenelab.cluster: {e}", file=sys.stderr)
        return 2
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    for f in s["failures"]:
        print(f"scenelab.cluster: FAILED {f['error']}", file=sys.stderr)
    print(f"{s['images']} images labelled, {s['failed']} failed, {s['seconds']:.1f} s, "
          f"{s['images_per_s']:.1f} images/s on {s['workers']} workers ({s['chunks']} tasks of up to "
          f"{s['chunk']}; start-up {s['startup_s']:.1f} s before)")
    if a.json:
        text = json.dumps(s, indent=2)
        if a.json == "-":
            print(text)
        else:
            Path(a.json).write_text(text + "\n")
    return 1 if s["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tools/sanitizer_summary.py on hand-made compute-sanitizer logs in the tools' own formats: a
race in one of our kernels and one inside cuBLAS's, memcheck and initcheck reports, a failed host
call, a log cut short by a time limit, one ended by the tool's own failure, one where a test
failed, one where no test ran; the exit status follows what is ours and what is complete.
    sanitizer_summary_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(sys.argv[1], "tools", "sanitizer_summary.py")
P = "========= "
GT_OK = "[==========] 1 test from 1 test suite ran. (5 ms total)\n[  PASSED  ] 1 test.\n"
OUR_K = "void scenelab::cuda::(anonymous namespace)::scan_kernel<(int)256>(const float *, int)"
NVJET = "nvjet_sm90_hss_64x8_64x16_1x4_h_bz_splitK_NNT"

LOGS = {
    "race-ours": (f"{P}COMPUTE-SANITIZER\n[ RUN      ] NmsGpu.X\n"
                  f"{P}Error: Race reported between Write access at {OUR_K}+0x2b80 in /s/nms/nms_cuda.cu:153\n"
                  f"{P}    and Read access at {OUR_K}+0x2c10 in /s/nms/nms_cuda.cu:160 [7 hazards]\n{P}\n"
                  f"[       OK ] NmsGpu.X (5 ms)\n{GT_OK}"
                  f"{P}RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"),
    "race-nvjet": (f"{P}COMPUTE-SANITIZER\n"
                   f"{P}Error: Race reported between Write access at {NVJET}+0x2f00\n"
                   f"{P}    and Read access at {NVJET}+0xb20 [100 hazards]\n{P}\n{GT_OK}"
                   f"{P}RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"),
    "memcheck-clean": (f"{P}COMPUTE-SANITIZER\n{P}Program hit cudaErrorMemoryAllocation (error 2) due to "
                       f"\"out of memory\" on CUDA API call to cudaMalloc.\n{P}    Saved host backtrace up to "
                       f"driver entry point at error\n{P}        Host Frame: [0x1] in libcuda.so.1\n{P}\n{GT_OK}"
                       f"{P}LEAK SUMMARY: 0 bytes leaked in 0 allocations\n{P}ERROR SUMMARY: 1 error\n"),
    "memcheck-ours": (f"{P}COMPUTE-SANITIZER\n{P}Invalid __global__ read of size 4 bytes\n"
                      f"{P}    at scenelab::cuda::bias_act_kernel(float *, const float *, int, bool)+0x90 in "
                      f"/s/kernels/conv.cu:88\n{P}    by thread (3,0,0) in block (0,0,0)\n"
                      f"{P}    Address 0x7f00 is out of bounds\n{P}\n{GT_OK}{P}ERROR SUMMARY: 1 error\n"),
    "initcheck-unknown": (f"{P}COMPUTE-SANITIZER\n{P}Uninitialized __global__ memory read of size 4 bytes\n"
                          f"{P}    at mystery_kernel(float *)+0x40\n{P}    by thread (0,0,0) in block (1,0,0)\n"
                          f"{P}\n{GT_OK}{P}ERROR SUMMARY: 1 error\n"),
    "timed-out": (f"{P}COMPUTE-SANITIZER\n[==========] Running 1 test from 1 test suite.\n"
                  f"[ RUN      ] PipelineGpu.DetectionHeadOnTheGpuEqualsTheCpuHeadFp16\n"),
    "tool-broke": (f"{P}COMPUTE-SANITIZER\n{P}Internal Sanitizer Error: The Sanitizer failed to handle a "
                   f"hardware exception\n[  FAILED  ] CudaBackend.ConvolutionEveryAlgorithmAndPrecision (3 ms)\n"
                   f"[  PASSED  ] 0 tests.\n[  FAILED  ] 1 test, listed below:\n"
                   f"[  FAILED  ] CudaBackend.ConvolutionEveryAlgorithmAndPrecision\n"
                   f"{P}ERROR SUMMARY: 1 error\n"),
    "test-failed": (f"{P}COMPUTE-SANITIZER\n[  FAILED  ] NmsGpu.Y (4 ms)\n[  PASSED  ] 2 tests.\n"
                    f"[  FAILED  ] 1 test, listed below:\n[  FAILED  ] NmsGpu.Y\n{P}ERROR SUMMARY: 0 errors\n"),
    "initcheck-host": (f"{P}COMPUTE-SANITIZER\n{P}Host API memory access error at host access to 0x7efa of size "
                       f"98,320 bytes\n{P}    Uninitialized access to 0x7efb on access by cudaMemcpy source\n"
                       f"{P}    Saved host backtrace up to driver entry point at error\n"
                       f"{P}        Host Frame: cudaMemcpyAsync [0x70eec] in libcudart.so.13\n"
                       f"{P}        Host Frame: scenelab::nms::GpuWindowCandidates::run(float) [0x239111] in "
                       f"scenelab_gpu_tests\n{P}        Host Frame: main [0xb0604] in scenelab_gpu_tests\n{P}\n"
                       f"{GT_OK}{P}ERROR SUMMARY: 1 error\n"),
    "initcheck-unprinted": (f"{P}COMPUTE-SANITIZER\n{GT_OK}{P}ERROR SUMMARY: 3 errors\n"
                            f"{P}ERROR SUMMARY: 3 errors were not printed. Use --print-limit option to adjust "
                            f"the number of printed errors\n"),
    "none-ran": f"{P}COMPUTE-SANITIZER\n[  PASSED  ] 0 tests.\n{P}ERROR SUMMARY: 0 errors\n",
    "clean": f"{P}COMPUTE-SANITIZER\n{GT_OK}{P}RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n",
}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as d:
    paths = {}
    for name, text in LOGS.items():
        tool = name.split("-")[0] if name.split("-")[0] in ("memcheck", "initcheck") else "racecheck"
        paths[name] = os.path.join(d, f"sanitizer-{tool}-{name}.log")
        with open(paths[name], "w") as f:
            f.write(text)

    def run(*names, strict=False):
        cmd = [sys.executable, TOOL] + (["--strict"] if strict else []) + [paths[n] for n in names]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr

    for name, want in [("clean", 0), ("memcheck-clean", 0), ("race-nvjet", 0), ("race-ours", 1),
                       ("memcheck-ours", 1), ("initcheck-unknown", 1), ("timed-out", 1), ("tool-broke", 1),
                       ("test-failed", 1), ("none-ran", 1)]:
        rc, out = run(name)
        check(rc == want, f"{name}: exit {rc}, expected {want}")
    rc, out = run("race-nvjet", strict=True)
    check(rc == 1, "--strict fails on NVIDIA's kernels' reports too")
    rc, out = run("race-ours")
    check("reports: ours 1, nobody's 0, NVIDIA's 0" in out, "a race in scenelab::...scan_kernel is ours")
    check("ours: " + OUR_K in out, "our kernel is named, without its offset or source line")
    rc, out = run("race-nvjet")
    check("reports: ours 0, nobody's 0, NVIDIA's 1" in out and "NVIDIA's: " + NVJET in out,
          "a race inside cuBLAS's nvjet kernel is NVIDIA's, and named")
    rc, out = run("memcheck-clean")
    check("failed host calls 1" in out and "reports: ours 0" in out and "complete" in out,
          "a failed cudaMalloc is a host call, not a kernel's report")
    rc, out = run("memcheck-ours")
    check("ours: scenelab::cuda::bias_act_kernel(float *, const float *, int, bool)" in out,
          "memcheck's 'at' line names the kernel")
    rc, out = run("initcheck-unknown")
    check("nobody's 1" in out and "unknown: mystery_kernel(float *)" in out, "a kernel of nobody's fails")
    rc, out = run("initcheck-host")
    check(rc == 1 and "ours: scenelab::nms::GpuWindowCandidates::run(float)" in out,
          "a report on a host copy is owned by the first of our functions in its backtrace")
    rc, out = run("initcheck-unprinted")
    check(rc == 1 and "nobody's 3" in out, "errors the tool counted but did not print fail")
    rc, out = run("timed-out")
    check("NOT COMPLETE (no tool summary)" in out, "a log cut short is not complete")
    rc, out = run("tool-broke")
    check("NOT COMPLETE (Internal Sanitizer Error" in out, "the tool's own failure is named")
    rc, out = run("test-failed")
    check("failed 1 NmsGpu.Y" in out, "a failed test is named")
    rc, out = run("none-ran")
    check("NOT COMPLETE (no test ran)" in out, "a filter that ran nothing is not clean")
    rc, out = run("clean", "race-nvjet", "race-ours", "timed-out")
    check(rc == 1 and "racecheck: 3 of 4 processes complete" in out and "in our kernels 1, in NVIDIA's 1" in out,
          "the totals over several logs")
    check("sanitizers: NOT CLEAN" in out, "the verdict line")
    rc, out = run("clean", "race-nvjet")
    check(rc == 0 and "sanitizers: clean (our kernels)" in out, "clean where only NVIDIA's kernels reported")
    p = subprocess.run([sys.executable, TOOL, os.path.join(d, "missing.log")], capture_output=True, text=True)
    check(p.returncode == 1 and "cannot read it" in p.stdout, "a missing log fails, naming it")

print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)

#!/usr/bin/env python3
"""What compute-sanitizer found, told apart by whose code it is in: ours (every kernel of ours is
in a `scenelab::` namespace), NVIDIA's libraries (cuBLAS, cuBLASLt, cuDNN and the kernels they
ship: nvjet, xmma, cutlass, ...), or neither (counted as ours: a report nobody owns fails).

    sanitizer_summary.py [--strict] LOG...

Each LOG is the output of one `compute-sanitizer --tool TOOL ... scenelab_gpu_tests` process.
A log is complete when the tool printed its summary and GoogleTest its result; one that ends
early (a time limit, the tool's own failure, a test that died) is not clean, whatever it showed
before. One line a log, then the totals; exit status 0 when every log is complete, every test
passed and no report is ours (with --strict, none is NVIDIA's either), else 1.
"""
import argparse
import collections
import re
import sys

# Kernels NVIDIA's libraries launch (their names as the tools print them). A name that matches
# neither this nor `scenelab::` is nobody's and is counted with ours.
VENDOR = re.compile(r"nvjet|xmma|cutlass|cudnn|cublas|cask|gemmSN|gemmk1|gemv2|splitKreduce|"
                    r"\bsm\d\d_|\bampere_|\bhopper_|implicit_convolve|fft_|winograd|dgrad|wgrad")
OURS = re.compile(r"scenelab::")
PREFIX = "========= "
# The first line of a report: the tool's words for what it found.
REPORT = re.compile(r"^(Error|Warning): Race reported|^(ERROR|WARNING): Potential \w+ hazard|"
                    r"^Invalid __\w+__ (read|write|atomic)|^Uninitialized __\w+__ memory|"
                    r"^Barrier error|^Misaligned|^Out-of-range|^Malloc/Free error|^Cuda API error|"
                    r"^Program hit |^Leaked \d+ bytes|^Unused memory|^Illegal|^Hardware exception|"
                    r"^Invalid (shared|global|local) |^Host API memory access error")
BROKEN = re.compile(r"Internal Sanitizer Error|didn't terminate successfully|Target application "
                    r"terminated|failed to (launch|attach)|unspecified launch failure")


def owner(text):
    if OURS.search(text):
        return "ours"
    if VENDOR.search(text):
        return "nvidia"
    return "unknown"


def kernel_of(line):
    """The function a report's 'at ...' line names, without its offset and source position."""
    m = re.search(r"\bat (.*?)(\+0x[0-9a-f]+)?( in \S+)?( \[\d+ hazards?\])?$", line)
    return m.group(1).strip() if m else line.strip()


def read_log(path):
    with open(path, errors="replace") as f:
        lines = f.read().splitlines()
    r = {"path": path, "tool": None, "found": collections.Counter(), "kernels": collections.defaultdict(set),
         "passed": 0, "failed": [], "skipped": 0, "summary": None, "gtest_done": False, "broken": []}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(PREFIX):
            body = line[len(PREFIX):].strip()
            if m := re.match(r"(ERROR SUMMARY|RACECHECK SUMMARY): (.*)", body):
                r["summary"] = (r["summary"] + "; " if r["summary"] else "") + m.group(2)
            elif BROKEN.search(body):
                r["broken"].append(body)
            elif REPORT.search(body):
                if body.startswith("Program hit ") or body.startswith("Cuda API error"):
                    r["found"]["api"] += 1  # a host call that failed (some tests make them fail)
                    i += 1
                    continue
                # The accesses it names: racecheck's 'at X' and 'and ... at Y', the others' 'at X'.
                # A report on a host call (initcheck's "Host API memory access error") names no
                # kernel: the first of our functions in its host backtrace stands for it.
                named, host = [], None
                if " at " in body and not body.startswith("Host API"):
                    named.append(kernel_of(body))
                j = i + 1
                while j < len(lines) and lines[j].startswith(PREFIX + "    "):
                    sub = lines[j][len(PREFIX):].strip()
                    if sub.startswith("and ") or (sub.startswith("at ") and not named) or \
                            re.match(r"(Read|Write) Thread", sub):
                        named.append(kernel_of(sub))
                    elif host is None and (m := re.match(r"Host Frame: ?(scenelab::.*?)( \[0x[0-9a-f]+\])? in ", sub)):
                        host = m.group(1)
                    j += 1
                if not named and host:
                    named.append(host)
                who = [owner(k) for k in named] or ["unknown"]
                side = "ours" if "ours" in who else "unknown" if "unknown" in who else "nvidia"
                r["found"][side] += 1
                r["kernels"][side].update(named)
                i = j
                continue
        else:
            if m := re.match(r"\[  PASSED  \] (\d+) test", line):
                r["passed"] = int(m.group(1))
                r["gtest_done"] = True
            elif m := re.match(r"\[  FAILED  \] (\S+\.\S+)", line):
                if m.group(1) not in r["failed"]:
                    r["failed"].append(m.group(1))
                r["gtest_done"] = True
            elif m := re.match(r"\[  SKIPPED \] (\d+) test", line):
                r["skipped"] = int(m.group(1))
            elif BROKEN.search(line):
                r["broken"].append(line.strip())
        if r["tool"] is None and (m := re.search(r"--tool[ =](\w+)", line)):
            r["tool"] = m.group(1)
        i += 1
    if r["tool"] is None:  # the log's name, as gpu_check.sh writes it: sanitizer-TOOL-FILTER.log
        m = re.search(r"sanitizer-(memcheck|racecheck|initcheck|synccheck)", path)
        r["tool"] = m.group(1) if m else "?"
    # Reports the tool counted but did not print (its --print-limit) belong to nobody we can name.
    if r["summary"] and (m := re.match(r"(\d+) errors?", r["summary"])):
        shown = sum(r["found"][k] for k in ("ours", "unknown", "nvidia", "api"))
        if int(m.group(1)) > shown:
            r["found"]["unknown"] += int(m.group(1)) - shown
            r["kernels"]["unknown"].add(f"{int(m.group(1)) - shown} reports the tool counted but did not print")
    ran = r["passed"] + len(r["failed"]) + r["skipped"]
    r["complete"] = r["summary"] is not None and r["gtest_done"] and not r["broken"] and ran > 0
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--strict", action="store_true", help="NVIDIA's kernels' reports fail too")
    a = ap.parse_args()
    per_tool = collections.defaultdict(collections.Counter)
    vendor_kernels = collections.defaultdict(set)
    bad = False
    for path in a.logs:
        try:
            r = read_log(path)
        except OSError as e:
            print(f"{path}: cannot read it ({e.strerror})")
            bad = True
            continue
        f = r["found"]
        state = "complete" if r["complete"] else "NOT COMPLETE"
        why = ""
        if not r["complete"]:
            why = " (" + ("; ".join(dict.fromkeys(r["broken"]))[:200] if r["broken"] else
                          "no tool summary" if r["summary"] is None else "GoogleTest did not finish" if not r["gtest_done"]
                          else "no test ran") + ")"
        print(f"{path}: {r['tool']}, {state}{why}; tests passed {r['passed']}, failed {len(r['failed'])}"
              f"{' ' + ','.join(r['failed']) if r['failed'] else ''}, skipped {r['skipped']}; reports: ours "
              f"{f['ours']}, nobody's {f['unknown']}, NVIDIA's {f['nvidia']}; failed host calls {f['api']}"
              f"{'; tool: ' + r['summary'] if r['summary'] else ''}")
        for side in ("ours", "unknown"):
            for k in sorted(r["kernels"][side])[:5]:
                print(f"    {side}: {k[:160]}")
        vendor_kernels[r["tool"]].update(r["kernels"]["nvidia"])
        t = per_tool[r["tool"]]
        t["logs"] += 1
        t["complete"] += r["complete"]
        t["passed"] += r["passed"]
        t["failed"] += len(r["failed"])
        t["skipped"] += r["skipped"]
        for k in ("ours", "unknown", "nvidia"):
            t[k] += f[k]
        bad |= not r["complete"] or bool(r["failed"]) or f["ours"] > 0 or f["unknown"] > 0
        bad |= a.strict and f["nvidia"] > 0
    for tool, t in sorted(per_tool.items()):
        print(f"{tool}: {t['complete']} of {t['logs']} processes complete; tests passed {t['passed']}, "
              f"failed {t['failed']}, skipped {t['skipped']}; reports in our kernels {t['ours'] + t['unknown']}, "
              f"in NVIDIA's {t['nvidia']}")
        for k in sorted(vendor_kernels[tool])[:8]:
            print(f"    NVIDIA's: {k[:160]}")
    print("sanitizers: " + ("NOT CLEAN" if bad else "clean (our kernels)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

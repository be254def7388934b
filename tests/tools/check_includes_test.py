#!/usr/bin/env python3
"""tools/check_includes.py: the real tree keeps to docs/ARCHITECTURE.md's arrows, and a tree with
one upward include (core/ including engine/, kernels/ including job/) is refused by name."""
import os
import shutil
import subprocess
import sys
import tempfile

src = os.path.abspath(sys.argv[1])
script = os.path.join(src, "tools", "check_includes.py")


def write(root, path, text, mode="w"):
    with open(os.path.join(root, path), mode) as f:
        f.write(text)


def run(root):
    p = subprocess.run([sys.executable, script, root], capture_output=True, text=True)
    return p.returncode, p.stdout


rc, out = run(src)
assert rc == 0, f"the source tree has includes against the arrows:\n{out}"
print(out.strip().splitlines()[-1])

with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "docs"))
    shutil.copy(os.path.join(src, "docs", "ARCHITECTURE.md"), os.path.join(tmp, "docs"))
    for d in ("core", "engine", "kernels", "job"):
        os.makedirs(os.path.join(tmp, d))
    write(tmp, "core/a.h", '#pragma once\n#include "core/b.h"\n')
    write(tmp, "engine/g.cpp", '#include "core/a.h"\n#include "engine/g.h"\n')
    rc, out = run(tmp)
    assert rc == 0, f"a tree with only downward includes was refused:\n{out}"
    write(tmp, "core/a.h", '#include "engine/graph.h"\n', "a")
    write(tmp, "kernels/k.cu", '  #  include "job/pipeline.h"\n')
    rc, out = run(tmp)
    assert rc == 1, f"upward includes were not refused (exit {rc}):\n{out}"
    assert 'core/a.h:3: floor core includes "engine/..." (floor engine)' in out, out
    assert 'kernels/k.cu:1: floor ops includes "job/..." (floor job)' in out, out
    assert "2 include(s) against the arrows" in out, out
    os.remove(os.path.join(tmp, "docs", "ARCHITECTURE.md"))
    rc, out = run(tmp)
    assert rc == 2 and "ARCHITECTURE.md" in out, out
print("check_includes: the tree passes; upward includes in a .h and a .cu are refused by file and line")

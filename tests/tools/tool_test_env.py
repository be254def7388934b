"""What the Python tests of tools/ share: the modules a test needs (exit 77, skipped, where one is
missing) and the source tree's tools/ on the path. A test runs as TEST.py SOURCE_DIR:

    src = tool_test_env.setup("cv2", "torch")
"""
import importlib
import os
import sys


def setup(*modules):
    for m in modules:
        try:
            importlib.import_module(m)
        except ImportError as e:
            print(f"skipped: {e}")
            sys.exit(77)
    src = sys.argv[1]
    sys.path.insert(0, os.path.join(src, "tools"))
    return src

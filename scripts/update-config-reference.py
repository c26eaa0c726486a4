#!/usr/bin/env python3
"""Rewrites the key list in configs/README.md from `ds2 config-keys` (run after adding a key;
tests/train/config_docs_test.cpp fails until the two agree). Usage: scripts/update-config-reference.py [build/ds2]"""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else str(root / "build" / "ds2")
keys = subprocess.run([binary, "config-keys"], capture_output=True, text=True, check=True).stdout
doc = root / "configs" / "README.md"
text = doc.read_text()
new = re.sub(r"```\nrun\.dir.*?```", lambda _: "```\n" + keys + "```", text, flags=re.S)
if new == text:
    print("configs/README.md: up to date")
else:
    doc.write_text(new)
    print("configs/README.md: key list rewritten")

#!/usr/bin/env python3
"""Unpack an Office file into a folder, pretty-printing its XML parts."""
import sys
import zipfile
from pathlib import Path

import defusedxml.minidom

src, out = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(src) as z:
    z.extractall(out)
for part in out.rglob("*.xml"):
    part.write_text(defusedxml.minidom.parse(str(part)).toprettyxml())
print(f"Unpacked {src} to {out}")

#!/usr/bin/env python3
"""Check a skill folder: SKILL.md with YAML frontmatter naming `name` and `description`."""
import re
import sys
from pathlib import Path

import yaml

ALLOWED = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}


def validate(folder):
    md = Path(folder) / "SKILL.md"
    if not md.exists():
        return False, "SKILL.md not found"
    m = re.match(r"^---\n(.*?)\n---", md.read_text(), re.DOTALL)
    if not m:
        return False, "No YAML frontmatter found"
    front = yaml.safe_load(m.group(1))
    if not isinstance(front, dict):
        return False, "Frontmatter must be a YAML dictionary"
    extra = set(front) - ALLOWED
    if extra:
        return False, f"Unexpected key(s) in SKILL.md frontmatter: {', '.join(sorted(extra))}"
    for key in ("name", "description"):
        if not front.get(key):
            return False, f"Missing '{key}' in frontmatter"
    return True, "Skill is valid!"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("Usage: python quick_validate.py <skill_directory>")
        sys.exit(1)
    ok, message = validate(sys.argv[1])
    print(message)
    sys.exit(0 if ok else 1)

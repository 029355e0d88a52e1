"""The rule model."""

import subprocess


def parse(text):
    return [line for line in text.splitlines() if line.startswith("TODO")]


def compiler_version():
    return subprocess.run(["rulec", "--version"], capture_output=True).stdout

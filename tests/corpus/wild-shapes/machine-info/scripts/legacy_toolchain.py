"""Old toolchain probes, no longer used by detect.py."""

import subprocess


def compiler():
    return subprocess.run(["gcc", "--version"], capture_output=True).stdout


def mac_cpu():
    return subprocess.check_output(["sysctl", "-n", "machdep.cpu.brand_string"])

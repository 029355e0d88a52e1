import subprocess

from rules import parse


def test_parse():
    assert parse("TODO x") == ["TODO x"]
    subprocess.run(["pytest", "-q"])

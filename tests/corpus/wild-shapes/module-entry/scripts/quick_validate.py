"""Checks a skill name: lowercase words joined by hyphens."""

import re

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def validate(name):
    return "ok" if NAME.match(name) else "bad"

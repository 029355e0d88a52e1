#!/usr/bin/python3
# A recorded stand-in for a CLI that talks to an API (gh, curl, claude): it answers only the calls
# on its tape, and checks each call's argv and the files it reads against the recording. Tests
# write a copy of this file under the command's name with the tape filled in (the TAPE line), in a
# folder they own that they put first on PATH (host) or mount over /usr/local/bin in a private
# mount namespace (sandbox). It never reaches a network.
#
# A tape entry: {"argv": [...] (without the command name), "files": {path: expected text},
# "stdin": expected text, "stdout": text, "output": text written to the path after --output / -o,
# "output_b64": the same as base64, "stderr": text, "exit": status}. Paths are written as the
# sandbox sees them (/tmp, /workspace, /skill, /band/io); on the host they are mapped through the
# script's TMPDIR, WORKSPACE, SKILL_DIR, INPUT_PATH and CONFIG_PATH. On the host, each answered
# entry's index is appended to $STANDIN_LOG.
TAPE = []
import base64, json, os, sys

NAME = os.path.basename(sys.argv[0])
MAP = [
    (os.environ.get("INPUT_PATH"), "/band/io/input.json"),
    (os.environ.get("CONFIG_PATH"), "/band/io/config.json"),
    (os.environ.get("TMPDIR"), "/tmp"),
    (os.environ.get("WORKSPACE"), "/workspace"),
    (os.environ.get("SKILL_DIR"), "/skill"),
]
MAP = [(h, s) for h, s in MAP if h and h != s]


def to_sandbox(text):
    for host, sandbox in MAP:
        text = text.replace(host, sandbox)
    return text


def to_host(path):
    for host, sandbox in MAP:
        if path == sandbox or path.startswith(sandbox + "/"):
            return host + path[len(sandbox):]
    return path


def fail(why):
    sys.stderr.write("stand-in %s: %s\n" % (NAME, why))
    sys.exit(99)


def read(path):
    try:
        with open(to_host(path), "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return "<unreadable: %s>" % e.strerror


args = [to_sandbox(a) for a in sys.argv[1:]]
stdin = None
mismatch = []
for index, entry in enumerate(TAPE):
    if entry["argv"] != args:
        continue
    wrong = [p for p, want in entry.get("files", {}).items() if read(p) != want]
    if "stdin" in entry:
        if stdin is None:
            stdin = sys.stdin.read()
        if stdin != entry["stdin"]:
            wrong.append("<stdin>")
    if wrong:
        mismatch.append("entry %d: %s differ (%s)" % (index, ", ".join(wrong), "; ".join(
            "%s=%r" % (p, read(p) if p != "<stdin>" else stdin) for p in wrong)))
        continue
    if os.environ.get("STANDIN_LOG"):
        with open(os.environ["STANDIN_LOG"], "a") as log:
            log.write(json.dumps([NAME, index]) + "\n")
    out = None
    for flag in ("--output", "-o"):
        if flag in args:
            out = args[args.index(flag) + 1]
    data = None
    if "output_b64" in entry:
        data = base64.b64decode(entry["output_b64"])
    elif "output" in entry:
        data = entry["output"].encode()
    if data is not None:
        if out is None:
            fail("entry %d has an output but the call names no --output" % index)
        with open(to_host(out), "wb") as f:
            f.write(data)
    sys.stdout.write(entry.get("stdout", ""))
    sys.stderr.write(entry.get("stderr", ""))
    sys.exit(entry.get("exit", 0))
fail("no recorded call matches %s %s%s" % (NAME, json.dumps(args), "".join("\n  " + m for m in mismatch)))

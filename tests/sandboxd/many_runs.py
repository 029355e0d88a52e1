"""Many concurrent Starts on band-sandboxd, a quarter of their clients killed mid-run (issue 42).

Usage: many_runs.py GRPC TOKEN_FILE N KILL_EVERY
       many_runs.py --client GRPC TOKEN_FILE I    (one client of its own, for the driver to kill)

Run I, for every I % KILL_EVERY == KILL_EVERY - 1, is started by a client process of its own:
its command is `sleep 1200+I` (after saying `ready`). Every other run is the probe below: it
leaves a file in its /tmp and says `ready`; when its stdin closes it reports what it sees from
inside. All N are started at once; once every one of them is ready (all N alive at once), the
driver SIGKILLs the clients of its own.

The driver prints, in this order:
  killed I PID                  each killed client's run (PID: band-sandboxd's process id)
  ready PID PID ...             the probes' process ids, once every killed client is dead
then waits for a line on its stdin, closes every probe's stdin, and prints
  run I PID EXIT_CODE REPORT    each probe's exit code and its one-line JSON report
  all N
"""

import json
import subprocess
import sys
import threading

from k8s_agent_sandbox.commands._process_stubs import process_pb2 as pb

from pod_client import stub

# What a probe sees. Its own process (`python3 -c PROBE I`) and the sandbox's init are the only
# ones it should find; any other probe, any killed run's `sleep`, or a band-server is foreign.
PROBE = r"""
import json, os, sys
i = sys.argv[1]
open(f"/tmp/mine-{i}", "w").write(i)
print("ready", flush=True)
sys.stdin.read()
me = os.getpid()
pids, foreign = 0, []
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    pids += 1
    try:
        cmd = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ")
    except OSError:
        continue
    if int(p) != me and (b"mine-" in cmd or b"sleep 12" in cmd or b"band-server" in cmd):
        foreign.append(cmd.decode(errors="replace")[:80])
uid = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Uid:")][0]
print(json.dumps({"i": i, "uid": int(uid), "pids": pids, "foreign": foreign,
                  "tmp": sorted(os.listdir("/tmp"))}), flush=True)
"""


def fail(what):
    print(f"FAIL: {what}", flush=True)
    sys.exit(1)


class Run:
    """One Start, its stream read on a thread."""

    def __init__(self, processes, argv):
        self.call = processes.Start(pb.StartRequest(config=pb.ProcessConfig(command=argv)), timeout=600)
        self.id, self.out, self.err, self.code = None, b"", b"", None
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for e in self.call:
                with self.cond:
                    if e.HasField("init"):
                        self.id = e.init.process_id
                    elif e.HasField("stdout"):
                        self.out += e.stdout
                    elif e.HasField("stderr"):
                        self.err += e.stderr
                    elif e.HasField("exit"):
                        self.code = e.exit.exit_code
                    self.cond.notify_all()
        except Exception as e:  # the stream's end, as the run's outcome
            with self.cond:
                self.err += f"stream: {e}".encode()
        with self.cond:
            if self.code is None:
                self.code = -1
            self.cond.notify_all()

    def wait(self, pred, what):
        # The limit only names a hang.
        with self.cond:
            if not self.cond.wait_for(pred, timeout=300):
                fail(f"hang waiting for {what}: {self.id} {self.out!r} {self.err!r}")

    def ready(self):
        self.wait(lambda: b"ready" in self.out or self.code is not None, "ready")
        if self.code is not None:
            fail(f"a run ended before it was ready: {self.code} {self.out!r} {self.err!r}")


def client(target, token, i):
    run = Run(stub(target, token), ["sh", "-c", f"echo ready; exec sleep {1200 + int(i)}"])
    run.ready()
    print(f"ready {run.id}", flush=True)
    sys.stdin.read()


def main():
    if sys.argv[1] == "--client":
        target, token_file, i = sys.argv[2:5]
        return client(target, open(token_file).read().strip(), i)
    target, token_file, n, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    token = open(token_file).read().strip()
    processes = stub(target, token)
    killed, probes = {}, {}
    for i in range(n):
        if i % every == every - 1:
            killed[i] = subprocess.Popen(
                [sys.executable, __file__, "--client", target, token_file, str(i)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        else:
            probes[i] = Run(processes, ["python3", "-c", PROBE, str(i)])
    # Every run alive at once first: the killed clients' runs too.
    ready = {}
    for i, c in killed.items():
        line = c.stdout.readline()
        if not line.startswith("ready "):
            fail(f"client {i}: {line!r}")
        ready[i] = line.split()[1]
    for r in probes.values():
        r.ready()
    for i, c in killed.items():
        c.kill()
        c.wait()
        print(f"killed {i} {ready[i]}", flush=True)
    print("ready " + " ".join(str(r.id) for r in probes.values()), flush=True)
    sys.stdin.readline()
    for r in probes.values():
        processes.WriteStdin(pb.WriteStdinRequest(process_id=r.id, eof={}), timeout=60)
    for i, r in probes.items():
        r.wait(lambda r=r: r.code is not None, f"probe {i}'s end")
        report = r.out.split(b"ready\n", 1)[-1].decode(errors="replace").strip() or json.dumps(r.err.decode(errors="replace"))
        print(f"run {i} {r.id} {r.code} {report}", flush=True)
    print(f"all {n}", flush=True)


if __name__ == "__main__":
    main()

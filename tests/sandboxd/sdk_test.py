"""band-sandboxd, driven by the kubernetes-sigs agent-sandbox SDK's own client code.

The SDK (PyPI k8s-agent-sandbox, with its `grpc` extra) reaches sandboxd through a kubectl
port-forward and sends no token; here its connector is pointed at the ports band-sandboxd
listens on (a strategy that returns them), and the token rides on the connector's HTTP session
and on a gRPC interceptor. Everything else is the SDK's: `CommandExecutor.run` (Execute),
`Filesystem` (PUT/GET/HEAD/DELETE /v1/files/...), and its generated ProcessService stub for
Start, WriteStdin, SendSignal and ResizeTTY.

Usage: sdk_test.py GRPC HTTP TOKEN_FILE WORKSPACE OUTSIDE POLICY_SHA256
Prints `ok: <check>` per check; exits non-zero at the first failure.
"""

import os
import subprocess
import sys
import threading
import time
import types

import grpc
import requests

from k8s_agent_sandbox.commands._process_stubs import process_pb2 as pb
from k8s_agent_sandbox.commands._process_stubs import process_pb2_grpc as pbg
from k8s_agent_sandbox.commands.command_executor import CommandExecutor
from k8s_agent_sandbox.connector import ConnectionStrategy, SandboxConnector
from k8s_agent_sandbox.files.filesystem import Filesystem
from k8s_agent_sandbox.models import SandboxdPodTunnelConnectionConfig

from pod_client import channel, stub


def check(name, cond, detail=""):
    if not cond:
        print(f"FAIL: {name}: {detail}", flush=True)
        sys.exit(1)
    print(f"ok: {name}", flush=True)


class Direct(ConnectionStrategy):
    """The pod's ports, without kubectl (what the SDK's pod tunnel would forward to)."""

    def __init__(self, http, grpc_target):
        self.base_url = f"http://{http}"
        self.grpc_target = grpc_target

    def connect(self):
        return self.base_url

    def close(self):
        pass

    def verify_connection(self):
        pass

    def should_inject_router_headers(self):
        return False


def connector(http, grpc_target, token):
    c = SandboxConnector(
        "band", "default", SandboxdPodTunnelConnectionConfig(),
        types.SimpleNamespace(injected_api_client=None))
    c.strategy = Direct(http, grpc_target)
    for s in (c.session, c._no_retry_session):
        s.headers["Authorization"] = f"Bearer {token}"
    chan = channel(grpc_target, token)
    c.grpc_channel = lambda: chan
    return c, chan


class Started:
    """A Start stream read on a thread: its events in order."""

    def __init__(self, stub, argv):
        self.call = stub.Start(pb.StartRequest(config=pb.ProcessConfig(command=argv)), timeout=120)
        self.events = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for ev in self.call:
                with self.cond:
                    self.events.append(ev)
                    self.cond.notify_all()
        except grpc.RpcError as e:
            with self.cond:
                self.events.append(e)
                self.cond.notify_all()

    def wait_for(self, pred, what, limit=60):
        # The limit only names a hang.
        with self.cond:
            if not self.cond.wait_for(lambda: pred(self), timeout=limit):
                print(f"FAIL: hang waiting for {what}: {self.events}", flush=True)
                sys.exit(1)

    def pid(self):
        self.wait_for(lambda s: s.events, "init")
        return self.events[0].init.process_id

    def stdout(self):
        return b"".join(e.stdout for e in self.events if hasattr(e, "stdout") and e.HasField("stdout"))

    def stderr(self):
        return b"".join(e.stderr for e in self.events if hasattr(e, "stderr") and e.HasField("stderr"))

    def exit(self):
        self.wait_for(lambda s: s.events and (isinstance(s.events[-1], grpc.RpcError) or s.events[-1].HasField("exit")), "exit")
        last = self.events[-1]
        if isinstance(last, grpc.RpcError):
            print(f"FAIL: stream error {last}", flush=True)
            sys.exit(1)
        return last.exit.exit_code


def client_only(grpc_target, token):
    """A client that starts a run, says so, and waits to be killed (nothing outlives it)."""
    chan = channel(grpc_target, token)
    s = Started(pbg.ProcessServiceStub(chan), ["sh", "-c", "echo ready; exec cat"])
    pid = s.pid()
    s.wait_for(lambda s: b"ready" in s.stdout(), "ready")
    print(f"ready {pid}", flush=True)
    sys.stdin.read()


def memory(grpc_target, token):
    """Under a pod band with maxMemoryBytes 64m: a run that stays under it ends well, one that
    allocates past it is killed, from inside, and says so."""
    processes = stub(grpc_target, token)

    def run(code):
        return processes.Execute(pb.ExecuteRequest(config=pb.ProcessConfig(command=["python3", "-c", code])), timeout=120)

    r = run("x = bytearray(16 << 20); print(len(x))")
    check("16 MiB under a 64 MiB limit", r.exit_code == 0 and r.stdout == b"16777216\n", r)
    r = run("x = bytearray(256 << 20); print(len(x))")
    check("256 MiB is killed by the run's memory limit", r.exit_code == 10 and b"band: memory_limit" in r.stderr
          and r.stdout == b"", r)
    print("all ok", flush=True)


def net(grpc_target, token):
    """Under a pod band with allow.net api.example.test:80 and the test's lab resolver: the
    allowed name resolves and its server answers; another name does not resolve."""
    processes = stub(grpc_target, token)

    def run(code):
        return processes.Execute(pb.ExecuteRequest(config=pb.ProcessConfig(command=["python3", "-c", code])), timeout=120)

    r = run("import urllib.request; print(urllib.request.urlopen('http://api.example.test/from-the-pod', timeout=30).read().decode())")
    check("the allowed name resolves and its server answers", r.exit_code == 0 and b"/from-the-pod" in r.stdout
          and r.stdout.startswith(b"hello "), r)
    r = run("import socket; socket.getaddrinfo('other.example.test', 80)")
    check("a name the band does not allow does not resolve", r.exit_code != 0 and b"gaierror" in r.stderr, r)
    print("all ok", flush=True)


def main():
    if sys.argv[1] == "--net":
        return net(sys.argv[2], open(sys.argv[3]).read().strip())
    if sys.argv[1] == "--client-only":
        return client_only(sys.argv[2], sys.argv[3])
    if sys.argv[1] == "--memory":
        return memory(sys.argv[2], open(sys.argv[3]).read().strip())
    grpc_target, http, token_file, workspace, outside, policy_sha = sys.argv[1:7]
    token = open(token_file).read().strip()
    base = f"http://{http}"

    # The token, on both ports.
    bare = pbg.ProcessServiceStub(grpc.insecure_channel(grpc_target))
    try:
        bare.Execute(pb.ExecuteRequest(config=pb.ProcessConfig(command=["true"])), timeout=30)
        check("grpc without a token is refused", False, "it ran")
    except grpc.RpcError as e:
        check("grpc without a token is refused", e.code() == grpc.StatusCode.UNAUTHENTICATED, e)
    wrong = channel(grpc_target, token[:-1] + "x")
    try:
        pbg.ProcessServiceStub(wrong).Execute(pb.ExecuteRequest(config=pb.ProcessConfig(command=["true"])), timeout=30)
        check("grpc with a wrong token is refused", False, "it ran")
    except grpc.RpcError as e:
        check("grpc with a wrong token is refused", e.code() == grpc.StatusCode.UNAUTHENTICATED, e)
    for path in ("/v1/health", "/v1/metadata", "/v1/files/data/in.txt"):
        r = requests.get(base + path, timeout=30)
        check(f"http {path} without a token is 401", r.status_code == 401, r.status_code)
        r = requests.get(base + path, headers={"Authorization": "Bearer " + token[:-1] + "x"}, timeout=30)
        check(f"http {path} with a wrong token is 401", r.status_code == 401, r.status_code)

    c, chan = connector(http, grpc_target, token)
    stub = pbg.ProcessServiceStub(chan)
    auth = {"Authorization": f"Bearer {token}"}
    h = requests.get(base + "/v1/health", headers=auth, timeout=30).json()
    check("health says ok, band's version and the policy hash",
          h["status"] == "ok" and h["band"]["version"] and h["band"]["policy_sha256"] == policy_sha, h)
    m = requests.get(base + "/v1/metadata", headers=auth, timeout=30).json()
    check("metadata says band's version and the policy hash",
          m["band"]["policy_sha256"] == policy_sha and "env" in m, m)

    ex = CommandExecutor(c, None, "band-test")
    fs = Filesystem(c, None, "band-test")

    # Execute through the SDK's CommandExecutor (it wraps the command in /bin/sh -c).
    r = ex.run("cat data/in.txt; echo to-stderr >&2; exit 3")
    check("Execute: stdout, stderr and the exit code", (r.stdout, r.stderr, r.exit_code) == ("hello\n", "to-stderr\n", 3), r)
    r = ex.run("id -u")
    check("a command inside that the band does not allow is refused (sh says 127, band says why)",
          r.exit_code == 127 and "band: denied" in r.stderr and 'allow.cli "id *"' in r.stderr, r)
    r = pbg.ProcessServiceStub(chan).Execute(pb.ExecuteRequest(config=pb.ProcessConfig(command=["id", "-u"])), timeout=60)
    check("a command the band does not allow does not start: exit 5", r.exit_code == 5 and b"band: denied" in r.stderr and not r.stdout, r)

    # Start: init, then output, then exit.
    s = Started(stub, ["sh", "-c", "echo one; echo two >&2; exit 7"])
    pid = s.pid()
    code = s.exit()
    check("Start streams init, stdout, stderr, exit",
          pid > 0 and s.events[0].HasField("init") and s.stdout() == b"one\n" and s.stderr() == b"two\n" and code == 7,
          s.events)

    # Stdin.
    s = Started(stub, ["cat"])
    pid = s.pid()
    stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"hello "), timeout=30)
    stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, input=b"x" * 5000 + b"\n"), timeout=30)
    stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, eof={}), timeout=30)
    code = s.exit()
    check("WriteStdin feeds the run's stdin, eof ends it", s.stdout() == b"hello " + b"x" * 5000 + b"\n" and code == 0, (s.stdout()[:40], code))

    # Signals.
    for sig, want in ((pb.SIGNAL_SIGTERM, 143), (pb.SIGNAL_SIGINT, 130), (pb.SIGNAL_SIGKILL, 137)):
        s = Started(stub, ["sh", "-c", "echo ready; exec cat"])
        pid = s.pid()
        s.wait_for(lambda s: b"ready" in s.stdout(), "ready")
        stub.SendSignal(pb.SendSignalRequest(process_id=pid, signal=sig), timeout=30)
        code = s.exit()
        check(f"SendSignal {pb.Signal.Name(sig)} ends the run with {want}", code == want, code)
    try:
        stub.SendSignal(pb.SendSignalRequest(process_id=999999, signal=pb.SIGNAL_SIGTERM), timeout=30)
        check("SendSignal to an unknown process is NOT_FOUND", False)
    except grpc.RpcError as e:
        check("SendSignal to an unknown process is NOT_FOUND", e.code() == grpc.StatusCode.NOT_FOUND, e)
    s = Started(stub, ["sh", "-c", "echo ready; exec cat"])
    pid = s.pid()
    try:
        stub.ResizeTTY(pb.ResizeTTYRequest(process_id=pid, cols=80, rows=24), timeout=30)
        check("ResizeTTY of a run (no terminal) is FAILED_PRECONDITION", False)
    except grpc.RpcError as e:
        check("ResizeTTY of a run (no terminal) is FAILED_PRECONDITION", e.code() == grpc.StatusCode.FAILED_PRECONDITION, e)
    stub.WriteStdin(pb.WriteStdinRequest(process_id=pid, eof={}), timeout=30)
    check("... and the run goes on", s.exit() == 0)

    # The files API through the SDK's Filesystem.
    fs.write("data/up.txt", b"payload")
    check("write lands in the workspace", open(os.path.join(workspace, "data/up.txt"), "rb").read() == b"payload")
    check("read", fs.read("data/up.txt") == b"payload")
    check("exists", fs.exists("data/up.txt") and not fs.exists("data/none.txt"))
    names = sorted(e.name for e in fs.list("data"))
    check("list", "up.txt" in names and "in.txt" in names, names)
    r = ex.run("cat data/up.txt")
    check("a run sees the uploaded file", r.stdout == "payload" and r.exit_code == 0, r)
    r = ex.run("echo made > out/r.txt")
    check("a file a run writes under allow.write comes back to the workspace", r.exit_code == 0 and fs.read("out/r.txt") == b"made\n", r)
    fs.delete("data/up.txt")
    check("delete", not fs.exists("data/up.txt") and not os.path.exists(os.path.join(workspace, "data/up.txt")))

    def status_of(method, path, **kw):
        return requests.request(method, base + "/v1/files/" + path, headers=auth, timeout=30, **kw)

    check("a file the band does not admit is not written", status_of("PUT", "secret.txt", data=b"x").status_code == 403
          and not os.path.exists(os.path.join(workspace, "secret.txt")))
    check("... nor read", status_of("GET", "top.txt").status_code == 403)
    for bad in ("..%2Fescape.txt", "data%2F..%2F..%2Fescape.txt", "%2Fetc%2Fpasswd", "data%2F.%2Fx", ".git%2Fconfig"):
        r = status_of("PUT", bad, data=b"x")
        check(f"hostile path {bad} is refused", r.status_code == 400 and r.json()["code"] == "invalid_path", (r.status_code, r.text))
    check("nothing escaped", not os.path.exists(os.path.join(os.path.dirname(workspace), "escape.txt")))
    # data/link -> a folder outside the workspace (made by the test).
    r = status_of("PUT", "data%2Flink%2Fplanted.txt", data=b"x")
    check("a write through a symlink is refused", r.status_code == 403 and r.json()["code"] == "symlink" and "planted.txt" not in os.listdir(outside), (r.status_code, r.text))
    r = status_of("GET", "data%2Flink%2Fouter.txt")
    check("a read through a symlink is refused", r.status_code == 403 and "symlink" in r.text, (r.status_code, r.text))
    r = status_of("DELETE", "data%2Flink")
    check("a delete of a symlink is refused", r.status_code == 403, (r.status_code, r.text))

    # Two concurrent Starts: the second sees nothing of the first.
    a = Started(stub, ["python3", "-c",
                       "import socket,sys\n"
                       "open('/tmp/a-mark','w').write('x')\n"
                       "s=socket.socket(); s.bind(('127.0.0.1', 4711)); s.listen()\n"
                       "print('ready-a-marker', flush=True); sys.stdin.read()"])
    apid = a.pid()
    a.wait_for(lambda s: b"ready-a-marker" in s.stdout(), "the first run's readiness")
    probe = ex.run("ls -a /tmp; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done; echo uid=$(cat /proc/self/status | tr -s '\\t' ' ' | grep '^Uid')")
    # The probe itself worked: it listed its own /tmp and its own processes.
    check("the probe ran", probe.exit_code == 0 and "." in probe.stdout.split() and "sh -c ls -a /tmp" in probe.stdout, probe)
    check("the second run does not see the first's /tmp", "a-mark" not in probe.stdout, probe)
    check("the second run does not see the first's processes", "ready-a-marker" not in probe.stdout and "python3" not in probe.stdout, probe.stdout)
    conn = ex.run("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 4711), timeout=5)\"")
    check("the second run cannot reach the first's listening socket", conn.exit_code != 0 and "refused" in conn.stderr.lower(), conn)
    stub.WriteStdin(pb.WriteStdinRequest(process_id=apid, eof={}), timeout=30)
    check("the first run ends on its own", a.exit() == 0)

    # A client killed mid-run: its run is cancelled and torn down.
    kid = subprocess.Popen([sys.executable, __file__, "--client-only", grpc_target, token],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = kid.stdout.readline()
    check("the killed client's run started", line.startswith("ready "), line)
    kpid = int(line.split()[1])
    kid.kill()
    kid.wait()
    # The limit only names a hang.
    end = time.monotonic() + 60
    while True:
        try:
            stub.SendSignal(pb.SendSignalRequest(process_id=kpid, signal=pb.SIGNAL_SIGTERM), timeout=30)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                break
        if time.monotonic() > end:
            check("the killed client's run ends", False, "still running")
        time.sleep(0.1)
    check("the killed client's run ends", True)
    print("all ok", flush=True)


if __name__ == "__main__":
    main()

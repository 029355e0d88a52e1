"""Two concurrent Starts on band-sandboxd, held open until told (a line on stdin).

Usage: two_runs.py GRPC TOKEN_FILE. Prints `ready A_ID B_ID` once both runs print `ready`, then,
after a line on stdin, closes both runs' stdin and prints `done A_CODE B_CODE`.
"""

import sys
import threading

from k8s_agent_sandbox.commands._process_stubs import process_pb2 as pb

from pod_client import stub


def main():
    target, token_file = sys.argv[1:3]
    token = open(token_file).read().strip()
    processes = stub(target, token)
    argv = ["python3", "-c", "import sys; print('ready', flush=True); sys.stdin.read()"]
    runs = []
    for _ in range(2):
        call = processes.Start(pb.StartRequest(config=pb.ProcessConfig(command=argv)), timeout=300)
        state = {"id": None, "out": b"", "code": None, "ev": threading.Event(), "done": threading.Event()}

        def read(call=call, state=state):
            for e in call:
                if e.HasField("init"):
                    state["id"] = e.init.process_id
                elif e.HasField("stdout"):
                    state["out"] += e.stdout
                    if b"ready" in state["out"]:
                        state["ev"].set()
                elif e.HasField("stderr"):
                    sys.stderr.write(e.stderr.decode(errors="replace"))
                elif e.HasField("exit"):
                    state["code"] = e.exit.exit_code
                    state["ev"].set()
            state["done"].set()

        threading.Thread(target=read, daemon=True).start()
        runs.append(state)
    for s in runs:
        # The limit only names a hang.
        if not s["ev"].wait(120) or s["code"] is not None:
            print(f"FAIL: a run did not get ready: {s}", flush=True)
            sys.exit(1)
    print(f"ready {runs[0]['id']} {runs[1]['id']}", flush=True)
    sys.stdin.readline()
    for s in runs:
        processes.WriteStdin(pb.WriteStdinRequest(process_id=s["id"], eof={}), timeout=30)
    for s in runs:
        s["done"].wait(120)
    print(f"done {runs[0]['code']} {runs[1]['code']}", flush=True)


if __name__ == "__main__":
    main()

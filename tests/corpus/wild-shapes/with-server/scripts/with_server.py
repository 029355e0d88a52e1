#!/usr/bin/env python3
"""Start a server, wait for its port, run a command, stop the server."""

import argparse
import socket
import subprocess
import sys
import time


def wait_for(port, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args()
    server = subprocess.Popen(a.server, shell=True)
    try:
        if not wait_for(a.port):
            raise RuntimeError(f"Server failed to start on port {a.port}")
        subprocess.run("git rev-parse --short HEAD", shell=True)
        return subprocess.run(a.command[1:]).returncode
    finally:
        server.terminate()


if __name__ == "__main__":
    sys.exit(main())

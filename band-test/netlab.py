"""Fake internet for the network tests: runs inside a network namespace the test made.

usage: netlab.py LOGDIR ZONE_JSON HTTP_LISTENERS...

- DNS on UDP and TCP port 53 (every address of the namespace): answers A/AAAA from ZONE_JSON
  ({"name": ["addr", ...]}), NXDOMAIN otherwise; every question is appended to LOGDIR/dns.log.
- HTTP on each ADDR:PORT listener ("[v6]:port" for IPv6): answers "hello ADDR:PORT PATH" and
  appends "ADDR:PORT PATH" to LOGDIR/http.log.

Writes LOGDIR/ready when every socket is bound.
"""
import ipaddress
import json
import os
import socket
import socketserver
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

logdir, zone = sys.argv[1], json.loads(sys.argv[2])
lock = threading.Lock()


def log(name, line):
    with lock, open(os.path.join(logdir, name), "a") as f:
        f.write(line + "\n")


def parse_question(q):
    labels, i = [], 12
    while q[i]:
        n = q[i]
        labels.append(q[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += n + 1
    qtype, _ = struct.unpack("!HH", q[i + 1:i + 5])
    return ".".join(labels).lower(), qtype, q[12:i + 5]


def answer(q):
    name, qtype, question = parse_question(q)
    log("dns.log", f"{name} {qtype}")
    addrs = zone.get(name)
    rrs = []
    for a in addrs or []:
        ip = ipaddress.ip_address(a)
        if (qtype == 1 and ip.version == 4) or (qtype == 28 and ip.version == 6):
            rrs.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 30, len(ip.packed)) + ip.packed)
    rcode = 0 if addrs is not None else 3
    flags = 0x8180 | rcode
    return q[:2] + struct.pack("!HHHHH", flags, 1, len(rrs), 0, 0) + question + b"".join(rrs)


class UDP(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(answer(data), self.client_address)


class TCP(socketserver.BaseRequestHandler):
    def handle(self):
        n = struct.unpack("!H", self.request.recv(2))[0]
        reply = answer(self.request.recv(n))
        self.request.sendall(struct.pack("!H", len(reply)) + reply)


class V4TCP(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 256


servers = [
    socketserver.ThreadingUDPServer(("0.0.0.0", 53), UDP),
    V4TCP(("0.0.0.0", 53), TCP),
]


def http_handler(tag):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            log("http.log", f"{tag} {self.path}")
            body = f"hello {tag} {self.path}\n".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    return H


class V4HTTP(socketserver.ThreadingMixIn, HTTPServer):
    # Many runs at once (tests/it/load.rs): a thread per connection and a deep accept queue, so
    # the lab is never what is slow.
    daemon_threads = True
    request_queue_size = 256

    def server_bind(self):
        # HTTPServer.server_bind looks up the host's name; the lab has no DNS for itself.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "lab", self.server_address[1]


class V6HTTP(V4HTTP):
    address_family = socket.AF_INET6


for spec in sys.argv[3:]:
    host, port = spec.rsplit(":", 1)
    if host.startswith("["):
        servers.append(V6HTTP((host[1:-1], int(port)), http_handler(spec)))
    else:
        servers.append(V4HTTP((host, int(port)), http_handler(spec)))

for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
open(os.path.join(logdir, "ready"), "w").close()
threading.Event().wait()

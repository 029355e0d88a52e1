"""The egress test's HTTPS server, in the lab's namespace: HTTP/1.1 over TLS with the test's own
certificate, on each address:port given; logs one JSON line per request (host, method, path,
Authorization, body) to <dir>/https.log. Usage: egress_https.py DIR CERT KEY ADDR:PORT..."""
import json, ssl, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

out = sys.argv[1] + "/https.log"
lock = threading.Lock()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        rec = {"host": self.headers.get("Host", ""), "method": self.command, "path": self.path,
               "auth": self.headers.get("Authorization", ""), "body": body.decode("latin-1")}
        with lock, open(out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        reply = b"upstream ok\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_GET = do_POST = do_DELETE = do_PUT = handle_any

    def log_message(self, *a):
        pass


ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[2], sys.argv[3])
for spec in sys.argv[4:]:
    addr, port = spec.rsplit(":", 1)
    srv = ThreadingHTTPServer((addr, int(port)), H)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
open(sys.argv[1] + "/https.ready", "w").close()
threading.Event().wait()

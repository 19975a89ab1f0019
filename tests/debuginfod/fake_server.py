#!/usr/bin/env python3
"""Misbehaving debuginfod servers for tests/tests/debuginfod.rs, on 127.0.0.1:PORT:
  silent PORT        accepts connections and never answers
  garbage PORT       answers every request 200 with 256 KiB of pseudo-random bytes
  file PORT FILE     answers every request 200 with FILE (an ELF file with another build-id)
Prints "ready" once listening."""
import http.server, random, socket, sys, time

mode, port = sys.argv[1], int(sys.argv[2])
if mode == "silent":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    print("ready", flush=True)
    held = []
    while True:
        c, _ = s.accept()
        held.append(c)
body = (random.Random(7).randbytes(256 * 1024) if mode == "garbage"
        else open(sys.argv[3], "rb").read())


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("ready", flush=True)
server.serve_forever()

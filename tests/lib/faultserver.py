#!/usr/bin/env python3
"""faultserver.py PORT ROOT CONTROL LOG: a plain HTTP store (GET with Range,
HEAD, PUT, DELETE and MOVE of files under ROOT) that misbehaves on demand.
It is the one fake of the test suite, for faults no real server can be made
to produce; everything else talks to nginx and Ceph RGW.

Before each request it reads CONTROL, lines of "MODE [COUNT [PART]]"; the
first line whose mode is for the request's method (and whose PART, if
given, is in its path) counts. COUNT requests get the
fault (then the line becomes "none"), no COUNT: every one. A mode is for
GETs unless said otherwise; DELETE is always served right. Modes:
  none        serve right
  500, 503    that status, no body
  reset       the headers and half the body, then a TCP reset
  short       Content-Length as asked, half the bytes, then close
  long        206 with the right Content-Range, and 64 KiB more than asked
  badrange    206 whose Content-Range names another range (the bytes asked)
  wrongbytes  the right headers and length, one bit flipped in every 4 KiB
  stall       the headers and 16 bytes, then nothing (until the client goes)
  huge        200 and Content-Length 10 GiB to any request, zeros streamed
              until the client hangs up (LOG says how much went out)
  head404     (HEAD) 404 although the file is there, as a store that
              lost an answer or a listing not yet consistent
  holdput     (PUT of more than 1 MiB) reads the first MiB, writes "put held" to
              LOG, then waits (up to 60 s) until the file CONTROL.go exists
  dropreused  (PUT on a connection that served a request before) closes it
              without reading or answering: the client's reused keep-alive
              connection turns out closed, and the client must send the
              request again, body and all, on a new one (LOG: "put dropped")
  cutput      (PUT) reads 64 KiB of the body, then closes the connection
              without answering: the client's send fails mid-body (a proxy
              or a store gone away), and it must send it all again (LOG:
              "put cut")
  nomove      (MOVE) 405, as a server without WebDAV MOVE
  movelost    (MOVE) moves, then drops the connection without an answer
LOG gets one line per GET (mode, range asked, bytes sent) and per fault.
"""
import os
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, ROOT, CONTROL, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
lock = threading.Lock()


METHOD_OF = {"head404": "HEAD", "holdput": "PUT", "cutput": "PUT-CUT", "nomove": "MOVE", "movelost": "MOVE", "dropreused": "PUT-REUSED"}


def take_fault(method="GET", path=""):
    """The first line of CONTROL whose mode is for this method (and path)."""
    with lock:
        try:
            lines = open(CONTROL).read().splitlines()
        except FileNotFoundError:
            return "none"
        for i, line in enumerate(lines):
            words = line.split()
            if not words or METHOD_OF.get(words[0], "GET") != method:
                continue
            if len(words) > 2 and words[2] not in path:
                continue
            mode = words[0]
            if len(words) > 1:
                left = int(words[1]) - 1
                lines[i] = " ".join([mode, str(left)] + words[2:]) if left > 0 else "none"
                with open(CONTROL, "w") as f:
                    f.write("\n".join(lines) + "\n")
            return mode
        return "none"


def log(line):
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


class Store(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def path_of(self):
        rel = self.path.split("?", 1)[0].lstrip("/")
        if ".." in rel.split("/"):
            return None
        return os.path.join(ROOT, rel)

    def handle_one_request(self):
        super().handle_one_request()
        self.served = getattr(self, "served", 0) + 1

    def do_PUT(self):
        path = self.path_of()
        n = int(self.headers.get("Content-Length", "0"))
        if getattr(self, "served", 0) > 0 and take_fault("PUT-REUSED", self.path) == "dropreused":
            log(f"put dropped {self.path}")
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if n > (64 << 10) and take_fault("PUT-CUT", self.path) == "cutput":
            self.rfile.read(64 << 10)
            log(f"put cut {self.path}")
            self.close_connection = True  # closed with the rest of the body unread: a reset
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        hold = n > (1 << 20) and take_fault("PUT", self.path) == "holdput"
        if hold:  # what the client can send ahead while held: little
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".part", "wb") as f:
            while n > 0:
                chunk = self.rfile.read(min(n, 1 << 20))
                if not chunk:
                    return
                f.write(chunk)
                n -= len(chunk)
                if hold:
                    hold = False
                    log(f"put held {self.path}")
                    for _ in range(600):
                        if os.path.exists(CONTROL + ".go"):
                            break
                        time.sleep(0.1)
        os.rename(path + ".part", path)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self):
        path = self.path_of()
        try:
            os.unlink(path)
            self.send_response(204)
        except FileNotFoundError:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_MOVE(self):
        """WebDAV MOVE of a file; Destination is a path or a URL on this
        server; with "Overwrite: F" an existing destination is 412."""
        path = self.path_of()
        dest = re.sub(r"^https?://[^/]*", "", self.headers.get("Destination", ""))
        rel = dest.split("?", 1)[0].lstrip("/")
        status = 201
        mode = take_fault("MOVE")
        if mode == "nomove":
            status = 405
        elif not path or not os.path.isfile(path) or not rel or ".." in rel.split("/"):
            status = 404 if path and not os.path.isfile(path) else 400
        elif os.path.exists(os.path.join(ROOT, rel)):
            status = 412 if self.headers.get("Overwrite", "T") == "F" else 204
        if status in (201, 204):
            os.rename(path, os.path.join(ROOT, rel))
        log(f"MOVE {self.path} {dest} {status}{' lost' if mode == 'movelost' else ''}")
        if mode == "movelost":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        path = self.path_of()
        if take_fault("HEAD", self.path) == "head404":
            log(f"head404 {self.path}")
            path = None
        if not path or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.end_headers()

    def do_GET(self):
        path = self.path_of()
        if not path or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = os.path.getsize(path)
        start, end = 0, size  # [start, end)
        m = re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
        ranged = bool(m)
        if m:
            start = int(m.group(1))
            end = min(size, int(m.group(2)) + 1) if m.group(2) else size
        with open(path, "rb") as f:
            f.seek(start)
            body = f.read(end - start)
        mode = take_fault("GET", self.path)
        self.sent = 0
        try:
            self.sent = self.answer(mode, body, start, end, size, ranged)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sent = self.sent
        log(f"{mode} {start}-{end} sent {sent}")

    def head(self, status, length, crange=None):
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        if crange:
            self.send_header("Content-Range", crange)
        self.end_headers()

    def answer(self, mode, body, start, end, size, ranged):
        status = 206 if ranged else 200
        crange = f"bytes {start}-{end - 1}/{size}" if ranged else None
        if mode in ("500", "503"):
            self.head(int(mode), 0)
            return 0
        if mode == "reset":
            self.head(status, len(body), crange)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return len(body) // 2
        if mode == "short":
            self.head(status, len(body), crange)
            self.wfile.write(body[: len(body) // 2])
            self.close_connection = True
            return len(body) // 2
        if mode == "long":
            extra = bytes(65536)
            self.head(206, len(body) + len(extra), f"bytes {start}-{end - 1}/{size}")
            self.wfile.write(body + extra)
            return len(body) + len(extra)
        if mode == "badrange":
            self.head(206, len(body), f"bytes {start + 4096}-{end + 4095}/{size}")
            self.wfile.write(body)
            return len(body)
        if mode == "wrongbytes":
            b = bytearray(body)
            for i in range(0, len(b), 4096):
                b[i] ^= 1
            self.head(status, len(b), crange)
            self.wfile.write(bytes(b))
            return len(b)
        if mode == "stall":
            self.head(status, len(body), crange)
            self.wfile.write(body[:16])
            self.wfile.flush()
            # Nothing more until the client hangs up (a read of 0 bytes).
            self.connection.settimeout(600)
            try:
                self.connection.recv(1)
            except OSError:
                pass
            self.close_connection = True
            return 16
        if mode == "huge":
            self.head(200, 10 << 30)
            zeros = bytes(65536)
            while self.sent < (10 << 30):
                self.wfile.write(zeros)
                self.sent += len(zeros)
            return self.sent
        self.head(status, len(body), crange)
        self.wfile.write(body)
        return len(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    srv = Server(("127.0.0.1", PORT), Store)
    print("ready", flush=True)
    srv.serve_forever()

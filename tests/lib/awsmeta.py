#!/usr/bin/env python3
"""awsmeta.py DIR PORT - what AWS's metadata services answer, on 127.0.0.1,
for tests of tierd's credential sources where nothing real can run here.
A fake, and it says so: the answers' shapes are AWS's documented ones, and
the keys in them are whatever the test writes into DIR (real ones, from
the test's own RGW STS, so that a store accepts them):

  PUT /latest/api/token                      IMDSv2's session token (needs
                                             X-aws-ec2-metadata-token-ttl-seconds)
  GET /latest/meta-data/iam/security-credentials/       the role's name
  GET /latest/meta-data/iam/security-credentials/ROLE   DIR/imds.json
                                             (both: 401 without the token)
  GET /container                             DIR/container.json (403 unless
                                             Authorization is DIR/container-token)
  GET /.well-known/openid-configuration, /certs
                                             an OpenID Connect issuer whose key
                                             (DIR/oidc-key.pem, DIR/oidc-cert.der)
                                             signs the test's web identity tokens

A key file's "ExpiresIn": N (the test's, not AWS's) is served as
"Expiration": now + N s, so that keys are fetched again every N/2 s.
A file missing from DIR: 404. Every request is logged to stdout as
"REQ METHOD PATH STATUS", flushed."""
import base64, json, os, secrets, subprocess, sys, time, http.server

DIR, PORT = sys.argv[1], int(sys.argv[2])
ISSUER = f"http://127.0.0.1:{PORT}"
ROLE = "tierd-test-role"
tokens = set()


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwks():
    mod = subprocess.check_output(["openssl", "rsa", "-in", os.path.join(DIR, "oidc-key.pem"), "-noout", "-modulus"],
                                  stderr=subprocess.DEVNULL).decode().strip().split("=", 1)[1]
    der = open(os.path.join(DIR, "oidc-cert.der"), "rb").read()
    # RGW (pacific) needs x5c: it checks the signature with the certificate's key.
    return {"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": b64u(bytes.fromhex(mod)),
                      "e": "AQAB", "x5c": [base64.b64encode(der).decode()]}]}


def read(name):
    try:
        body = open(os.path.join(DIR, name), "rb").read()
    except OSError:
        return None
    if name.endswith(".json"):
        keys = json.loads(body)
        if "ExpiresIn" in keys:
            keys["Expiration"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + keys.pop("ExpiresIn")))
        body = json.dumps(keys).encode()
    return body


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, status, body=b"", ctype="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        print(f"REQ {self.command} {self.path} {status}", flush=True)

    def do_PUT(self):
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            return self.answer(400)
        t = secrets.token_hex(16)
        tokens.add(t)
        self.answer(200, t.encode())

    def do_GET(self):
        p = self.path.split("?")[0]
        if p == "/.well-known/openid-configuration":
            return self.answer(200, json.dumps({"issuer": ISSUER, "jwks_uri": ISSUER + "/certs"}).encode(), "application/json")
        if p == "/certs":
            return self.answer(200, json.dumps(jwks()).encode(), "application/json")
        if p.startswith("/latest/meta-data/iam/security-credentials/"):
            if self.headers.get("X-aws-ec2-metadata-token") not in tokens:
                return self.answer(401)
            rest = p[len("/latest/meta-data/iam/security-credentials/"):]
            if rest == "":
                return self.answer(200, ROLE.encode())
            body = read("imds.json") if rest == ROLE else None
            return self.answer(200, body, "application/json") if body else self.answer(404)
        if p == "/container":
            want = (read("container-token") or b"").strip()
            if not want or self.headers.get("Authorization", "").encode() != want:
                return self.answer(403)
            body = read("container.json")
            return self.answer(200, body, "application/json") if body else self.answer(404)
        self.answer(404)

    def log_message(self, fmt, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()

#!/usr/bin/python3
"""The S3 backend against a real S3 server on loopback (s3rver), checked independently.

Two independent referees:
  * the AWS SDK (the botocore of Debian's awscli, in-process) reads back every object we
    wrote, straight from s3rver: size, sha256, listing;
  * a small HTTP proxy between our client and s3rver recomputes every request's SigV4
    signature with botocore (shipped inside awscli) and checks x-amz-content-sha256 against
    the body, as real S3 does, because s3rver itself does not verify V4 signatures. The proxy
    also injects faults: 503 SlowDown, 500s on a multipart part, a 200-with-<Error> complete,
    and small list pages (max-keys) to force continuation tokens.
The server is always stopped, whatever happens (process group kill in finally/atexit).
s3rver runs with s3rver_durable.js preloaded, so that it answers a PUT only once the object is
in its file (read-after-write, as on S3); the proxy checks that on every PUT.
Exit 77 (skip) when s3rver, node or the awscli package (for botocore) are missing.

usage: test_s3.py --tool vdn_store_tool [--threads-tool test_s3_threads]
                  --s3rver PATH/.bin/s3rver [--file-only]
"""
import argparse
import atexit
import hashlib
import http.client
import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

BUCKET = "vdn-test"
PREFIX = "runs/ci"
SECRET = "S3RVER"  # s3rver's built-in account (AWS_ACCESS_KEY_ID=S3RVER as well)
MIB = 1 << 20
DURABLE_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "s3rver_durable.js")

failures = []


def check(cond, what):
    if cond:
        print(f"  ok   {what}")
    else:
        print(f"  FAIL {what}")
        failures.append(what)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def wait_port(port, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


class S3rver:
    """One s3rver process on 127.0.0.1 with its own data directory. The first start lets
    the kernel pick the port (no race with other tests for a 'free' one) and reads it from
    s3rver's log; restarts take the same port again, as a real endpoint keeps its address."""

    def __init__(self, exe, datadir):
        self.exe, self.datadir, self.port, self.proc = exe, datadir, 0, None
        self.log = open(os.path.join(datadir + ".log"), "ab")

    def start(self):
        # s3rver's continuation tokens use DES, which Node 17+ only has in the legacy provider.
        # s3rver_durable.js makes s3rver answer a PUT only once the object's file holds the
        # body (s3rver 3.7.1 can answer first; see that file), as S3's read-after-write
        # consistency promises.
        store_js = os.path.join(os.path.dirname(os.path.realpath(self.exe)), "..", "lib",
                                "stores", "filesystem.js")
        if not os.path.isfile(store_js):
            raise RuntimeError(f"{os.path.normpath(store_js)} not found: s3rver_durable.js "
                               "patches s3rver 3.x's FilesystemStore")
        env = dict(os.environ, VDN_S3RVER_FILESYSTEM_STORE=os.path.normpath(store_js),
                   NODE_OPTIONS=f'--openssl-legacy-provider --require "{DURABLE_JS}"')
        self.log.seek(0, os.SEEK_END)
        log_start = self.log.tell()
        self.proc = subprocess.Popen(
            [self.exe, "-d", self.datadir, "-a", "127.0.0.1", "-p", str(self.port),
             "--configure-bucket", BUCKET],
            stdout=self.log, stderr=self.log, start_new_session=True, env=env)
        end = time.time() + 60
        while True:
            m = re.search(r"S3rver listening on 127\.0\.0\.1:(\d+)", self.log_since(log_start))
            if m and wait_port(int(m.group(1)), 1):
                break
            if self.proc.poll() is not None or time.time() > end:
                why = (f"exited with status {self.proc.returncode}" if self.proc.poll() is not None
                       else "did not listen within 60 s")
                self.stop()
                raise RuntimeError(f"s3rver (port {self.port or 'any'}) {why}; its log:\n"
                                   + self.log_since(log_start)[-3000:])
            time.sleep(0.1)
        self.port = int(m.group(1))
        if "s3rver_durable.js: putObject" not in self.log_since(log_start):
            self.stop()
            raise RuntimeError("s3rver runs without s3rver_durable.js; its log:\n"
                               + self.log_since(log_start)[-3000:])

    def log_since(self, offset):
        self.log.flush()
        with open(self.log.name, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self.proc = None


# ---------------------------------------------------------------- signature-checking proxy

def load_botocore():
    import awscli  # noqa: F401  (makes the vendored botocore importable)
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    return botocore


regions_seen = set()
AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def verify_sigv4(botocore, method, raw_path, headers, body, secret):
    """None if the request is signed as S3 expects, else (code, message)."""
    auth = headers.get("Authorization", "")
    m = AUTH_RE.match(auth)
    if not m:
        return ("AuthorizationHeaderMalformed", f"bad Authorization header shape: {auth[:80]!r}")
    access, date, region, signed, sig = m.groups()
    regions_seen.add(region)
    amzdate = headers.get("x-amz-date", "")
    if not amzdate.startswith(date):
        return ("AuthorizationHeaderMalformed", "credential date differs from x-amz-date")
    names = signed.split(";")
    for need in ("host", "x-amz-content-sha256", "x-amz-date"):
        if need not in names:
            return ("AccessDenied", f"{need} is not signed")
    if names != sorted(names):
        return ("AuthorizationHeaderMalformed", "SignedHeaders not sorted")
    claimed = headers.get("x-amz-content-sha256", "")
    if claimed != "UNSIGNED-PAYLOAD" and claimed != hashlib.sha256(body).hexdigest():
        return ("XAmzContentSHA256Mismatch",
                "The provided 'x-amz-content-sha256' header does not match what was computed.")
    parts = urllib.parse.urlsplit(raw_path)
    # botocore encodes path and query itself: feeding it the decoded forms makes it an
    # independent check that our encoding is the canonical one.
    params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    hdrs = {n: headers.get(n, "") for n in names}
    # S3 signs the path as sent, encoded once (RFC 3986, '/' kept): re-encode it ourselves.
    path = urllib.parse.quote(urllib.parse.unquote(parts.path), safe="/~")
    if path != parts.path:
        return ("SignatureDoesNotMatch", f"path {parts.path!r} is not canonical ({path!r})")
    req = botocore.awsrequest.AWSRequest(
        method=method, url="http://" + headers.get("host", "") + path, headers=hdrs,
        params=params)
    req.context["timestamp"] = amzdate
    signer = botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(access, secret), "s3",
                                       region)
    canonical = signer.canonical_request(req)
    want = signer.signature(signer.string_to_sign(req, canonical), req)
    if parts.query and not params:
        return ("SignatureDoesNotMatch", "query did not parse")
    # The query on the wire must be exactly the canonical one (curl 7.88 signs it verbatim).
    if parts.query != signer.canonical_query_string(req):
        return ("SignatureDoesNotMatch",
                f"query {parts.query!r} is not canonical ({signer.canonical_query_string(req)!r})")
    if want != sig:
        return ("SignatureDoesNotMatch",
                "The request signature we calculated does not match the signature you provided.")
    return None


class Proxy:
    """Verifies, optionally injects a fault, then forwards to the upstream s3rver."""

    def __init__(self, upstream_port, botocore, datadir):
        self.upstream_port = upstream_port
        self.datadir = datadir    # s3rver's folder, for the read-after-write check
        self.botocore = botocore
        self.lock = threading.Lock()
        self.log = []             # (method, path, status)
        self.bad_signatures = []  # (method, path, code, message)
        self.unwritten = []       # (path, bytes sent, bytes in s3rver's file) after a 200
        self.faults = []          # list of [predicate, status, code, remaining]
        self.max_keys = None      # force small list pages
        self.complete_error = False
        self.truncate_gets = 0    # cut this many GET bodies off half-way (connection drop)
        self.regions = regions_seen
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_expect_100(self):
                # A server may refuse "Expect: 100-continue" with 417; curl then sends the
                # whole request again without it, rewinding the body (on_seek).
                with proxy.lock:
                    hit = [f for f in proxy.faults if f[2] == "EXPECT417" and f[3] > 0
                           and f[0](self.command, self.path)]
                    if hit:
                        hit[0][3] -= 1
                        proxy.log.append((self.command, self.path, 417))
                if not hit:
                    return super().handle_expect_100()
                self.send_response_only(417)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return False

            def reply(self, status, body, headers=(), length=None):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def error(self, status, code, message):
                body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                        f"<Message>{message}</Message></Error>").encode()
                self.reply(status, body, [("Content-Type", "application/xml")])

            def handle_any(self):
                with proxy.lock:
                    early = [f for f in proxy.faults if f[2] == "HANGUP" and f[3] > 0
                             and f[0](self.command, self.path)]
                    if early:
                        early[0][3] -= 1
                        proxy.log.append((self.command, self.path, -1))
                if early:  # hang up before reading the body: the client's send fails
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers["Authorization"] = self.headers.get("Authorization", "")
                bad = verify_sigv4(proxy.botocore, self.command, self.path, headers, body, SECRET)
                with proxy.lock:
                    if bad:
                        proxy.bad_signatures.append((self.command, self.path) + bad)
                    fault = None
                    for f in proxy.faults:
                        if f[3] > 0 and f[0](self.command, self.path):
                            f[3] -= 1
                            fault = f
                            break
                    proxy.log.append((self.command, self.path, fault[1] if fault else 0))
                if bad:
                    return self.error(403, bad[0], bad[1])
                if fault:
                    if fault[2] == "DROP":  # read the request, then hang up without answering
                        self.close_connection = True
                        return
                    if fault[2].startswith("<"):  # a raw body, e.g. a malformed document
                        return self.reply(fault[1], fault[2].encode(),
                                          [("Content-Type", "application/xml")])
                    return self.error(fault[1], fault[2], "injected by the test proxy")
                path = self.path
                if proxy.max_keys and "list-type=2" in path:
                    path += f"&max-keys={proxy.max_keys}"
                fwd = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("connection", "expect", "transfer-encoding")}
                fwd["Content-Length"] = str(len(body))
                try:
                    c = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                    c.request(self.command, path, body=body, headers=fwd)
                    r = c.getresponse()
                    data = r.read()
                    hdrs = [(k, v) for k, v in r.getheaders()
                            if k.lower() not in ("content-length", "connection",
                                                 "transfer-encoding", "keep-alive")]
                    c.close()
                except OSError as e:
                    return self.error(502, "BadGateway", str(e))
                if self.command == "PUT" and r.status == 200:
                    proxy.check_written(path, len(body))
                if self.command == "GET" and r.status == 200 and len(data) > 1000:
                    with proxy.lock:
                        cut = proxy.truncate_gets > 0
                        proxy.truncate_gets -= cut
                    if cut:  # promise the whole body, send half, drop the connection
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                if (proxy.complete_error and self.command == "POST" and "uploadId=" in path
                        and r.status == 200):
                    # Real S3 can fail a completion late with 200 + <Error>; the upstream
                    # did complete, so undo it to leave the store as real S3 would.
                    proxy.complete_error = False
                    obj = urllib.parse.urlsplit(path).path
                    d = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
                    d.request("DELETE", obj, headers={k: v for k, v in fwd.items()
                                                      if k.lower() != "content-length"})
                    d.getresponse().read()
                    d.close()
                    body = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidPart'
                            b"</Code><Message>One or more of the specified parts could not be "
                            b"found.</Message></Error>")
                    return self.reply(200, body, [("Content-Type", "application/xml")])
                # A HEAD answer carries the object's length without its body.
                self.reply(r.status, data, hdrs,
                           r.getheader("Content-Length") if self.command == "HEAD" else None)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def check_written(self, raw_path, want):
        """Read-after-write, as S3 promises: once s3rver has answered 200 to a PUT of an
        object or a part, its file must hold every byte (s3rver_durable.js sees to it)."""
        parts = urllib.parse.urlsplit(raw_path)
        segs = urllib.parse.unquote(parts.path).lstrip("/").split("/")
        query = dict(urllib.parse.parse_qsl(parts.query))
        if "partNumber" in query:
            f = os.path.join(self.datadir, segs[0], "._S3rver_uploads", query["uploadId"],
                             query["partNumber"])
        else:
            f = os.path.join(self.datadir, *segs) + "._S3rver_object"
        try:
            got = os.stat(f).st_size
        except OSError:
            got = None
        if got != want:
            with self.lock:
                self.unwritten.append((raw_path, want, got))

    def count(self, method, needle):
        with self.lock:
            return sum(1 for m, p, _ in self.log if m == method and needle in p)

    def reset(self):
        with self.lock:
            self.log.clear()
            self.faults.clear()


# ---------------------------------------------------------------- helpers

def run_tool(tool, args, env, stdin=None, timeout=120):
    p = subprocess.run([tool] + args, env=env, input=stdin, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


_clients = {}


def s3api(port):
    """An S3 client of the AWS SDK (the botocore inside Debian's awscli, as the CLI uses it),
    straight to s3rver: the referee that reads back what our client wrote. In-process,
    because starting the CLI for each of ~25 look-ups cost seconds (more under load)."""
    if port not in _clients:
        import botocore.config
        import botocore.session
        session = botocore.session.Session()
        session.set_config_variable("config_file", "/dev/null")
        session.set_config_variable("credentials_file", "/dev/null")
        _clients[port] = session.create_client(
            "s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
            aws_access_key_id="S3RVER", aws_secret_access_key=SECRET,
            config=botocore.config.Config(s3={"addressing_style": "path"},
                                          connect_timeout=10, read_timeout=120))
    return _clients[port]


def head(port, key):
    """head-object's answer, or None when the key is absent (404)."""
    import botocore.exceptions
    try:
        return s3api(port).head_object(Bucket=BUCKET, Key=key)
    except botocore.exceptions.ClientError as e:
        if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise


def remote_sha(port, key, tmp):
    import botocore.exceptions
    try:
        body = s3api(port).get_object(Bucket=BUCKET, Key=key)["Body"]
    except botocore.exceptions.ClientError as e:
        return f"get-object failed: {e}"
    h = hashlib.sha256()
    for chunk in iter(lambda: body.read(MIB), b""):
        h.update(chunk)
    return h.hexdigest()


def remote_keys(port, prefix):
    """(key, size) of every object under prefix, all pages, sorted."""
    pages = s3api(port).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted((o["Key"], o["Size"]) for page in pages for o in page.get("Contents", []))


def write_random(path, size, seed):
    import random
    r = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, MIB)
            f.write(r.randbytes(n))
            left -= n


def parse_ls(out):
    rows = []
    for line in out.decode().splitlines():
        size, key = line.strip().split("  ", 1)
        rows.append((key, int(size)))
    return rows


# ---------------------------------------------------------------- the tests

def test_file_cli(tool, tmp):
    print("file:// through the CLI")
    store = "file://" + os.path.join(tmp, "fstore")
    env = dict(os.environ)
    src = os.path.join(tmp, "f.bin")
    write_random(src, 300000, 1)
    rc, _, err = run_tool(tool, ["put", store, "a/b/c.bin", src], env)
    check(rc == 0, f"put exits 0 ({err.strip()})")
    check(os.path.exists(os.path.join(tmp, "fstore", "a/b/c.bin")), "object file exists")
    rc, _, _ = run_tool(tool, ["put", store, "a/x.txt", "-"], env, stdin=b"from stdin")
    check(rc == 0, "put from stdin")
    rc, out, _ = run_tool(tool, ["cat", store, "a/x.txt"], env)
    check(rc == 0 and out == b"from stdin", "cat prints the object")
    dst = os.path.join(tmp, "f.back")
    rc, _, _ = run_tool(tool, ["get", os.path.join(tmp, "fstore"), "a/b/c.bin", dst], env)
    check(rc == 0 and sha256_file(dst) == sha256_file(src), "get (plain path URI) round-trips")
    rc, out, _ = run_tool(tool, ["ls", store], env)
    check(rc == 0 and parse_ls(out) == [("a/b/c.bin", 300000), ("a/x.txt", 10)], "ls lists both")
    rc, out, _ = run_tool(tool, ["ls", store, "a/b"], env)
    check(parse_ls(out) == [("a/b/c.bin", 300000)], "ls with a prefix")
    rc, out, _ = run_tool(tool, ["stat", store, "a/x.txt"], env)
    check(rc == 0 and out.strip() == b"10", "stat prints the size")
    rc, _, err = run_tool(tool, ["rm", store, "a/x.txt"], env)
    check(rc == 0, "rm exits 0")
    rc, _, err = run_tool(tool, ["stat", store, "a/x.txt"], env)
    check(rc == 1 and "no such key" in err, f"stat of a removed key exits 1 ({err.strip()})")
    rc, _, err = run_tool(tool, ["put", store, "../escape", src], env)
    check(rc == 1 and "'..' segment" in err, f"bad key rejected: {err.strip()}")
    rc, _, err = run_tool(tool, ["get", store, "missing/key", dst], env)
    check(rc == 1 and "no such key" in err and "missing/key" in err,
          f"missing key named: {err.strip()}")
    rc, _, err = run_tool(tool, ["frobnicate", store], env)
    check(rc == 2 and "unknown command" in err, "unknown command: usage error")
    rc, _, err = run_tool(tool, ["put", store, "k"], env)
    check(rc == 2 and "expected URI KEY FILE" in err, "missing argument: usage error")
    rc, _, err = run_tool(tool, ["--bogus", "1", "ls", store], env)
    check(rc == 2 and "unknown option --bogus" in err, "unknown option: usage error")
    rc, _, err = run_tool(tool, ["--max-retries", "x", "ls", store], env)
    check(rc == 2 and "--max-retries expects" in err, "bad number: usage error")
    rc, _, err = run_tool(tool, ["ls", "gopher://x"], env)
    check(rc == 1 and "unknown scheme" in err, "unknown scheme")


def test_s3(tool, threads_tool, api_test, s3rver_exe, tmp):
    botocore = load_botocore()
    server = S3rver(s3rver_exe, os.path.join(tmp, "s3data"))
    os.makedirs(server.datadir)
    atexit.register(server.stop)
    proxy = None
    try:
        server.start()
        s3port = server.port
        proxy = Proxy(s3port, botocore, server.datadir)
        uri = f"s3://{BUCKET}/{PREFIX}"
        env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY=SECRET,
                   AWS_REGION="us-east-1", VDN_S3_ENDPOINT=f"http://127.0.0.1:{proxy.port}")
        env.pop("AWS_SESSION_TOKEN", None)

        print("single PUT")
        small = os.path.join(tmp, "small.bin")
        write_random(small, 3 * MIB + 17, 2)
        rc, _, err = run_tool(tool, ["put", uri, "a/small.bin", small], env)
        check(rc == 0, f"put exits 0 {err.strip()}")
        h = head(s3port, f"{PREFIX}/a/small.bin")
        check(h is not None and h["ContentLength"] == 3 * MIB + 17, "aws head-object: size")
        check(remote_sha(s3port, f"{PREFIX}/a/small.bin", tmp) == sha256_file(small),
              "aws get-object: sha256 equal")
        check(proxy.count("PUT", "/a/small.bin") == 1 and proxy.count("POST", "uploads") == 0,
              "one PUT, no multipart")

        print("multipart PUT (5 MiB parts)")
        big = os.path.join(tmp, "big.bin")
        write_random(big, 12 * MIB + 5, 3)
        key = "b/big file+é.bin"  # space, plus and UTF-8 exercise the canonical encoding
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "put", uri, key, big], env)
        check(rc == 0, f"multipart put exits 0 {err.strip()}")
        h = head(s3port, f"{PREFIX}/{key}")
        check(h is not None and h["ContentLength"] == 12 * MIB + 5, "aws head-object: size")
        check(remote_sha(s3port, f"{PREFIX}/{key}", tmp) == sha256_file(big),
              "aws get-object: sha256 equal")
        check(proxy.count("POST", "?uploads=") == 1, "one initiate")
        check(proxy.count("PUT", "partNumber=") == 3, "three parts (5 + 5 + 2 MiB)")
        check(proxy.count("POST", "?uploadId=") == 1, "one complete")

        print("put from stdin, get, cat")
        rc, _, err = run_tool(tool, ["--region", "eu-west-3", "put", uri, "c/stdin.txt", "-"],
                              env, stdin=b"piped\n")
        check("eu-west-3" in proxy.regions, "--region is the signing region")
        check(rc == 0 and remote_sha(s3port, f"{PREFIX}/c/stdin.txt", tmp)
              == hashlib.sha256(b"piped\n").hexdigest(), "stdin put lands intact")
        back = os.path.join(tmp, "big.back")
        rc, _, err = run_tool(tool, ["get", uri, key, back], env)
        check(rc == 0 and sha256_file(back) == sha256_file(big), f"get round-trips {err.strip()}")
        proxy.truncate_gets = 2
        os.remove(back)
        rc, _, err = run_tool(tool, ["get", uri, key, back], env)
        check(rc == 0 and sha256_file(back) == sha256_file(big) and "retry 2/" in err
              and proxy.truncate_gets == 0,
              "get survives two connections dropped mid-body (file rewound, content exact)")
        check(not [f for f in os.listdir(tmp) if ".vdn-part-" in f], "no temp file left")
        rc, out, _ = run_tool(tool, ["cat", uri, "a/small.bin"], env)
        check(rc == 0 and hashlib.sha256(out).hexdigest() == sha256_file(small), "cat")
        rc, out, _ = run_tool(tool, ["stat", uri, key], env)
        check(rc == 0 and int(out) == 12 * MIB + 5, "stat size")

        print("list, with prefixes and continuation tokens")
        for i in range(5):
            rc, _, _ = run_tool(tool, ["put", uri, f"d/k{i}", "-"], env, stdin=b"x" * i)
        proxy.max_keys = 2  # forces 3+ pages for 5 keys
        for pfx in ["", "d/", "d/k", "b/", "zzz"]:
            rc, out, err = run_tool(tool, ["ls", uri, pfx] if pfx else ["ls", uri], env)
            want = [(k[len(PREFIX) + 1:], s) for k, s in remote_keys(s3port, f"{PREFIX}/{pfx}")]
            check(rc == 0 and parse_ls(out) == want,
                  f"ls '{pfx}' equals aws list-objects-v2 ({len(want)} keys) {err.strip()}")
        check(proxy.count("GET", "continuation-token=") >= 2, "continuation tokens were followed")
        proxy.max_keys = None

        print("delete")
        rc, _, err = run_tool(tool, ["rm", uri, "d/k3"], env)
        check(rc == 0 and head(s3port, f"{PREFIX}/d/k3") is None, "rm: aws head-object 404")
        rc, _, err = run_tool(tool, ["rm", uri, "d/k3"], env)
        check(rc == 0, "rm of an absent key is fine")
        rc, _, err = run_tool(tool, ["stat", uri, "d/k3"], env)
        check(rc == 1 and "no such key" in err, "stat: absent")

        print("4xx fails at once with the S3 code")
        proxy.reset()
        rc, _, err = run_tool(tool, ["get", uri, "nope/missing", back], env)
        check(rc == 1 and "NoSuchKey" in err and "nope/missing" in err, f"NoSuchKey: {err.strip()}")
        check(proxy.count("GET", "nope/missing") == 1, "no retries on 404")
        wrong = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYWRONGSECRET"
        rc, _, err = run_tool(tool, ["put", uri, "e/x", small],
                              dict(env, AWS_SECRET_ACCESS_KEY=wrong))
        check(rc == 1 and "SignatureDoesNotMatch" in err, f"wrong secret: {err.strip()}")
        check(wrong not in err and "WRONGSECRET" not in err, "the secret is not in the message")
        check(head(s3port, f"{PREFIX}/e/x") is None, "nothing written with a bad signature")
        with proxy.lock:
            proxy.bad_signatures = [b for b in proxy.bad_signatures if "/e/x" not in b[1]]

        print("503 SlowDown and 500 are retried")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "PUT", 503, "SlowDown", 2])
        rc, _, err = run_tool(tool, ["put", uri, "f/slow.bin", small], env)
        check(rc == 0 and "SlowDown" in err and "retry 2/" in err, "put survives two SlowDowns")
        check(proxy.count("PUT", "f/slow.bin") == 3, "three attempts reached the proxy")
        check(remote_sha(s3port, f"{PREFIX}/f/slow.bin", tmp) == sha256_file(small), "content")

        print("429 is retried; a malformed response is a clear error")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "HEAD", 429, "TooManyRequests", 1])
        rc, out, err = run_tool(tool, ["stat", uri, "f/slow.bin"], env)
        check(rc == 0 and "HTTP 429" in err, "stat survives a 429")
        proxy.faults.append([lambda m, p: "list-type=2" in p, 200,
                             "<ListBucketResult><Contents><Key>x</Key><Size>1</Size>"
                             "</ListBucketResult>", 1])
        rc, out, err = run_tool(tool, ["ls", uri, "d/"], env)
        check(rc == 1 and "malformed ListBucketResult response" in err and "does not match"
              in err and uri in err, f"malformed list: {err.strip()}")

        print("a part dropped unanswered, hung up on mid-body, or refused 417 is sent again")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "PUT" and "partNumber=1&" in p, 0, "DROP", 1])
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "put", uri, "g/drop.bin", big],
                              env)
        check(rc == 0 and "Empty reply" in err,
              f"put survives an unanswered part {err.strip()[-300:]}")
        check(proxy.count("PUT", "partNumber=1&") == 2, "part 1 was sent twice")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "PUT" and "partNumber=2&" in p, 0, "HANGUP", 1])
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "put", uri, "g/drop.bin", big],
                              env)
        check(rc == 0 and "retry 1/" in err, f"put survives a hang-up mid-body {err.strip()[-300:]}")
        check(proxy.count("PUT", "partNumber=2&") == 2, "part 2 was sent twice")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "PUT" and "partNumber=3&" in p, 417, "EXPECT417", 1])
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "put", uri, "g/drop.bin", big],
                              env)
        check(rc == 0, f"put survives a 417 to Expect: 100-continue {err.strip()[-300:]}")
        check(proxy.count("PUT", "partNumber=3&") == 2, "part 3 was sent twice")
        check(remote_sha(s3port, f"{PREFIX}/g/drop.bin", tmp) == sha256_file(big),
              "aws get-object: sha256 equal")

        print("a multipart upload that fails leaves nothing under the key and is aborted")
        proxy.reset()
        proxy.faults.append([lambda m, p: m == "PUT" and "partNumber=2" in p, 500,
                             "InternalError", 100])
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "--max-retries", "2", "put",
                                     uri, "g/fail.bin", big], env)
        check(rc == 1 and "InternalError" in err and "part 2 of 3" in err and "after 3 attempts"
              in err, f"clear error: {err.strip().splitlines()[-1] if err.strip() else ''}")
        check(head(s3port, f"{PREFIX}/g/fail.bin") is None, "aws head-object: no object")
        check(proxy.count("DELETE", "uploadId=") == 1, "the upload was aborted")
        check(proxy.count("POST", "?uploadId=") == 0, "never completed")

        print("a completion answered 200 + <Error> is a failure")
        proxy.reset()
        proxy.complete_error = True
        rc, _, err = run_tool(tool, ["--part-size", str(5 * MIB), "put", uri, "g/late.bin", big],
                              env)
        check(rc == 1 and "InvalidPart" in err, f"late error reported: {err.strip()}")
        check(head(s3port, f"{PREFIX}/g/late.bin") is None, "no object under the key")

        if api_test:
            print("the API test suite of test_store_file, on S3")
            p = subprocess.run([api_test, f"s3://{BUCKET}/api-suite"], env=env,
                               capture_output=True, timeout=180)
            out = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
            check(p.returncode == 0, "test_store_file s3://... passed" + (
                "" if p.returncode == 0 else ":\n" + out[-3000:]))
            got = remote_keys(s3port, "api-suite/")
            check(("api-suite/hello.txt", 8) in got and ("api-suite/listing/b/x", 3) in got,
                  "aws list-objects-v2 sees what the suite wrote")

        if threads_tool:
            print("one store shared by 4 threads")
            p = subprocess.run([threads_tool, uri, "4", "5"], env=env, capture_output=True,
                               timeout=120)
            check(p.returncode == 0, f"threads: {p.stdout.decode().strip()} "
                  f"{p.stderr.decode().strip()[-300:]}")
            got = remote_keys(s3port, f"{PREFIX}/threads/")
            want = sorted((f"{PREFIX}/threads/t{i}/o{j}.bin", 1000 + (i * 1000 + j) * 37)
                          for i in range(4) for j in range(5))
            check(got == want, "aws list-objects-v2: all 20 objects with their sizes")

        check(not proxy.bad_signatures,
              f"every request carried a valid SigV4 signature ({len(proxy.bad_signatures)} bad: "
              f"{proxy.bad_signatures[:3]})")

        check(not proxy.unwritten,
              f"read-after-write: every PUT s3rver answered 200 was in its file "
              f"({len(proxy.unwritten)} not: (path, sent, on disk) {proxy.unwritten[:3]})")

        print("endpoint down for ~3 s: the upload retries and succeeds")
        direct = dict(env, VDN_S3_ENDPOINT=f"http://127.0.0.1:{s3port}")
        server.stop()
        t0 = time.time()
        p = subprocess.Popen([tool, "--part-size", str(5 * MIB), "put", uri, "h/late.bin", big],
                             env=direct, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(3)
        server.start()
        out, err = p.communicate(timeout=120)
        err = err.decode(errors="replace")
        check(p.returncode == 0, f"put succeeded after {time.time() - t0:.1f} s")
        check("Couldn't connect" in err and "retry" in err, "it did retry connection errors")
        check(remote_sha(s3port, f"{PREFIX}/h/late.bin", tmp) == sha256_file(big),
              "aws get-object: sha256 equal")

        print("endpoint dead beyond the retry budget")
        server.stop()
        t0 = time.time()
        rc, _, err = run_tool(tool, ["--max-retries", "3", "put", uri, "i/dead.bin", small],
                              dict(direct, AWS_SECRET_ACCESS_KEY="DEADSECRETabc123xyz"))
        last = err.strip().splitlines()[-1] if err.strip() else ""
        check(rc == 1 and f"127.0.0.1:{s3port}" in last and "i/dead.bin" in last
              and "after 4 attempts" in last, f"clear error: {last}")
        check("DEADSECRET" not in err, "the secret is not in any message")
        check(time.time() - t0 < 30, "gives up in bounded time")
    finally:
        if proxy:
            proxy.stop()
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--s3rver", default="")
    ap.add_argument("--threads-tool", default="")
    ap.add_argument("--api-test", default="")
    ap.add_argument("--file-only", action="store_true")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # ctest timeout: run the finally
    tmp = tempfile.mkdtemp(prefix="vdn-s3-test-")
    try:
        if a.file_only:
            test_file_cli(a.tool, tmp)
        else:
            missing = [w for w, ok in [("s3rver (bash ops/install-deps.sh)", os.access(a.s3rver,
                                                                                       os.X_OK)),
                                       ("node", shutil.which("node"))] if not ok]
            if missing:
                print("SKIP: missing " + ", ".join(missing))
                return 77
            try:
                load_botocore()
            except ImportError as e:
                print(f"SKIP: botocore from awscli (Debian package awscli) not importable: {e}")
                return 77
            test_s3(a.tool, a.threads_tool, a.api_test, a.s3rver, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) FAILED: {failures}")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

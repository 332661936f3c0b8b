"""The status page's posters and mp4s from an S3 store (issue 11): `vdn coordinator --store s3://...
--http` fetches a done job's objects into its media cache and serves them from there.

A farm on loopback whose store is a real S3 server (s3rver) behind the store tests' S3 proxy
(store/test/test_s3.py), which checks every SigV4 signature and logs every request: the proxy's
log is how this test counts what the coordinator asked the store, independently of the
coordinator's own numbers. The referee for the bytes is the AWS SDK (botocore) reading s3rver
directly.
  1. A worker renders two jobs with a video VAE (out.mp4 + out.png in S3). Their posters and mp4s
     come back byte for byte as s3rver holds them; a Range request is answered 206 from the
     copy; a second request makes no second S3 request; three requests at once for an object
     the store is slow to give are one download, and meanwhile the page answers at once; the
     copies lie in the default cache folder beside the database, with no temp files; a job not
     done, a missing job, a request without the token are refused. Headless Chromium loads the
     page: each done job shows its poster linking to its mp4, and the posters it asked for were
     fetched from S3.
  2. The coordinator restarts with --media-cache-mb 1: the copies on disk are served with no S3
     request at all; 400 kB objects evict the least recently served copy first (the folder,
     listed by the test, never holds more than 1 MiB); an object larger than the cache is
     served and not kept.
  3. The store goes down (s3rver stops; the proxy answers 502): a copy is still served; an object not cached gets a
     502 that names the job, the key and the store (never the secret), logged once; the page
     answers while the download retries; the coordinator keeps running."""
import json
import os
import signal
import sqlite3
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, SkipTest, check, free_port, log, main
from test_store_metrics import load_s3_tools, s3_store

TOKEN = "e2e-s3-media-token-0123456789"
MIB = 1 << 20


def get(url, token=TOKEN, headers=None, timeout=30):
    """(status, body bytes, headers) of a GET."""
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def wait_up(base, proc):
    t0 = time.time()
    while True:
        try:
            if get(base + "/api/status", timeout=2)[0] == 200:
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        check(proc.poll() is None, "the coordinator exited with status %s" % proc.poll())
        check(time.time() - t0 < 20, "the status page did not come up in 20 s")
        time.sleep(0.1)


def status(base):
    st, body, _ = get(base + "/api/status")
    check(st == 200, "/api/status: HTTP %d" % st)
    return json.loads(body)


def folder(cache):
    """{name: bytes} of the regular files in the cache folder (its lock file left out)."""
    out = {}
    for n in os.listdir(cache):
        p = os.path.join(cache, n)
        if n != ".lock" and os.path.isfile(p) and not os.path.islink(p):
            with open(p, "rb") as f:
                out[n] = f.read()
    return out


class Requests:
    """What the coordinator asked the store, from the proxy's log: per key, GETs and HEADs."""

    def __init__(self, proxy, bucket, prefix):
        self.proxy, self.path = proxy, "/%s/%s/" % (bucket, prefix)

    def count(self, method, key):
        with self.proxy.lock:
            return sum(1 for m, p, _ in self.proxy.log
                       if m == method and p.split("?")[0] == self.path + key)

    def total(self):
        with self.proxy.lock:
            return len(self.proxy.log)


def served_equal(base, job, kind, want, ctype):
    st, body, h = get("%s/media/j%d/%s" % (base, job, kind))
    check(st == 200 and h["Content-Type"] == ctype and body == want,
          "j%d %s: HTTP %d, %s, %d bytes; the store holds %d bytes"
          % (job, kind, st, h.get("Content-Type"), len(body), len(want)))


def part1(farm, base, reqs, ref, batch, queued):
    jobs = farm.q("SELECT id, object_keys FROM jobs WHERE batch_id=? AND state='done' ORDER BY id",
                  batch)
    check(len(jobs) == 2, "done jobs of batch %d: %s" % (batch, jobs))
    keys = {}
    for job, ks in jobs:
        ks = json.loads(ks)
        png = [k for k in ks if k.endswith(".png")]
        mp4 = [k for k in ks if k.endswith(".mp4")]
        check(len(png) == 1 and len(mp4) == 1, "j%d stored %s" % (job, ks))
        keys[job] = (png[0], mp4[0])
    (j1, (png1, mp41)), (j2, (png2, mp42)) = sorted(keys.items())
    st = status(base)
    check(st["media"]["mode"] == "cached" and st["media"]["store"] == farm.store and
          st["media"]["cache"]["objects"] == 0, "media on /api/status: %s" % st["media"])

    # the product, byte for byte as s3rver holds it; the second time from the copy
    served_equal(base, j1, "poster.png", ref(png1), "image/png")
    check(reqs.count("GET", png1) == 1 and reqs.count("HEAD", png1) == 1,
          "the first poster request: %d GETs, %d HEADs of %s"
          % (reqs.count("GET", png1), reqs.count("HEAD", png1), png1))
    served_equal(base, j1, "poster.png", ref(png1), "image/png")
    served_equal(base, j1, "video.mp4", ref(mp41), "video/mp4")
    video = ref(mp41)
    n = len(video)
    for rng, first, last in (("bytes=100-199", 100, 199), ("bytes=-50", n - 50, n - 1),
                             ("bytes=%d-" % (n // 2), n // 2, n - 1)):
        code, body, h = get("%s/media/j%d/video.mp4" % (base, j1), headers={"Range": rng})
        check(code == 206 and body == video[first:last + 1] and
              h["Content-Range"] == "bytes %d-%d/%d" % (first, last, n),
              "Range %s: HTTP %d, %d bytes, Content-Range %s" % (rng, code, len(body),
                                                                 h.get("Content-Range")))
    for key in (png1, mp41):
        check(reqs.count("GET", key) == 1 and reqs.count("HEAD", key) == 1,
              "%s: %d GETs and %d HEADs for repeated and ranged requests, expected 1 each"
              % (key, reqs.count("GET", key), reqs.count("HEAD", key)))
    log("j%d: poster and mp4 byte for byte, ranges 206 from the copy, one GET each" % j1)

    # three requests at once while the store is slow to answer: one download, and the page is
    # served meanwhile
    slow = {"left": 1}

    def slow_head(m, p):
        if m == "HEAD" and p.endswith("/" + mp42) and slow["left"]:
            slow["left"] = 0
            time.sleep(2.0)
        return False

    reqs.proxy.faults.append([slow_head, 0, "never", 1])
    results = [None] * 3

    def fetch(i):
        results[i] = get("%s/media/j%d/video.mp4" % (base, j2))

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    time.sleep(0.3)
    t0 = time.time()
    page = get(base + "/")[0], get(base + "/api/status")[0]
    page_s = time.time() - t0
    busy = any(t.is_alive() for t in threads)
    for t in threads:
        t.join(30)
    check(page == (200, 200) and page_s < 1.0 and busy,
          "the page while a download waits on the store: %s in %.2f s (downloads %s)"
          % (page, page_s, "still waiting" if busy else "already over"))
    want = ref(mp42)
    check(all(r and r[0] == 200 and r[1] == want for r in results),
          "concurrent requests: %s" % [(r[0], len(r[1])) if r else None for r in results])
    check(reqs.count("GET", mp42) == 1 and reqs.count("HEAD", mp42) == 1,
          "three requests at once made %d GETs, %d HEADs (expected one download)"
          % (reqs.count("GET", mp42), reqs.count("HEAD", mp42)))
    log("3 requests at once for j%d's mp4: one download; the page answered in %.2f s meanwhile"
        % (j2, page_s))

    # refusals: a job not done, no such job, no token; nothing asked of the store
    before = reqs.total()
    code, body, _ = get("%s/media/j%d/poster.png" % (base, queued))
    check(code == 404 and b"not done" in body, "a queued job: HTTP %d %r" % (code, body))
    check(get(base + "/media/j999/video.mp4")[0] == 404, "a missing job not 404")
    check(get("%s/media/j%d/poster.png" % (base, j1), token=None)[0] == 401,
          "a poster served without the token")
    check(reqs.total() == before, "refused requests reached the store")

    # the copies: in the default folder beside the database, whole, no temp files
    cache = farm.db + ".media-cache"
    files = folder(cache)
    check(sorted(files.values()) == sorted([ref(png1), ref(mp41), ref(mp42)]) and
          not [n for n in os.listdir(cache) if ".vdn-part-" in n],
          "the cache folder %s: %s" % (cache, sorted((n, len(b)) for n, b in files.items())))
    c = status(base)["media"]["cache"]
    check(c["objects"] == 3 and c["fetches"] == 3 and
          c["bytes"] == sum(len(b) for b in files.values()), "media.cache %s" % c)

    # the page in Chromium: posters linking to mp4s; the poster it had not seen is fetched
    from test_http import chromium_page, signed_media
    try:
        dom = chromium_page(base + "/#token=" + TOKEN,
                            os.path.abspath("e2e_http_s3_screenshot.png"))
    except SkipTest as e:
        log("Chromium part left out: %s" % e)
        return j1, (png1, mp41)
    body = dom.split("<script")[0]
    for j in (j1, j2):
        check(signed_media(body, j, TOKEN),
              "the page shows no signed poster and mp4 link for j%d" % j)
    check(reqs.count("GET", png2) == 1 and ref(png2) in folder(cache).values(),
          "Chromium's poster request for j%d did not fetch %s" % (j2, png2))
    log("Chromium shows both posters linking to their mp4s; j%d's poster came from S3 for it" % j2)
    return j1, (png1, mp41)


def part2(farm, base, reqs, ref, j1, keys1, big_jobs, huge_job):
    cache = farm.db + ".media-cache"
    before = reqs.total()
    served_equal(base, j1, "poster.png", ref(keys1[0]), "image/png")
    served_equal(base, j1, "video.mp4", ref(keys1[1]), "video/mp4")
    check(reqs.total() == before, "copies from before the restart made %d S3 requests"
          % (reqs.total() - before))
    log("after a restart the copies on disk are served with no S3 request")

    def within_bound(what):
        files = folder(cache)
        total = sum(len(b) for b in files.values())
        c = status(base)["media"]["cache"]
        check(total <= MIB and c["bytes"] == total and c["max_bytes"] == MIB,
              "after %s: the folder holds %d bytes (bound %d), media.cache %s"
              % (what, total, MIB, c))
        return files

    # a, b, a again, c: making room for c evicts the least recently served, b (and the small
    # copies from part 1, older still), not a
    (ja, ka), (jb, kb), (jc, kc) = big_jobs
    for job, key in ((ja, ka), (jb, kb), (ja, ka), (jc, kc)):
        served_equal(base, job, "video.mp4", ref(key), "video/mp4")
        files = within_bound("%s" % key)
    held = list(files.values())
    check(ref(ka) in held and ref(kc) in held and ref(kb) not in held,
          "LRU: after %s, %s, %s again, %s the folder should hold the first and the last only: "
          "sizes %s" % (ka, kb, ka, kc, sorted(len(b) for b in held)))
    check(reqs.count("GET", ka) == 1, "%s served again was fetched again" % ka)
    served_equal(base, jb, "video.mp4", ref(kb), "video/mp4")
    check(reqs.count("GET", kb) == 2, "%s, evicted, was not fetched again: %d GETs"
          % (kb, reqs.count("GET", kb)))
    within_bound("%s again" % kb)
    log("400 kB objects in a 1 MiB cache: the least recently served went first, the folder "
        "never over 1 MiB")

    job, key = huge_job
    before = folder(cache)
    for i in (1, 2):
        served_equal(base, job, "video.mp4", ref(key), "video/mp4")
        files = within_bound("a 1.5 MiB object")
        check(files == before, "an object larger than the cache changed the folder: %s"
              % sorted(len(b) for b in files.values()))
    check(reqs.count("GET", key) == 2, "the oversized object: %d GETs for 2 requests"
          % reqs.count("GET", key))
    log("an object larger than the cache: served, not kept")


def part3(farm, base, reqs, server, cached, down):
    job, key, want = cached
    server.stop()  # the store goes down: the proxy answers 502 BadGateway, S3's 5xx
    served_equal(base, job, "video.mp4", want, "video/mp4")
    check(reqs.count("HEAD", key) + reqs.count("GET", key) == 0, "a copy made S3 requests")
    job, key = down
    out = {}

    def fetch():
        t0 = time.time()
        out["r"] = get("%s/media/j%d/video.mp4" % (base, job))
        out["s"] = time.time() - t0

    t = threading.Thread(target=fetch)
    t.start()
    time.sleep(0.3)
    t0 = time.time()
    page = get(base + "/api/status")[0]
    page_s = time.time() - t0
    busy = t.is_alive()
    t.join(60)
    code, body, _ = out["r"]
    text = body.decode(errors="replace")
    check(page == 200 and page_s < 1.0 and busy,
          "the page while the store is down: HTTP %d in %.2f s (download %s)"
          % (page, page_s, "retrying" if busy else "already over"))
    check(code == 502 and "j%d" % job in text and key in text and farm.store in text,
          "the store down: HTTP %d after %.1f s: %s" % (code, out["s"], text))
    check(farm.env["AWS_SECRET_ACCESS_KEY"] not in text, "the secret in the answer")
    t0 = time.time()
    code2, body2, _ = get("%s/media/j%d/video.mp4" % (base, job))
    check(code2 == 502 and time.time() - t0 < 1.0 and key in body2.decode(),
          "asked again: HTTP %d after %.1f s" % (code2, time.time() - t0))
    with open(farm.logs["coordinator"], errors="replace") as f:
        lines = [l for l in f if "http: media:" in l and key in l]
    check(len(lines) == 1, "the failure logged %d times, expected once: %s" % (len(lines), lines))
    check(not any(farm.env["AWS_SECRET_ACCESS_KEY"] in l for l in lines), "the secret in the log")
    check(reqs.count("HEAD", key) >= 2 and reqs.count("GET", key) == 0,
          "the store down: %d HEADs (its retries), %d GETs of %s (expected none: the HEAD "
          "failed)" % (reqs.count("HEAD", key), reqs.count("GET", key), key))
    check(farm.procs["coordinator"].poll() is None and get(base + "/")[0] == 200,
          "the coordinator stopped serving after the store went down")
    log("store down: a copy still served; j%d's mp4 502 after %.1f s (%s), logged once; the "
        "page answered in %.2f s meanwhile" % (job, out["s"], text.strip()[:120], page_s))


def test(args):
    exe = os.path.join(os.path.abspath(args.source), "ops", "node", "node_modules", ".bin",
                       "s3rver")
    if not os.access(exe, os.X_OK):
        raise SkipTest("s3rver not installed (ops/install-deps.sh puts it in ops/node)")
    test_s3, botocore = load_s3_tools(args.source)
    bucket, prefix = test_s3.BUCKET, "e2e"
    with Farm(args.vdn, "https3", store="s3://%s/%s" % (bucket, prefix), steps=2,
              keep=args.keep) as farm:
        # a checkpoint with the video and audio VAEs: jobs store out.mp4 and out.png
        ckpt = os.path.join(farm.dir, "ckptv")
        farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ckpt],
                 timeout=120)
        farm.ckpt, farm.prompt = ckpt, os.path.join(ckpt, "prompt.safetensors")
        with s3_store(farm, test_s3, botocore, exe) as (server, proxy):
            s3 = test_s3.s3api(server.port)  # the referee, straight to s3rver

            def ref(key):
                return s3.get_object(Bucket=bucket, Key=prefix + "/" + key)["Body"].read()

            tokf = os.path.join(farm.dir, "http.token")
            with open(tokf, "w") as f:
                f.write(TOKEN + "\n")
            port = free_port()
            base = "http://127.0.0.1:%d" % port
            http = ["--http", "127.0.0.1:%d" % port, "--http-token-file", tokf]
            wait_up(base, farm.start_coordinator(http))
            farm.start_worker("w")
            batch = farm.submit(2)
            farm.wait_batch(batch, 2, timeout=100)
            farm.kill("w")
            queued = farm.q("SELECT max(id) FROM jobs")[0][0] + 1
            farm.submit(1, fname="later.jsonl")  # no worker left: it stays queued
            check(farm.q("SELECT state FROM jobs WHERE id=?", queued) == [("queued",)],
                  "job %d is not queued" % queued)
            proxy.reset()
            reqs = Requests(proxy, bucket, prefix)
            j1, keys1 = part1(farm, base, reqs, ref, batch, queued)

            # objects of 400 kB (three fill a 1 MiB cache) and one of 1.5 MiB, recorded as done
            # jobs of the batch the way a worker's RESULT records its keys
            farm.kill("coordinator", signal.SIGTERM)
            check(farm.wait_exit("coordinator", 30) == 0, "the coordinator did not stop cleanly")
            big, con = [], sqlite3.connect(farm.db)
            for i, size in enumerate((400000, 400000, 400000, 1536 * 1024)):
                key, path = "big/k%d.mp4" % i, os.path.join(farm.dir, "k%d.mp4" % i)
                with open(path, "wb") as f:
                    f.write(os.urandom(size))
                farm.run(["store", "put", farm.store, key, path])
                con.execute("INSERT INTO jobs(id,batch_id,state,request,output_prefix,"
                            "submitted_at,object_keys) VALUES(?,?,'done','{}','big',1,?)",
                            (1000 + i, batch, json.dumps([key])))
                big.append((1000 + i, key))
            con.commit()
            con.close()
            wait_up(base, farm.start_coordinator(http + ["--media-cache-mb", "1",
                                                         "--store-retry-seconds", "1.5"]))
            proxy.reset()
            part2(farm, base, reqs, ref, j1, keys1, big[:3], big[3])

            proxy.reset()
            # big[1] was fetched last in part 2: still a copy; big[3] is never kept
            part3(farm, base, reqs, server, big[1] + (ref(big[1][1]),), big[3])


if __name__ == "__main__":
    main(test)

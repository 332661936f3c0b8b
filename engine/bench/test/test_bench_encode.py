"""bench_encode_cpu: `vdn bench encode` on the CPU backend with a tiny checkpoint's video VAE.

  - it encodes what it says: the JSON line (stdout, and --json the same) names the keyframes and
    canvas asked, latents (C, H/16, W/16) with the VAE's channels, every part's median and best
    positive with best <= median, peak memory at least the encoder's weights, finite latents;
  - it encodes the same canvases each run: two runs give the same latents' RMS (fixed canvases and
    the release's fixed seed), one keyframe another (the first canvas's alone);
  - --peer prints PyTorch / vdn from the peer's numbers and the run's own median;
  - refusals name the problem: no --vae, a missing folder, a canvas that is not a multiple of 16,
    a peer of other keyframes or canvas, a peer file that is not JSON, unknown options, --reps 0.
With a third argument `cuda` (ctest bench_encode_cuda, label gpu): the first run and the peer's
line on the GPU (exit 77 without a GPU).
usage: test_bench_encode.py VDN WORKDIR [cuda]
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, work = sys.argv[1], sys.argv[2]
cuda = len(sys.argv) > 3 and sys.argv[3] == "cuda"
run = st.vdn_in(vdn, work)


def refused(why, args, *words):
    r = run(*args, ok=False)
    st.check(r.returncode != 0, f"{why}: vdn {' '.join(args)} succeeded")
    for w in words:
        st.check(w in r.stderr, f"{why}: stderr does not name '{w}': {r.stderr!r}")


def line_of(stdout):
    lines = [x for x in stdout.splitlines() if x.startswith("{")]
    st.check(len(lines) == 1, f"expected one JSON line on stdout: {stdout!r}")
    return json.loads(lines[0])


run("ckpt", "init", "--preset", "tiny", "--vae", "--out", "ck")
C = json.load(open("ck/vae/config.json")).get("latent_channels", 24)
H, W = 64, 96
size = ([] if cuda else ["--cpu"]) + ["--vae", "ck/vae", "--height", str(H), "--width", str(W)]

r = run("bench", "encode", *size, "--keyframes", "2", "--reps", "2", "--json", "ours.json", ok=not cuda)
if cuda and r.returncode != 0 and ("no CUDA GPU" in r.stderr or "backend 'cuda' unknown" in r.stderr):
    print("bench_encode_cuda: SKIP (no GPU):", r.stderr.strip()[-200:])
    raise SystemExit(77)
st.check(r.returncode == 0, f"exit {r.returncode}: {r.stderr[-2000:]}")
res = line_of(r.stdout)
st.check(json.load(open("ours.json")) == res, "--json holds another line than stdout")
st.check(res["op"] == "vae_encode" and res["backend"].startswith("cuda" if cuda else "cpu") and res["keyframes"] == 2
         and res["height"] == H and res["width"] == W and res["reps"] == 2, str(res))
st.check(res["latents"] == [C, H // 16, W // 16], f"latents {res['latents']}, expected [{C}, {H // 16}, {W // 16}]")
for part in ("pixels", "moments", "sample", "encode"):
    m, b = res[f"{part}_s"], res[f"{part}_best_s"]
    st.check(0 < b <= m, f"{part}: best {b}, median {m}")
st.check(res["peak_bytes"] >= res["weights_bytes"] > 0, f"memory {res['peak_bytes']} {res['weights_bytes']}")
st.check(res["finite"] is True and res["latent_rms"] > 0, f"latents: {res}")
reps = re.findall(r"rep (\d)/2: encode", r.stderr)
st.check(reps == ["1", "2"], f"no progress per rep: {r.stderr!r}")
for what in ("moments", "sample", "encode_u8"):
    st.check(re.search(rf"^{what}\b.*median\s+[\d.]+ s, best\s+[\d.]+ s$", r.stdout, re.M) is not None,
             f"no table line for {what}: {r.stdout!r}")

# the same canvases and the release's fixed seed: the same latents; one keyframe: its RMS is the
# first keyframe's alone, so it differs
# (the CPU backend's float64 sums: bit for bit; cuBLAS does not promise it)
if not cuda:
    again = line_of(run("bench", "encode", *size, "--keyframes", "2", "--reps", "1").stdout)
    st.check(again["latent_rms"] == res["latent_rms"], f"two runs: {again['latent_rms']} vs {res['latent_rms']}")
    one = line_of(run("bench", "encode", *size, "--keyframes", "1", "--reps", "1").stdout)
    st.check(one["latents"] == res["latents"] and one["latent_rms"] != res["latent_rms"], f"one keyframe: {one}")

# the comparison with a peer: PyTorch / ours
peer = {"peer": "test peer", "gpu": "cpu", "keyframes": 2, "height": H, "width": W, "reps": 3, "seconds": 2.5}
json.dump(peer, open("peer.json", "w"))
r = run("bench", "encode", *size, "--reps", "1", "--peer", "peer.json")
ours = line_of(r.stdout)
m = re.search(r"^encode PyTorch ([\d.]+) s, vdn ([\d.]+) s: ([\d.]+)x (faster|slower)$", r.stdout, re.M)
st.check(m is not None, f"no comparison line in {r.stdout!r}")
if m:
    x = peer["seconds"] / ours["encode_s"]
    want = x if x >= 1 else 1 / x
    st.check(abs(float(m.group(3)) - want) <= 0.006 * want + 0.005, f"printed {m.group(3)}x, expected {want:.3f}")
    st.check(m.group(4) == ("faster" if x >= 1 else "slower"), m.group(0))
    st.check(abs(float(m.group(2)) - ours["encode_s"]) < 1e-4, f"{m.group(0)} vs {ours}")
st.check("test peer on cpu" in r.stdout, f"the peer is not named: {r.stdout!r}")

if cuda:  # the rest is the CPU test's
    if st.failures:
        raise SystemExit(f"bench_encode_cuda: {len(st.failures)} check(s) failed")
    print("bench_encode_cuda: all checks passed")
    raise SystemExit(0)

# refusals
refused("no --vae", ["bench", "encode", "--cpu"], "--vae")
refused("missing folder", ["bench", "encode", "--cpu", "--vae", "nowhere/vae"], "nowhere/vae")
refused("canvas not a multiple of 16", ["bench", "encode", "--cpu", "--vae", "ck/vae", "--height", "40"], "16")
for bad, field in (({**peer, "keyframes": 1}, "keyframes"), ({**peer, "width": 1344}, "width"),
                   ({**peer, "seconds": -1}, "seconds")):
    json.dump(bad, open("peer_bad.json", "w"))
    refused(f"peer {field}", ["bench", "encode", *size, "--reps", "1", "--peer", "peer_bad.json"],
            "peer_bad.json", field)
open("peer_broken.json", "w").write("{not json")
refused("broken peer", ["bench", "encode", *size, "--reps", "1", "--peer", "peer_broken.json"], "peer_broken.json")
refused("unknown option", ["bench", "encode", "--vae", "ck/vae", "--frobnicate"], "--frobnicate")
refused("zero reps", ["bench", "encode", "--vae", "ck/vae", "--reps", "0"], "--reps")
r = run("bench", "encode", "--help")
st.check("--peer" in r.stdout and "--keyframes" in r.stdout, "help does not describe --peer")
if st.failures:
    raise SystemExit(f"bench_encode_cpu: {len(st.failures)} check(s) failed")
print("bench_encode_cpu: all checks passed")

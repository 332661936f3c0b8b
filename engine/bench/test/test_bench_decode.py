"""vae_bench_decode_cpu: `vdn bench decode` on the CPU backend with a tiny checkpoint's VAEs.

  - it decodes what it says: the JSON's frame count is what `vdn decode` makes of latents with the
    same T (read back from --frames-out), the latents' shape is the VAE's channels by --T/--h/--w,
    both times are positive, --json holds the same line;
  - with --peer it prints PyTorch / vdn from the peer's numbers and its own JSON line;
  - video alone and audio alone report null for the other decoder;
  - --devices 3,1: both group sizes timed, the 1-device frames and waveform equal the 3-device ones
    (max difference 0 on the CPU backend), the deal's tiles add up to the clip's, each member
    decoded some;
  - refusals name the problem: a missing VAE folder, T too short for one chunk, a peer that timed
    other latents, a peer file that is not JSON, unknown options, --reps 0, nothing to time, a
    malformed --devices list.
usage: test_bench_decode.py VDN WORKDIR
"""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "ops", "test"))
import st  # noqa: E402

vdn, work = sys.argv[1], sys.argv[2]
run = st.vdn_in(vdn, work)


def refused(why, args, *words):
    r = run(*args, ok=False)
    st.check(r.returncode != 0, f"{why}: vdn {' '.join(args)} succeeded")
    for w in words:
        st.check(w in r.stderr, f"{why}: stderr does not name '{w}': {r.stderr!r}")
    st.check(not r.stdout.strip(), f"{why}: printed a result anyway: {r.stdout!r}")


run("ckpt", "init", "--preset", "tiny", "--vae", "--out", "ck")
vcfg = json.load(open("ck/vae/config.json"))
C = vcfg.get("latent_channels", vcfg.get("z_dim"))
T, h, w, La = 5, 2, 3, 4
size = ["--T", str(T), "--h", str(h), "--w", str(w), "--La", str(La)]
both = ["--backend", "cpu", "--vae", "ck/vae", "--audio-vae", "ck/audio_vae"] + size

r = run("bench", "decode", *both, "--reps", "2", "--json", "ours.json")
line = r.stdout.splitlines()[0]
res = json.loads(line)
st.check(json.load(open("ours.json")) == res, "--json holds another line than stdout")
st.check(res["backend"] == "cpu" and res["reps"] == 2 and res["video_precision"] == "bf16", str(res))
st.check(res["video_s"] > 0 and res["audio_s"] > 0, f"times {res['video_s']} {res['audio_s']}")
st.check(res["audio_latents"] == La and res["wave_rms"] > 0, str(res))
st.check(res["latents"][1:] == [T, h, w], f"latents {res['latents']}, expected [C, {T}, {h}, {w}]")
# the video's reps, then the audio's (the peer's order)
reps = re.findall(r"rep (\d)/2: (video|audio)", r.stderr)
st.check(reps == [("1", "video"), ("2", "video"), ("1", "audio"), ("2", "audio")],
         f"no progress per rep, video's reps before audio's: {r.stderr!r}")

# the frame count `vdn decode` gives for latents of the same shape
Cv = res["latents"][0]
Ca = json.load(open("ck/audio_vae/config.json")).get("latent_channels", 0) or 0
lat = {"video": np.random.default_rng(0).standard_normal((Cv, T, h, w)).astype(np.float32)}
st.write_f32("lat.safetensors", lat)
run("decode", "lat.safetensors", "-o", "lat.mp4", "--vae", "ck/vae", "--audio-vae", "ck/audio_vae",
    "--frames-out", "frames.safetensors")
fshape = st.read_header("frames.safetensors")[0]
fshape = next(iter(v["shape"] for k, v in fshape.items() if k != "__metadata__"))
st.check(res["frames"] == fshape[1], f"bench says {res['frames']} frames, vdn decode made {fshape[1]}")
st.check(fshape[2:] == [16 * h, 16 * w], f"frames {fshape}")

# the comparison with a peer: PyTorch / ours from the two JSON lines
peer = {"peer": "test peer", "gpu": "cpu", "latents": [Cv, T, h, w], "audio_latents": La,
        "video_s": 3.0, "audio_s": 0.5}
json.dump(peer, open("peer.json", "w"))
r = run("bench", "decode", *both, "--reps", "1", "--peer", "peer.json")
ours = json.loads(r.stdout.splitlines()[0])
for what in ("video", "audio"):
    m = re.search(rf"^{what}\s+PyTorch ([\d.]+) s, vdn ([\d.]+) s: ([\d.]+)x (faster|slower)$", r.stdout, re.M)
    st.check(m is not None, f"no {what} comparison line in {r.stdout!r}")
    x = peer[f"{what}_s"] / ours[f"{what}_s"]
    want = x if x >= 1 else 1 / x
    st.check(abs(float(m.group(3)) - want) <= 0.006 * want + 0.005, f"{what}: printed {m.group(3)}x, expected {want:.3f}")
    st.check(m.group(4) == ("faster" if x >= 1 else "slower"), f"{what}: {m.group(0)}")
    st.check(abs(float(m.group(2)) - ours[f"{what}_s"]) < 1e-4, f"{what}: {m.group(0)} vs {ours}")

# one decoder alone
r = run("bench", "decode", "--backend", "cpu", "--vae", "ck/vae", *size, "--reps", "1")
v = json.loads(r.stdout.splitlines()[0])
st.check(v["audio_s"] is None and v["video_s"] > 0, f"video alone: {v}")
r = run("bench", "decode", "--backend", "cpu", "--audio-vae", "ck/audio_vae", *size, "--reps", "1")
a = json.loads(r.stdout.splitlines()[0])
st.check(a["video_s"] is None and a["audio_s"] > 0 and a["frames"] == 0, f"audio alone: {a}")

# a group of 3 host devices and 1: three chunks of two tiles (the group test's clip)
g = run("bench", "decode", "--backend", "cpu", "--vae", "ck/vae", "--audio-vae", "ck/audio_vae", "--T", "13",
        "--h", "2", "--w", "20", "--La", str(La), "--reps", "1", "--devices", "1,3")
gr = json.loads(g.stdout.splitlines()[0])
sizes = {z["devices"]: z for z in gr.get("sizes", [])}
st.check(sorted(sizes) == [1, 3] and gr["devices"] == 1, f"--devices 1,3: sizes {gr.get('sizes')}")
if sorted(sizes) == [1, 3]:
    st.check([z["devices"] for z in gr["sizes"]] == [3, 1], f"not largest first: {gr['sizes']}")
    for k, z in sizes.items():
        st.check(z["video_s"] > 0 and z["audio_s"] > 0, f"{k} devices: {z}")
        st.check(z["video_max_diff"] == 0 and z["audio_max_diff"] == 0, f"{k} devices differ from 3: {z}")
        st.check(len(z["tiles"]) == k and min(z["tiles"]) > 0, f"{k} devices: deal {z['tiles']}")
    st.check(sum(sizes[3]["tiles"]) == sum(sizes[1]["tiles"]) == 6, f"deals {sizes[3]['tiles']} {sizes[1]['tiles']}")
    st.check(gr["video_s"] == sizes[1]["video_s"], f"top-level video_s is not the 1-device time: {gr}")
st.check(len(re.findall(r"3 devices, rep 1/1", g.stderr)) == 2, f"no progress for 3 devices: {g.stderr!r}")

# refusals
for bad in ("0", "2,2", "1,", "a", "65", ""):
    refused(f"--devices {bad!r}", ["bench", "decode", "--backend", "cpu", "--vae", "ck/vae", "--devices", bad],
            "--devices")
refused("missing VAE folder", ["bench", "decode", "--backend", "cpu", "--vae", "nowhere/vae", *size], "nowhere/vae")
refused("too few latent frames", ["bench", "decode", "--backend", "cpu", "--vae", "ck/vae", "--T", "2", "--h", "2",
                                  "--w", "3"], "2")
json.dump({**peer, "latents": [Cv, T + 4, h, w]}, open("peer_other.json", "w"))
r = run("bench", "decode", *both, "--reps", "1", "--peer", "peer_other.json", ok=False)
st.check(r.returncode != 0 and "peer_other.json" in r.stderr and "latents" in r.stderr,
         f"a peer of other latents: {r.returncode} {r.stderr!r}")
open("peer_bad.json", "w").write("{not json")
r = run("bench", "decode", *both, "--reps", "1", "--peer", "peer_bad.json", ok=False)
st.check(r.returncode != 0 and "peer_bad.json" in r.stderr, f"a broken peer file: {r.stderr!r}")
refused("unknown option", ["bench", "decode", "--vae", "ck/vae", "--frobnicate"], "--frobnicate")
refused("zero reps", ["bench", "decode", "--vae", "ck/vae", "--reps", "0"], "--reps")
refused("bad precision", ["bench", "decode", "--vae", "ck/vae", "--precision", "fp4"], "fp4")
refused("nothing to time", ["bench", "decode", "--backend", "cpu"], "nothing to time")
r = run("bench", "decode", "--help")
st.check("--peer" in r.stdout, "help does not describe --peer")
if st.failures:
    raise SystemExit(f"vae_bench_decode_cpu: {len(st.failures)} check(s) failed")
print("vae_bench_decode_cpu: all checks passed")

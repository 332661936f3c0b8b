#!/bin/bash
# End to end on the CPU engine: `vdn up` (coordinator + worker + SQLite + file store, tiny
# checkpoint), `vdn eval suite init` (103 prompts), a sweep over three variants (309 renders at
# the smallest size: 32x32 pixels, 39 frames = 12 latent frames so the VDN path is taken rather
# than the F <= 10 dense bypass, 1 step via --steps-override for CI speed), a resumed sweep after
# deleting outputs, and `vdn eval report`; then checks the records and the report.
# usage: e2e.sh VDN WORKDIR PYTHON SRCDIR
set -euo pipefail
vdn=$1 work=$2 py=$3 src=$4
rm -rf "$work"
mkdir -p "$work"
cd "$work"
cleanup() { "$vdn" up "$work/farm" --stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
# The tiny checkpoint with its video VAE but without the audio VAE: every job still stores an mp4
# (video only), but the CPU BigVGAN oracle (~3 s per 39-frame clip on one core) would make 309
# renders take a quarter of an hour. The audio decoder has its own tests (vae_*, media_mp4, the
# quickstart's mp4 files carry sound).
"$vdn" ckpt init --preset tiny --vdn --vae --out "$work/ckpt" >/dev/null
rm -rf "$work/ckpt/base/audio_vae"
"$vdn" up "$work/farm" --cpu --detach --checkpoint "$work/ckpt" --data-root "$work" >/dev/null
"$vdn" eval suite init "$work/suite" --checkpoint "$work/ckpt" --prompts 103 --frames 39
"$vdn" eval suite check "$work/suite/suite.jsonl"
variants=dense@50,vdn@8,window-only@8
"$vdn" eval sweep "$work/suite/suite.jsonl" --variants $variants --dir "$work/farm" \
  --steps-override 1 --wait --timeout 400 | tee sweep1.log
sweep=$(ls "$work"/suite/sweeps/*.json)
grep -q "batch b[0-9]*: 309 jobs" sweep1.log
# resume: lose five outputs (their run records: a pair counts as done with its record beside its
# latents or its mp4); the same command submits exactly those five
tag=$(basename "$sweep" .json)
for p in p003 p017 p050 p088 p103; do rm -f "$work/farm/store/eval/$tag/$p/vdn_8/out.json"; done
"$vdn" eval sweep "$work/suite/suite.jsonl" --variants $variants --dir "$work/farm" \
  --steps-override 1 --wait --timeout 200 2>&1 | tee sweep2.log
grep -q "309 pairs: 304 done, 0 queued or running, 5 to submit" sweep2.log
grep -q "batch b[0-9]*: 5 jobs" sweep2.log
"$vdn" eval report "$sweep" --out "$work/report" --resamples 2000
"$py" - "$sweep" "$work/farm/store" "$work/report/report.json" <<'PY'
import json, sys, collections
sweep, store, rep = json.load(open(sys.argv[1])), sys.argv[2], json.load(open(sys.argv[3]))
suite = [json.loads(l) for l in open(sweep["suite"]) if l.startswith("{")]
n_kf = sum(it["mode"] != "t2va" for it in suite)
fails = []
if len(sweep["pairs"]) != 309 or len(sweep["batches"]) != 2:
    fails.append(f"manifest: {len(sweep['pairs'])} pairs, {len(sweep['batches'])} batches")
seeds = collections.defaultdict(set)
engine = {"dense@50": "dense", "vdn@8": "vdn", "window-only@8": "window-only"}
for q in sweep["pairs"]:
    r = json.load(open(f"{store}/{q['record_key']}"))
    seeds[q["prompt"]].add(r["request"]["seed"])
    if r["variant"]["name"] != engine[q["variant"]] or r["sampler"]["nfe"] != 1:
        fails.append(f"{q['prompt']}/{q['variant']}: rendered as {r['variant']['name']} with {r['sampler']['nfe']} NFE")
if any(len(s) != 1 for s in seeds.values()):
    fails.append("variants of one prompt must share the seed")
if rep["errors"]:
    fails.append(f"report errors: {rep['errors'][:3]}")
for m in rep["metrics"]:
    for v, s in m["per_variant"].items():
        want = 0 if (m["kind"] == "reference" and v == "dense@50") else (n_kf if "endpoint" in m["name"] else 103)
        if s["n"] != want:
            fails.append(f"{m['name']}/{v}: n = {s['n']}, expected {want}")
fid = next(m for m in rep["metrics"] if m["name"] == "fidelity_rel_l2")["per_variant"]
if not (fid["vdn@8"]["mean"] > 0 and fid["window-only@8"]["mean"] > 0):
    fails.append("variants should differ from dense at 12 latent frames")
# every job stored an mp4: the pixel metrics come from them (no --vae given)
names = {m["name"] for m in rep["metrics"]}
for n in ["pixel_psnr", "pixel_endpoint_psnr", "pixel_endpoint_ssim", "pixel_motion_flow",
          "pixel_temporal_diff", "pixel_temporal_diff_var"]:
    if n not in names:
        fails.append(f"metric {n} missing: the report should decode the stored mp4s")
if "frames of 309 output(s) decoded from their stored mp4" not in rep.get("note", ""):
    fails.append(f"note: {rep.get('note')}")
if fails:
    print("FAIL\n" + "\n".join(fails)); sys.exit(1)
print("ok: 309 pairs rendered with shared seeds, resumed, and reported without errors")
PY
rc=0
"$src/test/check_chromium.sh" "$work/report" "$py" || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || exit $rc
echo "eval e2e: ok"

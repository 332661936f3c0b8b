"""Latents only when asked: a farm job with a video VAE stores out.mp4, out.png (poster) and
out.json always, and out.safetensors (the latents) only with `save_latents: true`; a worker
without a video VAE stores the latents anyway (its only output). Then every consumer of the
objects still works without latents: `vdn status` shows the mp4, the status page streams it,
snapshots are cleaned up, and an eval sweep with --no-latents is reported from the mp4s alone
(pixel metrics, no latent metric, no error).
"""
import json
import os
import re
import subprocess
import urllib.request

from harness import Farm, FRAMES, check, free_port, log, main


def store_objects(root):
    out = []
    for d, _, files in os.walk(root):
        for fn in files:
            rel = os.path.relpath(os.path.join(d, fn), root)
            if not rel.startswith(".vdn-tmp" + os.sep):
                out.append(rel)
    return sorted(out)


def ffprobe_frames(path):
    r = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
                        "-show_entries", "stream=nb_read_frames,width,height", "-of", "json", path],
                       capture_output=True, text=True, check=True)
    s = json.loads(r.stdout)["streams"][0]
    return int(s["nb_read_frames"]), s["width"], s["height"]


def submit(farm, lines, name):
    path = os.path.join(farm.dir, name)
    with open(path, "w") as f:
        f.write("".join(json.dumps(l) + "\n" for l in lines))
    r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--json"])
    return int(re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout).group(1))


def keys_of(farm, batch):
    return {j: json.loads(k) for j, k in
            farm.q("SELECT id, object_keys FROM jobs WHERE batch_id=? ORDER BY id", batch)}


def vae_jobs(farm, port, ckptv):
    """Three jobs on a worker with a video VAE: save_latents absent, true, false."""
    farm.spawn("wv", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckptv, "--store",
                      farm.store, "--id", "wv", "--cpu", "--scratch",
                      os.path.join(farm.dir, "scratch"), "--heartbeat-seconds",
                      str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir,
                      "--snapshot-every", "1"])
    base = {"prompt_cache": farm.prompt, "frames": FRAMES, "height": 32, "width": 32, "steps": 2}
    batch = submit(farm, [dict(base, seed=1), dict(base, seed=2, save_latents=True),
                          dict(base, seed=3, save_latents=False)], "vae.jsonl")
    c = farm.wait_batch(batch, 3, timeout=120)
    check(c.get("done") == 3, "jobs with a VAE: %s" % c)
    keys = keys_of(farm, batch)
    root = farm.store_dir()
    for i, (job, ks) in enumerate(sorted(keys.items())):
        pre = "batches/b%d/j%d/out" % (batch, job)
        want = [pre + ".mp4", pre + ".png"] + ([pre + ".safetensors"] if i == 1 else []) + \
            [pre + ".json"]
        check(ks == want, "job %d (save_latents %s): object keys %s, want %s"
              % (job, ["absent", "true", "false"][i], ks, want))
        n, w, h = ffprobe_frames(os.path.join(root, pre + ".mp4"))
        check((n, w, h) == (FRAMES, 32, 32), "%s.mp4: %d frames of %dx%d" % (pre, n, w, h))
        with open(os.path.join(root, pre + ".png"), "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "%s.png is not a PNG" % pre)
    # the store holds exactly what the jobs report: no latents unasked, no leftover snapshots
    have = store_objects(root)
    want = sorted(k for ks in keys.values() for k in ks)
    check(have == want, "store %s, jobs name %s" % (have, want))
    # vdn status shows a done job's mp4 first; the status page streams it
    j0 = min(keys)
    r = farm.run(["status", "j%d" % j0, "--coordinator", farm.client_ep])
    objects = [l.split()[1] for l in r.stdout.splitlines() if l.strip().startswith("object ")]
    check(objects == keys[j0] and objects[0].endswith(".mp4"),
          "vdn status j%d:\n%s" % (j0, r.stdout))
    body = urllib.request.urlopen("http://127.0.0.1:%d/media/j%d/video.mp4" % (port, j0),
                                  timeout=10).read()
    with open(os.path.join(root, keys[j0][0]), "rb") as f:
        check(body == f.read(), "/media/j%d/video.mp4 differs from the stored mp4" % j0)
    log("with a VAE: mp4 + poster + record always, latents only for save_latents: true")
    return base


def no_vae_job(farm, base):
    """A worker without a video VAE: the latents are the only output, stored unasked."""
    farm.kill("wv")
    farm.start_worker("w")
    batch = submit(farm, [dict(base, seed=4)], "novae.jsonl")
    c = farm.wait_batch(batch, 1, timeout=90)
    check(c.get("done") == 1, "job without a VAE: %s" % c)
    ((job, ks),) = keys_of(farm, batch).items()
    pre = "batches/b%d/j%d/out" % (batch, job)
    check(ks == [pre + ".safetensors", pre + ".json"], "job without a VAE stored %s" % ks)
    farm.kill("w")
    log("without a VAE: the latents and the record")


def eval_without_latents(farm, ckptv):
    """A sweep with --no-latents is reported from the mp4s: pixel metrics for every output,
    no latent metric, no error."""
    farm.spawn("wv2", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckptv, "--store",
                       farm.store, "--id", "wv2", "--cpu", "--scratch",
                       os.path.join(farm.dir, "scratch2"), "--heartbeat-seconds",
                       str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir])
    suite = os.path.join(farm.dir, "suite")
    farm.run(["eval", "suite", "init", suite, "--checkpoint", ckptv, "--prompts", "5",
              "--frames", "22", "--height", "32", "--width", "32"])
    r = farm.run(["eval", "sweep", os.path.join(suite, "suite.jsonl"), "--variants",
                  "dense@50,vdn@8", "--coordinator", farm.client_ep, "--store", farm.store,
                  "--checkpoint", ckptv, "--steps-override", "1", "--no-latents", "--wait",
                  "--timeout", "150"], timeout=180)
    sweep = [l.split(": ", 1)[1] for l in r.stdout.splitlines() if l.startswith("sweep manifest")]
    check(sweep, "no sweep manifest printed:\n%s" % r.stdout)
    objs = store_objects(farm.store_dir())
    check(not [o for o in objs if o.startswith("eval/") and o.endswith(".safetensors")
               and "/caches/" not in o],
          "--no-latents: latents in the store: %s" % objs)
    # the resume check counts an mp4 + record as done: nothing is submitted again
    r = farm.run(["eval", "sweep", os.path.join(suite, "suite.jsonl"), "--variants",
                  "dense@50,vdn@8", "--coordinator", farm.client_ep, "--store", farm.store,
                  "--checkpoint", ckptv, "--steps-override", "1", "--no-latents"])
    check("10 pairs: 10 done, 0 queued or running, 0 to submit" in r.stderr,
          "re-run of a finished --no-latents sweep:\n%s" % r.stderr)
    out = os.path.join(farm.dir, "report")
    farm.run(["eval", "report", sweep[0], "--out", out, "--resamples", "200"], timeout=120)
    rep = json.load(open(os.path.join(out, "report.json")))
    check(not rep["errors"], "report errors: %s" % rep["errors"][:3])
    by = {m["name"]: m for m in rep["metrics"]}
    for n in ["pixel_motion_flow", "pixel_temporal_diff", "pixel_temporal_diff_var"]:
        check(n in by and all(by[n]["per_variant"][v]["n"] == 5 for v in ("dense@50", "vdn@8")),
              "%s: %s" % (n, by.get(n, {}).get("per_variant")))
    check(by["pixel_psnr"]["per_variant"]["vdn@8"]["n"] == 5, "pixel_psnr: not from 5 prompts")
    for n in ["fidelity_psnr", "motion_flow", "temporal_diff"]:
        check(all(by[n]["per_variant"][v]["n"] == 0 for v in ("dense@50", "vdn@8")),
              "%s has values without latents" % n)
    check("frames of 10 output(s) decoded from their stored mp4" in rep.get("note", ""),
          "report note: %s" % rep.get("note"))
    log("eval --no-latents: 10 outputs scored on their mp4s")


def test(args):
    with Farm(args.vdn, "save-latents", keep=args.keep) as farm:
        ckptv = os.path.join(farm.dir, "ckptv")
        farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ckptv],
                 timeout=120)
        # the CPU BigVGAN would add seconds per job; the mp4s carry no sound here
        subprocess.run(["rm", "-rf", os.path.join(ckptv, "base", "audio_vae")], check=True)
        port = free_port()
        farm.start_coordinator(["--http", "127.0.0.1:%d" % port])
        base = vae_jobs(farm, port, ckptv)
        no_vae_job(farm, base)
        eval_without_latents(farm, ckptv)


if __name__ == "__main__":
    main(test)

"""Jobs on a worker's GPUs without a GPU: a stand-in nvidia-smi (VDN_NVIDIA_SMI) lists 4 GPUs and
the worker opens one CPU engine per GPU, with the checkpoint's VAEs beside each.

1. Decode on the job's own GPU: the VAEs load once per GPU at start (one log line per GPU, none
   later), and every job decodes its mp4 and poster on the GPU it rendered on, whatever that GPU
   is (not all on GPU 0).
   The run record's gpus.decoded_on names that GPU.
2. A k-GPU job renders one clip sharded over its k GPUs: a 2-GPU job's latents equal a 1-GPU
   job's bit for bit (the CPU sharded forward is bit-identical), its run record says 2 ranks
   rendered it, on which devices, through which communicator, and the log says so. It decodes
   over both GPUs too (the clip's 3 temporal chunks and 2 audio channels dealt over their
   decoders): the log and the record (decoded_on, decode_video_tiles, decode_audio_channels) say
   both GPUs decoded a share, and the frames and sound ffmpeg decodes from its mp4 equal those of
   the 1-GPU job's mp4 byte for byte.
3. A device fault in one GPU's share of a 2-GPU decode (VDN_TEST_DECODE_FAULT=1 on a 2-GPU
   worker) fails the job as the worker's, naming the decode, and takes only GPU 1 out of
   service: GPU 0 stays in service and the worker lives.
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from harness import FRAMES, Farm, check, log, main


def stand_in_gpus(farm, n, name="nvidia-smi"):
    smi = os.path.join(farm.dir, name)
    with open(smi, "w") as f:
        f.write("#!/bin/sh\n# stand-in: %d H200s\n" % n +
                "case \"$*\" in *--query-gpu=index,name,memory.total*) ;; *) exit 9;; esac\n"
                "for i in %s; do echo \"$i, NVIDIA H200, 143771\"; done\n"
                % " ".join(str(i) for i in range(n)))
    os.chmod(smi, os.stat(smi).st_mode | stat.S_IXUSR)
    return smi


def submit(farm, jobs, name):
    path = os.path.join(farm.dir, name + ".jsonl")
    with open(path, "w") as f:
        for j in jobs:
            f.write(json.dumps(j) + "\n")
    r = farm.run(["submit", path, "--coordinator", farm.client_ep, "--json"], timeout=60)
    m = re.search(r'"batch_id"\s*:\s*(\d+)', r.stdout)
    check(m, "vdn submit printed no batch id: %r" % r.stdout)
    return int(m.group(1))


def read_object(farm, key):
    with open(os.path.join(farm.store_dir(), key), "rb") as f:
        return f.read()


def latents_of(farm, keys):
    """The raw video and audio tensors of a job's latents file (safetensors)."""
    key = [k for k in keys if k.endswith(".safetensors")][0]
    data = read_object(farm, key)
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name in ("video", "audio"):
        a, b = header[name]["data_offsets"]
        out[name] = (header[name]["shape"], body[a:b])
    return out


def record_of(farm, keys):
    return json.loads(read_object(farm, [k for k in keys if k.endswith(".json")][0]))


def decoded_mp4(farm, keys):
    """The RGB frames and the float samples Debian's ffmpeg decodes from a job's mp4."""
    path = os.path.join(farm.store_dir(), [k for k in keys if k.endswith(".mp4")][0])
    out = []
    for args in (["-an", "-f", "rawvideo", "-pix_fmt", "rgb24"], ["-vn", "-f", "f32le"]):
        r = subprocess.run(["ffmpeg", "-v", "error", "-i", path] + args + ["-"],
                           capture_output=True, timeout=60)
        check(r.returncode == 0, "ffmpeg on %s: %s" % (path, r.stderr.decode(errors="replace")))
        out.append(r.stdout)
    return out


def test(args):
    with Farm(args.vdn, "gpu_jobs", lease=6.0, keep=args.keep) as farm:
        ckpt = os.path.join(farm.dir, "ckptv")
        farm.run(["ckpt", "init", "--preset", "tiny", "--vdn", "--vae", "--out", ckpt],
                 timeout=120)
        env = dict(farm.env, VDN_NVIDIA_SMI=stand_in_gpus(farm, 4), VDN_TEST_NFE_DELAY_MS="300")
        farm.start_coordinator()
        farm.spawn("g4", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckpt,
                          "--store", farm.store, "--id", "g4", "--scratch",
                          os.path.join(farm.dir, "scratch"), "--heartbeat-seconds",
                          str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir],
                   env=env)
        wlog = os.path.join(farm.dir, "logs", "g4.log")

        # ---- 1. four one-GPU jobs at once: each decodes on its own GPU
        req = {"prompt_cache": farm.prompt, "frames": 22, "height": 32, "width": 32, "steps": 3}
        b1 = submit(farm, [dict(req, seed=s) for s in range(1, 5)], "four")
        farm.wait_batch(b1, 4, 120)
        farm.check_exactly_once(b1, 4)
        text = open(wlog).read()
        loads = re.findall(r"GPU (\d+) \(NVIDIA H200\): VAEs loaded on", text)
        check(sorted(loads) == ["0", "1", "2", "3"], "VAE loads at start: %s" % loads)
        started = dict(re.findall(r"job (\d+) attempt \d+: start on GPU (\d+) ", text))
        decoded = dict(re.findall(r"job (\d+) attempt \d+: decoded on GPU (\d+) ", text))
        check(len(decoded) == 4 and decoded == started,
              "jobs started on %s but decoded on %s" % (started, decoded))
        check(len(set(decoded.values())) == 4, "the 4 jobs did not decode on 4 GPUs: %s" % decoded)
        for job, keys in farm.job_keys(b1).items():
            mp4 = [k for k in keys if k.endswith(".mp4")]
            check(mp4 and read_object(farm, mp4[0])[4:8] == b"ftyp", "job %d: no mp4" % job)
            g = record_of(farm, keys)["gpus"]
            check(g["decoded_on"] == g["held"] == [int(decoded[str(job)])]
                  and g["decode_audio_channels"] == [2], "job %d: record gpus %s" % (job, g))
        log("4 one-GPU jobs decoded on GPUs %s, VAEs loaded once per GPU"
            % sorted(decoded.values()))

        # ---- 2. the same clip on 1 GPU and sharded over 2 (56 frames: the VDN branch runs)
        # the latents are compared below: ask for them (the jobs' mp4s alone are the default)
        clip = dict(req, frames=FRAMES, steps=2, seed=77, save_latents=True)
        b2 = submit(farm, [clip, dict(clip, gpus=2)], "sharded")
        farm.wait_batch(b2, 2, 120)
        farm.check_exactly_once(b2, 2)
        keys = farm.job_keys(b2)
        one, two = sorted(keys)
        lat1, lat2 = latents_of(farm, keys[one]), latents_of(farm, keys[two])
        for name in ("video", "audio"):
            check(lat1[name][0] == lat2[name][0], "%s shapes %s vs %s"
                  % (name, lat1[name][0], lat2[name][0]))
            check(lat1[name][1] == lat2[name][1],
                  "the 2-GPU job's %s latents differ from the 1-GPU job's" % name)
        r1, r2 = record_of(farm, keys[one]), record_of(farm, keys[two])
        check(r1["gpus"]["ranks"] == 1 and len(r1["gpus"]["held"]) == 1
              and r1["gpus"]["communicator"] == "none", "1-GPU record: %s" % r1["gpus"])
        g2 = r2["gpus"]
        check(g2["ranks"] == 2 and g2["communicator"] == "inproc" and len(g2["held"]) == 2
              and g2["rendered_on"] == g2["held"] and "not_sharded" not in g2,
              "2-GPU record: %s" % g2)
        text = open(wlog).read()
        check(re.search(r"job %d attempt \d+: one clip sharded over 2 ranks on GPUs \d,\d "
                        r"\(inproc communicator\)" % two, text), "no log line for the sharded job")
        log("2-GPU job: latents equal to the 1-GPU job's bit for bit (%d video bytes); record "
            "gpus = %s" % (len(lat2["video"][1]), json.dumps(g2)))

        # ---- the same clip's decode: over both GPUs of the 2-GPU job, the 1-GPU job's frames
        g1 = r1["gpus"]
        tiles = sum(g1["decode_video_tiles"])
        check(g1["decoded_on"] == g1["held"] and g1["decode_audio_channels"] == [2] and tiles >= 2,
              "1-GPU job's decode: %s" % g1)
        check(g2["decoded_on"] == g2["held"] and len(g2["decode_video_tiles"]) == 2
              and min(g2["decode_video_tiles"]) >= 1 and sum(g2["decode_video_tiles"]) == tiles
              and g2["decode_audio_channels"] == [1, 1],
              "the 2-GPU job did not decode a share on each GPU: %s" % g2)
        m = re.search(r"job %d attempt \d+: decoded on GPUs (\d+),(\d+) \(cpu, cpu\) in [\d.]+ s: "
                      r"video tiles (\d+)\+(\d+), audio channels 1\+1" % two, text)
        check(m and [int(m.group(1)), int(m.group(2))] == g2["held"]
              and [int(m.group(3)), int(m.group(4))] == g2["decode_video_tiles"],
              "no log line for the 2-GPU decode (or not the record's): %s"
              % re.findall(r"job %d attempt \d+: decoded .*" % two, text))
        (f1, a1), (f2, a2) = decoded_mp4(farm, keys[one]), decoded_mp4(farm, keys[two])
        check(len(f1) == FRAMES * 32 * 32 * 3 and len(a1) > 0,
              "1-GPU mp4: %d bytes of frames, %d of sound" % (len(f1), len(a1)))
        check(f1 == f2, "the 2-GPU job's mp4 frames differ from the 1-GPU job's")
        check(a1 == a2, "the 2-GPU job's mp4 sound differs from the 1-GPU job's")
        log("2-GPU decode: tiles %s, audio channels %s on GPUs %s; ffmpeg's frames (%d bytes) and "
            "sound (%d bytes) equal the 1-GPU job's" % (g2["decode_video_tiles"],
                                                        g2["decode_audio_channels"],
                                                        g2["decoded_on"], len(f2), len(a2)))

        # ---- 3. a device fault in GPU 1's share of a 2-GPU decode: GPU 1 alone goes
        farm.kill("g4", signal.SIGTERM)
        check(farm.wait_exit("g4", 60) == 0, "g4 did not leave on SIGTERM")
        farm.spawn("g2", ["worker", "--connect", farm.worker_ep, "--checkpoint", ckpt,
                          "--store", farm.store, "--id", "g2", "--scratch",
                          os.path.join(farm.dir, "scratch2"), "--heartbeat-seconds",
                          str(farm.heartbeat), "--threads", "1", "--data-root", farm.dir],
                   env=dict(env, VDN_NVIDIA_SMI=stand_in_gpus(farm, 2, "nvidia-smi-2"),
                            VDN_TEST_DECODE_FAULT="1"))
        b3 = submit(farm, [dict(clip, gpus=2, seed=78, save_latents=False)], "decode_fault")
        t0 = time.time()
        fails = []
        while not fails:
            check(time.time() - t0 < 120, "the 2-GPU job's decode never failed: %s"
                  % farm.counts(b3))
            fails = farm.q("SELECT a.reason, a.fault FROM attempts a JOIN jobs j ON j.id=a.job_id"
                           " WHERE j.batch_id=? AND a.state='failed'", b3)
            time.sleep(0.2)
        check(len(fails) == 1 and fails[0][1] == "worker"
              and "decoding the latents into an mp4" in fails[0][0]
              and "an illegal memory access was encountered" in fails[0][0]
              and "decoder 1 of a group of 2" in fails[0][0], "failed attempts: %s" % fails)
        gpus = json.loads(farm.q("SELECT gpus FROM workers WHERE id='g2'")[0][0])
        check([g["index"] for g in gpus if g.get("out_of_service")] == [1]
              and len(gpus) == 2, "out of service after the decode fault: %s" % gpus)
        glog = open(os.path.join(farm.dir, "logs", "g2.log")).read()
        check(re.search(r"GPU 1 \(NVIDIA H200\) OUT OF SERVICE", glog)
              and not re.search(r"GPU 0 \(NVIDIA H200\) OUT OF SERVICE", glog),
              "out-of-service log lines: %s" % re.findall(r".*OUT OF SERVICE.*", glog))
        check(farm.procs["g2"].poll() is None, "the worker died with its GPU")
        log("decode fault on GPU 1 of a 2-GPU job: %s; GPU 0 stays in service" % fails[0][0])


if __name__ == "__main__":
    main(test)

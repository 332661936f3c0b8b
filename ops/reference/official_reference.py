#!/usr/bin/env python3
"""Expected values for engine/test/reference from the PUBLIC PyTorch reference code.

Runs, on CPU with torch, on a checkpoint written by `vdn ckpt init` (diffusers base layout plus the
VDN linear_branch/):
  (a) the dense MiniMax-H3 forward: diffusers `MiniMaxH3Transformer3DModel`
      (src/diffusers/models/transformers/transformer_minimax_h3.py), its packer
      `MiniMaxH3PrepareLayoutStep.build_packed_sequence`, `patchify_video_latents`, the row-timestep plan
      `MiniMaxH3SetTimestepsStep.build_row_timesteps` (modular_pipelines/minimax_h3/before_denoise.py),
      the frame/audio arithmetic (modular_pipelines/minimax_h3/modular_pipeline.py) and two
      `MiniMaxH3Scheduler`s (schedulers/scheduling_minimax_h3.py, shift 12 video / 3 audio);
  (b) the VDN hybrid forward: the same model with every block's attention processor replaced by the
      hybrid of the torch-only port Saganaki22/ComfyUI-VDN-H3 (vdn_h3/window.py `window_bounds`,
      `window_softmax_grouped`; vdn_h3/branch.py `LinearBranch.readout`), combined as that port's
      hybrid.py and the official OpenVDN HybridAttention do: softmax gate per head on the windowed
      softmax output, to_out, plus to_out_linear(readout) on the target video rows;
  (c) the render loop of the diffusers denoise blocks (transformer, then scheduler.step on video
      and audio rows) for 1 and 2 model evaluations, from given noise,
in float32 (and float64 for the dense model), and writes noise + outputs to one safetensors file.

The reference files are NOT part of vdn and are never committed: they are read from a folder given
with --ref (see docs/reference-check.md for where they come from). This script only provides the
minimal stand-ins for the diffusers framework modules those files import (config/mixin base classes,
logging, the attention dispatcher = torch SDPA), and loads the few generic diffusers helpers it needs
(SwiGLU/FeedForward, Timesteps/TimestepEmbedding) from the real diffusers sources by name.
"""
import argparse
import ast
import hashlib
import importlib.util
import json
import logging as pylogging
import os
import sys
import types

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

# ---------------------------------------------------------------- framework stand-ins


def _pkg(name, **attrs):
    mod = types.ModuleType(name)
    mod.__path__ = []  # importable as a package, so relative imports below it resolve
    mod.__dict__.update(attrs)
    sys.modules[name] = mod
    parent, _, leaf = name.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, mod)
    return mod


def _load_file_as(modname, path):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod
    spec.loader.exec_module(mod)
    parent, _, leaf = modname.rpartition(".")
    setattr(sys.modules[parent], leaf, mod)
    return mod


def _defs_from(path, names, namespace):
    """Execute only the named top-level definitions of a real diffusers source file (its other
    imports pull in the whole library, which is not installed on the device)."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    keep = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in names:
            keep.append(node)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in names for t in node.targets
        ):
            keep.append(node)
    found = {getattr(n, "name", None) or n.targets[0].id for n in keep}
    missing = set(names) - found
    if missing:
        raise SystemExit(f"{path}: definitions {sorted(missing)} not found")
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), namespace)
    return namespace


class _Empty:
    def __init__(self, *args, **kwargs):
        pass


def _mixin(name):
    # a distinct empty base per framework mixin: a class may not list the same base twice
    return type(name, (), {})


def _noop_decorator(fn):
    return fn


def _logging_module():
    return types.SimpleNamespace(get_logger=pylogging.getLogger)


def _sdpa_dispatch(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   backend=None, parallel_config=None, **_):
    # diffusers' dispatcher takes and returns [B, S, H, D]; its native backend is torch SDPA
    out = F.scaled_dot_product_attention(
        query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
        attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
    return out.transpose(1, 2)


def _get_parameter_dtype(module):
    return next(module.parameters()).dtype


class _AttentionModuleMixin:
    fused_projections = False  # diffusers' default: separate to_q/to_k/to_v

    def set_processor(self, processor):
        self.processor = processor


def install_diffusers(src):
    """src: a folder holding the diffusers files at their repository paths under src/diffusers."""
    p = lambda rel: os.path.join(src, rel)  # noqa: E731
    _pkg("diffusers")
    _pkg("diffusers.configuration_utils", ConfigMixin=_mixin("ConfigMixin"), register_to_config=_noop_decorator,
         FrozenDict=dict)
    _pkg("diffusers.loaders", PeftAdapterMixin=_mixin("PeftAdapterMixin"), MiniMaxH3LoraLoaderMixin=_mixin("MiniMaxH3LoraLoaderMixin"))
    _pkg("diffusers.utils", BaseOutput=object, logging=_logging_module(),
         apply_lora_scale=lambda _name: _noop_decorator, deprecate=lambda *a, **k: None)
    _pkg("diffusers.utils.torch_utils", randn_tensor=None, maybe_allow_in_graph=_noop_decorator)
    _pkg("diffusers.models")
    _pkg("diffusers.models._modeling_parallel", ContextParallelInput=_Empty,
         ContextParallelOutput=_Empty)
    _pkg("diffusers.models.attention_dispatch", dispatch_attention_fn=_sdpa_dispatch)
    _pkg("diffusers.models.cache_utils", CacheMixin=_mixin("CacheMixin"))
    _pkg("diffusers.models.modeling_utils", ModelMixin=nn.Module,
         get_parameter_dtype=_get_parameter_dtype)

    ns = {"torch": torch, "nn": nn, "F": F, "math": __import__("math")}
    _defs_from(p("models/activations.py"), ["ACT2CLS", "get_activation", "SwiGLU"], ns)
    ns["deprecate"] = lambda *a, **k: None
    _defs_from(p("models/attention.py"), ["FeedForward"], ns)
    _defs_from(p("models/embeddings.py"),
               ["get_timestep_embedding", "TimestepEmbedding", "Timesteps"], ns)
    _pkg("diffusers.models.attention", AttentionMixin=_mixin("AttentionMixin"),
         AttentionModuleMixin=_AttentionModuleMixin, FeedForward=ns["FeedForward"])
    _pkg("diffusers.models.embeddings", TimestepEmbedding=ns["TimestepEmbedding"],
         Timesteps=ns["Timesteps"])
    _pkg("diffusers.models.transformers")
    tm = _load_file_as("diffusers.models.transformers.transformer_minimax_h3",
                       p("models/transformers/transformer_minimax_h3.py"))

    _pkg("diffusers.schedulers")
    _pkg("diffusers.schedulers.scheduling_utils", SchedulerMixin=_mixin("SchedulerMixin"))
    sm = _load_file_as("diffusers.schedulers.scheduling_minimax_h3",
                       p("schedulers/scheduling_minimax_h3.py"))
    sys.modules["diffusers.schedulers"].MiniMaxH3Scheduler = sm.MiniMaxH3Scheduler

    _pkg("diffusers.modular_pipelines")
    _pkg("diffusers.modular_pipelines.modular_pipeline", ModularPipelineBlocks=_mixin("ModularPipelineBlocks"),
         PipelineState=_Empty, ModularPipeline=_mixin("ModularPipeline"), BlockState=_Empty,
         LoopSequentialPipelineBlocks=_mixin("LoopSequentialPipelineBlocks"))
    _pkg("diffusers.modular_pipelines.modular_pipeline_utils", ComponentSpec=_Empty,
         ConfigSpec=_Empty, InputParam=_Empty, OutputParam=_Empty)
    _pkg("diffusers.modular_pipelines.minimax_h3")
    _pkg("diffusers.modular_pipelines.minimax_h3.references", MiniMaxH3Reference=_Empty)
    mp = _load_file_as("diffusers.modular_pipelines.minimax_h3.modular_pipeline",
                       p("modular_pipelines/minimax_h3/modular_pipeline.py"))
    bd = _load_file_as("diffusers.modular_pipelines.minimax_h3.before_denoise",
                       p("modular_pipelines/minimax_h3/before_denoise.py"))
    return tm, sm, mp, bd


# ---------------------------------------------------------------- checkpoint


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_model(tm, ckpt, dtype):
    cfg_path = os.path.join(ckpt, "base/transformer/config.json")
    with open(cfg_path) as f:
        cfg = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    cfg["patch_size"] = tuple(cfg["patch_size"])
    model = tm.MiniMaxH3Transformer3DModel(**cfg)
    sd = load_file(os.path.join(ckpt, "base/transformer/diffusion_pytorch_model.safetensors"))
    model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    model = model.to(dtype).eval()
    # the rope buffer stays float32 at any model dtype (`_keep_in_fp32_modules` lists "rope"; the
    # inv_freq buffer is computed, never loaded)
    model.rope.float()
    return model, cfg


def branch_weights(ckpt, n_blocks):
    """Per block: the linear_branch tensors keyed as the port's LinearBranch/hybrid read them
    (block prefix and `linear_attention.` stripped)."""
    sd = load_file(os.path.join(ckpt, "linear_branch/model.safetensors"))
    blocks = [{} for _ in range(n_blocks)]
    for name, t in sd.items():
        parts = name.split(".")
        if parts[0] != "transformer_blocks" or parts[2] != "attn":
            raise SystemExit(f"linear_branch: unexpected tensor {name}")
        key = ".".join(parts[3:])
        if key.startswith("linear_attention."):
            key = key[len("linear_attention."):]
        blocks[int(parts[1])][key] = t.float()
    return blocks


# ---------------------------------------------------------------- VDN hybrid processor


class HybridProcessor:
    """One block's VDN attention, built from the port's window softmax and linear branch. The
    linear branch reads the raw (pre-QK-norm, pre-RoPE) q/k/v projections and the attention input
    x, as the official HybridAttention does."""

    def __init__(self, tm, window, weights, branch, layout):
        self.tm, self.window, self.w, self.branch, self.lay = tm, window, weights, branch, layout

    def __call__(self, attn, hidden_states, rotary_emb=None, attention_mask=None):
        lay, w = self.lay, self.w
        x = hidden_states[0]
        s, heads = x.shape[0], attn.heads
        q_raw = attn.to_q(x).unflatten(-1, (heads, -1))
        k_raw = attn.to_k(x).unflatten(-1, (heads, -1))
        v = attn.to_v(x).unflatten(-1, (heads, -1))
        head_dim = q_raw.shape[-1]
        q = self.tm._apply_rotary_emb(attn.norm_q(q_raw)[None], *rotary_emb)[0]
        k = self.tm._apply_rotary_emb(attn.norm_k(k_raw)[None], *rotary_emb)[0]
        vs, ve = lay["video_start"], lay["video_end"]
        if lay["full_cover"]:
            soft = _sdpa_dispatch(q[None], k[None], v[None])[0]
        else:
            soft = self.window.window_softmax_grouped(
                q, k, v, vs, ve, lay["frames"], lay["tokens_per_frame"], lay["bounds"],
                head_dim ** -0.5, anchor_frames=lay["anchor_frames"])
        gate = torch.sigmoid(F.linear(x, w["softmax_gate.up.weight"].to(x.dtype),
                                      w["softmax_gate.up.bias"].to(x.dtype)))
        out = attn.to_out[0]((soft * gate.view(s, heads, 1)).reshape(s, -1))
        if not lay["full_cover"] and self.branch is not None:
            wd = {k_: t.to(x.dtype) for k_, t in w.items()}
            L = lay["text_len"]
            readout = self.branch.readout(
                wd, x[vs:ve], q_raw[vs:ve], k_raw[vs:ve], v[vs:ve], lay["frames"],
                lay["tokens_per_frame"], lay["bounds"], frame_size=lay["frame_size"],
                text_x=x[:L], text_k_raw=k_raw[:L], text_v_raw=v[:L],
                skip_ends=(lay["anchor_frames"] == "both"))
            out = out.clone()
            out[vs:ve] += F.linear(readout.to(x.dtype), wd["to_out_linear.weight"])
        return out[None]


# ---------------------------------------------------------------- one render


class Case:
    """One request: a prompt cache of the checkpoint folder, its geometry, and its noise."""

    def __init__(self, name, bd, mp, prompt_path, frames, height, width, seed):
        pr = load_file(prompt_path)
        with open(prompt_path, "rb") as f:  # keyframe anchors live in the header's metadata
            n = int.from_bytes(f.read(8), "little")
            st_meta = json.loads(f.read(n)).get("__metadata__", {})
        anchors = tuple(a for a in st_meta.get("keyframe_anchors", "").split(",") if a)
        self.name, self.anchors = name, anchors
        self.emb, self.text_tags = pr["prompt_embeds"].float(), pr["text_token_tags"]
        self.keyframes = [pr[f"keyframe_{a}"].float() for a in anchors]
        if anchors:  # the keyframes fix the canvas
            height, width = int(st_meta["height"]), int(st_meta["width"])
        # frame arithmetic of the pipeline (its 5 s minimum duration is a request-validation rule,
        # not part of the model; the engine tests render shorter clips)
        self.frames = mp.align_num_frames(frames, 17, 5)
        self.F = mp.video_latent_num_frames(self.frames, 17, 5)
        self.La = mp.audio_latent_num_frames(self.frames)
        self.height, self.width = height, width
        self.lh, self.lw = height // 16, width // 16
        packed = bd.MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            self.text_tags, self.F, self.lh, self.lw, self.La, (1, 2, 2),
            mp.MINIMAX_H3_AUDIO_CHANNELS, mp.MINIMAX_H3_AUDIO_TAG, mp.MINIMAX_H3_VIDEO_TAG, anchors)
        (self.pos, self.tags, self.vid_idx, self.aud_idx, self.txt_idx, self.n_cond,
         n_cond_audio) = packed
        assert n_cond_audio == 0
        # draw order of the pipeline: each condition, then the video latents, then the audio rows
        gen = torch.Generator().manual_seed(seed)
        self.noise_kf = [torch.randn(kf.shape, generator=gen, dtype=torch.float32)
                         for kf in self.keyframes]
        self.noise_video = torch.randn((1, 24, self.F, self.lh, self.lw), generator=gen,
                                       dtype=torch.float32)
        self.noise_audio = torch.randn((2 * self.La, 32), generator=gen, dtype=torch.float32)


def render(model, sm, bd, case, nfe, dtype):
    """The diffusers denoise loop for `nfe` model evaluations (the pipeline's set_timesteps takes
    grid points, nfe + 1), conditioning rows first and never stepped."""
    patch = (1, 2, 2)
    sched_v, sched_a = sm.MiniMaxH3Scheduler(shift=12.0), sm.MiniMaxH3Scheduler(shift=3.0)
    sched_v.set_timesteps(nfe + 1)
    sched_a.set_timesteps(nfe + 1)
    keyframe_noise_aug = 0.999
    cond = [bd.patchify_video_latents(sched_v.scale_noise(kf, keyframe_noise_aug, nz), patch)
            for kf, nz in zip(case.keyframes, case.noise_kf)]
    latents = torch.cat(cond + [bd.patchify_video_latents(case.noise_video, patch)])
    assert latents.shape[0] == case.vid_idx.numel()
    audio = case.noise_audio.clone()
    n = case.n_cond
    step = bd.MiniMaxH3SetTimestepsStep.build_row_timesteps
    for i, (t, ta) in enumerate(zip(sched_v.timesteps, sched_a.timesteps)):
        uniq, idx = step(case.vid_idx, case.aud_idx, n, 0, case.txt_idx.numel(), float(t),
                         float(ta), max(float(t), keyframe_noise_aug), 1.0)
        with torch.no_grad():
            v_pred, a_pred = model(hidden_states=latents[None], audio_hidden_states=audio[None],
                                   encoder_hidden_states=case.emb[None].to(dtype), timestep=uniq,
                                   timestep_indices=idx, token_tags=case.tags,
                                   position_ids=case.pos, video_indices=case.vid_idx,
                                   audio_indices=case.aud_idx, text_indices=case.txt_idx,
                                   return_dict=False)
        latents = latents.clone()
        latents[n:] = sched_v.step(v_pred[0, n:].float(), t, latents[n:], return_dict=False)[0]
        audio = sched_a.step(a_pred[0].float(), sched_a.timesteps[i], audio, return_dict=False)[0]
    return latents[n:], audio, sched_v.sigmas, sched_a.sigmas


def unpatchify(rows, channels, frames, lh, lw):
    # inverse of patchify_video_latents for patch (1, 2, 2): rows (f, hp, wp) x features (c, ph, pw)
    x = rows.reshape(frames, lh // 2, lw // 2, channels, 2, 2)
    return x.permute(3, 0, 1, 4, 2, 5).reshape(channels, frames, lh, lw).contiguous()


# The variants vdn names (docs/engine.md), as settings of the port: (anchor_frames, delta_rule,
# linear branch on); None = as the checkpoint's model_spec.json says.
VARIANTS = {
    "vdn": (None, None, True),
    "vdn-no-anchors": ("none", None, True),
    "vdn-additive": (None, "sana_scaled", True),
    "window-only": (None, None, False),
}


def vdn_layout(window, hyb, case, anchor_frames):
    S = (case.lh // 2) * (case.lw // 2)
    bounds = window.window_bounds(case.F, hyb["softmax_attention"]["radius"],
                                  hyb["softmax_attention"]["chunk"])
    video_start = int(case.vid_idx[case.n_cond])  # the target video rows; keyframe rows are global
    lay = dict(video_start=video_start, video_end=video_start + case.F * S, frames=case.F,
               tokens_per_frame=S, frame_size=(case.lh // 2, case.lw // 2),
               text_len=int(case.txt_idx.numel()), bounds=bounds,
               full_cover=window.full_coverage(bounds, case.F),
               anchor_frames=anchor_frames or hyb["anchor_frames"])
    assert not lay["full_cover"], "pick more than 10 latent frames so the linear branch runs"
    return lay


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", required=True, help="folder with diffusers_src/ and vdn_h3/")
    ap.add_argument("--checkpoint", required=True, help="vdn ckpt init --vdn output folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--label", default="", help="free text stored in the output metadata")
    ap.add_argument("--variants", default="dense,vdn",
                    help=f"comma list of dense,{','.join(VARIANTS)}")
    ap.add_argument("--nfe", default="1,2", help="comma list of model-evaluation counts")
    ap.add_argument("--frames", type=int, default=56)
    ap.add_argument("--height", type=int, default=64, help="t2va canvas (fl2va: the keyframes')")
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    tm, sm, mp, bd = install_diffusers(os.path.join(args.ref, "diffusers_src"))
    sys.path.insert(0, args.ref)
    from vdn_h3 import branch as vdn_branch  # noqa: E402  (the port, from --ref)
    from vdn_h3 import window as vdn_window  # noqa: E402

    spec = json.load(open(os.path.join(args.checkpoint, "model_spec.json")))
    hyb = spec["transforms"][0]["config"]
    lin = hyb["linear_attention"]
    cases = [Case("t2va", bd, mp, os.path.join(args.checkpoint, "prompt.safetensors"),
                  args.frames, args.height, args.width, args.seed),
             Case("fl2va", bd, mp, os.path.join(args.checkpoint, "prompt_fl2va.safetensors"),
                  args.frames, args.height, args.width, args.seed + 1)]
    nfes = [int(n) for n in args.nfe.split(",")]
    out, meta = {}, {"label": args.label, "torch": torch.__version__}
    for case in cases:
        c = case.name
        out[f"{c}_noise_video"] = case.noise_video[0].contiguous()
        out[f"{c}_noise_audio"] = case.noise_audio.contiguous()
        if case.keyframes:
            out[f"{c}_noise_keyframes"] = torch.cat(case.noise_kf).contiguous()
        meta[f"{c}_request"] = json.dumps(dict(
            frames=case.frames, height=case.height, width=case.width, latent_frames=case.F,
            audio_latents=case.La, keyframes=list(case.anchors), noise_seed=args.seed))
        for variant in args.variants.split(","):
            # dense: float64 is the expected value, float32 only measured against it; vdn: the port
            # is written for bf16/fp32 activations (its RMSNorm asks vector_norm for a float32
            # accumulation, which torch refuses on float64 input), so float32
            dtypes = (torch.float64, torch.float32) if variant == "dense" else (torch.float32,)
            runs = {}
            for dtype in dtypes:
                model, cfg = build_model(tm, args.checkpoint, dtype)
                if variant in VARIANTS:
                    anchor_frames, rule, linear_on = VARIANTS[variant]
                    heads, hd = cfg["num_attention_heads"], cfg["attention_head_dim"]
                    assert lin["linear_head_dim"] == hd
                    lay = vdn_layout(vdn_window, hyb, case, anchor_frames)
                    ws = branch_weights(args.checkpoint, cfg["num_layers"])
                    for i, blk in enumerate(model.transformer_blocks):
                        br = vdn_branch.LinearBranch(
                            ws[i], heads, hd, delta_rule=rule or lin["delta_rule"],
                            bridge=lin["bridge"],
                            a_fp32=lin.get("a_fp32", True),
                            short_conv=tuple(lin["short_conv"]["targets"]),
                            enable_text_state=lin["enable_text_state"], retain_buffers=False)
                        blk.attn.set_processor(HybridProcessor(tm, vdn_window, ws[i],
                                                               br if linear_on else None, lay))
                elif variant != "dense":
                    raise SystemExit(f"--variants: unknown {variant}")
                for nfe in nfes:
                    lat, aud, sig_v, sig_a = render(model, sm, bd, case, nfe, dtype)
                    video = unpatchify(lat, 24, case.F, case.lh, case.lw)
                    # the inverse must round-trip through the reference's own patchify
                    assert torch.equal(bd.patchify_video_latents(video[None], (1, 2, 2)), lat)
                    audio = aud.reshape(2, case.La, 32).permute(0, 2, 1).contiguous()
                    runs[(dtype, nfe)] = (video, audio)
                    if nfe == 2:
                        out[f"{c}_sigmas_video_2nfe"], out[f"{c}_sigmas_audio_2nfe"] = sig_v, sig_a
            for nfe in nfes:
                video, audio = runs[(dtypes[0], nfe)]
                # stored as float32: the rounding (~6e-8) is far below any bound the test uses
                out[f"{c}_{variant}_{nfe}nfe_video"] = video.float()
                out[f"{c}_{variant}_{nfe}nfe_audio"] = audio.float()
                line = (f"{c} {variant} nfe={nfe} ({str(dtypes[0])[6:]}): "
                        f"|video|={float(video.norm()):.6g} |audio|={float(audio.norm()):.6g}")
                if len(dtypes) == 2:
                    v32, a32 = runs[(torch.float32, nfe)]
                    for part, x64, x32, noise in (
                            ("video", video, v32, case.noise_video[0]),
                            ("audio", audio, a32,
                             case.noise_audio.reshape(2, case.La, 32).permute(0, 2, 1))):
                        d64 = x64 - noise.double()
                        e = float((x32.double() - noise.double() - d64).norm() / d64.norm())
                        meta[f"{c}_{variant}_{nfe}nfe_{part}_f32_vs_f64"] = f"{e:.3e}"
                        line += f" {part} f32-vs-f64 {e:.2e}"
                print(line, flush=True)

    files = ["base/transformer/diffusion_pytorch_model.safetensors",
             "linear_branch/model.safetensors", "prompt.safetensors", "prompt_fl2va.safetensors"]
    meta["checkpoint_sha256"] = json.dumps(
        {f: sha256_file(os.path.join(args.checkpoint, f)) for f in files})
    meta["ckpt_metadata"] = open(os.path.join(args.checkpoint, "metadata.json")).read()
    for name in ("diffusers_src/COMMIT", "vdn_h3/COMMIT"):
        path = os.path.join(args.ref, name)
        if os.path.exists(path):
            meta[name] = open(path).read().strip()
    save_file({k: v.contiguous() for k, v in out.items()}, args.out, metadata=meta)
    print(f"wrote {args.out}: {len(out)} tensors", flush=True)


if __name__ == "__main__":
    main()

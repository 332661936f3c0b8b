"""The CPU forward (all five attention variants, with keyframe rows) against an independent numpy
float64 implementation of spec sections 1.4-5, written from the contract: positions, time
embedding, adaLN, refiner, DiT blocks with the window/anchor mask, softmax gate and the VDA linear
branch (short conv, features, alpha, text state, Cholesky-free solve, scans, boundary gather),
final layer and heads. argv: FORWARD_DUMP_BINARY WORKDIR"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

helper, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
path = os.path.join(work, "forward_case.safetensors")
subprocess.run([helper, path], check=True)

buf = open(path, "rb").read()
n = struct.unpack("<Q", buf[:8])[0]
hdr = json.loads(buf[8:8 + n])
meta = hdr.pop("__metadata__")
DT = {"F32": np.float32, "I32": np.int32, "U8": np.uint8}
Wt = {}
for k, e in hdr.items():
    b, t = e["data_offsets"]
    Wt[k] = np.frombuffer(buf[8 + n + b:8 + n + t], DT[e["dtype"]]).reshape(e["shape"]).astype(np.float64)
cfg = json.loads(meta["config"])
n_text, n_cond, n_audio, n_video, F, gh, gw, L, La, n_kf = map(int, meta["layout"].split())
HID, H, D, NF = cfg["hidden"], cfg["heads"], cfg["head_dim"], cfg["rope_freq_dim"]
EPS, K, R = cfg["norm_eps"], cfg["chunk"], cfg["radius"]
S = gh * gw
cond0, audio0 = n_text, n_text + n_cond
video0 = audio0 + n_audio
N = video0 + n_video
lat_h, lat_w = 2 * gh, 2 * gw

# ---- packed sequence (spec 1.4, 1.5) ----
pos = np.zeros((N, 3))
pos[:L, 0] = np.arange(L)
sq = np.sqrt(lat_h * lat_w)
def grid(Dl):
    ratio = Dl / sq
    left = (1 - ratio) / 2
    return np.linspace(left, left + ratio, Dl // 2, endpoint=False) * 32
hg, wg = grid(lat_h), grid(lat_w)
fg = np.stack([a.reshape(-1) for a in np.meshgrid(hg, wg, indexing="ij")], -1)
spans = np.array([5 / 3 * (1, 4, 4, 4, 4)[i % 5] for i in range(F)])
ftime = L + np.concatenate([[0.0], np.cumsum(spans[:-1])])
span = np.ones(F) * (5 / 3)
for i, p in enumerate((1, 4, 4, 4, 4)):
    span[i::5] *= p
for k, anchor in enumerate(["first", "last"][:n_kf]):
    r = slice(cond0 + k * S, cond0 + (k + 1) * S)
    pos[r, 0] = L if anchor == "first" else L + float(span.sum()) - 5 / 3
    pos[r, 1:] = fg
pos[audio0:video0, 0] = np.tile(L + np.arange(La), 2)
pos[audio0:video0, 2] = np.concatenate([np.full(La, wg[0]), np.full(La, wg[-1])])
pos[video0:, 0] = np.repeat(ftime, S)
pos[video0:, 1:] = np.tile(fg, (F, 1))
tags = np.zeros(N, np.int64)
tags[:L] = Wt["in_tags"][:L].astype(np.int64)
tags[audio0:video0] = 2
tv, ta = np.float32(0.3), np.float32(0.55)
row_t = np.full(N, tv, np.float32)
row_t[cond0:audio0] = max(tv, np.float32(0.999))
row_t[audio0:video0] = ta
tvals, tidx = np.unique(row_t, return_inverse=True)

# ---- ops ----
def rms(x, w, eps=EPS):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
silu = lambda x: x / (1 + np.exp(-x))
sigmoid = lambda x: 1 / (1 + np.exp(-x))
def lin(x, w, b=None):
    y = x @ Wt[w].T
    return y + Wt[b] if b else y

# the reference forms the angles in float32: float32(positions) * float32 inv_freq
inv = (np.float32(1.0) / np.float32(cfg["rope_theta"]) ** (np.arange(0, 2 * NF, 2, dtype=np.float32) / np.float32(2 * NF))).astype(np.float32)
def rope(x, p):  # x [n, H, D]
    p32 = p.astype(np.float32)
    th = np.concatenate([p32[:, 0:1] * inv, p32[:, 1:2] * inv, p32[:, 2:3] * inv], -1).astype(np.float64)
    th = np.concatenate([th, th], -1)[:, None, :]
    rot = x[..., :6 * NF]
    half = 3 * NF
    rh = np.concatenate([-rot[..., half:], rot[..., :half]], -1)
    return np.concatenate([rot * np.cos(th) + rh * np.sin(th), x[..., 6 * NF:]], -1)

def frame_of(i):
    return (i - video0) // S if i >= video0 else -1

def mask_for(mode):
    if mode == "dense" or F <= 10:
        return None
    fr = np.array([frame_of(i) for i in range(N)])
    anchors = mode != "vdn-no-anchors"
    glob = fr < 0
    if anchors:
        glob = glob | (fr == 0) | (fr == F - 1)
    c = np.where(fr >= 0, fr // K, -1000)
    near = np.abs(c[:, None] - c[None, :]) <= R
    return glob[:, None] | glob[None, :] | near

def attention(h, pre, p=None, mask=None):
    n = h.shape[0]
    q = rms(lin(h, pre + ".to_q").reshape(n, H, D), Wt[pre + ".norm_q"])
    k = rms(lin(h, pre + ".to_k").reshape(n, H, D), Wt[pre + ".norm_k"])
    v = lin(h, pre + ".to_v").reshape(n, H, D)
    if p is not None:
        q, k = rope(q, p), rope(k, p)
    s = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(D)
    if mask is not None:
        s = np.where(mask[None], s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    return np.einsum("hij,jhd->ihd", s, v)

def ff(h, pre):
    u = lin(h, pre + ".ff_in")
    f = u.shape[1] // 2
    return lin(u[:, :f] * silu(u[:, f:]), pre + ".ff_out")

# ---- VDA linear branch (spec 5.3) ----
def l2(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-6)

def conv(x, pre, which):  # x [Fp, gh, gw, C]: spatial 5x5 then temporal 5, zero padded
    C = x.shape[-1]
    sp = Wt[f"{pre}.{which}_sp"].reshape(C, 5, 5)
    tm = Wt[f"{pre}.{which}_tm"]
    xp = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))
    y = sum(sp[:, i, j] * xp[:, i:i + gh, j:j + gw, :] for i in range(5) for j in range(5))
    yp = np.pad(y, ((2, 2), (0, 0), (0, 0), (0, 0)))
    return sum(tm[:, d] * yp[d:d + x.shape[0]] for d in range(5))

def branch(x, q_raw, k_raw, v_raw, pre, mode):
    skip = mode in ("vdn", "vdn-additive")
    f0 = 1 if skip else 0
    Fp = F - 2 * f0
    out = np.zeros((n_video, H * D))
    rows = slice(video0 + f0 * S, video0 + (f0 + Fp) * S)
    xv = x[rows]
    kc = conv(k_raw[rows].reshape(Fp, gh, gw, -1), pre, "k").reshape(Fp, S, H, D)
    vc = conv(v_raw[rows].reshape(Fp, gh, gw, -1), pre, "v").reshape(Fp, S, H, D)
    q = l2(silu(q_raw[rows].reshape(Fp, S, H, D)))
    k = l2(silu(kc))
    v = silu(vc)
    beta = sigmoid(xv @ Wt[pre + ".beta_w"].T).reshape(Fp, S, H)
    m = xv.reshape(Fp, S, HID).mean(1)
    u = (m @ Wt[pre + ".alpha_down"].T) @ Wt[pre + ".alpha_up"].T + Wt[pre + ".dt_bias"]
    sp = np.where(u > 20, u, np.log1p(np.exp(np.minimum(u, 20))))
    alpha = np.exp(-np.exp(np.repeat(Wt[pre + ".A_log"], D)) * sp).reshape(Fp, H, D)
    A = np.einsum("fsh,fshi,fshj->fhij", beta, k, k)
    B = np.einsum("fsh,fshi,fshj->fhij", beta, v, k)
    # text state from all prompt rows, one chunk, no conv and no alpha
    kt, vt = l2(silu(k_raw[:L].reshape(L, H, D))), silu(v_raw[:L].reshape(L, H, D))
    bt = sigmoid(x[:L] @ Wt[pre + ".beta_w"].T)
    At = np.einsum("sh,shi,shj->hij", bt, kt, kt)
    Bt = np.einsum("sh,shi,shj->hij", bt, vt, kt)
    I = np.eye(D)
    if mode == "vdn-additive":
        S_text = Bt / np.sqrt(L)
    else:
        S_text = np.stack([np.linalg.solve((I + At[h]).T, Bt[h].T).T for h in range(H)])
    S0 = cfg["text_state_scale"] * S_text
    def step(Sx, f):  # frame update from the normal equations, per head
        out = np.empty_like(Sx)
        for h in range(H):
            Sbar = Sx[h] * alpha[f, h][None, :]
            if mode == "vdn-additive":
                out[h] = Sbar @ (I - A[f, h] / S) + B[f, h] / np.sqrt(S)
            else:
                out[h] = np.linalg.solve((I + A[f, h]).T, (Sbar + B[f, h]).T).T
        return out
    P, Rv = [None] * Fp, [None] * Fp
    st = S0
    for f in range(Fp):
        st = step(st, f)
        P[f] = st
    st = S0
    for f in reversed(range(Fp)):
        st = step(st, f)
        Rv[f] = st
    for t in range(Fp):
        c = (t + f0) // K
        lo, hi = (c - R) * K - f0, (c + R + 1) * K - 1 - f0
        left = P[lo - 1] if lo - 1 >= 0 else S0
        right = Rv[hi + 1] if hi + 1 <= Fp - 1 else S0
        pl = np.prod(alpha[max(lo, 0):t + 1], 0)  # [H, D]
        pr = np.prod(alpha[t:min(hi, Fp - 1) + 1], 0)
        St = left * pl[:, None, :] + right * pr[:, None, :]
        r = np.einsum("hij,shj->shi", St, q[t])
        r = rms(r, Wt[pre + ".lin_norm"], cfg["linear_norm_eps"])
        xr = xv[t * S:(t + 1) * S]
        g = sigmoid((xr @ Wt[pre + ".gate_down"].T) @ Wt[pre + ".gate_up"].T + Wt[pre + ".gate_up_b"])
        out[(t + f0) * S:(t + f0 + 1) * S] = (r.reshape(S, H * D) * g)
    return out

# ---- the model ----
def forward(mode):
    x = np.zeros((N, HID))
    t = lin(Wt["in_text"], "ctx_w", "ctx_b")
    h = rms(t, Wt["refiner0.norm1"])
    t = t + lin(attention(h, "refiner0").reshape(L, H * D), "refiner0.to_out")
    t = t + ff(rms(t, Wt["refiner0.norm2"]), "refiner0")
    x[:L] = rms(t, Wt["refiner_final_norm"])
    x[cond0:audio0] = lin(Wt["in_cond"], "proj_in_w", "proj_in_b")
    x[audio0:video0] = lin(Wt["in_audio"], "audio_in_w", "audio_in_b")
    x[video0:] = lin(Wt["in_video"], "proj_in_w", "proj_in_b")
    half = cfg["freq_dim"] // 2
    fr = np.exp(-np.log(10000.0) * np.arange(half) / half)
    e = np.concatenate([np.cos(tvals[:, None] * fr), np.sin(tvals[:, None] * fr)], -1)
    st = silu(lin(silu(lin(e, "t1_w", "t1_b")), "t2_w", "t2_b"))
    hybrid = mode != "dense"
    bypass = F <= 10
    mask = mask_for(mode)
    for l in range(cfg["layers"]):
        pre = f"block{l}"
        P = (st @ Wt[pre + ".ada_w"].T + Wt[pre + ".ada_b"]).reshape(len(tvals), 3, 6, HID)
        mod = P[tidx, tags]  # [N, 6, HID]
        h = rms(x, Wt[pre + ".norm1"]) * (1 + mod[:, 1]) + mod[:, 0]
        o = attention(h, pre, pos, mask)
        if hybrid:
            o = o * sigmoid(h @ Wt[pre + ".sg_w"].T + Wt[pre + ".sg_b"])[:, :, None]
        a = lin(o.reshape(N, H * D), pre + ".to_out")
        if hybrid and not bypass and mode != "window-only":
            q_raw, k_raw, v_raw = lin(h, pre + ".to_q"), lin(h, pre + ".to_k"), lin(h, pre + ".to_v")
            a[video0:] += branch(h, q_raw, k_raw, v_raw, pre, mode) @ Wt[pre + ".to_out_linear"].T
        x = x + mod[:, 2] * a
        h = rms(x, Wt[pre + ".norm2"]) * (1 + mod[:, 4]) + mod[:, 3]
        x = x + mod[:, 5] * ff(h, pre)
    fin = (st @ Wt["norm_out_lin_w"].T + Wt["norm_out_lin_b"])[tidx]
    h = rms(x, Wt["norm_out_w"]) * (1 + fin[:, HID:]) + fin[:, :HID]
    return lin(h[video0:], "proj_out_w", "proj_out_b"), lin(h[audio0:video0], "audio_out_w", "audio_out_b")

fails = 0
for mode in ("dense", "vdn", "vdn-no-anchors", "window-only", "vdn-additive"):
    rv, ra = forward(mode)
    for ref, got, what in ((rv, Wt["out_video." + mode], "video"), (ra, Wt["out_audio." + mode], "audio")):
        err = np.linalg.norm(ref - got) / np.linalg.norm(ref)
        ok = err < 2e-5
        fails += not ok
        print(f"{mode:15s} {what}: relative error {err:.2e} {'ok' if ok else 'FAIL'}")
print("test_forward_numpy:", "ok" if not fails else f"{fails} failures")
sys.exit(1 if fails else 0)

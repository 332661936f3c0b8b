"""Pictures in, against Pillow (the library the release's encode_keyframes.py reads pictures with).
Every picture is made here, at test time, with Pillow and numpy (or written byte by byte where
Pillow cannot write the layout: 16-bit and low-bit-depth PNGs).

usage: test_image.py IMAGE_TOOL WORKDIR PART    PART = resample | decode | canvas | bad

  resample  engine/core/resample.c = Pillow's Image.resize byte for byte: LANCZOS, BICUBIC,
            BILINEAR, BOX, HAMMING; down- and upscales; 1 and 3 channels; fractional boxes; and a
            window of the output = a crop of Pillow's output.
  decode    media/image.c = Image.open(f).convert("RGB"): PNG (RGB, RGBA, L, LA, P, 1-bit, 2/4-bit
            grey and palette, 16-bit RGB/RGBA/LA/grey) and WebP (lossless, lossy, with alpha)
            byte for byte; JPEG (4:2:0, 4:2:2, 4:4:4, progressive, grey) within the IDCT's
            difference (FFmpeg's integer IDCT vs libjpeg-turbo's islow: at most 4 levels on a
            sample, 0.1 on average, measured 3 and 0.04), CMYK JPEG within 3 levels (FFmpeg's
            decoder converts CMYK itself, truncating where Pillow rounds; measured 2).
  canvas    the canvas of the release's put_on_canvas, re-implemented below with Pillow: the
            canvas size over many aspect ratios, and the keyframes put on it (first stretched,
            last cover-cropped) for odd sizes and aspects, byte for byte on PNG and WebP input and
            on JPEG input decoded by us (the same decoded pixels through both recipes).
  bad       bad pictures are refused with a message naming the file and what was expected.
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ops", "test"))
import st  # noqa: E402

tool, work, part = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
rng = np.random.default_rng(20261128)
FILTERS = {"lanczos": Image.LANCZOS, "bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR,
           "box": Image.BOX, "hamming": Image.HAMMING}


def ok(cond, msg):
    """st.check that also returns the condition."""
    st.check(cond, msg)
    return cond


def run(*args):
    return subprocess.run([tool, *map(str, args)], capture_output=True, text=True)


def smooth(w, h, seed=0):
    """A photo-like picture: smooth colour fields plus a little noise."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = np.random.default_rng(seed)
    a = np.stack([128 + 90 * np.sin(x / (5 + seed) + y / 17), 128 + 90 * np.cos(y / 9 - x / 23),
                  128 + 60 * np.sin((x + y) / 7)], -1) + r.normal(0, 6, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def png_bytes(w, h, depth, ct, rows, plte=None):
    """A PNG written byte by byte (layouts Pillow does not write)."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + r for r in rows)
    s = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ct, 0, 0, 0))
    if plte:
        s += chunk(b"PLTE", plte)
    return s + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def adam7_png(a):
    """An interlaced (Adam7) 8-bit RGB PNG of a (Pillow writes none)."""
    h, w, _ = a.shape
    passes = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + r.tobytes() for r in sub)

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def decoded(path):
    """Our decode of path: (array, None) or (None, stderr)."""
    r = run("decode", path, "dec.raw")
    if r.returncode:
        return None, r.stderr.strip()
    w, h = map(int, r.stdout.split())
    return np.fromfile("dec.raw", np.uint8).reshape(h, w, 3), None


# ---------------------------------------------------------------- resample
def part_resample():
    n = 0
    for trial in range(120):
        w, h = (int(v) for v in rng.integers(1, 160, 2))
        ow, oh = (int(v) for v in rng.integers(1, 200, 2))
        if trial % 4 == 0:  # strong downscale
            w, h, ow, oh = w * 9 + 5, h * 7 + 3, max(1, ow // 5), max(1, oh // 6)
        c = (1, 3, 3, 2, 3, 4)[trial % 6]
        a = rng.integers(0, 256, (h, w, c) if c > 1 else (h, w), dtype=np.uint8)
        if trial % 2 and c != 2:  # smooth content too: ringing, clipping at 0 and 255
            a = np.dstack([smooth(w, h, trial)] * 2)[..., :c].reshape(a.shape)
        f = list(FILTERS)[trial % 5]
        box = None
        if trial % 3 == 0:  # Pillow passes its box as C floats
            x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
            box = tuple(float(np.float32(v)) for v in (x0, y0, rng.uniform(x0 + 0.5, w), rng.uniform(y0 + 0.5, h)))
        # 2 and 4 channels as Pillow's core resamples them: modes La and RGBa (Image.resize
        # premultiplies LA and RGBA first, which is the caller's business)
        im = Image.frombytes({1: "L", 2: "La", 3: "RGB", 4: "RGBa"}[c], (w, h), a.tobytes())
        ref = np.frombuffer(im.resize((ow, oh), FILTERS[f], box=box).tobytes(), np.uint8)
        ref = ref.reshape((oh, ow, c) if c > 1 else (oh, ow))
        a.tofile("in.raw")
        args = ["resample", "in.raw", w, h, c, ow, oh, f, "out.raw"]
        if box or trial % 5 == 1:
            args += ["%.9g" % v for v in (box or (0, 0, w, h))]
        win = None
        if trial % 5 == 1:  # a window of the output = a crop of Pillow's
            wx, wy = int(rng.integers(0, ow)), int(rng.integers(0, oh))
            win = (wx, wy, int(rng.integers(1, ow - wx + 1)), int(rng.integers(1, oh - wy + 1)))
            args += list(win)
            ref = ref[win[1]:win[1] + win[3], win[0]:win[0] + win[2]]
        r = run(*args)
        if r.returncode:
            st.check(False, f"resample {args[1:]}: {r.stderr}")
            continue
        got = np.fromfile("out.raw", np.uint8).reshape(ref.shape)
        d = np.abs(got.astype(int) - ref.astype(int))
        st.check(d.max() == 0, f"{f} {w}x{h}x{c} -> {ow}x{oh} box {box} window {win}: "
                 f"{int((d > 0).sum())} bytes differ from Pillow, by up to {d.max()}")
        n += 1
    print(f"resample: {n} resizes compared with Pillow")
    # refused arguments
    a = np.zeros((4, 4, 3), np.uint8)
    a.tofile("in.raw")
    for args, want in ((["in.raw", 4, 4, 3, 8, 8, "lanczos", "o.raw", 1, 1, 9, 3], "box"),
                       (["in.raw", 4, 4, 3, 8, 8, "lanczos", "o.raw", 0, 0, 4, 4, 6, 6, 4, 4], "window"),
                       (["in.raw", 4, 4, 3, 0, 8, "lanczos", "o.raw"], "output size")):
        r = run("resample", *args)
        st.check(r.returncode == 1 and want in r.stderr, f"resample {args}: {r.returncode} {r.stderr!r}")


# ---------------------------------------------------------------- decode
def part_decode():
    W, H = 37, 23
    pics = {}
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    Image.fromarray(rgb).save("rgb.png")
    Image.fromarray(np.dstack([rgb, rng.integers(0, 256, (H, W), dtype=np.uint8)])).save("rgba.png")
    Image.fromarray(rgb[..., 0]).save("l.png")
    Image.fromarray(np.dstack([rgb[..., 0], rgb[..., 1]]), "LA").save("la.png")
    Image.fromarray(rgb).quantize(100).save("p.png")
    q = Image.fromarray(rgb).quantize(50)
    q.info["transparency"] = 3
    q.save("p_trns.png", transparency=3)
    Image.fromarray(rng.integers(0, 2, (H, W)).astype(bool)).save("bw.png")
    Image.fromarray(rgb).save("rgb_odd_size.png")
    for d in (1, 2, 4):
        rows = [rng.integers(0, 256, (W * d + 7) // 8, dtype=np.uint8).tobytes() for _ in range(H)]
        open(f"grey{d}.png", "wb").write(png_bytes(W, H, d, 0, rows))
        open(f"pal{d}.png", "wb").write(png_bytes(W, H, d, 3, rows, rng.integers(0, 256, 3 << d, dtype=np.uint8).tobytes()))
    for name, ct, ch in (("rgb16", 2, 3), ("rgba16", 6, 4), ("la16", 4, 2), ("grey16", 0, 1)):
        a = rng.integers(0, 65536, (H, W, ch), dtype=np.uint16)
        if name == "grey16":  # low values too, where Pillow's clip at 255 shows
            a[: H // 2] //= 200
        open(f"{name}.png", "wb").write(png_bytes(W, H, 16, ct, [r.astype(">u2").tobytes() for r in a]))
    open("interlaced.png", "wb").write(adam7_png(rgb))
    # image data that ends early but well formed (zlib stream and IEND whole): the missing rows
    # come out black, in Pillow as here
    open("short_idat.png", "wb").write(png_bytes(W, H, 8, 2, [r.tobytes() for r in rgb[: H // 2]]))
    Image.fromarray(rgb).save("lossless.webp", lossless=True)
    Image.open("rgba.png").save("lossless_alpha.webp", lossless=True)
    sm = smooth(4 * W + 1, 4 * H + 3)
    Image.fromarray(sm).save("lossy.webp", quality=85)
    sa = Image.fromarray(sm)
    sa.putalpha(Image.fromarray(rng.integers(0, 256, sm.shape[:2], dtype=np.uint8)))
    sa.save("lossy_alpha.webp", quality=85)
    Image.fromarray(smooth(W, H, 3)).save("lossy_small.webp", quality=70)
    exact = ["interlaced.png", "short_idat.png", "rgb.png", "rgba.png", "l.png", "la.png", "p.png", "p_trns.png", "bw.png", "rgb_odd_size.png",
             "grey1.png", "grey2.png", "grey4.png", "pal1.png", "pal2.png", "pal4.png", "rgb16.png",
             "rgba16.png", "la16.png", "grey16.png", "lossless.webp", "lossless_alpha.webp", "lossy.webp",
             "lossy_alpha.webp", "lossy_small.webp"]
    jpeg = {}
    for name, kw in (("420", {}), ("422", {"subsampling": 1}), ("444", {"subsampling": 0}),
                     ("progressive", {"progressive": True}), ("q60", {"quality": 60})):
        Image.fromarray(sm).save(f"jpeg_{name}.jpg", quality=kw.pop("quality", 92), **kw)
        jpeg[f"jpeg_{name}.jpg"] = (4, 0.1)
    Image.fromarray(smooth(W, H, 2)).save("jpeg_odd.jpg", quality=90)
    jpeg["jpeg_odd.jpg"] = (4, 0.1)
    Image.fromarray(sm[..., 1]).save("jpeg_grey.jpg", quality=90)
    jpeg["jpeg_grey.jpg"] = (2, 0.05)
    Image.fromarray(sm).convert("CMYK").save("jpeg_cmyk.jpg", quality=95)
    jpeg["jpeg_cmyk.jpg"] = (3, 1.5)
    for name in exact + list(jpeg):
        ref = Image.open(name)
        mode = ref.mode
        ref = np.asarray(ref.convert("RGB"))
        got, err = decoded(name)
        if not ok(got is not None, f"{name} ({mode}): {err}"):
            continue
        if not ok(got.shape == ref.shape, f"{name}: {got.shape}, Pillow {ref.shape}"):
            continue
        d = np.abs(got.astype(int) - ref.astype(int))
        mx, mean = jpeg.get(name, (0, 0))
        st.check(d.max() <= mx and d.mean() <= mean,
                 f"{name} ({mode}): differs from Pillow's convert('RGB') by up to {d.max()} "
                 f"(mean {d.mean():.4f}); allowed {mx} (mean {mean})")
        print(f"decode: {name:22s} {mode:5s} max {d.max()} mean {d.mean():.4f}")
    # tiny pictures: libjpeg replicates a chroma plane of at most 2 samples instead of
    # interpolating; WebP's upsampler at its edges
    worst = {"jpg": 0, "webp": 0}
    for w, h in ((1, 17), (2, 5), (3, 9), (4, 1), (5, 2), (17, 3), (1, 1), (2, 2)):
        a = np.clip(rng.normal(128, 40, (h, w, 3)), 0, 255).astype(np.uint8)
        for name, kw in (("tiny420.jpg", {}), ("tiny422.jpg", {"subsampling": 1}), ("tiny.webp", {})):
            Image.fromarray(a).save(name, quality=90, **kw)
            ref = np.asarray(Image.open(name).convert("RGB")).astype(int)
            got, err = decoded(name)
            if ok(got is not None and got.shape == ref.shape, f"{w}x{h} {name}: {err}"):
                worst[name[-4:].lstrip(".")] = max(worst[name[-4:].lstrip(".")], int(np.abs(got - ref).max()))
    st.check(worst["jpg"] <= 4 and worst["webp"] == 0, f"tiny pictures differ from Pillow by up to {worst}")
    print(f"decode: tiny pictures within {worst} of Pillow")
    # memory = file; sha256 = hashlib's
    import hashlib
    r = run("sha256", "lossy.webp")
    st.check(r.stdout.strip() == hashlib.sha256(open("lossy.webp", "rb").read()).hexdigest(), f"sha256: {r.stdout!r}")
    r = run("probe", "jpeg_420.jpg")
    st.check(r.stdout.split() == ["jpeg", str(4 * W + 1), str(4 * H + 3), "8", "3"], f"probe: {r.stdout!r}")


# ---------------------------------------------------------------- canvas
def release_canvas_size(aw, ah):
    """The release's resolve_canvas_size (diffusers modular_pipeline.py), with its constants."""
    ratio = aw / ah
    if not 1 / 4 <= ratio <= 4:
        return None
    if ratio >= 1.0:
        width, height = 768 * ratio, float(768)
    else:
        width, height = float(768), 768 / ratio
    area = width * height
    if area > 768 * 1344:
        scale = (768 * 1344 / area) ** 0.5
        width, height = width * scale, height * scale
    return max(32, round(height / 32) * 32), max(32, round(width / 32) * 32)


def release_put_on_canvas(keyframes, size=None):
    """encode_keyframes.py's put_on_canvas (+ diffusers' explicit height/width), with Pillow."""
    height, width = size or release_canvas_size(*keyframes[0].size)
    out = []
    for index, k in enumerate(keyframes):
        k = k.convert("RGB")
        if k.size == (width, height):
            out.append(k)
        elif index == 0:
            out.append(k.resize((width, height), Image.Resampling.LANCZOS))
        else:
            scale = max(width / k.size[0], height / k.size[1])
            rs = (max(width, round(k.size[0] * scale)), max(height, round(k.size[1] * scale)))
            left, top = max(0, (rs[0] - width) // 2), max(0, (rs[1] - height) // 2)
            out.append(k.resize(rs, Image.Resampling.LANCZOS).crop((left, top, left + width, top + height)))
    return out, height, width


def canvas(paths, size=None):
    args = ["canvas"] + (["--size", size[1], size[0]] if size else []) + ["cv"] + paths
    r = run(*args)
    if r.returncode:
        return None, r.stderr.strip()
    w, h = map(int, r.stdout.split())
    return [np.fromfile(f"cv{i}.raw", np.uint8).reshape(h, w, 3) for i in range(len(paths))], None


def part_canvas():
    # the canvas size over aspect ratios: every size from 1 to 64 against 1 to 64, extremes, photos
    sizes = [(a, b) for a in range(1, 65) for b in range(1, 65)]
    sizes += [(1920, 1080), (1080, 1920), (4000, 3000), (3000, 4000), (1344, 768), (768, 1344), (6000, 1500),
              (1500, 6000), (6001, 1500), (7, 29), (1001, 250), (12345, 6789)]
    with open("sizes.txt", "w") as f:
        for a, b in sizes:
            f.write(f"{a} {b}\n")
    r = run("sizes", "sizes.txt")
    lines = r.stdout.splitlines()
    st.check(r.returncode == 0 and len(lines) == len(sizes), f"sizes: {r.returncode} {r.stderr}")
    for (a, b), line in zip(sizes, lines):
        want = release_canvas_size(a, b)
        got = None if line.startswith("error") else tuple(map(int, line.split()))
        st.check(got == want and (got or "1:4 to 4:1" in line),
                 f"canvas of {a}x{b}: {line!r}, the release's {want}")
    # the canvas of a picture is that of its pixel size
    for a, b in ((1920, 1080), (7, 29), (1001, 250), (3000, 4000)):
        Image.new("L", (a, b), 77).save("sz.png")
        r = run("canvas", "cz", "sz.png")
        want = release_canvas_size(a, b)
        if want is None:
            st.check(r.returncode == 1 and "sz.png" in r.stderr and "1:4 to 4:1" in r.stderr,
                     f"a {a}x{b} first keyframe: {r.returncode} {r.stderr!r}")
        else:
            got = tuple(map(int, r.stdout.split()))[::-1] if r.returncode == 0 else r.stderr
            st.check(got == want, f"canvas of a {a}x{b} picture: {got}, the release's {want}")
    print(f"canvas: {len(sizes)} sizes checked")

    # keyframes on the canvas: odd sizes and aspects, first alone, first + last of another aspect
    cases = [((301, 173), None), ((173, 301), (640, 359)), ((500, 500), (800, 450)), ((999, 333), (200, 800)),
             ((1344, 768), (672, 384)), ((768, 1344), None), ((50, 37), (37, 50)), ((1050, 350), (300, 301))]
    for i, (s0, s1) in enumerate(cases):
        fmt = ["png", "webp", "png", "png", "webp", "png", "png", "webp"][i]
        names = []
        for j, s in enumerate([s0] + ([s1] if s1 else [])):
            im = Image.fromarray(smooth(s[0], s[1], i * 2 + j))
            if j == 1 and i % 2:
                im.putalpha(128)  # RGBA: alpha dropped on both sides
            name = f"k{i}_{j}.{fmt}"
            im.save(name, **({"lossless": True} if fmt == "webp" and i % 3 == 0 else {"quality": 90} if fmt == "webp"
                             else {"compress_level": 1}))
            names.append(name)
        refs, h, w = release_put_on_canvas([Image.open(n) for n in names])
        got, err = canvas(names)
        if not ok(got is not None, f"canvas {names}: {err}"):
            continue
        for j, (g, r) in enumerate(zip(got, refs)):
            r = np.asarray(r)
            same = g.shape == r.shape
            d = np.abs(g.astype(int) - r.astype(int)).max() if same else -1
            st.check(same and d == 0, f"canvas {names} keyframe {j}: shape {g.shape} vs {r.shape}, max diff {d}")
        print(f"canvas: {names} -> {w}x{h} equal to the release's recipe")
    # an explicit canvas (diffusers' height/width): the first stretched onto it, the last cover-cropped
    Image.fromarray(smooth(500, 300, 9)).save("e0.png")
    Image.fromarray(smooth(300, 500, 8)).save("e1.png")
    refs, h, w = release_put_on_canvas([Image.open("e0.png"), Image.open("e1.png")], (320, 640))
    got, err = canvas(["e0.png", "e1.png"], (320, 640))
    st.check(got is not None and all(np.array_equal(g, np.asarray(r)) for g, r in zip(got, refs)),
             f"explicit 640x320 canvas: {err or 'pixels differ'}")
    for size, want in (((640, 0), "both"), ((650, 320), "multiples of 32")):
        r = run("canvas", "--size", size[0], size[1], "cx", "e0.png")
        st.check(r.returncode == 1 and want in r.stderr, f"--size {size}: {r.returncode} {r.stderr!r}")
    # JPEG: our decoded pixels through both recipes (the decoders differ by the IDCT alone)
    Image.fromarray(smooth(613, 411, 4)).save("j0.jpg", quality=90)
    Image.fromarray(smooth(400, 700, 5)).save("j1.jpg", quality=90)
    for n in ("j0", "j1"):
        a, err = decoded(f"{n}.jpg")
        Image.fromarray(a).save(f"{n}_ours.png")
    refs, h, w = release_put_on_canvas([Image.open("j0_ours.png"), Image.open("j1_ours.png")])
    got, err = canvas(["j0.jpg", "j1.jpg"])
    st.check(got is not None and all(np.array_equal(g, np.asarray(r)) for g, r in zip(got, refs)),
             f"JPEG keyframes on the canvas: {err or 'pixels differ'}")
    # ... and against Pillow's own decode, within the decoders' difference
    refs, h, w = release_put_on_canvas([Image.open("j0.jpg"), Image.open("j1.jpg")])
    if got is not None:
        ds = [np.abs(g.astype(int) - np.asarray(r).astype(int)) for g, r in zip(got, refs)]
        mx, mean = max(d.max() for d in ds), max(d.mean() for d in ds)
        st.check(mx <= 5 and mean <= 0.1, f"JPEG keyframes vs Pillow's decode + recipe: up to {mx} levels, mean {mean}")
        print(f"canvas: JPEG keyframes within {mx} levels (mean {mean:.4f}) of Pillow's decode + the release's recipe")


# ---------------------------------------------------------------- bad pictures
def part_bad():
    Image.fromarray(smooth(64, 48)).save("ok.png")
    Image.fromarray(smooth(64, 48)).save("ok.jpg", quality=90)
    Image.fromarray(smooth(64, 48)).save("ok.webp", quality=90)
    png, jpg, webp = (open(f"ok.{e}", "rb").read() for e in ("png", "jpg", "webp"))
    open("empty.png", "wb").close()
    open("text.png", "w").write("hello, I am not a picture\n")
    open("trunc.png", "wb").write(png[: len(png) // 2])
    open("trunc.jpg", "wb").write(jpg[: len(jpg) * 2 // 3])
    open("trunc.webp", "wb").write(webp[: len(webp) // 2])
    corrupt = bytearray(png)
    corrupt[60:80] = b"\x00" * 20  # inside IDAT: the CRC no longer matches
    open("corrupt.png", "wb").write(corrupt)
    Image.fromarray(smooth(149, 95)).save("ok2.jpg", quality=92)
    b = bytearray(open("ok2.jpg", "rb").read())  # damaged entropy-coded data FFmpeg's decoder notices
    sos = b.index(b"\xff\xda")
    b[sos + 300:sos + 340] = b"\x55" * 40
    open("damaged.jpg", "wb").write(b)
    Image.fromarray(smooth(64, 48)).save("pic.gif")
    Image.fromarray(smooth(64, 48)).save("pic.bmp")
    Image.fromarray(smooth(64, 48)).save("pic.tiff")
    frames = [Image.fromarray(smooth(32, 32, s)) for s in range(3)]
    frames[0].save("anim.webp", save_all=True, append_images=frames[1:], duration=100)
    frames[0].save("anim.png", save_all=True, append_images=frames[1:], duration=100)
    # 100 megapixels: a PNG whose IHDR says 10000 x 10000 (rows of zeros compress to little)
    row = b"\0" * (10000 // 8 + 1)
    big = png_bytes(10000, 10000, 1, 0, [row[1:]] * 10000)
    open("big.png", "wb").write(big)
    cases = [
        ("empty.png", "empty file"), ("text.png", "not a picture"), ("trunc.png", "truncated PNG"),
        ("trunc.jpg", "truncated JPEG"), ("trunc.webp", "truncated WebP"), ("corrupt.png", "corrupt PNG"),
        ("damaged.jpg", "corrupt JPEG"),
        ("pic.gif", "a GIF"), ("pic.bmp", "a BMP"), ("pic.tiff", "a TIFF"), ("anim.webp", "animated WebP"),
        ("anim.png", "animated PNG"), ("big.png", "100.0 megapixels, over the limit of 50.0"),
        ("missing.png", "missing.png"), (".", "directory"),
    ]
    for name, want in cases:
        r = run("decode", name, "x.raw")
        st.check(r.returncode == 1 and want in r.stderr and (name in r.stderr or name == "."),
                 f"{name}: exit {r.returncode}, message {r.stderr.strip()!r}, expected one with {want!r}")
        print(f"bad: {name:12s} -> {r.stderr.strip()}")
    # JPEG frame types vdn does not take (Pillow writes none: the frame header is patched)
    sof = jpg.index(b"\xff\xc0")
    for name, patch, want in (("arith.jpg", (sof + 1, 0xC9), "arithmetic-coded JPEG"),
                              ("lossless.jpg", (sof + 1, 0xC3), "lossless JPEG"),
                              ("deep.jpg", (sof + 4, 12), "12-bit JPEG")):
        b = bytearray(jpg)
        b[patch[0]] = patch[1]
        open(name, "wb").write(b)
        r = run("decode", name, "x.raw")
        st.check(r.returncode == 1 and want in r.stderr and name in r.stderr, f"{name}: {r.stderr!r}")
    r = run("decode", "--max-bytes", 1000, "ok.png", "x.raw")
    st.check(r.returncode == 1 and "over the limit of 1000 bytes" in r.stderr, f"--max-bytes 1000: {r.stderr!r}")
    r = run("decode", "--max-bytes", 100000, "/dev/zero", "x.raw")  # no size to stat: read up to the limit
    st.check(r.returncode == 1 and "/dev/zero: over the limit of 100000 bytes" in r.stderr, f"/dev/zero: {r.stderr!r}")
    # the limit is the caller's
    r = run("decode", "--max-pixels", 3000, "ok.png", "x.raw")
    st.check(r.returncode == 1 and "over the limit of 0.0 megapixels" in r.stderr, f"--max-pixels 3000: {r.stderr!r}")
    r = run("decode", "--max-pixels", 3072, "ok.png", "x.raw")
    st.check(r.returncode == 0, f"--max-pixels 3072 (= 64 x 48): {r.stderr!r}")
    # the canvas: a first keyframe outside 1:4 .. 4:1 is refused, a last one of any aspect is cover-cropped
    Image.fromarray(smooth(500, 100)).save("wide.png")
    r = run("canvas", "cv", "wide.png")
    st.check(r.returncode == 1 and "wide.png" in r.stderr and "aspect ratio" in r.stderr, f"wide first: {r.stderr!r}")
    r = run("canvas", "cv", "ok.png", "wide.png")
    st.check(r.returncode == 0, f"wide last keyframe is cover-cropped: {r.stderr!r}")
    # a picture stretched far out of its aspect (explicit canvas) is refused before the work starts
    Image.new("RGB", (1, 1000000), (9, 9, 9)).save("thin.png")
    r = run("canvas", "--size", 1344, 768, "cv", "thin.png")
    st.check(r.returncode == 1 and "thin.png" in r.stderr and "too far from the canvas" in r.stderr,
             f"1x1000000 onto 1344x768: {r.returncode} {r.stderr!r}")
    r = run("canvas", "--size", 4128, 32, "cv", "ok.png")
    st.check(r.returncode == 1 and "at most 4096" in r.stderr, f"--size 4128 32: {r.stderr!r}")
    r = run("canvas", "cv", "ok.png", "trunc.jpg")
    st.check(r.returncode == 1 and "trunc.jpg" in r.stderr, f"bad last keyframe: {r.stderr!r}")


{"resample": part_resample, "decode": part_decode, "canvas": part_canvas, "bad": part_bad}[part]()
if st.failures:
    raise SystemExit(f"image {part}: {len(st.failures)} check(s) failed")
print(f"image {part}: all checks passed")

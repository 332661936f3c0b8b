"""Stand-ins for shared libraries the render system never calls, so the farm's sysroot fits a
device call (ops/device/multi_carry.sh).

    standin_libs.py SYSROOT LIB...      (LIB: a file name under SYSROOT/usr/lib/x86_64-linux-gnu)

Debian's libavcodec and libavformat link some 40 codec libraries with BIND_NOW, so each must be
there with every symbol they import, though `vdn` only encodes H.264 (libx264) and AAC. Each LIB
here is replaced by a small library of the same soname that defines exactly the symbols the
sysroot's other files import from it: functions that return 0 (NULL), data as zero bytes of the
original's size. Not abort(): FFmpeg asks some of them at codec iteration (libaom's
aom_codec_version and aom_codec_get_caps, x265_api_get in their codecs' init_static_data), and 0
reads as "no such version or capability"; nothing else of theirs is called unless a request
names their codecs, which `vdn` never does. Only libraries without symbol versions (the script
refuses one with them). Writes SYSROOT/STANDINS (what was replaced, the symbols, the bytes saved)."""
import os
import subprocess
import sys
import tempfile

LIBDIR = "usr/lib/x86_64-linux-gnu"


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def elf_files(root):
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.islink(p) or not os.path.isfile(p):
                continue
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield p


def defined(lib):
    """name -> (is_function, size) of the dynamic symbols lib defines"""
    out = {}
    for line in run("nm", "-D", "-S", "--defined-only", lib).splitlines():
        parts = line.split()
        if len(parts) == 4:
            _, size, t, name = parts
        elif len(parts) == 3:
            _, t, name = parts
            size = "0"
        else:
            continue
        out[name.split("@")[0]] = (t in "TtWwi", int(size, 16))
    return out


def main():
    root, libs = sys.argv[1], sys.argv[2:]
    imports = {}
    for f in elf_files(root):
        if os.path.basename(f) in libs:
            continue
        for line in run("nm", "-D", "--undefined-only", f).splitlines():
            name = line.split()[-1].split("@")[0]
            imports.setdefault(name, set()).add(os.path.basename(f))
    report = []
    for lib in libs:
        path = os.path.join(root, LIBDIR, lib)
        if "Version definitions" in run("objdump", "-p", path):
            sys.exit("standin_libs.py: %s has symbol versions; not stood in" % lib)
        soname = run("objdump", "-p", path).split("SONAME")[1].split()[0]
        syms = {n: v for n, v in defined(path).items() if n in imports}
        src = ["/* a stand-in of %s (ops/device/standin_libs.py) */" % lib]
        for n, (fn, size) in sorted(syms.items()):
            if fn:
                src.append("long %s(void) { return 0; }" % n)
            else:
                src.append('char %s[%d];' % (n, max(size, 1)))
        with tempfile.TemporaryDirectory() as t:
            c = os.path.join(t, "s.c")
            with open(c, "w") as fh:
                fh.write("\n".join(src) + "\n")
            so = os.path.join(t, "s.so")
            run("gcc", "-shared", "-fPIC", "-O1", "-w", "-fno-builtin", "-o", so,
                "-Wl,-soname," + soname, c)
            before = os.path.getsize(path)
            os.replace(so, path)
        report.append("%s (soname %s): %d bytes -> %d, %d symbols for %s" % (
            lib, soname, before, os.path.getsize(path), len(syms),
            ", ".join(sorted(set().union(*[imports[n] for n in syms])) if syms else "none")))
        print("stand-in: " + report[-1])
    with open(os.path.join(root, "STANDINS"), "w") as fh:
        fh.write("\n".join(report) + "\n")


main()

#!/usr/bin/env python3
"""The house's layering rule, checked over every #include "..." of the tree and every
target_link_libraries between vdn's libraries (docs/engine.md "The house").

Each source file belongs to a room (its folder); a room may include only the rooms listed for it
below (and itself). Files under a room's test/ folder are that room's tests: they may also
include the test helpers and register the backends (kernels/backends.h). The app layer (cli/)
may include everything, and nothing may include it. The libraries' link graph must have no cycle.
Libraries read no environment variable (getenv): options are passed when a thing is opened, and
only the app layer (cli/) and tests read the environment; ENV_ALLOWED lists the exceptions.

    ops/check-layers.py ROOT            exit 0, or 1 listing every violation
    ops/check-layers.py --self-test DIR plants violations in a copy of ROOT's sources under DIR
                                        and checks that each one is caught
"""
import os
import re
import shutil
import sys

# room -> the rooms it may include (besides itself); order = bottom to top
ALLOWED = {
    "engine/core": set(),
    "kernels": {"engine/core"},
    "engine/dit": {"engine/core"},
    "engine/vae": {"engine/core"},
    "engine/text": {"engine/core"},
    "media": {"engine/core"},
    "store": {"engine/core"},
    "proto": {"engine/core"},
    "engine/pipeline": {"engine/dit", "engine/vae", "engine/text", "media", "store", "engine/core"},
    "engine/bench": {"engine/pipeline", "engine/dit", "engine/vae", "engine/text", "media", "store",
                     "engine/core", "kernels"},
    "coordinator": {"proto", "store", "media", "engine/pipeline", "engine/dit", "engine/core"},
    "worker": {"proto", "store", "media", "engine/pipeline", "engine/dit", "engine/vae",
               "engine/text", "engine/core"},
    "eval": {"coordinator", "proto", "store", "media", "engine/pipeline", "engine/dit",
             "engine/vae", "engine/text", "engine/core"},
    "cli": None,  # everything
}
# The environment variables a library still reads, file -> {getenv's argument: why}. Anything
# else a library passes to getenv is a violation: give it an option, read in cli/ (cli/env.h).
ENV_ALLOWED = {
    # test hooks of the worker; the worker is being restructured (renderer processes) and takes
    # them as vdn_worker_opts fields after that
    "worker/gpus.c": {'"VDN_NVIDIA_SMI"': "tests: a stand-in nvidia-smi"},
    "worker/attempt.c": {'"VDN_TEST_NFE_DELAY_MS"': "tests: slow evaluations"},
    "worker/loop.c": {'"VDN_TEST_GPU_FAULT"': "tests: an injected device fault",
                      '"VDN_TEST_DECODE_FAULT"': "tests: an injected decoder fault"},
    # S3's own variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, VDN_S3_ENDPOINT)
    # where vdn_store_opts leaves a field NULL, as every S3 client reads them: stores are opened
    # from URIs by workers, the coordinator and eval, and the cluster file's s3_* reach them
    # through these variables (cli/worker_args.c)
    "store/store_s3.c": {"env1": "S3's variables", "env2": "S3's variables"},
}
# the engine's own tests (engine/test) test the pipeline and everything under it
TEST_ROOMS = {"engine": "engine/pipeline"}
TEST_HELPERS = {"ops/test"}
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
SKIP_DIRS = {".git", "build", "node", "node_modules", "quickstart", "out"}


def room_of(path):
    """(room, is_test) of a repository-relative path, or (None, False) outside every room."""
    parts = path.split("/")
    is_test = "test" in parts
    for n in (2, 1):
        cand = "/".join(parts[:n])
        if cand in ALLOWED:
            return cand, is_test
    if parts[0] in TEST_ROOMS and len(parts) > 1 and parts[1] == "test":
        return "test:" + parts[0], True
    if "/".join(parts[:2]) in TEST_HELPERS:
        return "ops/test", True
    return None, False


def sources(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(("build", "."))]
        for f in files:
            if f.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def resolve(root, src, inc, by_name):
    """The repository path an include names: relative to the including file first (as the
    compiler does), else the header of that name in the including room, else the only one."""
    rel = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if os.path.exists(os.path.join(root, rel)):
        return rel
    cands = by_name.get(os.path.basename(inc), [])
    if len(cands) == 1:
        return cands[0]
    room, _ = room_of(src)
    same = [c for c in cands if room_of(c)[0] == room]
    if len(same) == 1:
        return same[0]
    return None  # a system or generated header (vdn.pb-c.h is proto's, built in place)


def check_includes(root):
    files = sources(root)
    by_name = {}
    for f in files:
        if f.endswith((".h", ".cuh")):
            by_name.setdefault(os.path.basename(f), []).append(f)
    bad = []
    pat = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for f in files:
        room, is_test = room_of(f)
        if room is None:
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for m in pat.finditer(text):
            tgt = resolve(root, f, m.group(1), by_name)
            if tgt is None:
                continue
            troom, _ = room_of(tgt)
            if troom is None or troom == room:
                continue
            if troom == "cli":
                if room != "cli":
                    bad.append(f"{f}: includes {tgt}: nothing includes the app layer (cli/)")
                continue
            if is_test and (troom in TEST_HELPERS or tgt == "kernels/backends.h"):
                continue
            base = room[5:] if room.startswith("test:") else room
            eff = TEST_ROOMS.get(base, base) if room.startswith("test:") else room
            allowed = ALLOWED.get(eff)
            if room.startswith("test:") and troom == eff:
                continue
            if allowed is None or troom in allowed:
                continue
            bad.append(f"{f}: includes {tgt}: {room} may not include {troom} "
                       f"(it may include: {', '.join(sorted(allowed)) or 'nothing'})")
    return bad


def code_only(text):
    """C text without comments and string literals' insides (a getenv named in a comment or a
    message is no call); the quotes stay, so getenv("NAME") keeps its argument."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q:
                j += 2 if text[j] == "\\" else 1
            lit = text[i:j + 1]
            out.append(lit if re.fullmatch(r'"[A-Z0-9_]+"', lit) else q + q)
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def check_environment(root):
    """getenv in the libraries, outside ENV_ALLOWED."""
    bad = []
    pat = re.compile(r"\b(?:secure_)?getenv\s*\(\s*([^)]*?)\s*\)")
    for f in sources(root):
        room, is_test = room_of(f)
        if room is None or room == "cli" or is_test:
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            code = code_only(fh.read())
        for m in pat.finditer(code):
            if m.group(1) in ENV_ALLOWED.get(f, {}):
                continue
            bad.append(f"{f}: getenv({m.group(1)}): a library reads no environment; pass it as "
                       f"an option when the thing is opened, read in cli/ (cli/env.h)")
    return bad


def check_link_cycles(root):
    """Cycles among the vdn_* libraries of every CMakeLists.txt / *.cmake."""
    edges = {}
    libs = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(("build", "."))]
        for f in files:
            if f != "CMakeLists.txt" and not f.endswith(".cmake"):
                continue
            text = open(os.path.join(d, f), encoding="utf-8").read()
            text = re.sub(r"#[^\n]*", "", text)
            for m in re.finditer(r"add_library\(\s*(vdn_\w+)", text):
                libs.add(m.group(1))
            for m in re.finditer(r"target_link_libraries\(\s*(vdn_\w+)([^)]*)\)", text):
                deps = re.findall(r"\bvdn_\w+", m.group(2))
                edges.setdefault(m.group(1), set()).update(deps)
    bad = []
    state = {}

    def visit(n, stack):
        state[n] = 1
        for m in sorted(edges.get(n, ())):
            if m not in libs:
                continue
            if state.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                bad.append("CMake link cycle: " + " -> ".join(cyc))
            elif m not in state:
                visit(m, stack + [m])
        state[n] = 2

    for n in sorted(libs):
        if n not in state:
            visit(n, [n])
    return bad


def run(root):
    return check_includes(root) + check_environment(root) + check_link_cycles(root)


def hidden_or_built(rel):
    """A folder of the walk the checks leave out: build trees, ops/node, and hidden folders
    (.git, and ignored copies such as .devcarry/old, an older tree carried to the GPU machine)."""
    return rel != "." and (rel.startswith(("build", "ops/node")) or
                           any(p.startswith(".") for p in rel.split(os.sep)))


def self_test(root, work):
    """Copy the sources and CMake files, plant one violation at a time, expect it caught."""
    shutil.rmtree(work, ignore_errors=True)
    for f in sources(root) + [os.path.relpath(os.path.join(d, x), root)
                              for d, ds, fs in os.walk(root) for x in fs
                              if (x == "CMakeLists.txt" or x.endswith(".cmake"))
                              and not hidden_or_built(os.path.relpath(d, root))]:
        dst = os.path.join(work, f)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(root, f), dst)
    base = run(work)
    if base:
        print("self-test: the copy already fails:\n  " + "\n  ".join(base))
        return 1
    plants = [
        ("engine/core/op.c", '#include "commands.h"\n', "app layer"),
        ("engine/dit/dit.c", '#include "engine.h"\n', "engine/dit may not include engine/pipeline"),
        ("engine/core/vdn_util.c", '#include "op_cuda.h"\n', "engine/core may not include kernels"),
        ("engine/vae/video_vae.c", '#include "mp4.h"\n', "engine/vae may not include media"),
        ("store/store.c", '#include "query.h"\n', "store may not include coordinator"),
        ("engine/core/vdn_util.c", 'static const char *e_(void) { return getenv("VDN_X"); }\n',
         'getenv("VDN_X")'),
        ("worker/loop.c", 'static const char *e_(void) { return getenv("VDN_Y"); }\n',
         'getenv("VDN_Y")'),
    ]
    fails = 0
    for path, line, expect in plants:
        p = os.path.join(work, path)
        orig = open(p).read()
        open(p, "w").write(line + orig)
        found = [b for b in run(work) if b.startswith(path) and expect in b]
        print(f"self-test: {path} + {line.strip()}: {'caught' if found else 'MISSED'}")
        fails += not found
        open(p, "w").write(orig)
    cm = os.path.join(work, "engine/core/CMakeLists.txt")
    orig = open(cm).read()
    open(cm, "w").write(orig + "\ntarget_link_libraries(vdn_core PUBLIC vdn_engine)\n")
    found = [b for b in run(work) if "CMake link cycle" in b]
    print(f"self-test: vdn_core -> vdn_engine: {'caught' if found else 'MISSED'}")
    fails += not found
    shutil.rmtree(work, ignore_errors=True)
    return 1 if fails else 0


def main(argv):
    here = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    if len(argv) == 2 and argv[0] == "--self-test":
        return self_test(here, argv[1])
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    bad = run(argv[0])
    for b in bad:
        print(b)
    print(f"check-layers: {len(bad)} violation(s)" if bad else
          "check-layers: every include and link looks down")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

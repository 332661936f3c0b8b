"""Writes suite.jsonl, the h3-103 evaluation suite: 103 prompts of our own writing in MiniMax-H3's
prompt structure (integrated_multimodal_description with timed [Shot N] sections, then
overall_soundscape and non_diegetic_music; dialogue in <d>[English] ...</d> tags, speakers tagged
(S1), (S2)), over people, animals, landscapes, action, animation styles, products, dialogue and
multi-shot stories. Three prompts in five are text-to-video (t2va); the other two alternate over
the keyframe modes i2va, l2va and fl2va, written as one uninterrupted take whose pictures align
with the clip's first (0.00 s) and last (14.30 s) frames, and name their pictures
keyframes/ID_first.png / keyframes/ID_last.png: `vdn eval suite keyframes` supplies them (from a
folder, or from an earlier sweep's frames). Every line renders from its text: no prompt caches.
usage: python3 make_suite.py [OUT.jsonl]"""
import json, os, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import prompts_a, prompts_b  # noqa: E402

FRAMES, HEIGHT, WIDTH, LAST = 345, 768, 1344, 14.30  # 14.375 s at 24 fps; the last frame's mark
KEYFRAME_MODES = ["i2va", "l2va", "fl2va"]


def sentence(s):
    return s if s.endswith((".", "</d>", "!", "?")) else s + "."


def stamp(t):
    return "00:%06.3f" % t


def t2va_text(p):
    b = p["beats"]
    shots = [f"[Shot 1] {p['style']}, {sentence(b[0])}"]
    for k in range(1, len(b)):
        shots.append(f"[Shot {k + 1}] At {stamp(k * LAST / len(b))}, the camera cuts to {sentence(b[k])}")
    return shots


def keyframe_text(p, mode):
    b = p["beats"]
    marks = {"i2va": ["Picture 1 (from Shot 1) aligns with the 0.00-second mark"],
             "l2va": [f"Picture 1 (from Shot 1) aligns with the {LAST:.2f}-second mark"],
             "fl2va": ["Picture 1 (from Shot 1) aligns with the 0.00-second mark",
                       f"Picture 2 (from Shot 1) aligns with the {LAST:.2f}-second mark"]}[mode]
    head = ("How the reference pictures align with the target video — " +
            "; ".join(m + " of the target video" for m in marks) + ".")
    take = [f"[Shot 1] {p['style']}, one uninterrupted {LAST:.1f}-second take with no cuts. "
            f"It opens on {sentence(b[0])}"]
    for k in range(1, len(b)):
        take.append(f"At {stamp(k * LAST / len(b))} within this same uninterrupted shot, the camera "
                    f"moves to {sentence(b[k])}")
    return head, [" ".join(take)]


def prompt_text(p, mode):
    head, shots = (None, t2va_text(p)) if mode == "t2va" else keyframe_text(p, mode)
    parts = ([head] if head else []) + ["**integrated_multimodal_description:**", *shots,
                                        "**overall_soundscape:**", p["sound"],
                                        "**non_diegetic_music:**", p["music"]]
    return "\n\n".join(parts)


def main():
    prompts = prompts_a.P + prompts_b.P
    assert len(prompts) == 103, len(prompts)
    lines, kf = [], 0
    for i, p in enumerate(prompts):
        if i % 5 in (1, 3):  # two in five: the keyframe modes in turn
            mode = KEYFRAME_MODES[kf % 3]
            kf += 1
        else:
            mode = "t2va"
        pid = "p%03d" % (i + 1)
        it = {"id": pid, "mode": mode, "prompt": prompt_text(p, mode)}
        if mode in ("i2va", "fl2va"):
            it["first_frame"] = f"keyframes/{pid}_first.png"
        if mode in ("l2va", "fl2va"):
            it["last_frame"] = f"keyframes/{pid}_last.png"
        it.update(seed=1000 + i, frames=FRAMES, height=HEIGHT, width=WIDTH)
        lines.append(json.dumps(it, ensure_ascii=False))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "suite.jsonl")
    with open(out, "w", encoding="utf-8") as f:
        f.write("# h3-103: written by make_suite.py (categories: " +
                ", ".join(sorted({p["cat"] for p in prompts})) + ")\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

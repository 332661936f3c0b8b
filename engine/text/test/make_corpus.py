#!/usr/bin/env python3
"""Writes corpus.jsonl: the tokenizer test corpus, one JSON string per line, deterministic (a
fixed seed; rerunning gives the same bytes). Every category the Qwen2 pre-tokenizer and byte-level
BPE treat specially is covered: whitespace runs, newlines, numbers, contractions, punctuation,
CJK, emoji, combining marks (NFC), added and special token text, long words, and random mixes.

    python3 engine/text/test/make_corpus.py engine/text/test/corpus.jsonl
"""
import json
import random
import sys

R = random.Random(20261124)

WORDS = ("a the of and to in is video camera slowly pans across city at night rain reflects "
         "neon lights on wet street woman walks her dog while children play football park "
         "sunset golden hour close-up shot wide angle drone flying over mountains ocean waves "
         "crash rocks cinematic lighting 4K HDR dramatic music soft ambient sound").split()
SPACES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\n ", "\u00a0", "\u3000",
          "\u2003", "\u2009", "\u202f", "\u205f", "\u1680", "\u0085", "\u2028", "\u2029", "\x0b",
          "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\u180e", "\u200b", "\ufeff", "\t\t", " \t "]
PUNCT = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["...", "--", "—", "–", "“", "”", "‘", "’",
                                                   "«", "»", "。", "，", "、", "！", "？", "：",
                                                   "（", "）", "【", "】", "…", "·", "•", "¿", "¡"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M",
                "'LL", "'D", "’s", "'x", "'", "''", "'ſ", "'K"]
NUMBERS = ["0", "7", "42", "123", "2026", "3.14159", "1,000,000", "-5", "+12", "1e10", "0x1F",
           "١٢٣", "۴۵", "１２３", "²", "³", "½", "¾", "Ⅻ", "ⅷ", "①", "〇", "百", "٣.١٤", "१२३",
           "๑๒", "𝟙𝟚", "1st", "2nd", "24fps", "768x1344", "12:30", "99%", "$5.99", "€10"]
CJK = ["一只猫在屋顶上奔跑", "夕阳下的海边", "镜头缓慢推进", "東京の夜景", "ひらがなカタカナ",
       "한국어 문장입니다", "漢字とかな混じり文", "中文，标点。", "𠀀𠀁𪚥", "ｈａｌｆ－ｗｉｄｔｈ",
       "ﾊﾝｶｸｶﾀｶﾅ", "長い長い物語が始まる", "你好世界", "雨の中を歩く"]
EMOJI = ["😀", "🎬", "🌧️", "👩‍👩‍👧‍👦", "👍🏽", "🇯🇵", "🇺🇸", "❤️", "✨", "🔥🔥🔥", "🏳️‍🌈", "1️⃣",
         "🧑🏿‍🚀", "☕", "⌚", "🫠", "🪐", "©", "®", "™", "↔️", "🐈‍⬛"]
COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0301", "n\u0303", "A\u030a", "\u1100\u1161\u11a8",
             "\u1112\u1161\u11ab", "z\u0335\u0336\u0337", "e\u0301\u0301\u0301", "\u0915\u094d\u0937",
             "ق\u064e\u0644\u064e\u0645", "ש\u05c1\u05b8", "ế", "Việt Nam", "ﬁ", "Å", "Å", "Ω",
             "\u0041\u030a", "\u212b", "\u2126", "c\u0327", "i\u0307", "\u0345", "\u0301",
             "\u00e9\u0301", "க\u0bcd", "ไทย", "ก\u0e49\u0e33"]
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|box_start|>",
         "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
         "</tool_call>", "<think>", "</think>", "<|fim_prefix|>", "<|file_sep|>", "<|quad_end|>",
         "<|im_sta", "<|im_start", "im_start|>", "<|", "|>", "< think>", "<THINK>", "<<|im_end|>|>",
         "<|im_start|><|im_start|>", "<tool_response>", "</tool_response>", "<|repo_name|>"]
BLOCKS = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x530, 0x58f),
          (0x590, 0x5ff), (0x600, 0x6ff), (0x900, 0x97f), (0xe00, 0xe5b), (0x1e00, 0x1eff),
          (0x2000, 0x206f), (0x2190, 0x22ff), (0x2500, 0x257f), (0x3040, 0x30ff), (0x4e00, 0x9fa5),
          (0xac00, 0xd7a3), (0xff00, 0xffef), (0x1f300, 0x1f64f), (0x1d400, 0x1d6a5),
          (0x20000, 0x2a6d6), (0x300, 0x36f)]


def pick(xs):
    return xs[R.randrange(len(xs))]


def sentence(n):
    out = []
    for i in range(n):
        w = pick(WORDS)
        if R.random() < 0.15:
            w = w.capitalize()
        if R.random() < 0.05:
            w = w.upper()
        out.append(w)
        if R.random() < 0.12:
            out.append(pick([",", ".", "!", "?", ";", ":"]))
    return " ".join(out)


def random_char():
    lo, hi = pick(BLOCKS)
    return chr(R.randint(lo, hi))


def gen_whitespace():
    parts = []
    for _ in range(R.randint(1, 8)):
        parts.append(pick(SPACES) * R.randint(1, 4) if R.random() < 0.6 else pick(WORDS))
    return "".join(parts)


def gen_numbers():
    return "".join(pick(NUMBERS) + (pick(SPACES) if R.random() < 0.5 else "") +
                   (pick(WORDS) if R.random() < 0.3 else "") for _ in range(R.randint(1, 6)))


def gen_contractions():
    out = []
    for _ in range(R.randint(1, 6)):
        w = pick(["I", "you", "we", "they", "it", "she", "don", "can", "WON", "Ol", "rock", "n"])
        out.append(w + pick(CONTRACTIONS) + pick(["", " ", "  ", "\n", "s", "x"]))
    return " ".join(out)


def gen_punct():
    return "".join(pick(PUNCT) * R.randint(1, 3) + (pick(WORDS) if R.random() < 0.4 else "") +
                   (pick(SPACES) if R.random() < 0.3 else "") for _ in range(R.randint(1, 10)))


def gen_cjk():
    return "".join(pick(CJK) + (pick(PUNCT + SPACES) if R.random() < 0.5 else "") +
                   (pick(WORDS) if R.random() < 0.3 else "") for _ in range(R.randint(1, 4)))


def gen_emoji():
    return "".join(pick(EMOJI) * R.randint(1, 2) + (pick(SPACES) if R.random() < 0.4 else "") +
                   (pick(WORDS) if R.random() < 0.4 else "") for _ in range(R.randint(1, 6)))


def gen_combining():
    return "".join(pick(COMBINING) + (pick(WORDS) if R.random() < 0.3 else "") +
                   (pick(SPACES) if R.random() < 0.3 else "") for _ in range(R.randint(1, 6)))


def gen_added():
    parts = []
    for _ in range(R.randint(1, 6)):
        parts.append(pick(ADDED))
        if R.random() < 0.6:
            parts.append(pick([sentence(R.randint(1, 5)), "\n", " ", "user\n", "\u0301", "é"]))
    return "".join(parts)


def gen_long():
    kind = R.randrange(7)
    n = R.choice([50, 100, 300, 1000, 3000])
    if kind == 0:
        return "".join(R.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
    if kind == 1:
        return pick(["a", "ab", "the", "xyz", "é", "中", "😀", "!"]) * (n // 2)
    if kind == 2:
        return "".join(R.choice("0123456789") for _ in range(n))
    if kind == 3:
        return " " * n + pick(WORDS)
    if kind == 4:
        return "https://example.com/" + "/".join(pick(WORDS) for _ in range(n // 20)) + "?q=1&x=%20"
    if kind == 5:
        return "".join(R.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                       for _ in range(n)) + "=="
    return "Supercalifragilisticexpialidocious" * (n // 30) + "pneumonoultramicroscopic"


def gen_prompt():
    return sentence(R.randint(5, 80)) + pick(["", ".", "\n", " ", "\n\n"])


def gen_random_mix():
    pool = [random_char, lambda: pick(SPACES), lambda: pick(PUNCT), lambda: pick(WORDS),
            lambda: pick(NUMBERS), lambda: pick(EMOJI), lambda: pick(COMBINING), lambda: pick(ADDED)]
    return "".join(pick(pool)() for _ in range(R.randint(1, 40)))


def gen_random_chars():
    return "".join(random_char() for _ in range(R.randint(1, 30)))


def fixed():
    """Hand-picked edge cases, then every single character of the ASCII and Latin-1 ranges
    (except NUL, which a JSON prompt line may not carry)."""
    out = ["", " ", "  ", "\n", "\r\n", "\t", "a", "A", "Hello world", "Hello  world", "hello\n\nworld",
           " leading", "trailing ", "  both  ", "x\r\n\r\ny", "don't", "DON'T", "it's", "I'm",
           "we'll", "they've", "you're", "he'd", "'s", "'", "''", "a''b", "3.14", "1234567890",
           "12345678901234567890", "a1b2c3", "____", "----", "....", "!!!", "?!", "e\u0301",
           "\u212b", "ﬁne", "<|im_start|>", "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>",
           "<think>\n\n</think>\n\n", "\u00a0\u00a0x", "x\u00a0", "\u3000中文", "a\u180eb",
           "a\u200bb", "\u0085", "a\u2028b", "🎬 action!", "😀😀😀", "👩‍👩‍👧‍👦", "\t\tindented\n",
           "    code();\n", "def f(x):\n    return x\n", "<|vision_start|><|image_pad|><|vision_end|>"]
    out += [chr(c) for c in range(1, 0x250)]
    out += [" " + chr(c) for c in range(1, 0x100)]
    out += [chr(c) + chr(c) for c in range(0x20, 0x7f)]
    return out


def main():
    gens = [gen_whitespace, gen_numbers, gen_contractions, gen_punct, gen_cjk, gen_emoji,
            gen_combining, gen_added, gen_long, gen_prompt, gen_random_mix, gen_random_chars]
    strings = fixed()
    while len(strings) < 12000:
        s = pick(gens)()
        if "\x00" not in s and not any(0xD800 <= ord(c) <= 0xDFFF for c in s):
            strings.append(s)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s, ensure_ascii=True) + "\n")


if __name__ == "__main__":
    main()

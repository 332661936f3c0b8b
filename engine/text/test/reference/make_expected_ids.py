#!/usr/bin/env python3
"""Expected token ids from the public `tokenizers` library (run on the GPU machine, where it is
installed): one JSON array per line of CORPUS, encoded with add_special_tokens=False as
MiniMax-H3 tokenizes prompts.

    python3 make_expected_ids.py TOKENIZER_JSON CORPUS OUT
"""
import json
import sys

import tokenizers

tok = tokenizers.Tokenizer.from_file(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    strings = [json.loads(line) for line in f]
encs = tok.encode_batch(strings, add_special_tokens=False)
with open(sys.argv[3], "w") as f:
    for e in encs:
        f.write(json.dumps(e.ids, separators=(",", ":")) + "\n")
print(f"tokenizers {tokenizers.__version__}: {len(strings)} strings, "
      f"{sum(len(e.ids) for e in encs)} ids")

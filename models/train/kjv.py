"""King James Version text (public domain) from the Debian package bible-kjv-text.

The package ships the text compressed in its own format (/usr/lib/bible.data); the `bible`
program from the package bible-kjv decompresses it. `bible -f` prints one verse per line,
prefixed by its reference ("Ge1:1 In the beginning ...").

Text layout used for training: verses of a chapter joined by newlines, chapters separated by a
blank line. Chapters i (counted from 0) with i % HELDOUT_EVERY == HELDOUT_OFFSET are held out
for evaluation (30 of 1189 chapters, spread over the whole book).
"""

import json
import os
import re
import shutil
import subprocess

HELDOUT_EVERY = 40
HELDOUT_OFFSET = 20
_REF = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def chapters():
    """Returns the list of (reference "Book chapter", text) in canonical order."""
    if shutil.which("bible") is None:
        raise FileNotFoundError("the `bible` program is missing: apt-get install bible-kjv")
    out = subprocess.run(["bible", "-f", "gen1:1-rev22:21"], check=True, capture_output=True,
                         stdin=subprocess.DEVNULL).stdout.decode("ascii")
    result, key, verses = [], None, []
    for line in out.splitlines():
        m = _REF.match(line)
        if m is None:
            raise ValueError(f"unexpected line from bible: {line[:60]!r}")
        k = f"{m.group(1)} {m.group(2)}"
        if k != key:
            if verses:
                result.append((key, "\n".join(verses)))
            key, verses = k, []
        verses.append(m.group(4).strip())
    result.append((key, "\n".join(verses)))
    if len(result) != 1189:
        raise ValueError(f"expected 1189 chapters of the KJV, got {len(result)}")
    return result


def split_text():
    """Returns (train_text, heldout_text). With KJV_SPLIT=FILE.json in the environment, reads
    them from that file ({"train": ..., "heldout": ...}), for machines without `bible`."""
    if os.environ.get("KJV_SPLIT"):
        with open(os.environ["KJV_SPLIT"]) as f:
            cached = json.load(f)
        return cached["train"], cached["heldout"]
    train, held = [], []
    for i, (_, text) in enumerate(chapters()):
        (held if i % HELDOUT_EVERY == HELDOUT_OFFSET else train).append(text)
    return "\n\n".join(train), "\n\n".join(held)

#!/usr/bin/python3
"""SentencePiece reference for test_tokenizer_sentencepiece.cpp (Debian's python3-sentencepiece).

  sentencepiece_ref.py train DIR                       trains DIR/bpe.model and DIR/unigram.model
  sentencepiece_ref.py encode MODEL IN_JSON OUT_JSON   writes the ids of each input string
"""
import json
import random
import sys

import sentencepiece as spm

WORDS = ("the of and to in is was he for it with as his on be at by had are but from or have an "
         "they which one you were all we her she there would their will when who him been has more "
         "if no out so said what up its about than into them can only other time new some could "
         "these two may first then do any like my now over such our man me even most made after "
         "also did many before must through back years where much your way well down should "
         "because each just those people how too little state good very make world still own see "
         "café naïve über straße 東京 日本 привет мир 123 2024 3.14").split()


def train(d):
    rng = random.Random(4)
    lines = []
    for _ in range(3000):
        n = rng.randint(3, 14)
        line = " ".join(rng.choice(WORDS) for _ in range(n))
        lines.append(line[0].upper() + line[1:] + rng.choice([".", "!", "?", ",", ""]))
    with open(f"{d}/corpus.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    for kind in ["bpe", "unigram"]:
        spm.SentencePieceTrainer.train(
            input=f"{d}/corpus.txt", model_prefix=f"{d}/{kind}",
            vocab_size=500 if kind == "bpe" else 250, hard_vocab_limit=False, model_type=kind,
            character_coverage=1.0, byte_fallback=(kind == "bpe"), minloglevel=2)


def encode(model, inp, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    with open(inp, encoding="utf-8") as f:
        texts = json.load(f)
    with open(out, "w", encoding="utf-8") as f:
        json.dump([sp.encode(t) for t in texts], f)


if __name__ == "__main__":
    if sys.argv[1] == "train":
        train(sys.argv[2])
    else:
        encode(*sys.argv[2:5])

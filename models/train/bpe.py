"""Byte-level BPE in the style of GPT-2: training, encoding, decoding, and saving in the file
formats of Hugging Face (vocab.json + merges.txt for GPT2Tokenizer, tokenizer.json for the
`tokenizers` library).

Byte level: every byte of the UTF-8 text is first mapped to a printable unicode character
(GPT-2's bytes_to_unicode table), so the 256 base tokens cover any input and no <unk> exists.

Pre-tokenisation: GPT-2 splits text with
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+
Python's `re` has no \\p{..} classes, so PRETOKENIZE approximates them:
    \\p{L} -> [^\\W\\d_]   (word characters minus decimal digits and '_')
    \\p{N} -> \\d          (decimal digits, Unicode category Nd)
    [^\\s\\p{L}\\p{N}] -> (?:[^\\s\\w]|_)
These agree exactly on ASCII text (the whole training corpus) and on most other text; they differ
on letter-like numbers such as '²' or 'Ⅻ' (\\w but not \\d in `re`: grouped with letters here,
with numbers in GPT-2) and on a few letters `re` does not count as \\w. The saved tokenizer.json
declares the real GPT-2 regex (ByteLevel with use_regex), which is what other readers apply.

Merges are learned greedily: repeatedly the most frequent adjacent symbol pair over the corpus's
pre-tokens (ties broken by the smaller pair) becomes a new symbol, until the vocabulary is full.
"""

import heapq
import json
import os
import re
from collections import Counter, defaultdict

PRETOKENIZE = re.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")
GPT2_REGEX = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
ENDOFTEXT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table. Printable Latin-1 bytes map to
    themselves; the other 68 bytes map to U+0100 onwards, in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
                 list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in printable:
        table[b] = chr(b)
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    # Order of the base vocabulary: printable bytes first, then the others (as GPT-2).
    return {b: table[b] for b in printable + [b for b in range(256) if b not in printable]}


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


def pretokenize(text):
    """Splits text into pre-tokens, each mapped to its byte-level unicode string."""
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))
            for piece in PRETOKENIZE.findall(text)]


def train(texts, vocab_size, special_tokens=(ENDOFTEXT,), verbose=False):
    """Learns merges on an iterable of texts. Returns (vocab: token -> id, merges: [(a, b)]).
    Ids: 256 byte tokens, then merged tokens in merge order, then the special tokens."""
    word_counts = Counter()
    for text in texts:
        word_counts.update(pretokenize(text))
    vocab = {c: i for i, c in enumerate(BYTE_TO_CHAR.values())}
    target = vocab_size - len(special_tokens)
    words = [list(w) for w in word_counts]
    counts = list(word_counts.values())
    pair_counts = defaultdict(int)
    where = defaultdict(set)  # pair -> indices of words that contain it
    for i, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_counts[pair] += counts[i]
            where[pair].add(i)
    heap = [(-c, p) for p, c in pair_counts.items()]
    heapq.heapify(heap)
    merges = []
    while len(vocab) < target and heap:
        neg, pair = heapq.heappop(heap)
        if pair_counts.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale heap entry
        a, b = pair
        new = a + b
        merges.append(pair)
        if new not in vocab:
            vocab[new] = len(vocab)
        touched = set()
        for i in list(where[pair]):
            w = words[i]
            for p in zip(w, w[1:]):
                pair_counts[p] -= counts[i]
                where[p].discard(i)
                touched.add(p)
            merged, j = [], 0
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    merged.append(new)
                    j += 2
                else:
                    merged.append(w[j])
                    j += 1
            words[i] = merged
            for p in zip(merged, merged[1:]):
                pair_counts[p] += counts[i]
                where[p].add(i)
                touched.add(p)
        for p in touched:
            if pair_counts[p] > 0:
                heapq.heappush(heap, (-pair_counts[p], p))
            else:
                pair_counts.pop(p, None)
                where.pop(p, None)
        if verbose and len(merges) % 500 == 0:
            print(f"bpe: {len(merges)} merges, last {new!r} x{-neg}", flush=True)
    for s in special_tokens:
        vocab[s] = len(vocab)
    return vocab, merges


class Tokenizer:
    def __init__(self, vocab, merges, special_tokens=(ENDOFTEXT,)):
        self.vocab = dict(vocab)
        self.inverse = {i: t for t, i in self.vocab.items()}
        self.merges = [tuple(m) for m in merges]
        self.ranks = {m: r for r, m in enumerate(self.merges)}
        self.special = list(special_tokens)
        self._special_split = re.compile("(" + "|".join(re.escape(s) for s in self.special) + ")")
        self._cache = {}

    def _bpe(self, word):
        if word in self._cache:
            return self._cache[word]
        symbols = list(word)
        while len(symbols) > 1:
            ranked = [(self.ranks.get(p, 1 << 30), k) for k, p in
                      enumerate(zip(symbols, symbols[1:]))]
            best, _ = min(ranked)
            if best == 1 << 30:
                break
            a, b = self.merges[best]
            out, j = [], 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == a and symbols[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(symbols[j])
                    j += 1
            symbols = out
        ids = [self.vocab[s] for s in symbols]
        self._cache[word] = ids
        return ids

    def encode(self, text):
        """Text -> token ids. Special-token strings in the text become their ids."""
        ids = []
        for part in self._special_split.split(text) if self.special else [text]:
            if part in self.special:
                ids.append(self.vocab[part])
            elif part:
                for word in pretokenize(part):
                    ids.extend(self._bpe(word))
        return ids

    def decode(self, ids):
        out, buf = [], bytearray()
        for i in ids:
            tok = self.inverse[int(i)]
            if tok in self.special:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                out.append(tok)
            else:
                buf.extend(CHAR_TO_BYTE[c] for c in tok)
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    # ---- Hugging Face files ----

    def save(self, folder, model_max_length):
        os.makedirs(folder, exist_ok=True)
        ordered = dict(sorted(self.vocab.items(), key=lambda kv: kv[1]))
        with open(os.path.join(folder, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(ordered, f, ensure_ascii=False)
        with open(os.path.join(folder, "merges.txt"), "w", encoding="utf-8") as f:
            f.write("#version: 0.2\n")
            f.writelines(f"{a} {b}\n" for a, b in self.merges)
        byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        tokenizer_json = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": self.vocab[s], "content": s, "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": True, "special": True} for s in self.special],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", **byte_level},
            "post_processor": {"type": "ByteLevel", **byte_level},
            "decoder": {"type": "ByteLevel", **byte_level},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": "", "end_of_word_suffix": "",
                      "fuse_unk": False, "byte_fallback": False, "vocab": ordered,
                      "merges": [f"{a} {b}" for a, b in self.merges]},
        }
        with open(os.path.join(folder, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tokenizer_json, f, ensure_ascii=False, indent=2)
            f.write("\n")
        eot = self.special[0]
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"tokenizer_class": "GPT2Tokenizer", "model_max_length": model_max_length,
                       "bos_token": eot, "eos_token": eot, "unk_token": eot,
                       "add_prefix_space": False, "add_bos_token": False}, f, indent=2)
            f.write("\n")
        with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
            json.dump({"bos_token": eot, "eos_token": eot, "unk_token": eot}, f, indent=2)
            f.write("\n")

    @classmethod
    def load(cls, folder):
        with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
            vocab = json.load(f)
        with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        merges = [tuple(line.split(" ")) for line in lines[1:] if line]
        special = [t for t in vocab if t.startswith("<|") and t.endswith("|>")]
        return cls(vocab, merges, special)

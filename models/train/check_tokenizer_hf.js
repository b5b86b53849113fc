// Checks a tokenizer.json written by bpe.py against Hugging Face's `tokenizers` library (npm):
// the ids of several sample texts must equal those of bpe.py, and decoding must round-trip.
//   (cd /tmp && npm install tokenizers@0.23.2)
//   NODE_PATH=/tmp/node_modules node models/train/check_tokenizer_hf.js assets/models/default-text
'use strict';
const { execFileSync } = require('child_process');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const dir = process.argv[2];
if (!dir) throw new Error('usage: check_tokenizer_hf.js <checkpoint folder>');
const helper = `
import json, sys
sys.path.insert(0, ${JSON.stringify(__dirname)})
import bpe, kjv
tok = bpe.Tokenizer.load(${JSON.stringify(dir)})
_, held = kjv.split_text()
samples = [held[:4000], "Hello <|endoftext|> world 123 caf\\u00e9 \\u00b2  x\\n\\n  y",
           "I'll don't you're HE'S  tabs\\there", "na\\u00efve \\u6771\\u4eac \\U0001F600 a__b",
           "   leading and trailing spaces   ", "\\n\\n\\n"]
print(json.dumps([{"text": s, "ids": tok.encode(s)} for s in samples]))
`;
const expected = JSON.parse(execFileSync('/usr/bin/python3', ['-c', helper]).toString());
const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
(async () => {
  let failures = 0;
  for (const { text, ids } of expected) {
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const got = Array.from(enc.getIds());
    const back = await tok.decode(got, false);
    const same = got.length === ids.length && got.every((v, i) => v === ids[i]);
    if (!same || back !== text) {
      failures++;
      console.log('MISMATCH', JSON.stringify(text.slice(0, 40)), got.slice(0, 20), ids.slice(0, 20));
    }
  }
  console.log(`${expected.length - failures}/${expected.length} samples identical`);
  process.exit(failures ? 1 : 0);
})();

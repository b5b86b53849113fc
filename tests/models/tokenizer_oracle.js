// Reference token ids from independent JavaScript implementations, for the tokenizer tests.
// Usage: node tokenizer_oracle.js KIND DATA_DIR INPUT_JSON OUTPUT_JSON
//   KIND gpt2:   gpt-3-encoder's own encoder (DATA_DIR/gpt2/Encoder.js)
//   KIND llama3: @lenml/tokenizers (transformers.js) on DATA_DIR/llama3/models/tokenizer.json
// INPUT_JSON is a list of strings; OUTPUT_JSON receives a list of id lists.
const fs = require('fs');
const path = require('path');
const [kind, dataDir, input, output] = process.argv.slice(2);
const texts = JSON.parse(fs.readFileSync(input, 'utf8'));
let encode;
if (kind === 'gpt2') {
  encode = require(path.resolve(dataDir, 'gpt2', 'Encoder.js')).encode;
} else if (kind === 'llama3') {
  const { TokenizerLoader } = require(path.resolve(dataDir, 'lenml', 'dist', 'main.js'));
  const dir = path.resolve(dataDir, 'llama3', 'models');
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
  });
  encode = (t) => tok.encode(t, { add_special_tokens: false });
} else {
  throw new Error('unknown kind ' + kind);
}
fs.writeFileSync(output, JSON.stringify(texts.map((t) => Array.from(encode(t)))));

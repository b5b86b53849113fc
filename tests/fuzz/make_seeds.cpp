// Writes the generated part of the fuzz seed corpora (make_corpus.sh copies the rest from the
// source tree): small valid files of every kind each loader reads, made with the project's own
// writers, plus a few that each loader must refuse. Usage: fuzz_make_seeds OUT_DIR
// (writes OUT_DIR/<target>/<seed>).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/core/session/session.h"
#include "compute/registry.h"
#include "compute/spec.h"
#include "models/formats/npy.h"
#include "models/formats/safetensors_writer.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBIW_WINDOWS_UTF8
#include <stb_image_write.h>

using namespace attn;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path out_dir;

void put(const std::string& target, const std::string& name, std::string_view bytes) {
  fs::create_directories(out_dir / target);
  std::ofstream out(out_dir / target / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}
void put(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  put(target, name, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<uint8_t> pattern_bytes(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = uint8_t(i * 29 + 3);
  return b;
}

models::NpyArray array_of(models::DType dtype, std::vector<int64_t> shape) {
  models::NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data = pattern_bytes(a.numel() * dtype_size(dtype));
  if (dtype == models::DType::Bool)
    for (auto& b : a.data) b &= 1;
  return a;
}

void npy_seeds() {
  const std::pair<models::DType, const char*> dtypes[] = {
      {models::DType::F32, "f4"}, {models::DType::F16, "f2"}, {models::DType::F64, "f8"},
      {models::DType::I32, "i4"}, {models::DType::I64, "i8"}, {models::DType::I8, "i1"},
      {models::DType::I16, "i2"}, {models::DType::U8, "u1"},  {models::DType::Bool, "b1"}};
  for (const auto& [dtype, tag] : dtypes)
    put("npy", std::string("dtype_") + tag + ".npy", serialize_npy(array_of(dtype, {2, 3})));
  put("npy", "scalar.npy", serialize_npy(array_of(models::DType::F32, {})));
  put("npy", "empty.npy", serialize_npy(array_of(models::DType::F32, {0, 4})));
  put("npy", "rank4.npy", serialize_npy(array_of(models::DType::F32, {2, 1, 3, 2})));
  // Hand-made headers: big-endian, version 2.0 and 3.0, Fortran order (refused).
  auto with_header = [](int major, const std::string& dict, size_t data_bytes) {
    std::string h = dict;
    const size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + h.size() + 1) % 64) h += ' ';
    h += '\n';
    std::string out = "\x93NUMPY";
    out += char(major);
    out += char(0);
    const size_t n = h.size();
    out += char(n & 0xff);
    out += char((n >> 8) & 0xff);
    if (major != 1) {
      out += char((n >> 16) & 0xff);
      out += char((n >> 24) & 0xff);
    }
    out += h;
    const auto data = pattern_bytes(data_bytes);
    out.append(data.begin(), data.end());
    return out;
  };
  put("npy", "big_endian.npy",
      with_header(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", 12));
  put("npy", "version2.npy",
      with_header(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", 32));
  put("npy", "version3.npy",
      with_header(3, "{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }", 10));
  put("npy", "fortran.npy",
      with_header(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16));

  const fs::path dir = out_dir / "npz";
  fs::create_directories(dir);
  std::map<std::string, models::NpyArray> arrays = {
      {"q", array_of(models::DType::F32, {2, 3, 4})},
      {"ids", array_of(models::DType::I64, {5})},
      {"mask", array_of(models::DType::Bool, {2, 2})}};
  models::write_npz((dir / "stored.npz").string(), arrays, false);
  models::write_npz((dir / "deflated.npz").string(), arrays, true);
  models::write_npz((dir / "one.npz").string(), {{"x", array_of(models::DType::F16, {3})}}, true);
}

void safetensors_seeds() {
  const fs::path dir = out_dir / "safetensors";
  fs::create_directories(dir);
  const models::DType dtypes[] = {models::DType::F32, models::DType::F16, models::DType::BF16,
                                  models::DType::F64, models::DType::I64, models::DType::I32,
                                  models::DType::I16, models::DType::I8,  models::DType::U8,
                                  models::DType::Bool};
  std::vector<std::vector<uint8_t>> store;
  std::vector<models::TensorToWrite> all;
  for (const models::DType d : dtypes) {
    store.push_back(pattern_bytes(6 * dtype_size(d)));
    if (d == models::DType::Bool)
      for (auto& b : store.back()) b &= 1;
  }
  for (size_t i = 0; i < std::size(dtypes); ++i)
    all.push_back({std::string("t.") + dtype_name(dtypes[i]), dtypes[i], {2, 3}, store[i]});
  models::write_safetensors((dir / "all_dtypes.safetensors").string(), all, {{"format", "pt"}});
  const auto one = pattern_bytes(4);
  models::write_safetensors((dir / "scalar.safetensors").string(),
                            {{"s", models::DType::F32, {}, one}});
  models::write_safetensors((dir / "empty_tensor.safetensors").string(),
                            {{"e", models::DType::F32, {0, 3}, {}}});
  models::write_safetensors((dir / "no_tensors.safetensors").string(), {}, {{"note", "empty"}});

  // The index target's folder holds model-00001-of-00002.safetensors (a.weight F32 [2,3],
  // b.bias F16 [4]) and model-00002-of-00002.safetensors (c.weight BF16 [2,2], d.ids I64 [3]).
  const std::string s1 = "model-00001-of-00002.safetensors",
                    s2 = "model-00002-of-00002.safetensors";
  json ok = {{"metadata", {{"total_size", 64}}},
             {"weight_map", {{"a.weight", s1}, {"b.bias", s1}, {"c.weight", s2}, {"d.ids", s2}}}};
  put("safetensors_index", "valid.json", ok.dump(2));
  json part = {{"weight_map", {{"c.weight", s2}}}};
  put("safetensors_index", "one_shard.json", part.dump());
  json wrong = {{"weight_map", {{"a.weight", s2}}}};
  put("safetensors_index", "wrong_shard.json", wrong.dump());
  json escape = {{"weight_map", {{"a.weight", "../" + s1}}}};
  put("safetensors_index", "escape.json", escape.dump());
  json missing = {{"weight_map", {{"a.weight", "model-00003-of-00003.safetensors"}}}};
  put("safetensors_index", "missing_shard.json", missing.dump());
}

void session_seeds() {
  const char* kinds[] = {"text", "ids", "image", "tensors", "synthetic"};
  for (const char* kind : kinds) {
    core::Session s;
    s.input.kind = kind;
    s.input.text = "The keeper trimmed the lamp.";
    s.input.ids = {1, 2, 3, 4};
    s.input.image = "images/coat_1.png";
    s.input.image_size = 32;
    s.input.tensors = "dump";
    s.input.tensors_layer = 1;
    s.input.synthetic_tokens = 256;
    s.model.id = std::string(kind) == "image" ? "default-vision" : "default-text";
    s.model.sha256 = {{"config.json", std::string(64, 'a')}};
    s.variants = {"window(size=16)", "block_topk(block=8,k=2)+sigmoid"};
    s.variant_backends = {"cpu", ""};
    s.substitute_layers = {0, 1};
    s.substitute_heads = {2};
    s.layer = 1;
    s.head = 2;
    s.view.view = "grid";
    s.view.vmax = 0.5;
    s.view.title = "t";
    s.extra = {{"gui", {{"dock", "left"}, {"zoom", 2.5}}}};
    put("session", std::string(kind) + ".attnscope.json", core::session_to_json(s).dump(2));
  }
}

void spec_seeds() {
  // Every registered piece with its parameters at their defaults, alone and composed.
  std::vector<std::string> specs;
  for (const PieceInfo& p : registry_pieces()) {
    SpecPiece piece{p.info.id, {}};
    for (const ParamSpec& ps : p.info.params)
      piece.params.emplace_back(ps.name, param_to_text(ps, ps.def));
    specs.push_back(format_spec_piece(piece));
  }
  int n = 0;
  for (const std::string& s : specs) put("spec", "piece_" + std::to_string(n++), s);
  put("spec", "composed_1", "sinks_window(sinks=4,window=16)+softcap(cap=30)+sigmoid");
  put("spec", "composed_2", "block_topk(block=8,k=2)+alibi+entmax(alpha=1.5)");
  put("spec", "composed_3", "top_p(block=8,p=0.9)+temperature(t=0.5)");
}

void image_seeds() {
  // 5 x 3 RGB gradient in each format stb_image_write knows; PNM and GIF by hand.
  const int w = 5, h = 3;
  std::vector<uint8_t> px(size_t(w) * h * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 17);
  const fs::path dir = out_dir / "image";
  fs::create_directories(dir);
  stbi_write_png((dir / "rgb.png").string().c_str(), w, h, 3, px.data(), w * 3);
  stbi_write_png((dir / "gray.png").string().c_str(), w, h, 1, px.data(), w);
  stbi_write_bmp((dir / "rgb.bmp").string().c_str(), w, h, 3, px.data());
  stbi_write_tga((dir / "rgb.tga").string().c_str(), w, h, 3, px.data());
  stbi_write_jpg((dir / "rgb.jpg").string().c_str(), w, h, 3, px.data(), 80);
  std::vector<float> hdr(px.begin(), px.end());
  stbi_write_hdr((dir / "rgb.hdr").string().c_str(), w, h, 3, hdr.data());
  std::string ppm = "P6\n5 3\n255\n";
  ppm.append(px.begin(), px.end());
  put("image", "rgb.ppm", ppm);
  std::string pgm = "P5 5 3 255\n";
  pgm.append(px.begin(), px.begin() + w * h);
  put("image", "gray.pgm", pgm);
  // A 1 x 1 GIF89a.
  const uint8_t gif[] = {0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80,
                         0x00, 0x00, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x21, 0xf9, 0x04,
                         0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01,
                         0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b};
  put("image", "pixel.gif", std::vector<uint8_t>(std::begin(gif), std::end(gif)));
}

void tokenizer_seeds(const fs::path& src) {
  // A WordPiece pipeline over the reference BERT vocabulary.
  json vocab = json::object();
  {
    std::ifstream in(src / "tests/ref/goldens/bert/vocab.txt");
    std::string line;
    int id = 0;
    while (std::getline(in, line)) vocab[line] = id++;
  }
  json wp = {{"version", "1.0"},
             {"added_tokens",
              {{{"id", 0},
                {"content", "[PAD]"},
                {"special", true},
                {"single_word", false},
                {"lstrip", false},
                {"rstrip", false},
                {"normalized", false}},
               {{"id", 2},
                {"content", "[CLS]"},
                {"special", true},
                {"single_word", false},
                {"lstrip", false},
                {"rstrip", false},
                {"normalized", false}},
               {{"id", 3},
                {"content", "[SEP]"},
                {"special", true},
                {"single_word", false},
                {"lstrip", false},
                {"rstrip", false},
                {"normalized", false}}}},
             {"normalizer",
              {{"type", "BertNormalizer"},
               {"clean_text", true},
               {"handle_chinese_chars", true},
               {"strip_accents", nullptr},
               {"lowercase", true}}},
             {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
             {"post_processor",
              {{"type", "TemplateProcessing"},
               {"single",
                {{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                 {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                 {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}}},
               {"pair", json::array()},
               {"special_tokens",
                {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
                 {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
             {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
             {"model",
              {{"type", "WordPiece"},
               {"unk_token", "[UNK]"},
               {"continuing_subword_prefix", "##"},
               {"max_input_chars_per_word", 100},
               {"vocab", vocab}}}};
  put("tokenizer_json", "wordpiece.json", wp.dump(1));

  // A byte-level BPE over the reference GPT-2 files, with a Split regex and a sequence
  // normalizer, as Llama 3 / Qwen2 files have.
  const json gvocab = json::parse(slurp(src / "tests/ref/goldens/gpt2/vocab.json"));
  json merges = json::array();
  {
    std::ifstream in(src / "tests/ref/goldens/gpt2/merges.txt");
    std::string line;
    while (std::getline(in, line))
      if (!line.empty() && line[0] != '#') merges.push_back(line);
  }
  json bpe = {{"version", "1.0"},
              {"added_tokens",
               {{{"id", int(gvocab.size())},
                 {"content", "<|endoftext|>"},
                 {"special", true},
                 {"single_word", false},
                 {"lstrip", false},
                 {"rstrip", false},
                 {"normalized", false}}}},
              {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}}},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"},
                   {"pattern",
                    {{"Regex",
                      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
                   {"behavior", "Isolated"},
                   {"invert", false}},
                  {{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", false}}}}}},
              {"post_processor",
               {{"type", "ByteLevel"},
                {"add_prefix_space", true},
                {"trim_offsets", false},
                {"use_regex", true}}},
              {"decoder",
               {{"type", "ByteLevel"},
                {"add_prefix_space", true},
                {"trim_offsets", true},
                {"use_regex", true}}},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", gvocab},
                {"merges", merges}}}};
  put("tokenizer_json", "bpe_split.json", bpe.dump());
  // Metaspace and byte fallback, as SentencePiece-converted files have.
  json sp = bpe;
  sp["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}}}}};
  sp["pre_tokenizer"] = nullptr;
  sp["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  sp["model"]["byte_fallback"] = true;
  put("tokenizer_json", "metaspace_fallback.json", sp.dump());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_make_seeds OUT_DIR SOURCE_DIR\n";
    return 2;
  }
  out_dir = argv[1];
  npy_seeds();
  safetensors_seeds();
  session_seeds();
  spec_seeds();
  image_seeds();
  tokenizer_seeds(argv[2]);
  return 0;
}

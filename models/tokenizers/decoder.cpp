#include "models/tokenizers/decoder.h"

#include <cctype>
#include <cstdlib>

#include "compute/error.h"
#include "models/tokenizers/byte_level.h"
#include "models/tokenizers/split_pattern.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {
namespace {

using nlohmann::json;

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces) const override {
    std::string bytes;
    for (const std::string& p : pieces) byte_level::decode(p, &bytes);
    pieces.assign(1, utf8_repair(bytes));
  }
};

void replace_in(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, pos)) {
    out.append(s, pos, p - pos);
    out.append(to);
    pos = p + from.size();
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

class WordPieceDecoder : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string& p = pieces[i];
      if (i > 0) {
        if (!prefix_.empty() && p.starts_with(prefix_)) {
          p.erase(0, prefix_.size());
        } else {
          std::string spaced;
          spaced.reserve(p.size() + 1);
          spaced += ' ';
          spaced += p;
          p.swap(spaced);
        }
      }
      if (cleanup_) {
        static const std::pair<const char*, const char*> kCleanup[] = {
            {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
            {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
            {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (auto [from, to] : kCleanup) replace_in(p, from, to);
      }
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    for (size_t i = 0; i < pieces.size(); ++i) {
      replace_in(pieces[i], replacement_, " ");
      if (i == 0 && strip_first_ && pieces[i].starts_with(' ')) pieces[i].erase(0, 1);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    for (std::string& p : pieces) {
      std::string out;
      size_t pos = 0;
      for (auto [b, e] : pattern_.find_all(p)) {
        out.append(p, pos, b - pos);
        out += content_;
        pos = e;
      }
      out.append(p, pos, std::string::npos);
      p = std::move(out);
    }
  }

 private:
  SplitPattern pattern_;
  std::string content_;
};

// Runs of <0xAB> pieces become the text of their bytes (U+FFFD per byte when not valid UTF-8).
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t nbytes = 0;
    auto flush = [&] {
      if (nbytes == 0) return;
      if (utf8_invalid_at(bytes) == std::string::npos) {
        out.push_back(bytes);
      } else {
        for (size_t k = 0; k < nbytes; ++k) out.push_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      nbytes = 0;
    };
    for (std::string& p : pieces) {
      if (p.size() == 6 && p.starts_with("<0x") && p.back() == '>' && std::isxdigit(p[3]) &&
          std::isxdigit(p[4])) {
        bytes += char(std::strtol(p.substr(3, 2).c_str(), nullptr, 16));
        ++nbytes;
      } else {
        flush();
        out.push_back(std::move(p));
      }
    }
    flush();
    pieces = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& pieces) const override {
    std::string all;
    for (const auto& p : pieces) all += p;
    pieces.assign(1, all);
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    if (content_.empty()) return;
    for (std::string& p : pieces) {
      for (size_t k = 0; k < start_ && p.starts_with(content_); ++k) p.erase(0, content_.size());
      for (size_t k = 0; k < stop_ && p.ends_with(content_); ++k) {
        p.erase(p.size() - content_.size());
      }
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// Classic BPE end-of-word suffix: "</w>" becomes a space, except at the very end.
class BpeSuffixDecoder : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    for (size_t i = 0; i < pieces.size(); ++i) {
      replace_in(pieces[i], suffix_, i + 1 == pieces.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts)
      : parts_(std::move(parts)) {}
  void decode_chain(std::vector<std::string>& pieces) const override {
    for (const auto& d : parts_) d->decode_chain(pieces);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::unique_ptr<Decoder> make_byte_level_decoder() {
  return std::make_unique<ByteLevelDecoder>();
}

std::unique_ptr<Decoder> make_wordpiece_decoder(std::string prefix, bool cleanup) {
  return std::make_unique<WordPieceDecoder>(std::move(prefix), cleanup);
}

std::unique_ptr<Decoder> decoder_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw Error(ErrorCode::Format, "decoder: missing 'type'");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return make_byte_level_decoder();
  if (type == "WordPiece") {
    return make_wordpiece_decoder(j.value("prefix", std::string("##")), j.value("cleanup", true));
  }
  if (type == "Metaspace") {
    bool strip_first = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
      strip_first = j["prepend_scheme"].get<std::string>() != "never";
    }
    return std::make_unique<MetaspaceDecoder>(j.value("replacement", std::string("\u2581")),
                                              strip_first);
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(
        SplitPattern::from_json(j.value("pattern", json()), "decoder Replace"),
        j.value("content", std::string()));
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(j.value("content", std::string(" ")),
                                          j.value("start", size_t(0)), j.value("stop", size_t(0)));
  }
  if (type == "BPEDecoder") {
    return std::make_unique<BpeSuffixDecoder>(j.value("suffix", std::string("</w>")));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& d : j.value("decoders", json::array())) {
      if (auto dd = decoder_from_json(d)) parts.push_back(std::move(dd));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  throw Error(ErrorCode::Unsupported, "decoder type '" + type + "' is not supported");
}

}  // namespace attn::models

#include "app/core/session/labels.h"

#include <cstdlib>

#include "compute/error.h"
#include "compute/registry.h"
#include "compute/spec.h"

namespace attn::core {

std::string display_piece(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(piece[i]);
    if (c == 0xC4 && i + 1 < piece.size()) {
      const unsigned char n = static_cast<unsigned char>(piece[i + 1]);
      if (n == 0xA0 || n == 0x8A) {  // "Ġ" (a leading space) or "Ċ" (a newline)
        out += n == 0xA0 ? "\xC2\xB7" : "\xC2\xB6";
        ++i;
        continue;
      }
    }
    if (c == 0xE2 && i + 2 < piece.size() && static_cast<unsigned char>(piece[i + 1]) == 0x96 &&
        static_cast<unsigned char>(piece[i + 2]) == 0x81) {  // "▁" (SentencePiece space)
      out += "\xC2\xB7";
      i += 2;
      continue;
    }
    out += piece[i];
  }
  return out;
}

std::vector<std::string> token_labels(const std::string& text,
                                      const std::vector<models::Token>& tokens,
                                      const std::vector<std::string>& pieces) {
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t'; };
  std::vector<std::string> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::string s;
    if (i < tokens.size() && tokens[i].end > tokens[i].begin && tokens[i].end <= text.size())
      s = text.substr(tokens[i].begin, tokens[i].end - tokens[i].begin);
    size_t lead = 0;
    while (lead < s.size() && blank(s[lead])) ++lead;
    std::string body = s.substr(lead);
    while (!body.empty() && blank(body.back())) body.pop_back();
    if (!body.empty())
      out.push_back(body);
    else if (!s.empty())
      out.push_back(s.find('\n') != std::string::npos ? "\u21b5" : "\u00b7");
    else
      out.push_back(display_piece(pieces[i]));
  }
  return out;
}

VariantLabel variant_label(const std::string& spec) {
  const std::string canon = make_variant(spec).spec();
  if (canon == "dense") return {"Dense softmax", ""};
  VariantLabel out;
  for (const SpecPiece& p : parse_spec(canon)) {
    std::string name = p.id;
    const std::vector<ParamSpec>* specs = nullptr;
    try {
      const PieceInfo& piece = registry_piece(p.id);
      name = piece.info.display_name;
      specs = &piece.info.params;
    } catch (const Error&) {
    }
    // A parameter another one makes unused is left out of the caption.
    const auto unused = [&](const std::string& k) {
      if (!specs) return false;
      for (const ParamSpec& ps : *specs)
        if (ps.name == k && !ps.unused_when.empty())
          for (const auto& [k2, v2] : p.params)
            if (k2 == ps.unused_when) return std::strtod(v2.c_str(), nullptr) != 0;
      return false;
    };
    std::string params;
    for (const auto& [k, v] : p.params)
      if (!unused(k)) params += (params.empty() ? "" : ", ") + k + "=" + v;
    out.name += (out.name.empty() ? "" : " + ") + name;
    if (!params.empty()) out.params += (out.params.empty() ? "" : "; ") + params;
  }
  return out;
}

std::string variant_caption(const std::string& spec) {
  const VariantLabel l = variant_label(spec);
  return l.params.empty() ? l.name : l.name + " [" + l.params + "]";
}

}  // namespace attn::core

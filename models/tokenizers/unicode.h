// Unicode character properties and per-character mappings used by normalizers and
// pre-tokenizers (ICU underneath), with the definitions BERT's tokenizer uses.
#pragma once
#include <string>

namespace attn::models::unicode {

// BERT whitespace: space, \t, \n, \r, or general category Zs.
bool is_bert_whitespace(char32_t c);
// BERT control: general category C* except \t, \n, \r.
bool is_bert_control(char32_t c);
// BERT punctuation: ASCII symbols 33-47, 58-64, 91-96, 123-126, or general category P*.
bool is_bert_punctuation(char32_t c);
// Code points of the CJK Unified Ideographs blocks that BERT isolates.
bool is_cjk_ideograph(char32_t c);
// Unicode White_Space property.
bool is_whitespace(char32_t c);
// General category Mn (nonspacing mark) / any mark M*.
bool is_nonspacing_mark(char32_t c);
bool is_mark(char32_t c);
// General category N* (Nd, Nl, No).
bool is_numeric(char32_t c);

// Full lowercase mapping of one code point (may give several, e.g. U+0130 -> i + U+0307).
std::u32string to_lower(char32_t c);

enum class NormForm { NFC, NFD, NFKC, NFKD };
// Normalises a UTF-8 string (valid input) to `form`.
std::string normalize(const std::string& utf8, NormForm form);
// True when normalisation never combines `c` with what comes before it, so text may be
// normalised piecewise at such code points (ICU's hasBoundaryBefore).
bool has_boundary_before(char32_t c, NormForm form);

}  // namespace attn::models::unicode

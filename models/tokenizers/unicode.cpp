#include "models/tokenizers/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include "compute/error.h"

namespace attn::models::unicode {
namespace {

const icu::Normalizer2& normalizer(NormForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormForm::NFC:
      n = icu::Normalizer2::getNFCInstance(status);
      break;
    case NormForm::NFD:
      n = icu::Normalizer2::getNFDInstance(status);
      break;
    case NormForm::NFKC:
      n = icu::Normalizer2::getNFKCInstance(status);
      break;
    case NormForm::NFKD:
      n = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status) || !n) {
    throw Error(ErrorCode::Unsupported,
                std::string("ICU normalizer unavailable: ") + u_errorName(status));
  }
  return *n;
}

}  // namespace

bool is_bert_whitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return u_charType(UChar32(c)) == U_SPACE_SEPARATOR;
}

bool is_bert_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (u_charType(UChar32(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_UNASSIGNED:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}

bool is_bert_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  switch (u_charType(UChar32(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_whitespace(char32_t c) {
  return u_isUWhiteSpace(UChar32(c));
}

bool is_nonspacing_mark(char32_t c) {
  return u_charType(UChar32(c)) == U_NON_SPACING_MARK;
}

bool is_mark(char32_t c) {
  const auto t = u_charType(UChar32(c));
  return t == U_NON_SPACING_MARK || t == U_COMBINING_SPACING_MARK || t == U_ENCLOSING_MARK;
}

bool is_numeric(char32_t c) {
  const auto t = u_charType(UChar32(c));
  return t == U_DECIMAL_DIGIT_NUMBER || t == U_LETTER_NUMBER || t == U_OTHER_NUMBER;
}

std::u32string to_lower(char32_t c) {
  if (c < 0x80) return std::u32string(1, (c >= 'A' && c <= 'Z') ? c + 32 : c);
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, UChar32(c));
  UChar dst[8];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
  if (U_FAILURE(status)) return std::u32string(1, c);
  std::u32string out;
  for (int32_t i = 0; i < n;) {
    UChar32 cp;
    U16_NEXT(dst, i, n, cp);
    out += char32_t(cp);
  }
  return out;
}

std::string normalize(const std::string& utf8, NormForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::UnicodeString src = icu::UnicodeString::fromUTF8(utf8);
  const icu::UnicodeString dst = normalizer(form).normalize(src, status);
  if (U_FAILURE(status)) {
    throw Error(ErrorCode::InvalidArgument,
                std::string("normalization failed: ") + u_errorName(status));
  }
  std::string out;
  dst.toUTF8String(out);
  return out;
}

bool has_boundary_before(char32_t c, NormForm form) {
  return normalizer(form).hasBoundaryBefore(UChar32(c));
}

}  // namespace attn::models::unicode

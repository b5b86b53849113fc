#define PCRE2_CODE_UNIT_WIDTH 8
#include "models/tokenizers/regex.h"

#include <pcre2.h>

#include "compute/error.h"
#include "models/tokenizers/utf8.h"

namespace attn::models {
namespace {
std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}
}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code) {
    throw Error(ErrorCode::Format, "regex '" + pattern + "' does not compile at offset " +
                                       std::to_string(offset) + ": " + pcre2_message(err));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when unavailable
  code_ = code;
}

Regex::~Regex() {
  pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  uint32_t options = 0;  // the caller guarantees valid UTF-8 from the second call on
  while (pos <= subject.size()) {
    const int rc = pcre2_match(code, s, subject.size(), pos, options, md, nullptr);
    options = PCRE2_NO_UTF_CHECK;
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      throw Error(ErrorCode::InvalidArgument,
                  "regex '" + pattern_ + "' failed on input: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one character so the search moves on.
      if (b >= subject.size()) break;
      pos = b + utf8_len(static_cast<unsigned char>(subject[b]));
    }
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace attn::models

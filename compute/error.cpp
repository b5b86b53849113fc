#include "compute/error.h"

#include <algorithm>
#include <cctype>

namespace attn {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::UnknownVariant: return "unknown variant";
    case ErrorCode::BadParameter: return "bad parameter";
    case ErrorCode::NonFinite: return "non-finite input";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Format: return "format error";
    case ErrorCode::Device: return "device error";
    case ErrorCode::Cancelled: return "cancelled";
  }
  return "error";
}

namespace {

char lower(char c) {
  return char(std::tolower(static_cast<unsigned char>(c)));
}

// Optimal string alignment distance: insertions, deletions, substitutions and swaps of
// neighbouring characters each cost one; case is ignored.
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const bool same = lower(a[i - 1]) == lower(b[j - 1]);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (same ? 0 : 1)});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

}  // namespace

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  // A third of the name may be wrong (at least one character, at most three): "windw" finds
  // "window", "sise" finds "size", "cuda" finds nothing.
  const size_t allowed = std::clamp<size_t>(name.size() / 3, 1, 3);
  std::string best;
  size_t best_d = allowed + 1;
  for (const std::string& k : known) {
    const size_t dist = edit_distance(name, k);
    if (dist < best_d) {
      best = k;
      best_d = dist;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& known) {
  const std::string best = closest_name(name, known);
  if (best.empty()) return best;
  std::string s = ": did you mean ";
  s.append(best).push_back('?');
  return s;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace attn

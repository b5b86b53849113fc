#include "models/arch/hooks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "compute/error.h"

namespace attn::models {

const std::vector<std::string>& hook_kinds() {
  static const std::vector<std::string> kinds = {
      "attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn.out", "resid"};
  return kinds;
}

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative wildcard match with backtracking to the last '*'.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

std::string hook_name(int layer, const std::string& what) {
  return "blocks." + std::to_string(layer) + "." + what;
}

std::string known_hooks() {
  std::string s;
  for (const auto& k : hook_kinds()) s += (s.empty() ? "blocks.{l}." : ", blocks.{l}.") + k;
  return s;
}

}  // namespace

HookSelection HookSelection::parse(const std::string& list) {
  HookSelection sel;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) {
      throw Error(ErrorCode::InvalidArgument, "hook list '" + list + "' has an empty entry");
    }
    if (item == "all") item = "*";
    // A pattern must match some hook of some layer (check() later tests the real layer count).
    // Trying every layer of every kind costs thousands of names: each pattern is checked once
    // per process (analyses over a dataset parse the same list for every record).
    static std::mutex checked_mu;
    static std::map<std::string, bool> checked;
    bool ok = false;
    {
      std::lock_guard<std::mutex> lock(checked_mu);
      if (const auto it = checked.find(item); it != checked.end()) ok = it->second;
    }
    if (!ok) {
      for (const auto& kind : hook_kinds()) {
        for (int layer = 0; layer < 1000 && !ok; ++layer)
          ok = glob_match(item, hook_name(layer, kind));
        if (ok) break;
      }
      std::lock_guard<std::mutex> lock(checked_mu);
      checked[item] = ok;
    }
    if (!ok) {
      throw Error(ErrorCode::InvalidArgument,
                  "hook '" + item + "' matches no hook name (known: " + known_hooks() + ")");
    }
    sel.patterns_.push_back(item);
    start = comma + 1;
  }
  return sel;
}

bool HookSelection::wants(int layer, const std::string& what) const {
  return matches(hook_name(layer, what));
}

bool HookSelection::matches(const std::string& name) const {
  for (const auto& p : patterns_) {
    if (glob_match(p, name)) return true;
  }
  return false;
}

void HookSelection::check(int n_layers) const {
  for (const auto& p : patterns_) {
    bool ok = false;
    for (int l = 0; l < n_layers && !ok; ++l) {
      for (const auto& kind : hook_kinds()) ok = ok || glob_match(p, hook_name(l, kind));
    }
    if (!ok) {
      throw Error(ErrorCode::InvalidArgument,
                  "hook '" + p + "' matches nothing in a model with " + std::to_string(n_layers) +
                      " layers (blocks.0 .. blocks." + std::to_string(n_layers - 1) + ")");
    }
  }
}

const Problem* Capture::problem(int l) const {
  if (l < 0 || l >= int(layers.size()) || !layers[size_t(l)].has_problem) return nullptr;
  return &layers[size_t(l)].problem;
}

std::vector<HookTensor> Capture::tensors() const {
  std::vector<HookTensor> out;
  const int64_t n = n_tokens;
  for (int l = 0; l < int(layers.size()); ++l) {
    const LayerCapture& c = layers[size_t(l)];
    if (c.has_problem) {
      const Problem& p = c.problem;
      if (selection_.wants(l, "attn.q")) {
        out.push_back({hook_name(l, "attn.q"), {p.n_heads, p.n_q, p.d}, p.q.data()});
      }
      if (selection_.wants(l, "attn.k")) {
        out.push_back({hook_name(l, "attn.k"), {p.n_kv_heads, p.n_k, p.d}, p.k.data()});
      }
      if (selection_.wants(l, "attn.v")) {
        out.push_back({hook_name(l, "attn.v"), {p.n_kv_heads, p.n_k, p.d}, p.v.data()});
      }
    }
    const int64_t h = c.n_heads, d = c.d;
    if (!c.scores.empty()) out.push_back({hook_name(l, "attn.scores"), {h, n, n}, c.scores.data()});
    if (!c.pattern.empty()) {
      out.push_back({hook_name(l, "attn.pattern"), {h, n, n}, c.pattern.data()});
    }
    if (!c.out.empty()) out.push_back({hook_name(l, "attn.out"), {h, n, d}, c.out.data()});
    if (!c.resid.empty()) out.push_back({hook_name(l, "resid"), {n, hidden}, c.resid.data()});
  }
  return out;
}

ResidualStats residual_stats(const std::vector<float>& resid, int n, int hidden, float min_abs,
                             float min_ratio) {
  require(n >= 0 && hidden > 0 && resid.size() == size_t(n) * size_t(hidden),
          ErrorCode::InvalidArgument,
          "residual_stats: " + std::to_string(resid.size()) + " values do not form [" +
              std::to_string(n) + ", " + std::to_string(hidden) + "]");
  ResidualStats s;
  s.token_norm.assign(size_t(n), 0.0f);
  s.dim_absmax.assign(size_t(hidden), 0.0f);
  std::vector<float> mags(resid.size());
  for (int t = 0; t < n; ++t) {
    double sq = 0;
    for (int j = 0; j < hidden; ++j) {
      const float x = resid[size_t(t) * hidden + j];
      sq += double(x) * x;
      s.dim_absmax[size_t(j)] = std::max(s.dim_absmax[size_t(j)], std::fabs(x));
      mags[size_t(t) * hidden + j] = std::fabs(x);
    }
    s.token_norm[size_t(t)] = float(std::sqrt(sq));
  }
  if (mags.empty()) return s;
  std::vector<float> sorted = mags;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  s.median_abs = sorted[sorted.size() / 2];
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < hidden; ++j) {
      const float m = mags[size_t(t) * hidden + j];
      if (m >= min_abs && m >= min_ratio * s.median_abs) {
        s.massive.push_back(
            {t, j, resid[size_t(t) * hidden + j], s.median_abs > 0 ? m / s.median_abs : INFINITY});
      }
    }
  }
  std::sort(s.massive.begin(), s.massive.end(),
            [](const auto& a, const auto& b) { return std::fabs(a.value) > std::fabs(b.value); });
  return s;
}

}  // namespace attn::models

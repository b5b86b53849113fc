#include "app/core/analysis/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "compute/error.h"
#include "compute/precision.h"
#include "compute/spec.h"

namespace attn::core {
namespace {

std::string fmt(double x) {
  if (std::isnan(x)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

double number(const std::string& s, const std::string& what) {
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  require(!s.empty() && end && *end == '\0' && std::isfinite(x), ErrorCode::InvalidArgument,
          what + ": '" + s + "' is not a number");
  return x;
}

// Values of one parameter: "a..b:xF", "a..b:+S", "a|b|c" or a single value.
std::vector<std::string> expand_value(const std::string& v, const std::string& where) {
  std::vector<std::string> out;
  const size_t dots = v.find("..");
  if (dots != std::string::npos) {
    const size_t colon = v.find(':', dots);
    require(colon != std::string::npos && colon + 2 <= v.size() &&
                (v[colon + 1] == 'x' || v[colon + 1] == '+'),
            ErrorCode::InvalidArgument,
            where + ": range '" + v + "' needs a step, e.g. 16..1024:x2 or 2..8:+2");
    const double a = number(v.substr(0, dots), where);
    const double b = number(v.substr(dots + 2, colon - dots - 2), where);
    const double step = number(v.substr(colon + 2), where);
    const bool geometric = v[colon + 1] == 'x';
    require(a <= b, ErrorCode::InvalidArgument, where + ": range '" + v + "' runs backwards");
    require(geometric ? (step > 1 && a > 0) : step > 0, ErrorCode::InvalidArgument,
            where + ": range '" + v + "' needs " +
                (geometric ? "a factor > 1 and a start > 0" : "a step > 0"));
    for (double x = a; x <= b * (1 + 1e-9) + 1e-12; x = geometric ? x * step : x + step) {
      out.push_back(fmt(x));
      require(out.size() <= 10000, ErrorCode::InvalidArgument,
              where + ": range '" + v + "' expands to more than 10000 values");
    }
    return out;
  }
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, '|')) {
    require(!item.empty(), ErrorCode::InvalidArgument, where + ": empty value in '" + v + "'");
    out.push_back(item);
  }
  require(!out.empty(), ErrorCode::InvalidArgument, where + ": empty value");
  return out;
}

// Variants one sweep may expand to: each runs attention over the whole input.
constexpr int kMaxSweepVariants = 10000;

const char* kHeader =
    "index,spec,pattern,density,flops,select_seconds,kernel_seconds,rel_error,mass_recall,"
    "row_kl,next_token_kl,top1_agreement,perplexity,cls_cosine,precision";
// Tables written before the precision column (every point ran in f32).
const char* kHeaderV2 =
    "index,spec,pattern,density,flops,select_seconds,kernel_seconds,rel_error,mass_recall,"
    "row_kl,next_token_kl,top1_agreement,perplexity,cls_cosine";
// Tables written before selection and kernel time were kept apart (kernel_seconds held both).
const char* kHeaderV1 =
    "index,spec,pattern,density,flops,kernel_seconds,rel_error,mass_recall,row_kl,"
    "next_token_kl,top1_agreement,perplexity,cls_cosine";

}  // namespace

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string csv_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_field(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

double csv_number(const std::string& s, const std::string& where) {
  if (s.empty()) return kNaN;  // an interval that does not exist
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  require(end && *end == '\0' && !std::isnan(x), ErrorCode::Format,
          where + ": '" + s + "' is not a number");
  return x;
}

int64_t csv_count(const std::string& s, const std::string& where, double max) {
  const double x = csv_number(s, where);
  require(std::isfinite(x) && x >= 0 && x == std::floor(x) && x < max, ErrorCode::Format,
          where + ": '" + s + "' is not a count");
  return int64_t(x);
}

std::vector<std::string> expand_sweep(const std::string& sweep_spec) {
  require(!sweep_spec.empty(), ErrorCode::InvalidArgument, "empty --variant");
  // compute's parser keeps values as text, so ranges and lists ("2..8:+2", "4|8") come through.
  std::vector<SpecPiece> pieces = parse_spec(sweep_spec);
  // One axis per parameter, the first parameter slowest.
  std::vector<std::vector<std::string>> axes;
  for (const SpecPiece& p : pieces)
    for (const auto& [name, value] : p.params)
      axes.push_back(expand_value(value, "sweep '" + sweep_spec + "' " + name));
  // The grid's size first: a grid too large to run is refused before any variant is written.
  double grid = 1;
  for (const auto& axis : axes) grid *= double(axis.size());
  require(grid <= kMaxSweepVariants, ErrorCode::InvalidArgument,
          "sweep '" + sweep_spec + "' expands to more than " + std::to_string(kMaxSweepVariants) +
              " variants");
  std::vector<size_t> at(axes.size(), 0);
  std::vector<std::string> out;
  while (true) {
    size_t a = 0;
    for (SpecPiece& p : pieces)
      for (auto& kv : p.params) {
        kv.second = axes[a][at[a]];
        ++a;
      }
    out.push_back(format_spec(pieces));
    int i = int(axes.size()) - 1;
    while (i >= 0 && ++at[size_t(i)] == axes[size_t(i)].size()) at[size_t(i--)] = 0;
    if (i < 0) break;
  }
  return out;
}

std::vector<std::string> expand_sweeps(const std::vector<std::string>& sweep_specs) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& s : sweep_specs)
    for (std::string& v : expand_sweep(s))
      if (seen.insert(v).second) out.push_back(std::move(v));
  return out;
}

std::vector<std::string> sweep_table_specs(const std::vector<std::string>& sweep_specs) {
  std::vector<std::string> out = {"dense"};
  for (std::string& v : expand_sweeps(sweep_specs))
    if (v != "dense") out.push_back(std::move(v));
  return out;
}

Shard parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  Shard sh;
  try {
    require(slash != std::string::npos, ErrorCode::InvalidArgument, "");
    size_t used = 0;
    sh.index = std::stoi(s.substr(0, slash), &used);
    require(used == slash, ErrorCode::InvalidArgument, "");
    const std::string n = s.substr(slash + 1);
    sh.count = std::stoi(n, &used);
    require(used == n.size(), ErrorCode::InvalidArgument, "");
  } catch (const std::exception&) {
    throw Error(ErrorCode::InvalidArgument,
                "--shard '" + s + "' must be i/n with 0 <= i < n (e.g. 0/4)");
  }
  require(sh.count >= 1 && sh.index >= 0 && sh.index < sh.count, ErrorCode::InvalidArgument,
          "--shard '" + s + "' must be i/n with 0 <= i < n (e.g. 0/4)");
  return sh;
}

std::vector<int> shard_items(int n_items, const Shard& shard) {
  std::vector<int> out;
  for (int i = shard.index; i < n_items; i += shard.count) out.push_back(i);
  return out;
}

std::string tradeoff_csv(const std::vector<SweepRow>& rows) {
  std::string out = std::string(kHeader) + "\n";
  for (const SweepRow& r : rows) {
    const TradeoffPoint& p = r.point;
    // A pattern id is a plain word; one read from a file may hold anything, so it is quoted
    // where it needs to be to read back the same.
    const bool plain = p.pattern.find_first_of(",\"\r\n") == std::string::npos;
    out += std::to_string(r.index) + "," + csv_quote(p.spec) + "," +
           (plain ? p.pattern : csv_quote(p.pattern)) + "," + fmt(p.density) + "," + fmt(p.flops) +
           "," + fmt(p.select_seconds) + "," + fmt(p.kernel_seconds) + "," + fmt(p.rel_error) +
           "," + fmt(p.mass_recall) + "," + fmt(p.row_kl) + "," + fmt(p.next_token_kl) + "," +
           fmt(p.top1_agreement) + "," + fmt(p.perplexity) + "," + fmt(p.cls_cosine) + "," +
           p.precision + "\n";
  }
  return out;
}

std::vector<SweepRow> parse_tradeoff_csv(const std::string& text, const std::string& source) {
  std::stringstream ss(text);
  std::string line;
  const bool got = bool(std::getline(ss, line));
  const bool v1 = got && line == kHeaderV1;
  const bool v2 = got && line == kHeaderV2;
  require(got && (line == kHeader || v1 || v2), ErrorCode::Format,
          source + ": not an attnscope sweep table (first line must be the header '" +
              std::string(kHeader) + "')");
  std::vector<SweepRow> rows;
  int n = 1;
  while (std::getline(ss, line)) {
    ++n;
    if (line.empty()) continue;
    const auto f = split_csv_line(line);
    const std::string where = source + ":" + std::to_string(n);
    const size_t want = v1 ? 13 : (v2 ? 14 : 15);
    require(f.size() == want, ErrorCode::Format,
            where + ": expected " + std::to_string(want) + " fields, found " +
                std::to_string(f.size()));
    auto num = [&](const std::string& s) {
      if (s == "nan") return kNaN;
      try {
        return number(s, where);
      } catch (const Error& e) {
        throw Error(ErrorCode::Format, e.what());
      }
    };
    SweepRow r;
    r.index = int(csv_count(f[0], where, 2147483648.0));
    r.point.spec = f[1];
    r.point.pattern = f[2];
    r.point.density = num(f[3]);
    r.point.flops = num(f[4]);
    const size_t o = v1 ? 0 : 1;  // v1 has no select_seconds column
    if (!v1) r.point.select_seconds = num(f[5]);
    r.point.kernel_seconds = num(f[5 + o]);
    r.point.rel_error = num(f[6 + o]);
    r.point.mass_recall = num(f[7 + o]);
    r.point.row_kl = num(f[8 + o]);
    r.point.next_token_kl = num(f[9 + o]);
    r.point.top1_agreement = num(f[10 + o]);
    r.point.perplexity = num(f[11 + o]);
    r.point.cls_cosine = num(f[12 + o]);
    if (!v1 && !v2) {
      try {
        r.point.precision = precision_name(parse_precision(f[14]));
      } catch (const Error& e) {
        throw Error(ErrorCode::Format, where + ": " + e.what());
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<SweepRow> merge_sweep_rows(const std::vector<std::vector<SweepRow>>& shards) {
  std::vector<SweepRow> all;
  for (const auto& s : shards) all.insert(all.end(), s.begin(), s.end());
  std::sort(all.begin(), all.end(),
            [](const SweepRow& a, const SweepRow& b) { return a.index < b.index; });
  for (size_t i = 0; i < all.size(); ++i) {
    require(i == 0 || all[i].index != all[i - 1].index, ErrorCode::Format,
            "sweep row " + std::to_string(all[i].index) + " appears in two shards");
    require(all[i].index == int(i), ErrorCode::Format,
            "sweep row " + std::to_string(i) + " is missing: is a shard absent?");
  }
  return all;
}

}  // namespace attn::core

#include "compute/spec.h"

#include <algorithm>
#include <cctype>

#include "compute/error.h"

namespace attn {

namespace {

bool blank(char c) {
  return std::isspace(static_cast<unsigned char>(c)) != 0;
}
bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool value_char(char c) {
  return c != ',' && c != ')' && c != '(' && !blank(c);
}

// A recursive-descent reader over one spec; `piece_start` marks where the current piece began so
// errors can quote it.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}

  std::vector<SpecPiece> spec() {
    std::vector<SpecPiece> out;
    blanks();
    if (done()) fail("empty spec");
    while (true) {
      out.push_back(piece());
      blanks();
      if (done()) return out;
      if (s_[i_] != '+') fail("expected '+' between pieces");
      ++i_;
      blanks();
      if (done()) fail("a piece must follow '+'");
    }
  }

 private:
  SpecPiece piece() {
    piece_start_ = i_;
    SpecPiece p;
    p.id = word();
    if (p.id.empty()) fail("expected a piece id");
    blanks();
    if (done() || s_[i_] != '(') return p;
    ++i_;
    blanks();
    if (!done() && s_[i_] == ')') {
      ++i_;
      return p;
    }
    while (true) {
      blanks();
      std::string name = word();
      if (name.empty()) fail("expected a parameter name");
      blanks();
      if (done() || s_[i_] != '=') fail("expected '=' after '" + name + "'");
      ++i_;
      blanks();
      const size_t start = i_;
      while (!done() && value_char(s_[i_])) ++i_;
      if (i_ == start) fail("expected a value for '" + name + "'");
      for (const auto& [seen, value] : p.params)
        if (seen == name)
          throw Error(ErrorCode::BadParameter,
                      p.id + ": parameter '" + name + "' given twice in '" + s_ + "'");
      p.params.emplace_back(std::move(name), s_.substr(start, i_ - start));
      blanks();
      if (!done() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (!done() && s_[i_] == ')') {
        ++i_;
        return p;
      }
      fail("expected ',' or ')'");
    }
  }

  std::string word() {
    const size_t start = i_;
    while (!done() && word_char(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  void blanks() {
    while (!done() && blank(s_[i_])) ++i_;
  }
  bool done() const { return i_ >= s_.size(); }

  // Names the spec, the 1-based character and the piece text read so far.
  [[noreturn]] void fail(const std::string& what) const {
    std::string where;
    size_t end = std::min(i_, s_.size());
    if (piece_start_ != std::string::npos && end > piece_start_) {
      std::string piece = s_.substr(piece_start_, end - piece_start_);
      while (!piece.empty() && blank(piece.back())) piece.pop_back();
      where = " in piece '" + piece + "'";
    }
    throw Error(ErrorCode::InvalidArgument,
                "malformed variant spec '" + s_ + "' at character " + std::to_string(i_ + 1) +
                    where + ": " + what + " (expected e.g. \"window(size=256)+softcap(cap=30)\")");
  }

  const std::string& s_;
  size_t i_ = 0;
  size_t piece_start_ = std::string::npos;
};

}  // namespace

std::vector<SpecPiece> parse_spec(const std::string& spec) {
  return Reader(spec).spec();
}

std::string format_spec_piece(const SpecPiece& piece) {
  if (piece.params.empty()) return piece.id;
  std::string s = piece.id + "(";
  for (size_t k = 0; k < piece.params.size(); ++k)
    s += (k ? "," : "") + piece.params[k].first + "=" + piece.params[k].second;
  return s + ")";
}

std::string format_spec(const std::vector<SpecPiece>& pieces) {
  std::string s;
  for (const SpecPiece& p : pieces) {
    if (!s.empty()) s += '+';
    s += format_spec_piece(p);
  }
  return s;
}

}  // namespace attn

#include "app/core/teaching/lesson.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "app/core/analysis/analysis.h"
#include "app/core/session/model_catalog.h"
#include "compute/error.h"
#include "compute/registry.h"

namespace attn::core {
namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string>& session_view_names() {
  // The names app/gui/main_window.cpp's kSessionViews gives the views, and "heatmap" (one head
  // of dense, which opens on the heatmap view).
  static const std::vector<std::string> names = {"heatmap", "variants", "grid",     "sinks",
                                                 "tokens",  "image",    "tradeoff", "attribution",
                                                 "qk",      "steps"};
  return names;
}

namespace {

// "FILE: step K: field 'F'" (step from 1; 0: the lesson itself).
std::string where(const std::string& source, size_t step, const std::string& field) {
  std::string s = source + ": ";
  if (step) s += "step " + std::to_string(step) + ": ";
  return s + "field '" + field + "'";
}

[[noreturn]] void fail(const std::string& source, size_t step, const std::string& field,
                       const std::string& what, ErrorCode code = ErrorCode::Format) {
  throw Error(code, where(source, step, field) + ": " + what);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// An optional string field of `o`.
std::string string_field(const json& o, const char* key, const std::string& source, size_t step,
                         const std::string& prefix = "") {
  const auto it = o.find(key);
  if (it == o.end() || it->is_null()) return {};
  if (!it->is_string())
    fail(source, step, prefix + key, std::string("must be a string, not ") + it->type_name());
  return it->get<std::string>();
}

// A non-negative integer, or a Format error naming `field`.
int index_value(const json& v, const std::string& source, size_t step, const std::string& field) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (1 << 30))
    fail(source, step, field, "must be a token index (an integer >= 0), not " + v.dump());
  return int(v.get<int64_t>());
}

LessonHighlight read_highlight(const json& step, const std::string& source, size_t k) {
  LessonHighlight h;
  const auto it = step.find("highlight");
  if (it == step.end() || it->is_null()) return h;
  if (!it->is_object())
    fail(source, k, "highlight", std::string("must be an object, not ") + it->type_name());
  for (const auto& [key, value] : it->items())
    if (key != "tokens" && key != "cells")
      fail(source, k, "highlight." + key, "unknown field (highlight takes tokens and cells)");
  if (const auto t = it->find("tokens"); t != it->end()) {
    if (!t->is_array()) fail(source, k, "highlight.tokens", "must be an array of token indices");
    for (size_t i = 0; i < t->size(); ++i)
      h.tokens.push_back(
          index_value((*t)[i], source, k, "highlight.tokens[" + std::to_string(i) + "]"));
  }
  if (const auto c = it->find("cells"); c != it->end()) {
    if (!c->is_array()) fail(source, k, "highlight.cells", "must be an array of [query, key]");
    for (size_t i = 0; i < c->size(); ++i) {
      const std::string f = "highlight.cells[" + std::to_string(i) + "]";
      const json& cell = (*c)[i];
      if (!cell.is_array() || cell.size() != 2)
        fail(source, k, f, "must be a pair [query, key], not " + cell.dump());
      const int q = index_value(cell[0], source, k, f), key = index_value(cell[1], source, k, f);
      h.cells.emplace_back(q, key);
    }
  }
  return h;
}

LessonStep read_step(const json& j, const json& defaults, const std::string& source, size_t k) {
  if (!j.is_object())
    fail(source, k, "steps", std::string("a step is an object, not ") + j.type_name());
  static const char* known[] = {"title", "caption", "highlight", "session"};
  for (const auto& item : j.items()) {
    const std::string& key = item.key();  // not a structured binding: clang 14 cannot capture one
    if (std::find_if(std::begin(known), std::end(known), [&](const char* n) { return key == n; }) ==
        std::end(known))
      fail(source, k, key, "unknown field (a step takes title, caption, highlight and session)");
  }
  LessonStep st;
  st.title = string_field(j, "title", source, k);
  st.caption = string_field(j, "caption", source, k);
  if (st.caption.empty()) fail(source, k, "caption", "is missing or empty (Markdown text)");
  st.highlight = read_highlight(j, source, k);
  const auto s = j.find("session");
  if (s == j.end()) fail(source, k, "session", "is missing");
  if (!s->is_object())
    fail(source, k, "session", std::string("must be an object, not ") + s->type_name());
  json merged = defaults;
  merged.merge_patch(*s);
  if (!merged.contains("format")) merged["format"] = kSessionFormat;
  if (!merged.contains("version")) merged["version"] = kSessionVersion;
  // session_from_json names the field ("input.text is empty", "field 'view.log_scale' has the
  // wrong type"); the step's fields live under "session".
  st.session = session_from_json(merged, source + ": step " + std::to_string(k) + ": session");
  const auto& views = session_view_names();
  if (std::find(views.begin(), views.end(), st.session.view.view) == views.end())
    fail(source, k, "session.view.view",
         "unknown view '" + st.session.view.view + "' (views: " + join(views) + ")");
  return st;
}

// The number of tokens of a step's input, or -1 when it cannot be known without running it.
int input_tokens(const Session& s, const Model& model) {
  if (s.input.kind == "ids") return int(s.input.ids.size());
  if (s.input.kind == "text" && !model.info().vision)
    return int(encode_for_model(model, s.input.text).ids.size());
  return -1;
}

}  // namespace

json lesson_to_json(const Lesson& l) {
  json steps = json::array();
  for (const LessonStep& st : l.steps) {
    json step = json::object();
    if (!st.title.empty()) step["title"] = st.title;
    step["caption"] = st.caption;
    if (!st.highlight.empty()) {
      json cells = json::array();
      for (const auto& [q, k] : st.highlight.cells) cells.push_back({q, k});
      step["highlight"] = {{"tokens", st.highlight.tokens}, {"cells", cells}};
    }
    step["session"] = session_to_json(st.session);
    steps.push_back(step);
  }
  json j = {{"format", kLessonFormat},
            {"version", kLessonVersion},
            {"title", l.title},
            {"description", l.description}};
  if (!l.defaults.empty()) j["defaults"] = l.defaults;
  j["steps"] = steps;
  return j;
}

Lesson lesson_from_json(const json& j, const std::string& source) {
  if (!j.is_object())
    throw Error(ErrorCode::Format,
                source + ": a lesson must be a JSON object, not " + std::string(j.type_name()));
  static const char* known[] = {"format", "version", "title", "description", "defaults", "steps"};
  for (const auto& item : j.items())
    if (const std::string& key = item.key();
        std::find_if(std::begin(known), std::end(known), [&](const char* n) { return key == n; }) ==
        std::end(known))
      fail(source, 0, key,
           "unknown field (a lesson takes format, version, title, description, defaults and "
           "steps)");
  const std::string format = string_field(j, "format", source, 0);
  if (format != kLessonFormat)
    throw Error(ErrorCode::Format, source + ": not an attnscope lesson (field 'format' is '" +
                                       format + "', expected '" + kLessonFormat + "')");
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer())
    fail(source, 0, "version", "is missing or not an integer");
  Lesson l;
  l.version = int(std::clamp<int64_t>(v->get<int64_t>(), -1, 1 << 20));
  if (l.version < 1 || l.version > kLessonVersion)
    throw Error(ErrorCode::Format,
                source + ": lesson version " + std::to_string(l.version) +
                    " is not supported by this attnscope (it reads versions 1.." +
                    std::to_string(kLessonVersion) + "); upgrade attnscope to open it");
  l.title = string_field(j, "title", source, 0);
  if (l.title.empty()) fail(source, 0, "title", "is missing or empty");
  l.description = string_field(j, "description", source, 0);
  if (const auto d = j.find("defaults"); d != j.end() && !d->is_null()) {
    if (!d->is_object())
      fail(source, 0, "defaults", std::string("must be an object, not ") + d->type_name());
    l.defaults = *d;
  }
  const auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_array() || steps->empty())
    fail(source, 0, "steps", "must be a non-empty array of steps");
  for (size_t k = 0; k < steps->size(); ++k)
    l.steps.push_back(read_step((*steps)[k], l.defaults, source, k + 1));
  return l;
}

void check_lesson(const Lesson& l, const std::string& lesson_path) {
  for (size_t i = 0; i < l.steps.size(); ++i) {
    const size_t k = i + 1;
    const Session& s = l.steps[i].session;
    for (size_t v = 0; v < s.variants.size(); ++v) {
      try {
        make_variant(s.variants[v]);
      } catch (const Error& e) {
        fail(lesson_path, k, "session.variants[" + std::to_string(v) + "]", e.what());
      }
    }
    if (s.input.kind == "tensors" || s.input.kind == "synthetic") {
      const auto& h = l.steps[i].highlight;
      if (s.input.kind == "synthetic")
        for (int t : h.tokens)
          if (t >= s.input.synthetic_tokens)
            fail(lesson_path, k, "highlight.tokens",
                 "token " + std::to_string(t) + " is past the input's " +
                     std::to_string(s.input.synthetic_tokens) + " tokens");
      continue;
    }
    std::shared_ptr<const Model> model;
    try {
      check_session_files(s, lesson_path);
      const std::string id = is_default_model_name(s.model.id)
                                 ? s.model.id
                                 : resolve_session_path(lesson_path, s.model.id);
      model = cached_model(id);
    } catch (const Error& e) {
      fail(lesson_path, k, "session.model.id", e.what(), e.code());
    }
    const ModelInfo& info = model->info();
    if (s.layer >= info.n_layers)
      fail(lesson_path, k, "session.selection.layer",
           "layer " + std::to_string(s.layer) + " does not exist (" + s.model.id + " has " +
               std::to_string(info.n_layers) + " layers, 0.." + std::to_string(info.n_layers - 1) +
               ")");
    if (s.head >= info.n_heads)
      fail(lesson_path, k, "session.selection.head",
           "head " + std::to_string(s.head) + " does not exist (" + s.model.id + " has " +
               std::to_string(info.n_heads) + " heads per layer)");
    if (info.vision != (s.input.kind == "image"))
      fail(lesson_path, k, "session.input.kind",
           "'" + s.input.kind + "' does not suit " + s.model.id +
               (info.vision ? " (a vision model: give an image)" : " (a text model)"));
    const LessonHighlight& h = l.steps[i].highlight;
    if (h.empty()) continue;
    int n = -1;
    try {
      n = input_tokens(s, *model);
    } catch (const Error& e) {
      fail(lesson_path, k, "session.input", e.what());
    }
    if (n < 0) continue;
    auto check = [&](int t, const std::string& field) {
      if (t >= n)
        fail(lesson_path, k, field,
             "index " + std::to_string(t) + " is past the input's last token (it has " +
                 std::to_string(n) + " tokens, 0.." + std::to_string(n - 1) + ")");
    };
    for (size_t t = 0; t < h.tokens.size(); ++t)
      check(h.tokens[t], "highlight.tokens[" + std::to_string(t) + "]");
    for (size_t c = 0; c < h.cells.size(); ++c) {
      const std::string f = "highlight.cells[" + std::to_string(c) + "]";
      check(h.cells[c].first, f);
      check(h.cells[c].second, f);
      if (info.causal && h.cells[c].second > h.cells[c].first)
        fail(lesson_path, k, f,
             "key " + std::to_string(h.cells[c].second) + " comes after query " +
                 std::to_string(h.cells[c].first) + " (a causal model attends to earlier tokens)");
    }
  }
}

Lesson load_lesson(const std::string& path) {
  const json j = read_json_file(path, "lesson");
  Lesson l = lesson_from_json(j, path);
  check_lesson(l, path);
  return l;
}

void save_lesson(const Lesson& l, const std::string& path) {
  write_file_atomic(path, lesson_to_json(l).dump(2) + "\n");
}

bool is_lesson_path(const std::string& path) {
  const std::string suffix = kLessonSuffix;
  return path.size() >= suffix.size() &&
         path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace attn::core

// A lesson: an ordered list of steps, each a session (session/session.h: the model, input,
// view, selection, variants, ablation...) with a Markdown caption and the tokens or cells it
// points at. The app plays it with Next/Back; the audience may edit the input at any step.
// Stored as versioned JSON (`.attnscope-lesson.json`, format in docs/lessons.md), written
// atomically like sessions.
//
//   Lesson l = load_lesson("heads.attnscope-lesson.json");  // every step checked, or throws
//   l.steps.push_back({"Sinks", "Layer 1 puts its mass on the **first** token.", {}, s});
//   save_lesson(l, "heads.attnscope-lesson.json");
//
// A lesson is checked completely before any of it is used: a malformed one throws
// attn::Error(Format) (Io for a missing model) whose message names the file, the step (from 1)
// and the field, e.g. "x.attnscope-lesson.json: step 2: field 'session.view.view': unknown
// view 'heatmaps' (views: heatmap, variants, ...)".
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "app/core/session/session.h"

namespace attn::core {

constexpr int kLessonVersion = 1;  // bump on an incompatible schema change
constexpr const char* kLessonFormat = "attnscope-lesson";
constexpr const char* kLessonSuffix = ".attnscope-lesson.json";

// What a step points at: tokens of the input and cells (query row, key column) of the
// attention pattern, 0-based. Checked against the step's input when the lesson is loaded.
struct LessonHighlight {
  std::vector<int> tokens;
  std::vector<std::pair<int, int>> cells;  // (query, key)
  bool empty() const { return tokens.empty() && cells.empty(); }
};

struct LessonStep {
  std::string title;          // optional short title ("" = none)
  std::string caption;        // Markdown shown beside the views
  LessonHighlight highlight;  // optional
  Session session;            // what the app shows at this step
};

struct Lesson {
  int version = kLessonVersion;
  std::string title;
  std::string description;  // Markdown, shown before the first step's caption
  // Session fields every step starts from (a JSON merge patch under each step's "session"),
  // e.g. {"model": {"id": "default-text"}}: the model a lesson uses is written once.
  nlohmann::json defaults = nlohmann::json::object();
  std::vector<LessonStep> steps;
};

// ---- views -----------------------------------------------------------------------------------
// The session names of the app's views ("heatmap", "variants", "grid", ...): a step's view.view
// must be one of them.
const std::vector<std::string>& session_view_names();

// ---- JSON ------------------------------------------------------------------------------------
// The lesson as JSON (always the current version; every step's session written in full).
nlohmann::json lesson_to_json(const Lesson& l);
// Parses a lesson and checks what needs no model: the format tag and version, the title, at
// least one step, each step's caption, highlight and session (session_from_json's checks, and
// the view name). `source` names it in messages. Throws Error(Format).
Lesson lesson_from_json(const nlohmann::json& j, const std::string& source = "lesson");
// Checks what needs the models: every step's model exists (default name, or a folder relative to
// `lesson_path`), its layer and head exist in it, its variants parse, and its highlighted tokens
// and cells lie inside its input. Throws Error naming `lesson_path`, the step and the field.
void check_lesson(const Lesson& l, const std::string& lesson_path);

// ---- files -----------------------------------------------------------------------------------
// Reads, parses and checks (check_lesson) a lesson file. Throws Error(Io) when unreadable,
// Error(Format) for invalid JSON (with line/column) or any bad field.
Lesson load_lesson(const std::string& path);
// Writes `l` atomically (`path`.tmp-<pid>, then rename). Throws Error(Io).
void save_lesson(const Lesson& l, const std::string& path);
// Whether `path` ends in kLessonSuffix.
bool is_lesson_path(const std::string& path);

}  // namespace attn::core

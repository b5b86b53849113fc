// Lessons: JSON and file round trips, the built-in lessons, and malformed lessons that name the
// file, the step and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "app/core/teaching/lesson.h"
#include "compute/error.h"
#include "model_available.h"

namespace attn::core {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

std::string work_dir() {
  const fs::path d = fs::path(ATTN_TEST_WORK_DIR) / "lesson";
  fs::create_directories(d);
  return d.string();
}

// A two-step lesson on default-text, as a file would hold it (sessions written in part).
json sample_json() {
  return json::parse(R"json({
    "format": "attnscope-lesson", "version": 1,
    "title": "Sample", "description": "Two steps on the cat.",
    "defaults": {"model": {"id": "default-text"}},
    "steps": [
      {"title": "One head", "caption": "Layer 0, head 3 looks at the **previous** token.",
       "highlight": {"tokens": [1, 2], "cells": [[2, 1]]},
       "session": {"input": {"kind": "text", "text": "The cat sat on the mat."},
                   "selection": {"layer": 0, "head": 3}, "view": {"view": "heatmap"}}},
      {"caption": "A window of 4 keys.",
       "session": {"input": {"kind": "text", "text": "The cat sat on the mat."},
                   "variants": ["window(size=4)"], "view": {"view": "grid"}}}
    ]})json");
}

std::string write_lesson(const std::string& name, const json& j) {
  const std::string p = work_dir() + "/" + name + kLessonSuffix;
  std::ofstream(p, std::ios::binary) << j.dump(2);
  return p;
}

// Expects load_lesson(path) to throw with a message holding every needle.
void expect_error(const std::string& path, const std::vector<std::string>& needles) {
  try {
    load_lesson(path);
    ADD_FAILURE() << path << " loaded without error";
  } catch (const Error& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "'" << n << "' missing from: " << e.what();
  }
}

TEST(Lesson, JsonRoundTripIsExact) {
  const Lesson l = lesson_from_json(sample_json(), "sample");
  ASSERT_EQ(l.steps.size(), 2u);
  EXPECT_EQ(l.title, "Sample");
  EXPECT_EQ(l.steps[0].title, "One head");
  EXPECT_EQ(l.steps[0].session.model.id, "default-text");  // from the defaults
  EXPECT_EQ(l.steps[0].session.head, 3);
  EXPECT_EQ(l.steps[0].highlight.tokens, (std::vector<int>{1, 2}));
  ASSERT_EQ(l.steps[0].highlight.cells.size(), 1u);
  EXPECT_EQ(l.steps[0].highlight.cells[0], std::make_pair(2, 1));
  EXPECT_EQ(l.steps[1].session.variants, std::vector<std::string>{"window(size=4)"});
  EXPECT_EQ(l.steps[1].session.view.view, "grid");
  const json j = lesson_to_json(l);
  EXPECT_EQ(lesson_to_json(lesson_from_json(j, "again")), j);
}

TEST(Lesson, FileRoundTripIsExactAndAtomic) {
  REQUIRE_MODEL("default-text");
  const std::string a = write_lesson("sample", sample_json());
  const Lesson l = load_lesson(a);
  const std::string b = work_dir() + "/saved" + kLessonSuffix;
  save_lesson(l, b);
  save_lesson(l, b);  // over an existing file
  for (const auto& e : fs::directory_iterator(work_dir()))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << "temp file left behind";
  EXPECT_EQ(lesson_to_json(load_lesson(b)), lesson_to_json(l));
  EXPECT_TRUE(is_lesson_path(b));
  EXPECT_FALSE(is_lesson_path(work_dir() + "/x.attnscope.json"));
}

TEST(Lesson, BuiltInLessonsLoadAndRoundTrip) {
  REQUIRE_MODEL("default-text");
  REQUIRE_MODEL("default-vision");
  const fs::path dir = fs::path(ATTN_TEST_SOURCE_DIR) / "assets" / "lessons";
  // The copies are saved beside an `images` folder, as the built-in ones are: their image paths
  // are relative ("../images/sneaker_1.png").
  const fs::path images = fs::path(work_dir()).parent_path() / "images";
  std::error_code ec;
  if (!fs::exists(images, ec))
    fs::create_directory_symlink(fs::path(ATTN_TEST_SOURCE_DIR) / "assets" / "images", images);
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (!is_lesson_path(p)) continue;
    ++n;
    SCOPED_TRACE(p);
    const Lesson l = load_lesson(p);
    EXPECT_GE(l.steps.size(), 3u);
    EXPECT_LE(l.steps.size(), 6u);
    const std::string copy = work_dir() + "/" + e.path().filename().string();
    save_lesson(l, copy);
    EXPECT_EQ(lesson_to_json(lesson_from_json(lesson_to_json(load_lesson(copy)), "x")),
              lesson_to_json(l));
  }
  EXPECT_EQ(n, 6) << "the six built-in lessons (a)-(f)";
}

TEST(Lesson, MalformedLessonsNameTheFileTheStepAndTheField) {
  REQUIRE_MODEL("default-text");
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"format", [](json& j) { j["format"] = "attnscope-session"; }, {"not an attnscope lesson"}},
      {"version", [](json& j) { j["version"] = 7; }, {"lesson version 7"}},
      {"title", [](json& j) { j.erase("title"); }, {"field 'title'"}},
      {"no_steps", [](json& j) { j["steps"] = json::array(); }, {"field 'steps'"}},
      {"bad_step", [](json& j) { j["steps"][1] = 3; }, {"step 2", "'steps'"}},
      {"caption", [](json& j) { j["steps"][1].erase("caption"); }, {"step 2", "'caption'"}},
      {"unknown_field",
       [](json& j) { j["steps"][0]["captoin"] = "x"; },
       {"step 1", "'captoin'", "unknown field"}},
      {"no_session", [](json& j) { j["steps"][1].erase("session"); }, {"step 2", "'session'"}},
      {"unknown_view",
       [](json& j) { j["steps"][1]["session"]["view"]["view"] = "heatmaps"; },
       {"step 2", "'session.view.view'", "heatmaps", "views: heatmap"}},
      {"bad_session_field",
       [](json& j) { j["steps"][0]["session"]["view"]["log_scale"] = "yes"; },
       {"step 1", "view.log_scale"}},
      {"missing_model",
       [](json& j) {
         j["steps"][1]["session"]["model"] = {{"id", "no-such-model"}};
       },
       {"step 2", "'session.model.id'", "no-such-model"}},
      {"unknown_model_everywhere",
       [](json& j) { j["defaults"]["model"]["id"] = "default-txet"; },
       {"step 1", "'session.model.id'", "default-txet"}},
      {"layer",
       [](json& j) { j["steps"][0]["session"]["selection"]["layer"] = 9; },
       {"step 1", "'session.selection.layer'", "layer 9"}},
      {"head",
       [](json& j) {
         j["steps"][1]["session"]["selection"] = {{"layer", 0}, {"head", 4}};
       },
       {"step 2", "'session.selection.head'"}},
      {"variant",
       [](json& j) { j["steps"][1]["session"]["variants"] = {"windw(size=4)"}; },
       {"step 2", "'session.variants[0]'", "windw"}},
      {"token_past_end",
       [](json& j) {
         j["steps"][0]["highlight"]["tokens"] = {0, 40};
       },
       {"step 1", "'highlight.tokens[1]'", "index 40"}},
      {"negative_token",
       [](json& j) { j["steps"][0]["highlight"]["tokens"] = {-1}; },
       {"step 1", "'highlight.tokens[0]'"}},
      {"cell_shape",
       [](json& j) {
         j["steps"][0]["highlight"]["cells"] = {{1, 2, 3}};
       },
       {"step 1", "'highlight.cells[0]'"}},
      {"cell_future",
       [](json& j) {
         j["steps"][0]["highlight"]["cells"] = {{1, 3}};
       },
       {"step 1", "'highlight.cells[0]'", "after query"}},
      {"empty_text",
       [](json& j) { j["steps"][1]["session"]["input"]["text"] = ""; },
       {"step 2", "input.text is empty"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    json j = sample_json();
    c.edit(j);
    const std::string p = write_lesson(std::string("bad_") + c.name, j);
    std::vector<std::string> needles = c.needles;
    needles.push_back(p);
    expect_error(p, needles);
  }
  const std::string bad = work_dir() + "/invalid" + kLessonSuffix;
  std::ofstream(bad) << "{\"format\": ";
  expect_error(bad, {bad, "invalid JSON"});
  expect_error(work_dir() + "/absent" + kLessonSuffix, {"cannot open"});
}

}  // namespace
}  // namespace attn::core

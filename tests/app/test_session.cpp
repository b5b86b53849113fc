// Sessions: JSON round trip, atomic save, and clear errors for bad files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/core/session/session.h"
#include "compute/error.h"

namespace attn::core {
namespace {
namespace fs = std::filesystem;

std::string work_dir() {
  const fs::path d = fs::path(ATTN_TEST_WORK_DIR) / "session";
  fs::create_directories(d);
  return d.string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Expects load_session(path) to throw `code` with a message containing `needle`.
void expect_error(const std::string& path, ErrorCode code, const std::string& needle) {
  try {
    load_session(path);
    FAIL() << path << " loaded without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Session sample() {
  Session s;
  s.input.text = "The cat sat on the mat. \"Quoted\", and unicode: \u00e9\u4e2d.";
  s.model.id = "default-text";
  s.model.sha256["config.json"] = std::string(64, 'a');
  s.variants = {"window(size=8)", "sinks_window(sinks=2,window=8)+softcap(cap=30)"};
  s.layer = 2;
  s.head = 3;
  s.substitute_layers = {1, 2};
  s.ablation.heads = {"L0H3", "L1H0"};
  s.ablation.mode = "mean";
  s.patch = {"And Moses said", " and", " upon", "patterns"};
  s.view.view = "grid";
  s.view.log_scale = true;
  s.view.vmax = 0.5;
  s.figure = {1200, 800, 200};
  s.extra = {{"gui", {{"dock", "left"}}}};
  return s;
}

TEST(Session, JsonRoundTripIsExact) {
  const Session s = sample();
  const nlohmann::json j = session_to_json(s);
  const Session r = session_from_json(j);
  EXPECT_EQ(session_to_json(r), j);
  EXPECT_EQ(r.input.text, s.input.text);
  EXPECT_EQ(r.variants, s.variants);
  EXPECT_EQ(r.layer, 2);
  EXPECT_EQ(r.head, 3);
  EXPECT_EQ(r.figure.dpi, 200);
  EXPECT_EQ(r.extra["gui"]["dock"], "left");
  EXPECT_EQ(r.ablation.heads, s.ablation.heads);
  EXPECT_EQ(r.ablation.mode, "mean");
  EXPECT_EQ(r.patch.corrupt, "And Moses said");
  EXPECT_EQ(r.patch.target, " and");
  EXPECT_EQ(r.patch.foil, " upon");
  EXPECT_EQ(r.patch.over, "patterns");
  // Sessions written before ablations existed read as no ablation.
  nlohmann::json old = j;
  old.erase("ablation");
  old.erase("patch");
  EXPECT_TRUE(session_from_json(old).ablation.empty());
  EXPECT_TRUE(session_from_json(old).patch.empty());
  EXPECT_EQ(session_from_json(old).patch.over, "positions");
  // The attribution setup and the Q/K map's projection travel too; older files read as unset.
  Session a = sample();
  a.attribution.methods = {"rollout", "attnlrp"};
  a.attribution.position = 7;
  a.attribution.foil = 12;
  a.attribution.baseline = "token:3";
  a.attribution.with_variant = true;
  a.attribution.faithfulness = true;
  a.attribution.matmul = "bf16";
  a.view.qk_method = "tsne";
  const Session b = session_from_json(session_to_json(a));
  EXPECT_EQ(b.attribution.methods, a.attribution.methods);
  EXPECT_EQ(b.attribution.position, 7);
  EXPECT_EQ(b.attribution.foil, 12);
  EXPECT_EQ(b.attribution.baseline, "token:3");
  EXPECT_TRUE(b.attribution.with_variant && b.attribution.faithfulness);
  EXPECT_EQ(b.attribution.matmul, "bf16");
  EXPECT_EQ(b.view.qk_method, "tsne");
  nlohmann::json older = session_to_json(a);
  older.erase("attribution");
  older["view"].erase("qk_method");
  EXPECT_TRUE(session_from_json(older).attribution.empty());
  EXPECT_EQ(session_from_json(older).attribution.matmul, "f32");
  EXPECT_EQ(session_from_json(older).view.qk_method, "pca");
}

TEST(Session, SaveIsAtomicAndReloads) {
  const std::string path = work_dir() + "/a.attnscope.json";
  save_session(sample(), path);
  save_session(sample(), path);  // replacing an existing file
  for (const auto& e : fs::directory_iterator(work_dir()))
    EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos) << "temp file left behind";
  EXPECT_EQ(session_to_json(load_session(path)), session_to_json(sample()));
}

TEST(Session, SaveIntoMissingFolderFails) {
  EXPECT_THROW(save_session(sample(), work_dir() + "/no/such/dir/x.attnscope.json"), Error);
}

TEST(Session, BadFilesGiveClearErrors) {
  const std::string d = work_dir();
  expect_error(d + "/missing.attnscope.json", ErrorCode::Io, "cannot open");
  write(d + "/invalid.json", "{\"format\": \"attnscope-session\", ");
  expect_error(d + "/invalid.json", ErrorCode::Format, "invalid JSON");
  nlohmann::json j = session_to_json(sample());
  j["version"] = 99;
  write(d + "/v99.json", j.dump());
  expect_error(d + "/v99.json", ErrorCode::Format, "version 99 is not supported");
  j = session_to_json(sample());
  j["format"] = "something-else";
  write(d + "/fmt.json", j.dump());
  expect_error(d + "/fmt.json", ErrorCode::Format, "not an attnscope session");
  j = session_to_json(sample());
  j["selection"]["layer"] = "two";
  write(d + "/type.json", j.dump());
  expect_error(d + "/type.json", ErrorCode::Format, "selection.layer");
  j = session_to_json(sample());
  j.erase("input");
  write(d + "/noinput.json", j.dump());
  expect_error(d + "/noinput.json", ErrorCode::Format, "missing field 'input'");
  j = session_to_json(sample());
  j["ablation"]["mode"] = "resample";
  write(d + "/ablation_mode.json", j.dump());
  expect_error(d + "/ablation_mode.json", ErrorCode::Format, "ablation.mode must be zero or mean");
  j["ablation"]["mode"] = "zero";
  j["patch"]["over"] = "tokens";
  write(d + "/patch_over.json", j.dump());
  expect_error(d + "/patch_over.json", ErrorCode::Format, "patch.over must be heads, positions");
  j = session_to_json(sample());
  j["attribution"]["methods"] = {"rollout", "saliency"};
  write(d + "/attribution_method.json", j.dump());
  expect_error(d + "/attribution_method.json", ErrorCode::Format, "unknown attribution method");
  j = session_to_json(sample());
  j["attribution"]["methods"] = {"rollout"};
  j["attribution"]["matmul"] = "fp8";
  write(d + "/attribution_matmul.json", j.dump());
  expect_error(d + "/attribution_matmul.json", ErrorCode::Format,
               "attribution.matmul is f32 or bf16, not 'fp8'");
  j = session_to_json(sample());
  j["view"]["qk_method"] = "umap";
  write(d + "/qk_method.json", j.dump());
  expect_error(d + "/qk_method.json", ErrorCode::Format, "view.qk_method must be pca or tsne");
  j = session_to_json(sample());
  j["ablation"]["heads"] = {"L0H3", "head three"};
  write(d + "/ablation_head.json", j.dump());
  expect_error(d + "/ablation_head.json", ErrorCode::Format, "'head three' is not a head");
  j["ablation"]["heads"] = {"L0H3,L1H1"};
  write(d + "/ablation_list.json", j.dump());
  expect_error(d + "/ablation_list.json", ErrorCode::Format, "one head per entry");
  write(d + "/array.json", "[1, 2]");
  expect_error(d + "/array.json", ErrorCode::Format, "must be a JSON object");
}

TEST(Session, MissingModelAndChangedFilesAreNamed) {
  Session s = sample();
  s.model.id = "no/such/model";
  s.model.sha256.clear();
  try {
    check_session_files(s, work_dir() + "/x.attnscope.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("no/such/model"), std::string::npos) << e.what();
  }
  // A model folder whose file changed after the session recorded its hash.
  const std::string m = work_dir() + "/model";
  fs::create_directories(m);
  write(m + "/config.json", "{}");
  s.model.id = m;
  fill_hashes(s);
  ASSERT_EQ(s.model.sha256.count("config.json"), 1u);
  EXPECT_NO_THROW(check_session_files(s));
  write(m + "/config.json", "{ }");
  try {
    check_session_files(s);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Format);
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

TEST(Session, RelativePathsFollowTheSessionFile) {
  EXPECT_EQ(resolve_session_path("/a/b/s.attnscope.json", "img.png"), "/a/b/img.png");
  EXPECT_EQ(resolve_session_path("/a/b/s.attnscope.json", "../c/img.png"), "/a/c/img.png");
  EXPECT_EQ(resolve_session_path("/a/b/s.attnscope.json", "/abs.png"), "/abs.png");
  EXPECT_EQ(resolve_session_path("", "img.png"), "img.png");
}

TEST(Session, Sha256MatchesKnownDigests) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string million(1000000, 'a');
  EXPECT_EQ(sha256_hex(million),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  const std::string f = work_dir() + "/abc.txt";
  write(f, "abc");
  EXPECT_EQ(sha256_file(f), sha256_hex("abc"));
}

TEST(Session, AutosaveIsNewerAfterWrite) {
  const std::string path = work_dir() + "/auto.attnscope.json";
  save_session(sample(), path);
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(10));
  fs::remove(autosave_path(path));
  EXPECT_FALSE(has_newer_autosave(path));
  save_session(sample(), autosave_path(path));
  EXPECT_TRUE(has_newer_autosave(path));
}

// Inputs found by tests/fuzz/fuzz_session (kept in tests/fuzz/regressions/session): numbers
// nlohmann cannot hold escaped as its own exception, and integers out of a field's range were
// wrapped (or, from a float, converted with undefined behaviour) instead of refused.
TEST(Session, FuzzRegressionsAreRefusedByName) {
  const fs::path dir = fs::path(ATTN_TEST_SOURCE_DIR) / "tests/fuzz/regressions/session";
  const std::pair<const char*, const char*> cases[] = {
      {"number_too_large_for_double.json", "invalid JSON"},
      {"float_layer_out_of_int_range.json", "selection.layer"},
      {"version_wraps_to_one.json", "version"},
      {"id_out_of_int32_range.json", "input.ids"},
  };
  for (const auto& [file, needle] : cases) {
    SCOPED_TRACE(file);
    expect_error((dir / file).string(), ErrorCode::Format, needle);
  }
}

TEST(Session, IntegerFieldsTakeIntegralFloatsOnly) {
  const std::string path = work_dir() + "/integral.attnscope.json";
  const std::string head =
      R"({"format": "attnscope-session", "version": 1, "input": {"kind": "text", "text": "a"},
          "model": {"id": "default-text"}, "selection": {"layer": )";
  write(path, head + "2.0}}");
  EXPECT_EQ(load_session(path).layer, 2);
  write(path, head + "2.5}}");
  expect_error(path, ErrorCode::Format, "selection.layer");
  write(path, head + "-1e19}}");
  expect_error(path, ErrorCode::Format, "selection.layer");
}

}  // namespace
}  // namespace attn::core

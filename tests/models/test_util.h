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

}  // namespace attn::test

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

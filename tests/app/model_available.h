// Tests that need an embedded model skip, with a message, where it is not installed.
#pragma once
#include "compute/error.h"
#include "models/arch/default_models.h"

namespace attn::test {

inline bool have_model(const char* id) {
  try {
    models::resolve_model_dir(id);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace attn::test

#define REQUIRE_MODEL(id)            \
  if (!::attn::test::have_model(id)) \
  GTEST_SKIP() << id << " not found (set ATTNSCOPE_MODELS or add assets/models)"

// Helpers for the architecture tests: the committed golden folders (tests/ref/goldens, made by
// tests/ref/make_goldens.py) and error measures against them.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "models/formats/npy.h"

namespace attn::test {

// tests/ref/goldens/<name>
std::string golden_dir(const std::string& name);
// <golden_dir(name)>/<file>.npy
models::NpyArray golden(const std::string& name, const std::string& file);
std::vector<int32_t> golden_ints(const std::string& name, const std::string& file);

// max |got - want| / max |want| (the tests' "relative" error of a whole tensor).
double max_rel_error(std::span<const float> got, std::span<const float> want);

// Copies a model folder into a scratch folder (for tests that damage files).
std::string copy_model(const std::string& name);

}  // namespace attn::test

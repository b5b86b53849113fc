// Backends by name (compute/backend_factory.cpp): every listed name builds that backend, the
// reference comes first, and an unknown name is refused with the list of known ones.
#include <gtest/gtest.h>

#include "compute/backend.h"
#include "compute/error.h"

using namespace attn;

TEST(BackendFactory, EveryNameBuildsThatBackend) {
  const std::vector<std::string> names = backend_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "reference");
  EXPECT_EQ(names[1], "cpu");
  for (const std::string& n : names) EXPECT_EQ(make_backend(n)->name(), n);
}

TEST(BackendFactory, UnknownNamesListTheKnownOnes) {
  try {
    make_backend("tpu");
    ADD_FAILURE() << "no error for 'tpu'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("'tpu'"), std::string::npos) << m;
    for (const std::string& n : backend_names()) EXPECT_NE(m.find(n), std::string::npos) << m;
  }
}

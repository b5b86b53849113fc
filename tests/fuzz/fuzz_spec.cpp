// Variant spec strings (parse_spec, make_variant): the grammar, every piece's parameters and
// their ranges. Pieces that parse print back to the same pieces (parse_spec(format_spec(p)) ==
// p); a variant that builds rebuilds from its canonical spec, and runs on two small problems
// (causal with grouped-query heads; bidirectional with fewer queries than keys) on the reference
// and cpu backends.
#include "compute/backend.h"
#include "compute/problem.h"
#include "compute/registry.h"
#include "compute/spec.h"
#include "tests/fuzz/fuzz_util.h"

using namespace attn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // a spec is a line of text; longer inputs only slow the search
  const std::string spec(fuzz::as_text(data, size));
  fuzz::refuse_only_with_attn_error([&] {
    const std::vector<SpecPiece> pieces = parse_spec(spec);
    std::vector<SpecPiece> again;
    try {
      again = parse_spec(format_spec(pieces));
    } catch (const attn::Error& e) {
      fuzz::broken("format_spec output does not parse: " + format_spec(pieces) + ": " + e.what());
    }
    fuzz::check(again == pieces, "parse_spec(format_spec(p)) != p for " + spec);
  });
  fuzz::refuse_only_with_attn_error([&] {
    const Variant v = make_variant(spec);
    try {
      fuzz::check(make_variant(v.spec()).spec() == v.spec(),
                  "canonical spec rebuilds differently: " + v.spec());
    } catch (const attn::Error& e) {
      fuzz::broken("canonical spec " + v.spec() + " does not build: " + e.what());
    }
    static const Problem problems[] = {random_problem(2, 1, 33, 33, 8, true, 1),
                                       random_problem(1, 1, 5, 40, 4, false, 2)};
    static const std::unique_ptr<Backend> backends[] = {make_backend("reference"),
                                                        make_backend("cpu")};
    RunOptions opt;
    opt.threads = 1;
    for (const Problem& p : problems)
      for (const auto& b : backends)
        fuzz::refuse_only_with_attn_error([&] { (void)run(v, p, *b, opt); });
  });
  return 0;
}

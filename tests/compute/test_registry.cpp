// Registry: every piece documented, specs round-trip through their canonical form, and bad specs
// give the documented errors.
#include <gtest/gtest.h>

#include <set>

#include "compute/error.h"
#include "compute/layout.h"
#include "compute/registry.h"
#include "compute/spec.h"
#include "test_util.h"

using namespace attn;
using attn::test::contains;
using attn::test::error_of;

namespace {

TEST(Registry, EveryPieceIsDocumented) {
  std::set<std::string> ids;
  for (const PieceInfo& p : registry_pieces()) {
    const VariantInfo& i = p.info;
    EXPECT_TRUE(ids.insert(i.id).second) << "duplicate id " << i.id;
    EXPECT_FALSE(i.display_name.empty()) << i.id;
    EXPECT_FALSE(i.family.empty()) << i.id;
    EXPECT_GT(i.source.size(), 20u) << i.id << ": source should name the paper: " << i.source;
    EXPECT_FALSE(i.description.empty()) << i.id;
    for (const ParamSpec& s : i.params) {
      EXPECT_LE(s.min, s.def) << i.id << "." << s.name;
      EXPECT_LE(s.def, s.max) << i.id << "." << s.name;
      EXPECT_FALSE(s.help.empty()) << i.id << "." << s.name;
    }
    EXPECT_EQ(&registry_piece(i.id), &p);
  }
  for (const char* id :
       {"dense",       "window",      "sinks_window", "strided",  "fixed",          "dilated",
        "bigbird",     "block_topk",  "topk",         "top_p",    "vertical_slash", "h2o",
        "sketch_walk", "temperature", "alibi",        "softcap",  "softmax",        "sigmoid",
        "relu",        "relu2",       "entmax15",     "softplus", "selective"})
    EXPECT_TRUE(ids.count(id)) << id;
}

TEST(Registry, CanonicalSpecsSpellEveryParameterAndRoundTrip) {
  EXPECT_EQ(make_variant("sinks_window(sinks=4,window=256)+softcap(cap=30)+sigmoid").spec(),
            "sinks_window(sinks=4,window=256)+softcap(cap=30)+sigmoid(bias_offset=0)");
  EXPECT_EQ(make_variant("window").spec(), "window(size=256)");
  EXPECT_EQ(make_variant(" window ( size = 8 ) + temperature(t=0.3) ").spec(),
            "window(size=8)+temperature(t=0.3)");
  EXPECT_EQ(make_variant("dense").spec(), "dense");
  EXPECT_EQ(make_variant("dense+softmax").spec(), "dense");
  EXPECT_EQ(make_variant("relu2+dense").spec(), "relu2");
  EXPECT_EQ(make_variant("selective").spec(), "selective");
  EXPECT_EQ(make_variant("top_p(p=0.95)").spec(), "top_p(block=64,p=0.95)");
  EXPECT_EQ(make_variant("window(size=1e2)").spec(), "window(size=100)");
  EXPECT_EQ(make_variant("temperature(t=1e+1)").spec(), "temperature(t=10)");
  EXPECT_EQ(make_variant("window", {{"size", 5}}).spec(), "window(size=5)");

  std::vector<std::string> specs;
  for (const PieceInfo& p : registry_pieces()) specs.push_back(p.info.id);
  for (const char* s :
       {"bigbird(block=32,random=2,seed=9)+alibi+softcap(cap=20)+entmax15",
        "block_topk(k=3)+temperature(t=0.7)+selective", "vertical_slash(last_q=16)+softplus",
        "softcap(cap=12.5)+alibi", "sketch_walk(density=0.33)+sigmoid(bias_offset=-1.25)"})
    specs.push_back(s);
  for (const std::string& s : specs) {
    Variant v = make_variant(s);
    Variant again = make_variant(v.spec());
    EXPECT_EQ(again.spec(), v.spec()) << s;
    EXPECT_EQ(again.mods().size(), v.mods().size()) << s;
    EXPECT_EQ(int(again.normaliser().kind), int(v.normaliser().kind)) << s;
    EXPECT_EQ(again.normaliser().a, v.normaliser().a) << s;
    EXPECT_EQ(again.selective(), v.selective()) << s;
    EXPECT_EQ(again.dense_pattern(), v.dense_pattern()) << s;
  }
}

TEST(Registry, PiecesBuildTheRightParts) {
  Variant v = make_variant("window(size=8)+alibi+temperature(t=2)+relu2+selective");
  ASSERT_NE(v.pattern(), nullptr);
  EXPECT_EQ(v.pattern()->info().id, "window");
  ASSERT_EQ(v.mods().size(), 2u);
  EXPECT_EQ(v.mods()[0].kind, ScoreMod::Kind::Alibi);
  EXPECT_EQ(v.mods()[1].kind, ScoreMod::Kind::Temperature);
  EXPECT_FLOAT_EQ(v.mods()[1].a, 2.0f);
  EXPECT_EQ(v.normaliser().kind, Normaliser::Kind::Relu);
  EXPECT_FLOAT_EQ(v.normaliser().a, 2.0f);
  EXPECT_TRUE(v.selective());
  EXPECT_EQ(make_variant("relu").normaliser().a, 1.0f);
  EXPECT_EQ(make_variant("sigmoid(bias_offset=2)").normaliser().kind, Normaliser::Kind::Sigmoid);
  EXPECT_EQ(make_variant("sigmoid(bias_offset=2)").normaliser().a, 2.0f);
  EXPECT_EQ(make_variant("entmax15").normaliser().kind, Normaliser::Kind::Entmax15);
  EXPECT_EQ(make_variant("softplus").normaliser().kind, Normaliser::Kind::SoftplusL1);
  EXPECT_EQ(make_variant("softcap(cap=5)").mods()[0].kind, ScoreMod::Kind::Softcap);
  EXPECT_TRUE(make_variant("dense").dense_pattern());
  EXPECT_EQ(make_variant("dense").select(random_problem(1, 1, 5, 5, 4, true, 1)).kind,
            Layout::Kind::Dense);
}

TEST(Registry, ScoreModAndNormaliserTablesBuildTheirPieces) {
  // Every normaliser piece builds the normaliser that names itself after it.
  int normalisers = 0, mods = 0;
  for (const PieceInfo& p : registry_pieces()) {
    if (p.kind == PieceKind::Normaliser) {
      ++normalisers;
      EXPECT_EQ(make_variant(p.info.id).normaliser().name(), p.info.id);
      EXPECT_EQ(p.info.family, "normaliser") << p.info.id;
    }
    if (p.kind == PieceKind::ScoreMod) {
      ++mods;
      EXPECT_EQ(make_variant(p.info.id).mods().size(), 1u) << p.info.id;
      EXPECT_EQ(p.info.family, "score-mod") << p.info.id;
    }
  }
  EXPECT_EQ(normalisers, 6);
  EXPECT_EQ(mods, 3);
  // Parameters reach the built pieces.
  EXPECT_EQ(make_variant("temperature(t=0.25)").mods()[0].kind, ScoreMod::Kind::Temperature);
  EXPECT_FLOAT_EQ(make_variant("temperature(t=0.25)").mods()[0].a, 0.25f);
  EXPECT_FLOAT_EQ(make_variant("softcap(cap=7)").mods()[0].a, 7.0f);
  EXPECT_EQ(make_variant("alibi").mods()[0].kind, ScoreMod::Kind::Alibi);
  EXPECT_FLOAT_EQ(make_variant("alibi").mods()[0].a, 8.0f);
  EXPECT_FLOAT_EQ(make_variant("sigmoid(bias_offset=-3)").normaliser().a, -3.0f);
  EXPECT_FLOAT_EQ(make_variant("relu").normaliser().a, 1.0f);
  EXPECT_FLOAT_EQ(make_variant("relu2").normaliser().a, 2.0f);
  EXPECT_EQ(make_variant("relu2").normaliser().kind, Normaliser::Kind::Relu);
  EXPECT_STREQ(piece_kind_name(PieceKind::ScoreMod), "score-mod");
  EXPECT_STREQ(piece_kind_name(PieceKind::Approximation), "approximation");
  // Display order: dense, patterns, score modifiers, normalisers, selective, approximations.
  auto rank = [](PieceKind k) {
    switch (k) {
      case PieceKind::Dense:
        return 0;
      case PieceKind::Pattern:
        return 1;
      case PieceKind::ScoreMod:
        return 2;
      case PieceKind::Normaliser:
        return 3;
      case PieceKind::Selective:
        return 4;
      case PieceKind::Approximation:
        return 5;
    }
    return -1;
  };
  const auto& all = registry_pieces();
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LE(rank(all[i - 1].kind), rank(all[i].kind)) << all[i].info.id;
}

TEST(Registry, BadSpecsGiveTheDocumentedErrors) {
  std::string m = error_of([] { make_variant("windw(size=3)"); }, ErrorCode::UnknownVariant);
  EXPECT_TRUE(contains(m, "windw") && contains(m, "sinks_window") && contains(m, "h2o")) << m;
  error_of([] { make_variant("window", {{"size", 3}, {"width", 2}}); }, ErrorCode::BadParameter);
  m = error_of([] { make_variant("window(width=3)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "width") && contains(m, "size")) << m;
  m = error_of([] { make_variant("top_p(p=1.5)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "top_p") && contains(m, "p=1.5") && contains(m, "range")) << m;
  error_of([] { make_variant("topk(k=0)"); }, ErrorCode::BadParameter);
  error_of([] { make_variant("window(size=3,size=4)"); }, ErrorCode::BadParameter);
  m = error_of([] { make_variant("fixed(block=4,summary=5)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "summary")) << m;

  for (const char* bad : {"", "   ", "window(", "window(size=", "window(size 3)", "window(size=3",
                          "+window", "window+", "window++alibi", "window(size=abc)", "window)",
                          "window(=3)", "window(size=3)x", "window(size=3,)", "win dow"}) {
    m = error_of([&] { make_variant(bad); }, ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(m, "malformed")) << "'" << bad << "': " << m;
  }
  m = error_of([] { make_variant("window(size=4)+dilated"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "two patterns") && contains(m, "dilated")) << m;
  error_of([] { make_variant("dense+topk"); }, ErrorCode::InvalidArgument);
  m = error_of([] { make_variant("sigmoid+relu"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "two normalisers")) << m;
  error_of([] { make_variant("selective+selective"); }, ErrorCode::InvalidArgument);
}

TEST(Spec, ParsesPiecesAndFormatsThemBack) {
  const std::string text = "sinks_window(sinks=4,window=256)+softcap(cap=30)+sigmoid";
  const std::vector<SpecPiece> pieces = parse_spec(text);
  const std::vector<SpecPiece> want = {{"sinks_window", {{"sinks", "4"}, {"window", "256"}}},
                                       {"softcap", {{"cap", "30"}}},
                                       {"sigmoid", {}}};
  EXPECT_EQ(pieces, want);
  EXPECT_EQ(format_spec(pieces), text);
  EXPECT_EQ(format_spec_piece(pieces[0]), "sinks_window(sinks=4,window=256)");
  // Parameter order is kept as written (the registry, not the parser, orders by schema).
  EXPECT_EQ(parse_spec("bigbird(seed=9,block=32)")[0].params,
            (std::vector<std::pair<std::string, std::string>>{{"seed", "9"}, {"block", "32"}}));
  // Every registered piece and every canonical spec round-trips.
  for (const PieceInfo& p : registry_pieces()) {
    const std::string canon = make_variant(p.info.id).spec();
    EXPECT_EQ(format_spec(parse_spec(canon)), canon) << p.info.id;
  }
  for (const std::vector<SpecPiece>& ps :
       {want, std::vector<SpecPiece>{{"x_1", {{"a_b", "-1.5e-3"}}}},
        std::vector<SpecPiece>{{"a", {}}, {"b", {}}, {"c", {{"n", "0"}}}}})
    EXPECT_EQ(parse_spec(format_spec(ps)), ps) << format_spec(ps);
}

TEST(Spec, BlanksAroundEveryTokenAreIgnored) {
  const auto compact = parse_spec("window(size=8)+temperature(t=0.3)");
  EXPECT_EQ(parse_spec(" window ( size = 8 ) + temperature( t=0.3 ) "), compact);
  EXPECT_EQ(parse_spec("\twindow(\nsize=8\n)+\ttemperature(t=0.3)\n"), compact);
  // Empty parentheses mean no parameters, and format back as the bare id.
  EXPECT_EQ(parse_spec("window ( )"), (std::vector<SpecPiece>{{"window", {}}}));
  EXPECT_EQ(format_spec(parse_spec("window()")), "window");
  EXPECT_EQ(make_variant("window()").spec(), "window(size=256)");
}

TEST(Spec, OddValuesStayText) {
  const auto params = [](const std::string& s) { return parse_spec(s).at(0).params.at(0).second; };
  EXPECT_EQ(params("temperature(t=1e+1)"), "1e+1");  // '+' of an exponent is not a separator
  EXPECT_EQ(params("temperature(t=-0.5)"), "-0.5");
  EXPECT_EQ(params("temperature(t=.5)"), ".5");
  EXPECT_EQ(params("h2o(heavy=true)"), "true");
  EXPECT_EQ(params("block_topk(k=2..8:+2)"), "2..8:+2");  // sweep ranges and lists
  EXPECT_EQ(params("window(size=16|32|64)"), "16|32|64");
  EXPECT_EQ(parse_spec("temperature(t=1e+1)+alibi").size(), 2u);
  EXPECT_EQ(make_variant("temperature(t=1E+1)+softcap(cap=2.5e1)").spec(),
            "temperature(t=10)+softcap(cap=25)");
  // A value the parser accepts but the registry cannot read as a number.
  const std::string m = error_of([] { make_variant("window(size=8)+softcap(cap=1..3)"); },
                                 ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "'1..3' is not a number") && contains(m, "softcap(cap=1..3)")) << m;
}

TEST(Spec, ErrorsNameThePositionAndThePiece) {
  std::string m =
      error_of([] { parse_spec("window(size=8)+softcap(cap=)"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "character 28") && contains(m, "piece 'softcap(cap='") &&
              contains(m, "value for 'cap'"))
      << m;
  m = error_of([] { parse_spec("window(size 8)"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "piece 'window(size'") && contains(m, "'='")) << m;
  m = error_of([] { parse_spec("dense+sigmoid(bias_offset=1 2)"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "piece 'sigmoid(bias_offset=1'") && contains(m, "',' or ')'")) << m;
  m = error_of([] { parse_spec("window+"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "must follow '+'")) << m;
  m = error_of([] { parse_spec("window(size=(8))"); }, ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(m, "piece 'window(size='")) << m;
  m = error_of([] { parse_spec("topk(k=1,k=2)"); }, ErrorCode::BadParameter);
  EXPECT_TRUE(contains(m, "topk") && contains(m, "'k' given twice")) << m;
  for (const char* bad : {"", " ", "(size=3)", "window(size=3", "window(size=3)(", "a++b", "a,b"})
    error_of([&] { parse_spec(bad); }, ErrorCode::InvalidArgument);
}

TEST(Spec, PatternIdIsThePatternPieceOrDense) {
  EXPECT_EQ(spec_pattern_id("window(size=8)+softcap(cap=3)"), "window");
  EXPECT_EQ(spec_pattern_id("softcap(cap=3)+block_topk(block=16,k=2)"), "block_topk");
  EXPECT_EQ(spec_pattern_id("dense+relu"), "dense");
  EXPECT_EQ(spec_pattern_id("softcap(cap=3)"), "dense");
  EXPECT_EQ(spec_pattern_id("selective"), "dense");
  error_of([] { spec_pattern_id("windw"); }, ErrorCode::UnknownVariant);
  error_of([] { spec_pattern_id("window("); }, ErrorCode::InvalidArgument);
}

TEST(Registry, PredictCountsKeptEntriesAndSelectorWork) {
  Problem p = random_problem(4, 2, 100, 100, 16, true, 3);
  int64_t visible = visible_entries(p);
  Cost dense = make_variant("dense").predict(p);
  EXPECT_DOUBLE_EQ(dense.flops, 4.0 * 16 * double(visible) * 4);
  EXPECT_GT(dense.bytes, 4.0 * (4 * 100 * 16 * 2 + 2 * 2 * 100 * 16) - 1);
  Variant w = make_variant("window(size=10)");
  int64_t kept = layout_kept_entries(w.select(p), p, 0);
  EXPECT_NEAR(w.predict(p).flops, 4.0 * 16 * double(kept) * 4, 1e-6);
  EXPECT_LT(w.predict(p).flops, dense.flops);
  // A selector's prediction adds its own work to the kept entries' work.
  Variant t = make_variant("topk(k=10)");
  EXPECT_GT(t.predict(p, 0.1).flops, 4.0 * 16 * 0.1 * double(visible) * 4);
  EXPECT_DOUBLE_EQ(t.predict(p, 0.1).flops - 4.0 * 16 * 0.1 * double(visible) * 4,
                   2.0 * 16 * double(visible) * 4);
}

}  // namespace

TEST(Registry, FamiliesGroupApproximationsApartFromDense) {
  EXPECT_EQ(spec_family_id("dense"), "dense");
  EXPECT_EQ(spec_family_id("window(size=8)+softcap(cap=30)"), "window");
  EXPECT_EQ(spec_family_id("performer(features=64)"), "performer");
  EXPECT_EQ(spec_family_id("softcap(cap=3)"), "softcap");
  EXPECT_EQ(spec_pattern_id("performer(features=64)"), "dense");  // no pattern piece
  EXPECT_THROW(spec_family_id("nope(x=1)"), Error);
}

// Sweep specs, shards and the trade-off table.
#include <gtest/gtest.h>

#include <algorithm>

#include "app/core/analysis/sweep.h"
#include "compute/error.h"

namespace attn::core {
namespace {

TEST(Sweep, ExpandsGeometricArithmeticAndLists) {
  EXPECT_EQ(expand_sweep("window(size=16..128:x2)"),
            (std::vector<std::string>{"window(size=16)", "window(size=32)", "window(size=64)",
                                      "window(size=128)"}));
  EXPECT_EQ(expand_sweep("block_topk(block=16,k=2..6:+2)"),
            (std::vector<std::string>{"block_topk(block=16,k=2)", "block_topk(block=16,k=4)",
                                      "block_topk(block=16,k=6)"}));
  EXPECT_EQ(
      expand_sweep("top_p(p=0.5|0.9)+softcap(cap=10|30)"),
      (std::vector<std::string>{"top_p(p=0.5)+softcap(cap=10)", "top_p(p=0.5)+softcap(cap=30)",
                                "top_p(p=0.9)+softcap(cap=10)", "top_p(p=0.9)+softcap(cap=30)"}));
  EXPECT_EQ(expand_sweep("dense"), (std::vector<std::string>{"dense"}));
  EXPECT_EQ(expand_sweeps({"window(size=8..16:x2)", "window(size=16)", "dense"}),
            (std::vector<std::string>{"window(size=8)", "window(size=16)", "dense"}));
}

// A sweep table starts with its dense baseline row; dense among the variants is not repeated.
TEST(Sweep, TableStartsWithTheDenseBaseline) {
  EXPECT_EQ(sweep_table_specs({"window(size=8..16:x2)"}),
            (std::vector<std::string>{"dense", "window(size=8)", "window(size=16)"}));
  EXPECT_EQ(sweep_table_specs({"window(size=8)", "dense", "top_p(p=0.5|0.9)"}),
            (std::vector<std::string>{"dense", "window(size=8)", "top_p(p=0.5)", "top_p(p=0.9)"}));
  EXPECT_EQ(sweep_table_specs({"dense"}), (std::vector<std::string>{"dense"}));
  // Shard 0 of any split owns the baseline, once.
  for (int n = 1; n <= 4; ++n) {
    int owners = 0;
    for (int i = 0; i < n; ++i) {
      const auto mine = shard_items(5, {i, n});
      owners += std::count(mine.begin(), mine.end(), 0);
      if (i == 0) {
        EXPECT_EQ(mine.front(), 0);
      }
    }
    EXPECT_EQ(owners, 1);
  }
}

TEST(Sweep, GridsUpToTheLimitExpand) {
  EXPECT_EQ(expand_sweep("window(size=1..100:+1)+softcap(cap=1..100:+1)").size(), 10000u);
}

TEST(Sweep, BadRangesAreNamed) {
  for (const char* bad : {"window(size=16..8:x2)", "window(size=16..64)", "window(size=1..8:x1)",
                          "window(size=a..8:x2)", "window(size=4..8:+0)", "window(size)",
                          "window(size=8", "window(size=8||16)",
                          // 100 x 101 variants: refused before any is written
                          "window(size=1..100:+1)+softcap(cap=1..101:+1)"}) {
    try {
      expand_sweep(bad);
      ADD_FAILURE() << bad << " expanded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
    }
  }
}

TEST(Sweep, ShardsPartitionTheItems) {
  for (int n = 1; n <= 5; ++n) {
    std::vector<int> seen(13, 0);
    for (int i = 0; i < n; ++i)
      for (int k : shard_items(13, {i, n})) ++seen[size_t(k)];
    for (int c : seen) EXPECT_EQ(c, 1);
  }
  EXPECT_EQ(parse_shard("2/4").index, 2);
  EXPECT_EQ(parse_shard("2/4").count, 4);
  for (const char* bad : {"4/4", "-1/4", "1", "1/0", "a/b", "1/2x"})
    EXPECT_THROW(parse_shard(bad), Error) << bad;
}

TEST(Sweep, CsvRoundTripAndMerge) {
  std::vector<SweepRow> rows;
  for (int i = 0; i < 5; ++i) {
    SweepRow r;
    r.index = i;
    r.point.spec = "block_topk(block=16,k=" + std::to_string(i + 1) + ")";
    r.point.pattern = "block_topk";
    r.point.density = 0.1 * (i + 1);
    r.point.rel_error = 1.0 / (i + 3);
    r.point.next_token_kl = i == 2 ? kNaN : 0.01 * i;
    rows.push_back(r);
  }
  const std::string csv = tradeoff_csv(rows);
  const auto back = parse_tradeoff_csv(csv, "t.csv");
  EXPECT_EQ(tradeoff_csv(back), csv);
  std::vector<SweepRow> a = {rows[0], rows[2], rows[4]}, b = {rows[1], rows[3]};
  EXPECT_EQ(tradeoff_csv(merge_sweep_rows({b, a})), csv);
  EXPECT_THROW(merge_sweep_rows({a}), Error);                // a shard is missing
  EXPECT_THROW(merge_sweep_rows({a, b, {rows[1]}}), Error);  // a row twice
  EXPECT_THROW(parse_tradeoff_csv("x,y\n1,2\n", "bad.csv"), Error);
  EXPECT_THROW(parse_tradeoff_csv(csv + "7,short\n", "bad.csv"), Error);
  // The index is a count: nan, fractions, negatives and values past int are refused by name.
  const std::string rest = ",\"dense\",dense,1,100,0,0.75,0,1,0,nan,nan,nan,nan,f32\n";
  for (const char* index : {"nan", "1e300", "2147483648", "-1", "2.5", ""}) {
    try {
      parse_tradeoff_csv(tradeoff_csv({}) + index + rest, "bad.csv");
      ADD_FAILURE() << "index '" << index << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Format) << index;
      EXPECT_NE(std::string(e.what()).find("bad.csv:2"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(parse_tradeoff_csv(tradeoff_csv({}) + "2147483647" + rest, "ok.csv")[0].index,
            2147483647);
  // A pattern with quotes or commas (read from a file) is written so that it reads back.
  for (const char* pattern : {"a\"b", "a,b", "\"\"", "plain"}) {
    SweepRow odd;
    odd.point.spec = "dense";
    odd.point.pattern = pattern;
    const auto again = parse_tradeoff_csv(tradeoff_csv({odd}), "odd.csv");
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].point.pattern, pattern);
  }
}

TEST(Sweep, SelectionAndKernelTimeKeptApart) {
  SweepRow r;
  r.index = 0;
  r.point.spec = "topk(k=8)";
  r.point.pattern = "topk";
  r.point.select_seconds = 0.25;
  r.point.kernel_seconds = 0.5;
  const auto back = parse_tradeoff_csv(tradeoff_csv({r}), "t.csv");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].point.select_seconds, 0.25);
  EXPECT_EQ(back[0].point.kernel_seconds, 0.5);
  // A table written before the split (kernel_seconds held both) still opens.
  const auto v1 = parse_tradeoff_csv(
      "index,spec,pattern,density,flops,kernel_seconds,rel_error,mass_recall,row_kl,"
      "next_token_kl,top1_agreement,perplexity,cls_cosine\n"
      "0,\"dense\",dense,1,100,0.75,0,1,0,nan,nan,nan,nan\n",
      "old.csv");
  ASSERT_EQ(v1.size(), 1u);
  EXPECT_EQ(v1[0].point.select_seconds, 0.0);
  EXPECT_EQ(v1[0].point.kernel_seconds, 0.75);
  EXPECT_EQ(v1[0].point.flops, 100.0);
  EXPECT_EQ(v1[0].point.mass_recall, 1.0);
  // The new header with the old field count is refused, with the line named.
  EXPECT_THROW(
      parse_tradeoff_csv(tradeoff_csv({}) + "0,\"dense\",dense,1,100,0.75,0,1,0,nan,nan,nan,nan\n",
                         "mixed.csv"),
      Error);
}

TEST(Sweep, PrecisionIsAColumn) {
  SweepRow r;
  r.index = 1;
  r.point.spec = "window(size=16)";
  r.point.pattern = "window";
  r.point.precision = "bf16";
  const std::string csv = tradeoff_csv({r});
  EXPECT_NE(csv.find(",cls_cosine,precision\n"), std::string::npos) << csv;
  const auto back = parse_tradeoff_csv(csv, "t.csv");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].point.precision, "bf16");
  // A table written before the column holds f32 points.
  const auto v2 = parse_tradeoff_csv(
      "index,spec,pattern,density,flops,select_seconds,kernel_seconds,rel_error,mass_recall,"
      "row_kl,next_token_kl,top1_agreement,perplexity,cls_cosine\n"
      "0,\"dense\",dense,1,100,0,0.75,0,1,0,nan,nan,nan,nan\n",
      "v2.csv");
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0].point.precision, "f32");
  // An unknown precision is refused with the line named.
  try {
    parse_tradeoff_csv(
        tradeoff_csv({}) + "0,\"dense\",dense,1,100,0,0.75,0,1,0,nan,nan,nan,nan,f8\n", "bad.csv");
    ADD_FAILURE() << "precision f8 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Format);
    EXPECT_NE(std::string(e.what()).find("bad.csv:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attn::core

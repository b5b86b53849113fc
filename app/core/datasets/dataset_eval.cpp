#include "app/core/datasets/dataset_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <tuple>

#include "app/core/analysis/sweep.h"
#include "app/core/datasets/dataset_worker.h"
#include "app/core/datasets/shard_rows.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/session/labels.h"
#include "compute/backend.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/registry.h"
#include "models/arch/substitution.h"

namespace attn::core {

DatasetEval evaluate_image_dataset(const models::Model& model, const ImageDataset& d,
                                   const std::string& spec, const std::vector<int32_t>* dense,
                                   const DatasetEvalOptions& o) {
  const models::ModelInfo& info = model.info();
  require(info.vision, ErrorCode::InvalidArgument,
          info.dir + " is a text model: an image dataset needs a vision model");
  require(!dense || dense->size() == d.records.size(), ErrorCode::InvalidArgument,
          "dataset evaluation: the dense predictions are for another dataset");
  const Variant variant = make_variant(spec);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = int64_t(d.records.size());
  DatasetEval e;
  e.spec = spec;
  e.records = n;
  e.predicted.assign(size_t(n), -1);
  // Images in parallel, each forward pass on one thread with its own backend (a backend runs one
  // call at a time); per-image sums combined at the end in record order.
  std::vector<double> density(size_t(n), 0.0), flops(size_t(n), 0.0);
  parallel_items(
      n, o.threads,
      [&]() -> std::function<void(int64_t)> {
        auto w = std::make_shared<DatasetWorker>(variant, o);
        return [&, w](int64_t i) {
          models::ModelInput in;
          in.image = model.preprocessor()(d.records[size_t(i)].image);
          const models::ModelOutput out = model.forward(in, w->substituted);
          require(out.n_logits > 0 && out.logits.size() >= size_t(out.n_logits),
                  ErrorCode::InvalidArgument, info.dir + ": the model gives no class logits");
          e.predicted[size_t(i)] =
              int32_t(std::max_element(out.logits.begin(), out.logits.begin() + out.n_logits) -
                      out.logits.begin());
          const SubstitutedCost c = substituted_cost(out);
          density[size_t(i)] = c.density;
          flops[size_t(i)] = c.flops;
        };
      },
      o.cancel);
  require(!(o.cancel && o.cancel->load()), ErrorCode::Cancelled, "dataset evaluation cancelled");
  int64_t right = 0, same = 0;
  std::vector<double> correct, drop;  // per labelled image: 1 when right; dense's right - mine
  for (int64_t i = 0; i < n; ++i) {
    const ImageRecord& r = d.records[size_t(i)];
    if (r.label >= 0) {
      ++e.labelled;
      const bool mine = e.predicted[size_t(i)] == r.label;
      right += mine;
      correct.push_back(mine);
      if (dense) drop.push_back(double((*dense)[size_t(i)] == r.label) - double(mine));
    }
    same += !dense || (*dense)[size_t(i)] == e.predicted[size_t(i)];
    e.density += density[size_t(i)];
    e.attention_flops += flops[size_t(i)];
  }
  if (n > 0) e.density /= double(n), e.attention_flops /= double(n);
  e.accuracy = e.labelled ? double(right) / double(e.labelled) : std::nan("");
  std::tie(e.accuracy_lo, e.accuracy_hi) =
      e.labelled ? bootstrap_ci(correct, 1000, 1234) : std::pair{std::nan(""), std::nan("")};
  std::tie(e.drop_lo, e.drop_hi) =
      !drop.empty() ? bootstrap_ci(drop, 1000, 4321) : std::pair{std::nan(""), std::nan("")};
  e.agreement = n ? double(same) / double(n) : std::nan("");
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

namespace {

constexpr const char* kDatasetHeader =
    "index,spec,records,labelled,accuracy,accuracy_lo,accuracy_hi,accuracy_drop,drop_lo,drop_hi,"
    "agreement_with_dense,density,attention_gflops_per_image,seconds";

}  // namespace

std::string dataset_csv(const std::vector<DatasetRow>& rows) {
  const DatasetRow& base =
      dense_row(rows, "a dataset table needs its dense row (index 0): the drops are against it");
  std::string out = std::string(kDatasetHeader) + "\n";
  for (const DatasetRow& r : rows) {
    const DatasetEval& e = r.eval;
    out += std::to_string(r.index) + "," + csv_quote(e.spec) + "," + std::to_string(e.records) +
           "," + std::to_string(e.labelled) + "," + csv_field(e.accuracy) + "," +
           csv_field(e.accuracy_lo) + "," + csv_field(e.accuracy_hi) + "," +
           csv_field(base.eval.accuracy - e.accuracy) + "," + csv_field(e.drop_lo) + "," +
           csv_field(e.drop_hi) + "," + csv_field(e.agreement) + "," + csv_field(e.density) + "," +
           csv_field(e.attention_flops / 1e9) + "," + csv_field(e.seconds) + "\n";
  }
  return out;
}

bool is_dataset_csv(const std::string& text) {
  return has_header(text, kDatasetHeader);
}

std::vector<DatasetRow> parse_dataset_csv(const std::string& text, const std::string& source) {
  std::vector<DatasetRow> rows;
  for (const TableLine& line : table_lines(text, kDatasetHeader, 14, source, "dataset")) {
    const std::vector<std::string>& f = line.fields;
    const std::string& where = line.where;
    auto num = [&](const std::string& s) { return csv_number(s, where); };
    auto count = [&](const std::string& s) { return csv_count(s, where, 9e15); };
    DatasetRow r;
    const int64_t index = count(f[0]);
    require(index < (int64_t(1) << 30), ErrorCode::Format, where + ": index out of range");
    r.index = int(index);
    DatasetEval& e = r.eval;
    e.spec = f[1];
    e.records = count(f[2]);
    e.labelled = count(f[3]);
    e.accuracy = num(f[4]);
    e.accuracy_lo = num(f[5]);
    e.accuracy_hi = num(f[6]);
    e.drop_lo = num(f[8]);
    e.drop_hi = num(f[9]);
    e.agreement = num(f[10]);
    e.density = num(f[11]);
    e.attention_flops = num(f[12]) * 1e9;
    e.seconds = num(f[13]);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<DatasetRow> merge_dataset_rows(const std::vector<std::vector<DatasetRow>>& shards) {
  return merge_shard_rows(shards, [](const DatasetRow& a, const DatasetRow& b) {
    // Every shard ran dense on its own: the same data and model give the same numbers.
    if (a.eval.records == b.eval.records && a.eval.accuracy == b.eval.accuracy)
      return std::string();
    return std::to_string(b.eval.records) + " images at " + csv_field(b.eval.accuracy) +
           " against " + std::to_string(a.eval.records) + " at " + csv_field(a.eval.accuracy);
  });
}

TradeoffPoint dataset_point(const DatasetEval& e) {
  TradeoffPoint t;
  t.spec = e.spec;
  t.caption = variant_caption(e.spec);
  t.pattern = spec_family_id(e.spec);
  t.density = e.density;
  t.flops = e.attention_flops;
  t.rel_error = kNaN;  // no per-input comparison ran: only the dataset's numbers are drawn
  t.mass_recall = kNaN;
  t.accuracy = e.accuracy;
  t.accuracy_lo = e.accuracy_lo;
  t.accuracy_hi = e.accuracy_hi;
  return t;
}

}  // namespace attn::core

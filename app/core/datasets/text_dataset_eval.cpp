#include "app/core/datasets/text_dataset_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "app/core/analysis/sweep.h"
#include "app/core/datasets/dataset_worker.h"
#include "app/core/datasets/shard_rows.h"
#include "app/core/heads/head_atlas.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/labels.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "compute/registry.h"
#include "models/arch/substitution.h"
#include "models/arch/text_input.h"

namespace attn::core {

EncodedRecords encode_records(const models::Model& model, const std::vector<TextRecord>& records) {
  EncodedRecords out;
  for (const TextRecord& r : records) {
    models::TextInput ti = encode_for_model(model, r.text, r.source);
    out.truncated += ti.truncated;
    out.ids.push_back(std::move(ti.ids));
  }
  return out;
}

TextDatasetEval evaluate_text_dataset(const models::Model& model, const EncodedRecords& records,
                                      const std::vector<std::string>& names,
                                      const std::string& spec, const TextDatasetEval* dense,
                                      const DatasetEvalOptions& o) {
  const models::ModelInfo& info = model.info();
  require(info.causal && info.vocab > 0, ErrorCode::InvalidArgument,
          info.dir + " has no next-token logits: a text dataset needs a causal language model");
  const int64_t n = int64_t(records.ids.size());
  require(n > 0, ErrorCode::InvalidArgument, "the text dataset has no records");
  require(!dense || int64_t(dense->record_loss.size()) == n, ErrorCode::InvalidArgument,
          "text dataset evaluation: the dense baseline is for another dataset");
  for (int64_t i = 0; i < n; ++i)
    require(records.ids[size_t(i)].size() >= 2, ErrorCode::InvalidArgument,
            (size_t(i) < names.size() ? names[size_t(i)] : "record " + std::to_string(i)) +
                ": fewer than 2 tokens, so no next token to predict");
  const Variant variant = make_variant(spec);
  const auto t0 = std::chrono::steady_clock::now();
  TextDatasetEval e;
  e.spec = spec;
  e.records = n;
  e.truncated = records.truncated;
  e.record_loss.assign(size_t(n), 0.0);
  std::vector<double> kl(size_t(n), 0.0), top1(size_t(n), 1.0), density(size_t(n), 1.0),
      flops(size_t(n), 0.0);
  // Records in parallel, each forward pass on one thread with its own backend; per-record values
  // combined at the end in record order.
  parallel_items(
      n, o.threads,
      [&]() -> std::function<void(int64_t)> {
        auto w = std::make_shared<DatasetWorker>(variant, o);
        return [&, w](int64_t i) {
          models::ModelInput in;
          in.ids = records.ids[size_t(i)];
          const models::ModelOutput out = model.forward(in, w->substituted);
          e.record_loss[size_t(i)] = next_token_loss(out, in.ids);
          if (dense) {  // the same record without the variant, for the KL and the agreement
            const models::EndToEnd ee =
                models::end_to_end(info, in, model.forward(in, w->plain), out);
            kl[size_t(i)] = ee.mean_kl;
            top1[size_t(i)] = ee.top1_agreement;
          }
          const SubstitutedCost c = substituted_cost(out);
          density[size_t(i)] = c.density;
          flops[size_t(i)] = c.flops;
        };
      },
      o.cancel);
  require(!(o.cancel && o.cancel->load()), ErrorCode::Cancelled,
          "text dataset evaluation cancelled");
  std::vector<double> rise;
  double loss = 0, kls = 0, agree = 0, dens = 0, all_flops = 0;
  for (int64_t i = 0; i < n; ++i) {
    e.tokens += int64_t(records.ids[size_t(i)].size());
    loss += e.record_loss[size_t(i)];
    kls += kl[size_t(i)];
    agree += top1[size_t(i)];
    dens += density[size_t(i)];
    all_flops += flops[size_t(i)];
    if (dense) rise.push_back(e.record_loss[size_t(i)] - dense->record_loss[size_t(i)]);
  }
  e.loss = loss / double(n);
  e.next_token_kl = kls / double(n);
  e.top1_agreement = agree / double(n);
  e.density = dens / double(n);
  e.attention_flops = all_flops / double(e.tokens);
  std::tie(e.loss_lo, e.loss_hi) = bootstrap_ci(e.record_loss, 1000, 1234);
  std::tie(e.rise_lo, e.rise_hi) = dense ? bootstrap_ci(rise, 1000, 4321) : std::pair{kNaN, kNaN};
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

namespace {

constexpr const char* kTextHeader =
    "index,spec,records,tokens,loss,loss_lo,loss_hi,loss_rise,rise_lo,rise_hi,next_token_kl,"
    "top1_agreement,density,attention_flops_per_token,seconds";

}  // namespace

std::string text_dataset_csv(const std::vector<TextDatasetRow>& rows) {
  const TextDatasetRow& base = dense_row(
      rows, "a text dataset table needs its dense row (index 0): the rises are against it");
  std::string out = std::string(kTextHeader) + "\n";
  for (const TextDatasetRow& r : rows) {
    const TextDatasetEval& e = r.eval;
    out += std::to_string(r.index) + "," + csv_quote(e.spec) + "," + std::to_string(e.records) +
           "," + std::to_string(e.tokens) + "," + csv_field(e.loss) + "," + csv_field(e.loss_lo) +
           "," + csv_field(e.loss_hi) + "," + csv_field(e.loss - base.eval.loss) + "," +
           csv_field(e.rise_lo) + "," + csv_field(e.rise_hi) + "," + csv_field(e.next_token_kl) +
           "," + csv_field(e.top1_agreement) + "," + csv_field(e.density) + "," +
           csv_field(e.attention_flops) + "," + csv_field(e.seconds) + "\n";
  }
  return out;
}

bool is_text_dataset_csv(const std::string& text) {
  return has_header(text, kTextHeader);
}

std::vector<TextDatasetRow> parse_text_dataset_csv(const std::string& text,
                                                   const std::string& source) {
  std::vector<TextDatasetRow> rows;
  for (const TableLine& line : table_lines(text, kTextHeader, 15, source, "text dataset")) {
    const std::vector<std::string>& f = line.fields;
    const std::string& where = line.where;
    auto num = [&](const std::string& s) { return csv_number(s, where); };
    auto count = [&](const std::string& s) { return csv_count(s, where, 1e9); };
    TextDatasetRow r;
    r.index = int(count(f[0]));
    TextDatasetEval& e = r.eval;
    e.spec = f[1];
    e.records = count(f[2]);
    e.tokens = count(f[3]);
    e.loss = num(f[4]);
    e.loss_lo = num(f[5]);
    e.loss_hi = num(f[6]);
    e.rise_lo = num(f[8]);
    e.rise_hi = num(f[9]);
    e.next_token_kl = num(f[10]);
    e.top1_agreement = num(f[11]);
    e.density = num(f[12]);
    e.attention_flops = num(f[13]);
    e.seconds = num(f[14]);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<TextDatasetRow> merge_text_dataset_rows(
    const std::vector<std::vector<TextDatasetRow>>& shards) {
  return merge_shard_rows(shards, [](const TextDatasetRow& a, const TextDatasetRow& b) {
    if (a.eval.tokens == b.eval.tokens && a.eval.loss == b.eval.loss) return std::string();
    return std::to_string(b.eval.tokens) + " tokens at loss " + csv_field(b.eval.loss) +
           " against " + std::to_string(a.eval.tokens) + " at " + csv_field(a.eval.loss);
  });
}

TradeoffPoint text_dataset_point(const TextDatasetEval& e) {
  TradeoffPoint t;
  t.spec = e.spec;
  t.caption = variant_caption(e.spec);
  t.pattern = spec_family_id(e.spec);
  t.density = e.density;
  t.flops = e.attention_flops;
  t.rel_error = kNaN;  // no per-input comparison ran: only the dataset's numbers are drawn
  t.mass_recall = kNaN;
  t.next_token_kl = e.next_token_kl;
  t.top1_agreement = e.top1_agreement;
  t.perplexity = std::exp(e.loss);
  t.loss = e.loss;
  t.loss_lo = e.loss_lo;
  t.loss_hi = e.loss_hi;
  return t;
}

}  // namespace attn::core

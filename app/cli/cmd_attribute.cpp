// `attnscope attribute`: what each attribution method says the target depended on (attention,
// rollout, flow, gradients, integrated gradients, attention x gradient, Chefer et al., AttnLRP,
// occlusion; app/core/attribution), with or without a variant, their rank agreement and, with
// --faithfulness, deletion and insertion curves against random orders.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/json_file.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "app/cli/usage.h"
#include "app/core/analysis/analysis.h"
#include "app/core/analysis/sweep.h"
#include "app/core/attribution/attribution.h"
#include "app/core/attribution/attribution_dataset.h"
#include "app/core/attribution/attribution_export.h"
#include "app/core/attribution/faithfulness.h"
#include "app/core/datasets/image_dataset.h"
#include "app/core/datasets/text_dataset.h"
#include "app/core/export/data_export.h"
#include "app/core/heads/interventions.h"
#include "app/core/session/model_catalog.h"
#include "app/figures/figure.h"
#include "compute/fallback.h"
#include "compute/registry.h"

namespace attn::cli {

namespace {

class AttributeCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override;
  int run() override;

 private:
  core::ModelInput input(const core::Model& model) const;
  core::AttributionRequest request(const core::Model& model, const core::ModelInput& in);
  // A class given by index or by name (id2label).
  int class_of(const core::Model& model, const std::string& text, const std::string& option) const;
  void print(const core::Attribution& a, const std::vector<core::RankAgreement>& agree) const;
  void print_faithfulness(const core::Faithfulness& f) const;
  // --faithfulness: the curves with the command's steps and orders (else none).
  core::Faithfulness curves(const core::Model& model, const core::ModelInput& in,
                            const core::Attribution& a, const core::AttributionRequest& q) const;
  // --dataset: every record (this shard's) attributed; --merge: shard files joined.
  int run_dataset(const core::Model& model);
  int run_merge();
  void print_summary(const core::AttributionDatasetSummary& s) const;
  core::AttributionRecordSummary attribute_record(const core::Model& model,
                                                  const core::ModelInput& in);

  struct Options {
    std::string model, text, text_file, image, methods = "attention,rollout,grad_input,attnlrp";
    std::vector<int32_t> ids;
    int target_pos = -1, target_id = -1, foil_id = -1;
    std::string target, target_class, foil, variant, backend = "cpu";
    std::vector<int> layers, heads;
    std::string baseline = "zero", occlusion = "replace", json_out, dump, figure, matmul = "f32";
    FigureSizeOptions size;
    std::string dataset, shard;
    std::vector<std::string> merge;
    int limit = 0, bootstrap = 1000;
    int ig_steps = 32, top_k = 5, show = 8, steps = 0, random_orders = 4, threads = 0;
    bool faithfulness = false, bos = false;
  } o;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Variant> variant_;
  core::Substitution sub_;
};

void AttributeCommand::add_options(CLI::App& cmd) {
  add_model_option(cmd, o.model, "; not with --merge");
  auto* t = cmd.add_option("--text", o.text, "Input text");
  auto* tf = cmd.add_option("--text-file", o.text_file, "File holding the input text (UTF-8)");
  auto* ids =
      cmd.add_option("--ids", o.ids, "Token ids (spaces or commas between them)")->delimiter(',');
  auto* im = cmd.add_option("--image", o.image, "Input image (vision models)");
  t->excludes(tf)->excludes(ids)->excludes(im);
  tf->excludes(ids)->excludes(im);
  ids->excludes(im);
  cmd.add_flag("--bos", o.bos,
               "Text: put the model's beginning-of-text token (config bos_token_id) first");
  cmd.add_option("--target-pos", o.target_pos,
                 "Text: the position whose logits hold the target (-1: the last)")
      ->capture_default_str();
  cmd.add_option("--target-id", o.target_id, "Target token id (default: the top prediction)");
  cmd.add_option("--target", o.target, "Target token as text (one token, e.g. ' the')");
  cmd.add_option("--target-class", o.target_class, "Images: target class, index or name");
  cmd.add_option("--foil", o.foil,
                 "z = logit(target) - logit(foil): a token as text, or a class index or name");
  cmd.add_option("--foil-id", o.foil_id, "The foil as a token id");
  cmd.add_option("--method", o.methods,
                 "Methods, comma separated, or 'all': attention, rollout, flow, grad_input, "
                 "integrated_gradients, attn_grad, chefer, attnlrp, occlusion")
      ->capture_default_str();
  cmd.add_option("-v,--variant", o.variant, "Variant substituted for dense attention (one spec)")
      ->type_name("SPEC");
  add_index_list(cmd, "--layers", o.layers, "Layers the variant replaces (default: all)");
  add_index_list(cmd, "--heads", o.heads, "Query heads the variant replaces (default: all)");
  cmd.add_option("--backend", o.backend, "Backend of the variant")->capture_default_str();
  cmd.add_option("--baseline", o.baseline,
                 "Integrated gradients' start and what occlusion puts in: zero, token[:ID] "
                 "(text: the mask/pad/unk token), mean (images: each channel's mean)")
      ->capture_default_str();
  cmd.add_option("--ig-steps", o.ig_steps, "Integrated gradients: steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd.add_option("--matmul", o.matmul,
                 "Precision of every pass's matrix products: f32, or bf16 (x and weights rounded "
                 "to bf16, sums in f32; AMX tiles or vdpbf16ps where the CPU has them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd.add_option("--occlusion", o.occlusion, "Occlusion: replace (by the baseline) or delete")
      ->capture_default_str()
      ->check(CLI::IsMember({"replace", "delete"}));
  cmd.add_flag("--faithfulness", o.faithfulness,
               "Deletion and insertion curves in each method's order and random orders");
  cmd.add_option("--steps", o.steps,
                 "Faithfulness: steps of the curves (0: one unit a step up to 64 units, else 64)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd.add_option("--random-orders", o.random_orders, "Faithfulness: random orders averaged")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd.add_option("--top-k", o.top_k, "Rank agreement: the k of top-k overlap")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--show", o.show, "Units listed per method")->capture_default_str();
  add_json_option(cmd, o.json_out, "Write scores, agreement and curves");
  cmd.add_option("--dump", o.dump,
                 "Write DIR/<method>/attribution.npy (and maps.npy, heads.npy) per method");
  cmd.add_option("--figure", o.figure,
                 "The scores side by side, rank agreement and (with --faithfulness) the deletion "
                 "curves (.png/.svg/.pdf)");
  add_figure_size_options(cmd, o.size);
  cmd.add_option("--dataset", o.dataset,
                 "Attribute every record: JSONL of {\"text\": ...}, a folder of .txt files, or "
                 "for vision models an image dataset (IDX files, a folder of class folders); "
                 "means of the agreement and faithfulness with bootstrap 95% intervals");
  cmd.add_option("--limit", o.limit, "--dataset: at most this many records (0 = all)")
      ->check(CLI::Range(0, 100000000));
  cmd.add_option("--bootstrap", o.bootstrap, "--dataset: bootstrap resamples")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  cmd.add_option("--shard", o.shard,
                 "--dataset: attribute every n-th record from the i-th (i/n) and write the "
                 "records to --json, for --merge");
  cmd.add_option("--merge", o.merge, "Join the --json files of --shard runs and summarise them")
      ->expected(1, -1);
  cmd.add_option("--threads", o.threads, "Worker threads (0 = all)");
}

core::ModelInput AttributeCommand::input(const core::Model& model) const {
  const int given = !o.text.empty() + !o.text_file.empty() + !o.ids.empty() + !o.image.empty();
  usage(given == 1, "give exactly one input: --text, --text-file, --ids or --image");
  const bool vision = model.info().vision;
  usage(vision == !o.image.empty(),
        vision ? o.model + " is a vision model: give --image"
               : o.model + " is a text model: give --text, --text-file or --ids, not --image");
  if (!o.image.empty()) return core::attribution_image_input(model, o.image);
  usage(!o.bos || !vision, "--bos is for text");
  if (!o.ids.empty()) return core::attribution_ids_input(model, o.ids, o.bos);
  std::string notice;
  core::ModelInput in = core::attribution_text_input(
      model, o.text_file.empty() ? o.text : read_text_file(o.text_file),
      o.text_file.empty() ? "--text" : "--text-file " + o.text_file, &notice, o.bos);
  if (!notice.empty()) std::fprintf(stderr, "%s\n", notice.c_str());
  return in;
}

int AttributeCommand::class_of(const core::Model& model, const std::string& text,
                               const std::string& option) const {
  const auto& names = model.info().class_names;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return int(i);
  usage(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
            text.size() < 10,
        option + " " + text + ": not a class index or name of " + o.model);
  const int c = std::stoi(text);
  usage(c < model.info().n_classes, option + " " + text + ": the model has " +
                                        std::to_string(model.info().n_classes) + " classes");
  return c;
}

core::AttributionRequest AttributeCommand::request(const core::Model& model,
                                                   const core::ModelInput& in) {
  core::AttributionRequest q;
  try {
    q.methods = core::parse_attribution_methods(o.methods);
    q.baseline = core::parse_baseline(o.baseline);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  const core::ModelInfo& info = model.info();
  usage(info.vision || q.baseline.kind != core::Baseline::Kind::Mean,
        "--baseline mean is for images; text takes zero or token[:ID]");
  usage(!info.vision || q.baseline.kind != core::Baseline::Kind::Token,
        "--baseline token is for text; images take zero or mean");
  q.ig_steps = o.ig_steps;
  q.matmul = core::parse_matmul(o.matmul);
  q.occlusion_delete = o.occlusion == "delete";
  q.threads = o.threads;
  if (info.vision) {
    usage(o.target_pos == -1 && o.target_id < 0 && o.target.empty() && o.foil_id < 0,
          "images take --target-class and --foil (a class), not token targets");
    if (!o.target_class.empty()) q.target.id = class_of(model, o.target_class, "--target-class");
    if (!o.foil.empty()) q.target.foil = class_of(model, o.foil, "--foil");
  } else {
    usage(o.target_class.empty(),
          "--target-class is for images; text takes --target-id or --target");
    const int N = int(in.ids.size());
    usage(o.target_pos >= -1 && o.target_pos < N, "--target-pos " + std::to_string(o.target_pos) +
                                                      " is outside the input's " +
                                                      std::to_string(N) + " tokens");
    q.target.position = o.target_pos;
    usage(o.target.empty() || o.target_id < 0, "give --target or --target-id, not both");
    usage(o.foil.empty() || o.foil_id < 0, "give --foil or --foil-id, not both");
    try {
      if (!o.target.empty()) q.target.id = core::single_token(model, o.target, "--target");
      if (!o.foil.empty()) q.target.foil = core::single_token(model, o.foil, "--foil");
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    if (o.target_id >= 0) q.target.id = o.target_id;
    if (o.foil_id >= 0) q.target.foil = o.foil_id;
    usage(q.target.id < info.vocab, "--target-id " + std::to_string(q.target.id) +
                                        " is outside the vocabulary [0, " +
                                        std::to_string(info.vocab) + ")");
    usage(q.target.foil < info.vocab, "--foil-id " + std::to_string(q.target.foil) +
                                          " is outside the vocabulary [0, " +
                                          std::to_string(info.vocab) + ")");
  }
  usage(q.target.foil < 0 || q.target.foil != q.target.id, "the foil is the target itself");
  if (!o.variant.empty()) {
    check_variant_specs({o.variant}, "--variant");
    check_backend(o.backend);
    variant_ = std::make_unique<Variant>(make_variant(o.variant));
    backend_ = make_backend_with_fallback(o.backend);
    sub_.variant = variant_.get();
    sub_.backend = backend_.get();
    sub_.layers = o.layers;
    sub_.heads = o.heads;
    try {
      sub_.check(info);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    for (const std::string& m : q.methods) {
      if (!core::attribution_methods()[size_t(core::attribution_method_index(m))].gradient)
        continue;
      const std::string why = core::gradient_refusal(*variant_);
      usage(why.empty(),
            "--method " + m + ": " + why + "; attention, rollout, flow and occlusion run with it");
    }
    q.substitution = &sub_;
  } else {
    usage(o.layers.empty() && o.heads.empty(), "--layers and --heads choose where --variant runs");
  }
  usage(!(info.vision && q.occlusion_delete),
        "--occlusion delete is for text: an image's patches are replaced by the baseline");
  return q;
}

void AttributeCommand::print(const core::Attribution& a,
                             const std::vector<core::RankAgreement>& agree) const {
  std::printf("target: %s%s at %s%d, z = %.4f, p = %.4f%s\n", a.target_label.c_str(),
              a.foil >= 0 ? (" - " + a.foil_label).c_str() : "",
              a.image ? "class row " : "position ", a.position, a.z, a.probability,
              a.variant == "dense" ? "" : ("; variant " + a.variant).c_str());
  for (const core::MethodScores& m : a.methods) {
    const std::vector<int> order = core::order_by_score(m.scores, a.ranked, core::tie_seed(a));
    std::string line;
    for (size_t i = 0; i < order.size() && int(i) < o.show; ++i) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "(%.3g)", double(m.scores[size_t(order[i])]));
      line += " [" + a.unit_labels[size_t(order[i])] + "]" + buf;
    }
    std::printf("%-22s %6.3f s %s\n", m.method.c_str(), m.seconds, line.c_str());
    if (std::isfinite(m.relevance_sum))
      std::printf("%-22s relevance at the %s %.4f vs z %.4f (the rest sits in %s)\n", "",
                  a.image ? "pixels" : "token-embedding rows", m.relevance_sum, a.z,
                  a.image ? "the CLS and position embeddings and the biases"
                          : "the position embeddings and the biases");
    if (std::isfinite(m.z_difference)) {
      double s = 0;
      for (int u : a.ranked) s += m.scores[size_t(u)];
      std::printf("%-22s sum %.4f vs z(x) - z(baseline) %.4f (completeness)\n", "", s,
                  m.z_difference);
    }
    if (!m.note.empty()) std::printf("%-22s %s\n", "", m.note.c_str());
  }
  if (agree.empty()) return;
  Table t({"methods", "kendall tau", "spearman", "top-" + std::to_string(agree[0].k) + " overlap"});
  for (const core::RankAgreement& r : agree)
    t.add({r.a + " / " + r.b, fixed(r.kendall_tau, 3), fixed(r.spearman, 3),
           fixed(r.top_k_overlap, 2)});
  t.print();
}

core::Faithfulness AttributeCommand::curves(const core::Model& model, const core::ModelInput& in,
                                            const core::Attribution& a,
                                            const core::AttributionRequest& q) const {
  if (!o.faithfulness) return {};
  core::FaithfulnessOptions fo;
  fo.steps = o.steps;
  fo.random_orders = o.random_orders;
  fo.threads = o.threads;
  return core::faithfulness(model, in, a, q, fo);
}

void AttributeCommand::print_faithfulness(const core::Faithfulness& f) const {
  Table t({"order", "deletion AOPC (p)", "deletion AOPC (z)", "insertion area (p)",
           "insertion area (z)"});
  for (const core::Curve& c : f.curves)
    t.add({c.order, fixed(c.aopc_p, 4), fixed(c.aopc_z, 4), fixed(c.insertion_p, 4),
           fixed(c.insertion_z, 4)});
  t.print();
}

core::AttributionRecordSummary AttributeCommand::attribute_record(const core::Model& model,
                                                                  const core::ModelInput& in) {
  const core::AttributionRequest q = request(model, in);
  const core::Attribution a = core::attribute(model, in, q);
  const std::vector<core::RankAgreement> agree = core::rank_agreement(a, o.top_k);
  const core::Faithfulness f = curves(model, in, a, q);
  return core::summarize_record(a, agree, o.faithfulness ? &f : nullptr);
}

int AttributeCommand::run_dataset(const core::Model& model) {
  usage(o.text.empty() && o.text_file.empty() && o.ids.empty() && o.image.empty(),
        "--dataset holds the inputs: do not give --text, --text-file, --ids or --image");
  usage(o.dump.empty() && o.figure.empty(), "--dump and --figure are for one input, not --dataset");
  core::Shard shard;
  if (!o.shard.empty()) {
    try {
      shard = core::parse_shard(o.shard);
    } catch (const Error& e) {
      throw UsageError(std::string("--shard: ") + e.what());
    }
    usage(!o.json_out.empty(), "--shard writes its records to --json, for --merge");
  }
  std::vector<core::ModelInput> inputs;
  std::vector<std::string> sources;
  std::vector<int> labels;
  if (model.info().vision) {
    const core::ImageDataset d =
        core::read_image_dataset(o.dataset, model.preprocessor().channels, o.limit);
    for (const core::ImageRecord& r : d.records) {
      inputs.push_back(core::attribution_image8_input(model, r.image));
      sources.push_back(r.source);
      labels.push_back(r.label);
    }
  } else {
    std::vector<core::TextRecord> records = core::read_text_dataset(o.dataset);
    if (o.limit > 0 && int(records.size()) > o.limit) records.resize(size_t(o.limit));
    for (const core::TextRecord& r : records) {
      inputs.push_back(core::attribution_text_input(model, r.text, r.source, nullptr, o.bos));
      sources.push_back(r.source);
      labels.push_back(-1);
    }
  }
  std::vector<core::AttributionRecordSummary> records;
  const std::vector<int> mine = core::shard_items(int(inputs.size()), shard);
  usage(!mine.empty(),
        "--shard " + o.shard + " owns none of the " + std::to_string(inputs.size()) + " records");
  for (int i : mine) {
    core::AttributionRecordSummary r = attribute_record(model, inputs[size_t(i)]);
    r.index = i;
    r.source = sources[size_t(i)];
    r.label = labels[size_t(i)];
    records.push_back(std::move(r));
    std::fprintf(stderr, "\r%zu/%zu records", records.size(), mine.size());
  }
  std::fprintf(stderr, "\n");
  nlohmann::json j;
  j["model"] = o.model;
  j["dataset"] = o.dataset;
  j["records"] = core::records_json(records);
  if (!o.shard.empty()) {
    j["shard"] = o.shard;
    write_json_file(o.json_out, j);
    std::fprintf(stderr, "wrote %s (shard %s: %zu records; join with attribute --merge)\n",
                 o.json_out.c_str(), o.shard.c_str(), records.size());
    return kExitOk;
  }
  const core::AttributionDatasetSummary s = core::summarize_records(records, o.bootstrap);
  std::printf("%s: %d records of %s\n", o.model.c_str(), s.records, o.dataset.c_str());
  print_summary(s);
  if (!o.json_out.empty()) {
    j["summary"] = core::to_json(s);
    write_json_file(o.json_out, j);
  }
  return kExitOk;
}

int AttributeCommand::run_merge() {
  usage(o.dataset.empty() && o.shard.empty() && o.text.empty() && o.text_file.empty() &&
            o.ids.empty() && o.image.empty(),
        "--merge joins the shard files of attribute --dataset --shard: give only the files and "
        "the output options (--json, --bootstrap)");
  std::vector<core::AttributionRecordSummary> records;
  nlohmann::json first;
  for (const std::string& f : o.merge) {
    const nlohmann::json j = read_shard_json(f);
    usage(j.contains("records"), f + " is not a shard file of attribute --dataset --shard");
    if (first.is_null()) first = j;
    for (core::AttributionRecordSummary& r : core::records_from_json(j["records"], f))
      records.push_back(std::move(r));
  }
  std::sort(records.begin(), records.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  for (size_t i = 1; i < records.size(); ++i)
    usage(records[i].index != records[i - 1].index,
          "record " + std::to_string(records[i].index) + " is in two shard files");
  const core::AttributionDatasetSummary s = core::summarize_records(records, o.bootstrap);
  std::printf("%s: %d records of %s (%zu shards)\n", first.value("model", "").c_str(), s.records,
              first.value("dataset", "").c_str(), o.merge.size());
  print_summary(s);
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"model", first.value("model", "")},
                        {"dataset", first.value("dataset", "")},
                        {"records", core::records_json(records)},
                        {"summary", core::to_json(s)}};
    write_json_file(o.json_out, j);
  }
  return kExitOk;
}

void AttributeCommand::print_summary(const core::AttributionDatasetSummary& s) const {
  auto ci = [](const core::Interval& v) {
    return fixed(v.mean, 3) + " [" + fixed(v.lo, 3) + ", " + fixed(v.hi, 3) + "]";
  };
  Table t({"methods", "kendall tau", "spearman", "top-k overlap"});
  for (const auto& p : s.pairs)
    t.add({p.a + " / " + p.b, ci(p.kendall_tau), ci(p.spearman), ci(p.top_k_overlap)});
  t.print();
  if (s.orders.empty()) return;
  Table f({"order", "deletion AOPC (p)", "deletion AOPC (z)", "insertion area (p)",
           "insertion area (z)"});
  for (const auto& r : s.orders)
    f.add({r.order, ci(r.aopc_p), ci(r.aopc_z), ci(r.insertion_p), ci(r.insertion_z)});
  f.print();
}

int AttributeCommand::run() {
  if (!o.json_out.empty()) core::check_output_path(o.json_out);
  if (!o.merge.empty()) return run_merge();
  check_figure_option(o.figure);
  o.model = model_or_default(o.model, !o.image.empty() || core::is_image_dataset(o.dataset));
  check_model_path(o.model, o.model);
  const std::shared_ptr<const core::Model> model = core::cached_model(o.model);
  usage(model->info().vision ? model->info().n_classes > 0 : model->info().vocab > 0,
        o.model + " has no " + (model->info().vision ? "classifier" : "language-model") +
            " head: there is no logit to attribute");
  if (!o.dataset.empty()) return run_dataset(*model);
  usage(o.shard.empty(), "--shard splits a --dataset");
  const core::ModelInput in = input(*model);
  const core::AttributionRequest q = request(*model, in);
  const core::Attribution a = core::attribute(*model, in, q);
  const std::vector<core::RankAgreement> agree = core::rank_agreement(a, o.top_k);
  print(a, agree);
  const core::Faithfulness f = curves(*model, in, a, q);
  if (o.faithfulness) print_faithfulness(f);
  if (!o.json_out.empty()) {
    nlohmann::json j = core::to_json(a);
    j["model"] = o.model;
    j["agreement"] = core::to_json(agree);
    if (o.faithfulness) j["faithfulness"] = core::to_json(f);
    write_json_file(o.json_out, j);
  }
  if (!o.figure.empty()) {
    const core::FigureData d =
        core::attribution_figure(a, agree, o.faithfulness ? &f : nullptr, in, o.model);
    fig::export_figure(d, o.figure, figure_size(o.size, d, {2100, 0, 300}));
    std::fprintf(stderr, "wrote %s\n", o.figure.c_str());
  }
  if (!o.dump.empty()) {
    const std::vector<std::string> files = core::dump_attribution(a, o.dump);
    std::fprintf(stderr, "wrote %zu files under %s\n", files.size(), o.dump.c_str());
  }
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> make_attribute_command() {
  return std::make_unique<AttributeCommand>();
}

}  // namespace attn::cli

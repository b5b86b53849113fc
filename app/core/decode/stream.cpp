#include "app/core/decode/stream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "compute/error.h"
#include "compute/kv/kv_policy.h"
#include "models/formats/npy.h"

namespace attn::core {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

double token_nll(const float* row, int vocab, int target) {
  double mx = row[0];
  for (int j = 1; j < vocab; ++j) mx = std::max(mx, double(row[j]));
  double sum = 0;
  for (int j = 0; j < vocab; ++j) sum += std::exp(double(row[j]) - mx);
  return std::log(sum) + mx - double(row[target]);
}

double PolicyRun::mean_nll(int from, int to) const {
  to = std::min<int>(to, int(nll.size()));
  from = std::max(0, from);
  if (to <= from) return NAN;
  double s = 0;
  for (int i = from; i < to; ++i) s += nll[size_t(i)];
  return s / (to - from);
}

double PolicyRun::perplexity(int from, int to) const {
  return std::exp(mean_nll(from, to));
}

double PolicyRun::step_seconds() const {
  // The first timed row is the prefill's; the one-token steps follow it.
  const auto first = std::find_if(seconds.begin(), seconds.end(), [](double x) { return x > 0; });
  if (first == seconds.end() || first + 1 == seconds.end()) return 0;
  double s = 0;
  for (auto it = first + 1; it != seconds.end(); ++it) s += *it;
  return s / double(seconds.end() - first - 1);
}

std::vector<int32_t> tokenize_stream(const models::Model& model, const std::string& text) {
  require(model.tokenizer() != nullptr, ErrorCode::InvalidArgument,
          model.info().model_type + " model has no tokenizer: give token ids");
  require(!text.empty(), ErrorCode::InvalidArgument, "the text is empty: nothing to stream");
  std::vector<int32_t> ids;
  for (const models::Token& t : model.tokenizer()->encode(text)) ids.push_back(t.id);
  return ids;
}

StreamResult run_stream(const models::Model& model, const std::string& model_name,
                        const std::vector<int32_t>& all_ids, const StreamOptions& opt) {
  const models::ModelInfo& info = model.info();
  require(info.causal && !info.vision && info.vocab > 0, ErrorCode::Unsupported,
          "streaming needs a causal language model (GPT-2 or the Llama family); " +
              info.model_type + " is not one");
  std::vector<int32_t> ids = all_ids;
  if (opt.max_tokens > 0 && int(ids.size()) > opt.max_tokens) ids.resize(size_t(opt.max_tokens));
  const int T = int(ids.size());
  require(T >= 2, ErrorCode::InvalidArgument,
          "a stream needs at least 2 tokens (it scores each token after the first)");
  require(opt.prefill >= 1 && opt.prefill <= T, ErrorCode::InvalidArgument,
          "prefill " + std::to_string(opt.prefill) + " is outside [1, " + std::to_string(T) +
              "] tokens");
  for (size_t i = 0; i < ids.size(); ++i)
    require(ids[i] >= 0 && ids[i] < info.vocab, ErrorCode::InvalidArgument,
            "token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                " is outside the vocabulary [0, " + std::to_string(info.vocab) + ")");
  std::vector<KvPolicy> policies;
  for (const std::string& spec :
       opt.policies.empty() ? std::vector<std::string>{"kv_full"} : opt.policies)
    policies.push_back(make_kv_policy(spec));

  StreamResult r;
  r.model = model_name;
  r.model_type = info.model_type;
  r.context = info.max_tokens;
  r.vocab = info.vocab;
  r.prefill = opt.prefill;
  r.ids = ids;
  const int V = info.vocab;
  for (size_t pi = 0; pi < policies.size(); ++pi) {
    PolicyRun run;
    run.spec = policies[pi].spec;
    models::KvCache cache(policies[pi]);
    cache.record = opt.record_cache;
    const auto t_all = Clock::now();
    models::ForwardOptions fo;
    fo.threads = opt.threads;
    int t = 0;
    // Scores rows [first, first + rows) of `logits` against the tokens after them.
    const auto take = [&](const models::ModelOutput& out, int first, double secs) {
      const int rows = out.n_tokens;
      for (int i = 0; i < rows; ++i) {
        const int row = first + i;
        const float* lg = out.logits.data() + size_t(i) * V;
        if (row + 1 < T) {
          run.nll.push_back(float(token_nll(lg, V, ids[size_t(row) + 1])));
          const double prev = run.ppl.empty() ? 0 : std::log(run.ppl.back()) * double(row);
          run.ppl.push_back(std::exp((prev + run.nll.back()) / double(row + 1)));
        }
        if (opt.keep_logits) run.logits.insert(run.logits.end(), lg, lg + V);
        run.entries.push_back(cache.entries());
        run.bytes.push_back(cache.bytes());
        run.seconds.push_back(i + 1 == rows ? secs : 0.0);
      }
    };
    try {
      const auto t0 = Clock::now();
      const models::ModelOutput pre =
          model.decode(std::vector<int32_t>(ids.begin(), ids.begin() + opt.prefill), cache, fo);
      take(pre, 0, since(t0));
      t = opt.prefill;
      if (opt.progress && !opt.progress(int(pi), t)) throw Error(ErrorCode::Cancelled, "cancelled");
      for (; t < T; ++t) {
        const auto ts = Clock::now();
        const models::ModelOutput s = model.decode({ids[size_t(t)]}, cache, fo);
        take(s, t, since(ts));
        if (opt.progress && (t % 64 == 0 || t + 1 == T) && !opt.progress(int(pi), t + 1))
          throw Error(ErrorCode::Cancelled, "cancelled");
      }
    } catch (const Error& e) {
      if (e.code() == ErrorCode::Cancelled) throw;
      if (t == 0) throw;  // the prefill itself failed: nothing to show
      run.error = e.what();
    }
    run.tokens = int(run.entries.size());
    run.policy_seconds = cache.policy_seconds;
    run.total_seconds = since(t_all);
    run.history = std::move(cache.history);
    r.runs.push_back(std::move(run));
  }
  return r;
}

nlohmann::json stream_json(const StreamResult& r) {
  using nlohmann::json;
  json j;
  j["version"] = 1;
  j["model"] = r.model;
  j["model_type"] = r.model_type;
  j["context"] = r.context;
  j["vocab"] = r.vocab;
  j["prefill"] = r.prefill;
  j["tokens"] = r.ids.size();
  j["policies"] = json::array();
  for (const PolicyRun& p : r.runs) {
    json q;
    q["spec"] = p.spec;
    q["tokens"] = p.tokens;
    if (!p.error.empty()) q["error"] = p.error;
    q["mean_nll"] = p.nll.empty() ? json(nullptr) : json(p.mean_nll());
    q["perplexity"] = p.nll.empty() ? json(nullptr) : json(p.perplexity());
    q["step_seconds"] = p.step_seconds();
    q["policy_seconds"] = p.policy_seconds;
    q["total_seconds"] = p.total_seconds;
    q["final_entries"] = p.entries.empty() ? 0 : p.entries.back();
    q["final_bytes"] = p.bytes.empty() ? 0.0 : p.bytes.back();
    q["nll"] = p.nll;
    q["ppl"] = p.ppl;
    q["entries"] = p.entries;
    q["bytes"] = p.bytes;
    q["seconds"] = p.seconds;
    j["policies"].push_back(std::move(q));
  }
  return j;
}

void write_stream_csv(const StreamResult& r, const std::string& path) {
  std::ofstream f(path);
  require(bool(f), ErrorCode::Io, path + ": cannot write");
  f << "policy,token,nll,ppl,entries,bytes,seconds\n";
  f.precision(9);
  for (const PolicyRun& p : r.runs)
    for (int t = 0; t < p.tokens; ++t) {
      f << '"' << p.spec << "\"," << t << ',';
      if (size_t(t) < p.nll.size())
        f << p.nll[size_t(t)] << ',' << p.ppl[size_t(t)];
      else
        f << ',';
      f << ',' << p.entries[size_t(t)] << ',' << p.bytes[size_t(t)] << ',' << p.seconds[size_t(t)]
        << '\n';
    }
  require(bool(f), ErrorCode::Io, path + ": write failed");
}

void write_stream_dump(const StreamResult& r, const std::string& dir) {
  namespace fs = std::filesystem;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const PolicyRun& p = r.runs[i];
    const fs::path d = fs::path(dir) / std::to_string(i);
    std::error_code ec;
    fs::create_directories(d, ec);
    require(!ec, ErrorCode::Io, d.string() + ": cannot create (" + ec.message() + ")");
    {
      std::ofstream f(d / "spec.txt");
      f << p.spec << "\n";
      require(bool(f), ErrorCode::Io, (d / "spec.txt").string() + ": write failed");
    }
    require(p.logits.size() == size_t(p.tokens) * size_t(r.vocab), ErrorCode::InvalidArgument,
            "the stream kept no logits to dump");
    write_npy((d / "logits.npy").string(),
              models::NpyArray::from_f32({int64_t(p.tokens), int64_t(r.vocab)}, p.logits));
    write_npy((d / "nll.npy").string(), models::NpyArray::from_f32({int64_t(p.nll.size())}, p.nll));
  }
}

int32_t sample_token(const float* logits, int V, const SamplingOptions& s, double u) {
  if (s.temperature <= 0) return int32_t(std::max_element(logits, logits + V) - logits);
  std::vector<std::pair<double, int32_t>> c(static_cast<size_t>(V));
  double mx = logits[0];
  for (int j = 1; j < V; ++j) mx = std::max(mx, double(logits[j]));
  for (int j = 0; j < V; ++j) c[size_t(j)] = {(double(logits[j]) - mx) / s.temperature, j};
  // Highest first; ties by id, so a draw is reproducible.
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  size_t keep = c.size();
  if (s.top_k > 0) keep = std::min(keep, size_t(s.top_k));
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += c[i].first = std::exp(c[i].first);
  if (s.top_p < 1.0) {  // the smallest prefix whose mass reaches top_p
    double acc = 0;
    for (size_t i = 0; i < keep; ++i) {
      acc += c[i].first / total;
      if (acc >= s.top_p) {
        keep = i + 1;
        break;
      }
    }
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += c[i].first;
  }
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += c[i].first / total;
    if (u < acc) return c[i].second;
  }
  return c[keep - 1].second;
}

Generation generate(const models::Model& model, const std::vector<int32_t>& prompt,
                    const std::string& policy, const SamplingOptions& s, int threads,
                    const std::function<void(int32_t)>& on_token) {
  const models::ModelInfo& info = model.info();
  require(info.causal && !info.vision && info.vocab > 0, ErrorCode::Unsupported,
          "generation needs a causal language model (GPT-2 or the Llama family); " +
              info.model_type + " is not one");
  require(!prompt.empty(), ErrorCode::InvalidArgument, "the prompt is empty");
  require(s.max_new_tokens >= 0, ErrorCode::InvalidArgument, "max_new_tokens must be >= 0");
  require(s.top_p > 0 && s.top_p <= 1, ErrorCode::InvalidArgument, "top_p must be in (0, 1]");
  require(s.top_k >= 0 && s.temperature >= 0 && std::isfinite(s.temperature),
          ErrorCode::InvalidArgument, "top_k and temperature must be >= 0");
  models::KvCache cache(make_kv_policy(policy));
  models::ForwardOptions fo;
  fo.threads = threads;
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  Generation g;
  const int V = info.vocab;
  models::ModelOutput out = model.decode(prompt, cache, fo);
  const float* last = out.logits.data() + size_t(out.n_tokens - 1) * V;
  const auto t0 = Clock::now();
  for (int i = 0; i < s.max_new_tokens; ++i) {
    const int32_t id = sample_token(last, V, s, unif(rng));
    g.ids.push_back(id);
    g.logprob.push_back(float(-token_nll(last, V, id)));
    if (on_token) on_token(id);
    if (id == s.stop_id || i + 1 == s.max_new_tokens) break;
    out = model.decode({id}, cache, fo);
    last = out.logits.data();
  }
  g.seconds_per_token = g.ids.empty() ? 0 : since(t0) / double(g.ids.size());
  g.entries = cache.entries();
  g.bytes = cache.bytes();
  return g;
}

}  // namespace attn::core

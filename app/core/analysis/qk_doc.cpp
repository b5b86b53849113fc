#include "app/core/analysis/qk_doc.h"

#include <chrono>
#include <cstdio>

#include "compute/error.h"

namespace attn::core {

QkRun run_qk(const Analysis& a, int layer, int head, const std::string& method,
             const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  require(a.model && a.info, ErrorCode::InvalidArgument,
          "the Q/K map needs a model: raw tensors and synthetic problems have no queries and "
          "keys of a model to embed");
  QkOptions o;
  o.layer = layer;
  o.head = head;
  o.method = method;
  o.cancel = cancel;
  QkRun r;
  r.embedding = qk_embedding(*a.model, {a.input}, o);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

render::QkDoc qk_doc(const QkRun& r, const Analysis* a, uint64_t serial) {
  const QkEmbedding& e = r.embedding;
  render::QkDoc d;
  d.present = true;
  d.serial = serial;
  d.layer = e.layer;
  d.head = e.head;
  d.kv_head = e.kv_head;
  d.method = e.method;
  d.rank_fidelity = e.rank_fidelity;
  d.scale = e.scale;
  // One input: its queries, then its keys.
  for (const QkPoint& p : e.points)
    if (p.input == 0) d.points.push_back({p.x, p.y, p.key, p.position});
  if (!e.labels.empty()) d.labels = e.labels[0];
  if (!e.patterns.empty()) d.pattern = e.patterns[0];
  // The analysis's labels when they are the embedded tokens (the view's font has Latin-1 only).
  if (a && a->labels.size() == d.labels.size())
    for (size_t t = 0; t < d.labels.size(); ++t)
      d.labels[t] = a->labels[t] == "\u21b5" ? "\u00b6" : a->labels[t];
  char fid[96];
  std::snprintf(fid, sizeof fid, "rank fidelity %.3f", e.rank_fidelity);
  const std::string kv =
      e.kv_head != e.head ? " (kv head " + std::to_string(e.kv_head) + ")" : std::string();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f s", r.seconds);
  d.title = "Q/K map of layer " + std::to_string(e.layer) + " head " + std::to_string(e.head) + kv +
            " \u00b7 " + (e.method == "tsne" ? "t-SNE" : "PCA") + " \u00b7 " + fid + " \u00b7 " +
            std::to_string(d.n()) + " tokens \u00b7 " + secs;
  return d;
}

std::string qk_stale(const Analysis& ran_on, int layer, int head, const Analysis& now) {
  if (ran_on.model != now.model) return "it was computed with another model";
  if (ran_on.input.ids != now.input.ids || ran_on.input.image.data != now.input.image.data)
    return "it was computed for an earlier input";
  if (layer != now.session.layer || head != now.session.head)
    return "it shows layer " + std::to_string(layer) + " head " + std::to_string(head) +
           ", not the selected head";
  return {};
}

}  // namespace attn::core

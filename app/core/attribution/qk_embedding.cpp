#include "app/core/attribution/qk_embedding.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "app/core/attribution/faithfulness.h"
#include "app/core/export/figure_data.h"
#include "app/core/session/labels.h"
#include "compute/error.h"
#include "compute/parallel.h"
#include "models/arch/hooks.h"
#include "models/tokenizers/tokenizer.h"

namespace attn::core {
namespace {

using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Row i's conditional affinities P(j|i) for distances d2 (row i, j != i) at the perplexity:
// a binary search on the Gaussian's precision.
void calibrate_row(const std::vector<double>& d2, int n, int i, double perplexity, double* p) {
  const double target = std::log(perplexity);
  double beta = 1, lo = 0, hi = INFINITY;
  for (int it = 0; it < 200; ++it) {
    double sum = 0, dsum = 0;
    double dmin = INFINITY;
    for (int j = 0; j < n; ++j)
      if (j != i) dmin = std::min(dmin, d2[size_t(i) * n + j]);
    for (int j = 0; j < n; ++j) {
      if (j == i) {
        p[j] = 0;
        continue;
      }
      const double dj = d2[size_t(i) * n + j] - dmin;  // shifted: the same distribution
      p[j] = std::exp(-beta * dj);
      sum += p[j];
      dsum += dj * p[j];
    }
    const double entropy = std::log(sum) + beta * dsum / sum;
    for (int j = 0; j < n; ++j) p[j] /= sum;
    if (std::abs(entropy - target) < 1e-5) break;
    if (entropy > target) {
      lo = beta;
      beta = std::isinf(hi) ? beta * 2 : (beta + hi) / 2;
    } else {
      hi = beta;
      beta = (beta + lo) / 2;
    }
  }
}

std::vector<std::string> input_labels(const models::Model& model, const models::ModelInput& in,
                                      int n) {
  std::vector<std::string> out;
  if (model.info().vision) {
    const int special = n - (in.image.height / std::max<int>(1, int(model.config().patch_size))) *
                                (in.image.width / std::max<int>(1, int(model.config().patch_size)));
    const int gw = in.image.width / std::max<int>(1, int(model.config().patch_size));
    for (int t = 0; t < n; ++t)
      out.push_back(t < special ? (t == 0 ? "CLS" : "DIST")
                                : std::to_string((t - special) / gw) + "," +
                                      std::to_string((t - special) % gw));
    return out;
  }
  for (int t = 0; t < n; ++t) {
    if (in.labels.size() == size_t(n)) {
      out.push_back(display_piece(in.labels[size_t(t)]));
    } else if (model.tokenizer()) {
      out.push_back(display_piece(model.tokenizer()->id_to_piece(in.ids[size_t(t)])));
    } else {
      out.push_back("#" + std::to_string(in.ids[size_t(t)]));
    }
  }
  return out;
}

}  // namespace

std::vector<float> pca_2d(const std::vector<float>& x, int n, int dim) {
  MatD X = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
               x.data(), n, dim)
               .cast<double>();
  X.rowwise() -= X.colwise().mean();
  const MatD cov = X.transpose() * X / std::max(1, n - 1);
  Eigen::SelfAdjointEigenSolver<MatD> es(cov);
  std::vector<float> out(size_t(n) * 2);
  for (int c = 0; c < 2 && c < dim; ++c) {
    Eigen::VectorXd v = es.eigenvectors().col(dim - 1 - c);  // eigenvalues ascend
    Eigen::Index big = 0;
    v.cwiseAbs().maxCoeff(&big);
    if (v[big] < 0) v = -v;  // a fixed sign: the same map for the same data
    const Eigen::VectorXd proj = X * v;
    for (int i = 0; i < n; ++i) out[size_t(i) * 2 + c] = float(proj[i]);
  }
  return out;
}

std::vector<float> tsne_2d(const std::vector<float>& x, int n, int dim, double perplexity,
                           int iterations, uint64_t seed, const std::atomic<bool>* cancel) {
  require(n >= 3, ErrorCode::InvalidArgument, "t-SNE needs at least 3 points");
  require(perplexity > 0 && perplexity < n, ErrorCode::InvalidArgument,
          "t-SNE perplexity must lie in (0, " + std::to_string(n) + "): the number of points");
  std::vector<double> d2(size_t(n) * n);
  parallel_for(n, [&](int i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int c = 0; c < dim; ++c) {
        const double t = double(x[size_t(i) * dim + c]) - x[size_t(j) * dim + c];
        s += t * t;
      }
      d2[size_t(i) * n + j] = s;
    }
  });
  std::vector<double> cond(size_t(n) * n);
  parallel_for(n, [&](int i) { calibrate_row(d2, n, i, perplexity, cond.data() + size_t(i) * n); });
  std::vector<double> P(size_t(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      P[size_t(i) * n + j] =
          std::max((cond[size_t(i) * n + j] + cond[size_t(j) * n + i]) / (2.0 * n), 1e-12);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1e-4);
  std::vector<double> Y(size_t(n) * 2), dY(Y.size()), vel(Y.size(), 0.0), gain(Y.size(), 1.0);
  for (double& y : Y) y = nd(rng);
  const double eta = std::max(double(n) / 12.0 / 4.0, 50.0);
  const int early = std::min(250, iterations / 3);
  std::vector<double> zrow(static_cast<size_t>(n));
  for (int it = 0; it < iterations; ++it) {
    if (cancel && cancel->load()) throw Error(ErrorCode::Cancelled, "t-SNE cancelled");
    const double exag = it < early ? 12.0 : 1.0, momentum = it < early ? 0.5 : 0.8;
    // Z: the sum of the Student-t kernel over every pair.
    parallel_for(n, [&](int i) {
      double s = 0;
      for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const double a = Y[2 * i] - Y[2 * j], b = Y[2 * i + 1] - Y[2 * j + 1];
        s += 1 / (1 + a * a + b * b);
      }
      zrow[size_t(i)] = s;
    });
    double Z = 0;
    for (double s : zrow) Z += s;
    parallel_for(n, [&](int i) {
      double gx = 0, gy = 0;
      for (int j = 0; j < n; ++j) {
        if (j == i) continue;
        const double a = Y[2 * i] - Y[2 * j], b = Y[2 * i + 1] - Y[2 * j + 1];
        const double num = 1 / (1 + a * a + b * b);
        const double m = (exag * P[size_t(i) * n + j] - num / Z) * num;
        gx += m * a;
        gy += m * b;
      }
      dY[2 * i] = 4 * gx;
      dY[2 * i + 1] = 4 * gy;
    });
    for (size_t k = 0; k < Y.size(); ++k) {
      gain[k] = (dY[k] > 0) != (vel[k] > 0) ? gain[k] + 0.2 : std::max(gain[k] * 0.8, 0.01);
      vel[k] = momentum * vel[k] - eta * gain[k] * dY[k];
      Y[k] += vel[k];
    }
    double mx = 0, my = 0;
    for (int i = 0; i < n; ++i) {
      mx += Y[2 * i];
      my += Y[2 * i + 1];
    }
    for (int i = 0; i < n; ++i) {
      Y[2 * i] -= mx / n;
      Y[2 * i + 1] -= my / n;
    }
  }
  return std::vector<float>(Y.begin(), Y.end());
}

const std::vector<float>* QkEmbedding::row(int point, int* n) const {
  const QkPoint& p = points[size_t(point)];
  if (p.key) return nullptr;
  *n = int(labels[size_t(p.input)].size());
  return &patterns[size_t(p.input)];
}

QkEmbedding qk_embedding(const models::Model& model, const std::vector<models::ModelInput>& inputs,
                         const QkOptions& o) {
  const models::ModelInfo& info = model.info();
  require(o.layer >= 0 && o.layer < info.n_layers, ErrorCode::InvalidArgument,
          "layer " + std::to_string(o.layer) + " is outside the model's " +
              std::to_string(info.n_layers) + " layers");
  require(o.head >= 0 && o.head < info.n_heads, ErrorCode::InvalidArgument,
          "head " + std::to_string(o.head) + " is outside the model's " +
              std::to_string(info.n_heads) + " query heads");
  require(o.method == "pca" || o.method == "tsne", ErrorCode::InvalidArgument,
          "unknown projection '" + o.method + "'; projections: pca, tsne");
  require(!inputs.empty(), ErrorCode::InvalidArgument, "no input to embed");
  QkEmbedding e;
  e.layer = o.layer;
  e.head = o.head;
  e.method = o.method;
  const int d = info.head_dim;
  std::vector<float> q, k;                     // rows f32 [*, d]
  std::vector<std::vector<int>> visible_keys;  // per query point: its visible key points
  const std::string L = "blocks." + std::to_string(o.layer) + ".attn.";
  for (size_t idx = 0; idx < inputs.size(); ++idx) {
    if (o.cancel && o.cancel->load()) throw Error(ErrorCode::Cancelled, "Q/K embedding cancelled");
    models::Capture cap(models::HookSelection::parse(L + "q," + L + "k," + L + "pattern"));
    models::ForwardOptions fo;
    fo.capture = &cap;
    fo.substitution = o.substitution;
    fo.threads = o.threads;
    const models::ModelOutput out = model.forward(inputs[idx], fo);
    const Problem* p = cap.problem(o.layer);
    require(p != nullptr, ErrorCode::InvalidArgument, "the model captured no queries and keys");
    const int N = out.n_tokens;
    require(int(q.size() / d + k.size() / d) + 2 * N <= o.max_points, ErrorCode::InvalidArgument,
            "the Q/K embedding takes at most " + std::to_string(o.max_points) +
                " points (queries and keys); these inputs have more");
    e.kv_head = p->kv_head(o.head);
    const size_t k0 = k.size() / d;
    for (int i = 0; i < N; ++i) q.insert(q.end(), p->q_row(o.head, i), p->q_row(o.head, i) + d);
    for (int j = 0; j < N; ++j) k.insert(k.end(), p->k_row(o.head, j), p->k_row(o.head, j) + d);
    for (int i = 0; i < N; ++i) {
      std::vector<int> vis;
      for (int j = 0; j < N; ++j)
        if (!p->causal || p->kpos(j) <= p->qpos(i)) vis.push_back(int(k0) + j);
      visible_keys.push_back(std::move(vis));
    }
    const auto& pat = cap.layers[size_t(o.layer)].pattern;
    e.patterns.emplace_back(pat.begin() + ptrdiff_t(size_t(o.head) * N * N),
                            pat.begin() + ptrdiff_t(size_t(o.head + 1) * N * N));
    e.labels.push_back(input_labels(model, inputs[idx], N));
  }
  const int nq = int(q.size() / d), nk = int(k.size() / d);
  // Translate the keys onto the queries' mean; balance the mean norms.
  std::vector<double> mq(size_t(d), 0.0), mk(size_t(d), 0.0);
  for (int i = 0; i < nq; ++i)
    for (int c = 0; c < d; ++c) mq[size_t(c)] += q[size_t(i) * d + c] / double(nq);
  for (int j = 0; j < nk; ++j)
    for (int c = 0; c < d; ++c) mk[size_t(c)] += k[size_t(j) * d + c] / double(nk);
  for (int j = 0; j < nk; ++j)
    for (int c = 0; c < d; ++c) k[size_t(j) * d + c] += float(mq[size_t(c)] - mk[size_t(c)]);
  double nqm = 0, nkm = 0;
  for (int i = 0; i < nq; ++i)
    nqm += Eigen::Map<const Eigen::VectorXf>(q.data() + size_t(i) * d, d).norm() / nq;
  for (int j = 0; j < nk; ++j)
    nkm += Eigen::Map<const Eigen::VectorXf>(k.data() + size_t(j) * d, d).norm() / nk;
  e.scale = nqm > 0 && nkm > 0 ? std::sqrt(nkm / nqm) : 1.0;
  for (float& v : q) v = float(v * e.scale);
  for (float& v : k) v = float(v / e.scale);
  std::vector<float> all = q;
  all.insert(all.end(), k.begin(), k.end());
  const int n = nq + nk;
  const std::vector<float> xy =
      o.method == "pca"
          ? pca_2d(all, n, d)
          : tsne_2d(all, n, d, std::min(o.perplexity, (n - 1) / 3.0), o.iterations, o.seed);
  // Points: each input's queries, then its keys.
  size_t qi = 0, ki = 0;
  for (size_t idx = 0; idx < inputs.size(); ++idx) {
    const int N = int(e.labels[idx].size());
    for (int t = 0; t < N; ++t, ++qi)
      e.points.push_back({xy[qi * 2], xy[qi * 2 + 1], false, int(idx), t});
    for (int t = 0; t < N; ++t, ++ki)
      e.points.push_back(
          {xy[(size_t(nq) + ki) * 2], xy[(size_t(nq) + ki) * 2 + 1], true, int(idx), t});
  }
  // Rank fidelity: per query, Spearman between -distance in the map and q.k over its keys.
  double sum = 0;
  int counted = 0;
  for (int i = 0; i < nq; ++i) {
    const std::vector<int>& vis = visible_keys[size_t(i)];
    if (vis.size() < 3) continue;
    std::vector<double> near, score;
    for (int j : vis) {
      const double a = xy[size_t(i) * 2] - xy[(size_t(nq) + j) * 2];
      const double b = xy[size_t(i) * 2 + 1] - xy[(size_t(nq) + j) * 2 + 1];
      near.push_back(-(a * a + b * b));
      double s = 0;
      for (int c = 0; c < d; ++c) s += double(q[size_t(i) * d + c]) * k[size_t(j) * d + c];
      score.push_back(s);
    }
    const double r = spearman_rho(near, score);
    if (std::isfinite(r)) {
      sum += r;
      ++counted;
    }
  }
  e.rank_fidelity = counted ? sum / counted : std::nan("");
  return e;
}

nlohmann::json to_json(const QkEmbedding& e) {
  nlohmann::json pts = nlohmann::json::array();
  for (const QkPoint& p : e.points)
    pts.push_back({{"x", p.x},
                   {"y", p.y},
                   {"kind", p.key ? "key" : "query"},
                   {"input", p.input},
                   {"position", p.position},
                   {"token", e.labels[size_t(p.input)][size_t(p.position)]}});
  return {{"layer", e.layer},
          {"head", e.head},
          {"kv_head", e.kv_head},
          {"method", e.method},
          {"scale", e.scale},
          {"rank_fidelity", std::isfinite(e.rank_fidelity) ? nlohmann::json(e.rank_fidelity)
                                                           : nlohmann::json(nullptr)},
          {"points", pts}};
}

FigureData qk_figure(const QkEmbedding& e, const std::string& model_name) {
  FigureData d;
  d.view = View::Qk;
  QkFigure& f = d.qk;
  f.layer = e.layer;
  f.head = e.head;
  f.method = e.method;
  f.rank_fidelity = e.rank_fidelity;
  f.inputs = int(e.labels.size());
  for (const QkPoint& p : e.points) {
    f.x.push_back(p.x);
    f.y.push_back(p.y);
    f.key.push_back(p.key ? 1 : 0);
    const int n = int(e.labels[size_t(p.input)].size());
    f.position.push_back(n > 1 ? float(p.position) / float(n - 1) : 0.0f);
  }
  d.title = "Queries and keys of L" + std::to_string(e.layer) + "H" + std::to_string(e.head) +
            " in one map (" + (e.method == "pca" ? "PCA" : "t-SNE") + ")";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", e.rank_fidelity);
  d.subtitle = model_name + " \u00b7 " + std::to_string(f.inputs) + " input" +
               (f.inputs == 1 ? "" : "s") + " \u00b7 " + std::to_string(e.points.size()) +
               " points \u00b7 rank fidelity " + buf;
  return d;
}

}  // namespace attn::core

#include "app/core/attribution/attention_graph.h"

#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <queue>

namespace attn::core {
namespace {

using MatD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Dinic's maximum flow on a graph built once and reset for each source/sink pair.
class MaxFlow {
 public:
  explicit MaxFlow(int nodes)
      : head_(size_t(nodes), -1), level_(size_t(nodes)), it_(size_t(nodes)) {}
  void add_edge(int from, int to, double cap) {
    edges_.push_back({to, head_[size_t(from)], cap, cap});
    head_[size_t(from)] = int(edges_.size()) - 1;
    edges_.push_back({from, head_[size_t(to)], 0, 0});
    head_[size_t(to)] = int(edges_.size()) - 1;
  }
  double run(int s, int t) {
    for (Edge& e : edges_) e.cap = e.initial;
    double total = 0;
    while (bfs(s, t)) {
      for (size_t i = 0; i < it_.size(); ++i) it_[i] = head_[i];
      for (double f; (f = dfs(s, t, std::numeric_limits<double>::infinity())) > kEps;) total += f;
    }
    return total;
  }

 private:
  static constexpr double kEps = 1e-15;
  struct Edge {
    int to, next;
    double cap, initial;
  };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[size_t(s)] = 0;
    q.push(s);
    while (!q.empty()) {
      const int u = q.front();
      q.pop();
      for (int e = head_[size_t(u)]; e >= 0; e = edges_[size_t(e)].next) {
        const Edge& ed = edges_[size_t(e)];
        if (ed.cap > kEps && level_[size_t(ed.to)] < 0) {
          level_[size_t(ed.to)] = level_[size_t(u)] + 1;
          q.push(ed.to);
        }
      }
    }
    return level_[size_t(t)] >= 0;
  }
  double dfs(int u, int t, double pushed) {
    if (u == t) return pushed;
    for (int& e = it_[size_t(u)]; e >= 0; e = edges_[size_t(e)].next) {
      Edge& ed = edges_[size_t(e)];
      if (ed.cap <= kEps || level_[size_t(ed.to)] != level_[size_t(u)] + 1) continue;
      const double f = dfs(ed.to, t, std::min(pushed, ed.cap));
      if (f > kEps) {
        ed.cap -= f;
        edges_[size_t(e ^ 1)].cap += f;
        return f;
      }
    }
    return 0;
  }
  std::vector<Edge> edges_;
  std::vector<int> head_, level_, it_;
};

// The layered graph of the first `layers` matrices: node l * n + i is token i after layer l.
MaxFlow layered_graph(const std::vector<Matrix>& a, int layers, int n) {
  MaxFlow g((layers + 1) * n);
  for (int l = 0; l < layers; ++l)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        const double c = a[size_t(l)][size_t(i) * n + j];
        if (c > 0) g.add_edge(l * n + j, (l + 1) * n + i, c);
      }
  return g;
}

}  // namespace

Matrix head_mean(const float* pattern, int heads, int n) {
  Matrix m(size_t(n) * n, 0.0);
  for (int h = 0; h < heads; ++h)
    for (size_t e = 0; e < m.size(); ++e) m[e] += pattern[size_t(h) * m.size() + e];
  for (double& v : m) v /= heads;
  return m;
}

Matrix gradient_weighted_mean(const float* pattern, const float* grad, int heads, int n,
                              bool positive) {
  Matrix m(size_t(n) * n, 0.0);
  for (int h = 0; h < heads; ++h)
    for (size_t e = 0; e < m.size(); ++e) {
      const size_t k = size_t(h) * m.size() + e;
      const double v = double(pattern[k]) * grad[k];
      m[e] += positive ? std::max(v, 0.0) : v;
    }
  for (double& v : m) v /= heads;
  return m;
}

Matrix with_residual(const Matrix& a, int n) {
  Matrix m(a.size());
  for (int i = 0; i < n; ++i) {
    double s = 0;
    for (int j = 0; j < n; ++j) {
      const double v = 0.5 * a[size_t(i) * n + j] + (i == j ? 0.5 : 0.0);
      m[size_t(i) * n + j] = v;
      s += v;
    }
    if (s > 0)
      for (int j = 0; j < n; ++j) m[size_t(i) * n + j] /= s;
  }
  return m;
}

std::vector<double> rollout_row(const std::vector<Matrix>& adjusted, int n, int row) {
  // e_row^T Â_L ... Â_1, from the last layer down: one vector-matrix product per layer.
  Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(n);
  v[row] = 1;
  for (size_t l = adjusted.size(); l-- > 0;)
    v = v * Eigen::Map<const MatD>(adjusted[l].data(), n, n);
  return {v.data(), v.data() + n};
}

std::vector<float> rollout_maps(const std::vector<Matrix>& adjusted, int n) {
  std::vector<float> out(adjusted.size() * size_t(n) * n);
  MatD r = MatD::Identity(n, n);
  for (size_t l = 0; l < adjusted.size(); ++l) {
    r = Eigen::Map<const MatD>(adjusted[l].data(), n, n) * r;
    for (size_t e = 0; e < size_t(n) * n; ++e) out[l * size_t(n) * n + e] = float(r.data()[e]);
  }
  return out;
}

std::vector<double> flow_row(const std::vector<Matrix>& adjusted, int layers, int n, int row) {
  MaxFlow g = layered_graph(adjusted, layers, n);
  std::vector<double> out(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) out[size_t(j)] = g.run(j, layers * n + row);
  return out;
}

std::vector<float> flow_maps(const std::vector<Matrix>& adjusted, int n) {
  const int L = int(adjusted.size());
  std::vector<float> out(size_t(L) * n * n);
  for (int l = 0; l < L; ++l) {
    MaxFlow g = layered_graph(adjusted, l + 1, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        out[(size_t(l) * n + i) * n + j] = float(g.run(j, (l + 1) * n + i));
  }
  return out;
}

std::vector<double> chefer_row(const std::vector<Matrix>& weighted, int n, int row) {
  // e_row^T (I + Ā_L) ... (I + Ā_1): v += v Ā_l from the last layer down.
  Eigen::RowVectorXd v = Eigen::RowVectorXd::Zero(n);
  v[row] = 1;
  for (size_t l = weighted.size(); l-- > 0;)
    v = v + v * Eigen::Map<const MatD>(weighted[l].data(), n, n);
  return {v.data(), v.data() + n};
}

}  // namespace attn::core

#include "app/core/attribution/attribution_dataset.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "app/core/export/data_export.h"
#include "compute/error.h"

namespace attn::core {
namespace {

using nlohmann::json;

double value(const json& j) {
  return j.is_number() ? j.get<double>() : std::nan("");
}

json interval_json(const Interval& v) {
  return {{"mean", json_number(v.mean)},
          {"lo", json_number(v.lo)},
          {"hi", json_number(v.hi)},
          {"n", v.n}};
}

}  // namespace

AttributionRecordSummary summarize_record(const Attribution& a,
                                          const std::vector<RankAgreement>& agreement,
                                          const Faithfulness* f) {
  AttributionRecordSummary r;
  r.units = int(a.ranked.size());
  r.z = a.z;
  r.probability = a.probability;
  r.target = a.id;
  r.agreement = agreement;
  if (f)
    for (Curve c : f->curves) {
      c.z_deletion.clear();
      c.p_deletion.clear();
      c.z_insertion.clear();
      c.p_insertion.clear();
      r.curves.push_back(std::move(c));
    }
  return r;
}

AttributionDatasetSummary summarize_records(const std::vector<AttributionRecordSummary>& r,
                                            int bootstrap, uint64_t seed) {
  require(!r.empty(), ErrorCode::InvalidArgument, "no records to summarise");
  const AttributionRecordSummary& first = r.front();
  for (const AttributionRecordSummary& x : r) {
    bool same =
        x.agreement.size() == first.agreement.size() && x.curves.size() == first.curves.size();
    for (size_t i = 0; same && i < x.agreement.size(); ++i)
      same = x.agreement[i].a == first.agreement[i].a && x.agreement[i].b == first.agreement[i].b;
    for (size_t i = 0; same && i < x.curves.size(); ++i)
      same = x.curves[i].order == first.curves[i].order;
    require(same, ErrorCode::InvalidArgument,
            x.source + " was attributed with other methods or faithfulness options than " +
                first.source + ": runs to join must use the same --method and --faithfulness");
  }
  AttributionDatasetSummary s;
  s.records = int(r.size());
  uint64_t k = seed;
  auto over = [&](auto get) {
    std::vector<double> v;
    for (const AttributionRecordSummary& x : r) v.push_back(get(x));
    return interval_of(v, bootstrap, k++);
  };
  for (size_t i = 0; i < first.agreement.size(); ++i) {
    AttributionDatasetSummary::Pair p;
    p.a = first.agreement[i].a;
    p.b = first.agreement[i].b;
    p.kendall_tau = over([&](const auto& x) { return x.agreement[i].kendall_tau; });
    p.spearman = over([&](const auto& x) { return x.agreement[i].spearman; });
    p.top_k_overlap = over([&](const auto& x) { return x.agreement[i].top_k_overlap; });
    s.pairs.push_back(p);
  }
  for (size_t i = 0; i < first.curves.size(); ++i) {
    AttributionDatasetSummary::Order o;
    o.order = first.curves[i].order;
    o.aopc_p = over([&](const auto& x) { return x.curves[i].aopc_p; });
    o.aopc_z = over([&](const auto& x) { return x.curves[i].aopc_z; });
    o.insertion_p = over([&](const auto& x) { return x.curves[i].insertion_p; });
    o.insertion_z = over([&](const auto& x) { return x.curves[i].insertion_z; });
    s.orders.push_back(o);
  }
  s.probability = over([](const auto& x) { return x.probability; });
  return s;
}

json records_json(const std::vector<AttributionRecordSummary>& r) {
  json a = json::array();
  for (const AttributionRecordSummary& x : r) {
    json agree = json::array(), curves = json::array();
    for (const RankAgreement& g : x.agreement)
      agree.push_back({{"a", g.a},
                       {"b", g.b},
                       {"kendall_tau", json_number(g.kendall_tau)},
                       {"spearman", json_number(g.spearman)},
                       {"top_k_overlap", json_number(g.top_k_overlap)},
                       {"k", g.k}});
    for (const Curve& c : x.curves)
      curves.push_back({{"order", c.order},
                        {"aopc_p", json_number(c.aopc_p)},
                        {"aopc_z", json_number(c.aopc_z)},
                        {"insertion_p", json_number(c.insertion_p)},
                        {"insertion_z", json_number(c.insertion_z)}});
    a.push_back({{"index", x.index},
                 {"source", x.source},
                 {"units", x.units},
                 {"z", json_number(x.z)},
                 {"probability", json_number(x.probability)},
                 {"target", x.target},
                 {"label", x.label},
                 {"agreement", agree},
                 {"curves", curves}});
  }
  return a;
}

std::vector<AttributionRecordSummary> records_from_json(const json& j, const std::string& source) {
  std::vector<AttributionRecordSummary> out;
  try {
    require(j.is_array(), ErrorCode::Format, source + ": the records are not a JSON array");
    for (const json& x : j) {
      AttributionRecordSummary r;
      r.index = x.at("index").get<int>();
      r.source = x.at("source").get<std::string>();
      r.units = x.at("units").get<int>();
      r.z = value(x.at("z"));
      r.probability = value(x.at("probability"));
      r.target = x.at("target").get<int>();
      r.label = x.at("label").get<int>();
      for (const json& g : x.at("agreement"))
        r.agreement.push_back({g.at("a").get<std::string>(), g.at("b").get<std::string>(),
                               value(g.at("kendall_tau")), value(g.at("spearman")),
                               value(g.at("top_k_overlap")), g.at("k").get<int>()});
      for (const json& c : x.at("curves")) {
        Curve cv;
        cv.order = c.at("order").get<std::string>();
        cv.aopc_p = value(c.at("aopc_p"));
        cv.aopc_z = value(c.at("aopc_z"));
        cv.insertion_p = value(c.at("insertion_p"));
        cv.insertion_z = value(c.at("insertion_z"));
        r.curves.push_back(std::move(cv));
      }
      out.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    throw Error(ErrorCode::Format, source + ": not an attribution shard: " + e.what());
  }
  return out;
}

json to_json(const AttributionDatasetSummary& s) {
  json pairs = json::array(), orders = json::array();
  for (const auto& p : s.pairs)
    pairs.push_back({{"a", p.a},
                     {"b", p.b},
                     {"kendall_tau", interval_json(p.kendall_tau)},
                     {"spearman", interval_json(p.spearman)},
                     {"top_k_overlap", interval_json(p.top_k_overlap)}});
  for (const auto& o : s.orders)
    orders.push_back({{"order", o.order},
                      {"aopc_p", interval_json(o.aopc_p)},
                      {"aopc_z", interval_json(o.aopc_z)},
                      {"insertion_p", interval_json(o.insertion_p)},
                      {"insertion_z", interval_json(o.insertion_z)}});
  return {{"records", s.records},
          {"probability", interval_json(s.probability)},
          {"agreement", pairs},
          {"faithfulness", orders}};
}

}  // namespace attn::core

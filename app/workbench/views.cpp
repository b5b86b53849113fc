#include "app/workbench/views.h"

#include "compute/error.h"

namespace attn {

const std::vector<std::string>& head_grid_metrics() {
  static const std::vector<std::string> names = {"entropy", "sink_mass", "output_error",
                                                 "mass_recall"};
  return names;
}

std::string head_grid_metric_title(const std::string& name) {
  if (name == "entropy") return "Mean row entropy (nats)";
  if (name == "sink_mass") return "Mass on the most-attended token";
  if (name == "output_error") return "Relative output error vs dense";
  if (name == "mass_recall") return "Dense mass kept (recall)";
  return name;
}

const std::vector<float>& HeadGrid::metric(const std::string& name) const {
  if (name == "entropy") return entropy;
  if (name == "sink_mass") return sink_mass;
  if (name == "output_error") return output_error;
  if (name == "mass_recall") return mass_recall;
  throw Error(ErrorCode::InvalidArgument,
              "unknown head-grid metric '" + name +
                  "' (known: entropy, sink_mass, output_error, mass_recall)");
}

}  // namespace attn

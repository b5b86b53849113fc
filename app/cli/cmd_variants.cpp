// `attnscope variants`: the registry, as a table or JSON (what the GUI generates widgets from).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/options.h"
#include "app/cli/table.h"
#include "compute/kv/kv_policy.h"
#include "compute/params.h"
#include "compute/registry.h"

namespace attn::cli {

namespace {

std::string param_list(const VariantInfo& info) {
  std::string s;
  for (const auto& p : info.params) {
    std::string one;
    if (p.type == ParamSpec::Type::Enum) {
      one = p.name + "=" + param_to_text(p, p.def) + " [";
      for (size_t i = 0; i < p.choices.size(); ++i) one += (i ? "|" : "") + p.choices[i];
      one += "]";
    } else {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s=%.10g [%.10g..%.10g]", p.name.c_str(), p.def, p.min,
                    p.max);
      one = buf;
    }
    s += (s.empty() ? "" : ", ") + one;
  }
  return s;
}

const char* type_name(ParamSpec::Type t) {
  switch (t) {
    case ParamSpec::Type::Int:
      return "int";
    case ParamSpec::Type::Float:
      return "float";
    case ParamSpec::Type::Bool:
      return "bool";
    case ParamSpec::Type::Enum:
      return "enum";
  }
  return "?";
}

nlohmann::json params_json(const VariantInfo& info) {
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : info.params) {
    nlohmann::json j = {{"name", p.name}, {"type", type_name(p.type)}, {"min", p.min},
                        {"max", p.max},   {"default", p.def},          {"help", p.help}};
    if (p.type == ParamSpec::Type::Enum) {
      j["choices"] = p.choices;
      j["default"] = param_to_text(p, p.def);
    }
    params.push_back(std::move(j));
  }
  return params;
}

class VariantsCommand final : public Command {
 public:
  void add_options(CLI::App& cmd) override {
    add_json_option(cmd, json, "Write the registry");
    cmd.add_flag("--kv", kv, "List the KV-cache policy pieces (for stream and generate) instead");
  }
  int run() override;

 private:
  std::string json;  // bound by add_options
  bool kv = false;
};

int VariantsCommand::run() {
  if (kv) {
    if (!json.empty()) {
      nlohmann::json out = nlohmann::json::array();
      for (const VariantInfo& info : kv_pieces())
        out.push_back({{"id", info.id},
                       {"kind", info.family},
                       {"name", info.display_name},
                       {"source", info.source},
                       {"description", info.description},
                       {"params", params_json(info)}});
      write_json_output(json, out.dump(2));
      return 0;
    }
    Table t({"id", "kind", "name", "parameters", "source"});
    for (const VariantInfo& info : kv_pieces())
      t.add({info.id, info.family, info.display_name, param_list(info),
             info.source.size() > 60 ? info.source.substr(0, 57) + "..." : info.source});
    t.print();
    return 0;
  }
  if (!json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& piece : registry_pieces()) {
      const nlohmann::json params = params_json(piece.info);
      out.push_back({{"id", piece.info.id},
                     {"kind", piece_kind_name(piece.kind)},
                     {"name", piece.info.display_name},
                     {"family", piece.info.family},
                     {"source", piece.info.source},
                     {"description", piece.info.description},
                     {"params", params}});
    }
    write_json_output(json, out.dump(2));
    return 0;
  }
  Table t({"id", "kind", "name", "parameters", "source"});
  for (const auto& piece : registry_pieces())
    t.add({piece.info.id, piece_kind_name(piece.kind), piece.info.display_name,
           param_list(piece.info),
           piece.info.source.size() > 60 ? piece.info.source.substr(0, 57) + "..."
                                         : piece.info.source});
  t.print();
  return 0;
}

}  // namespace

std::unique_ptr<Command> make_variants_command() {
  return std::make_unique<VariantsCommand>();
}

}  // namespace attn::cli

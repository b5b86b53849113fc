// `attnscope variants`: the registry, as a table or JSON (what the GUI generates widgets from).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/commands.h"
#include "app/cli/table.h"
#include "compute/registry.h"

namespace attn::cli {

namespace {

const char* kind_name(PieceKind k) {
  switch (k) {
    case PieceKind::Pattern: return "pattern";
    case PieceKind::ScoreMod: return "score-mod";
    case PieceKind::Normaliser: return "normaliser";
    case PieceKind::Dense: return "dense";
    case PieceKind::Selective: return "selective";
  }
  return "?";
}

std::string param_list(const VariantInfo& info) {
  std::string s;
  for (const auto& p : info.params) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s=%g [%g..%g]", p.name.c_str(), p.def, p.min, p.max);
    s += (s.empty() ? "" : ", ") + std::string(buf);
  }
  return s;
}

}  // namespace

void add_variants_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("variants", "List every variant piece with parameters and source");
  static bool json = false;
  cmd->add_flag("--json", json, "Print the registry as JSON");
  cmd->callback([&action] {
    action = [] {
      if (json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& piece : registry_pieces()) {
          nlohmann::json params = nlohmann::json::array();
          for (const auto& p : piece.info.params)
            params.push_back({{"name", p.name},
                              {"type", p.type == ParamSpec::Type::Int     ? "int"
                                       : p.type == ParamSpec::Type::Float ? "float"
                                                                          : "bool"},
                              {"min", p.min},
                              {"max", p.max},
                              {"default", p.def},
                              {"help", p.help}});
          out.push_back({{"id", piece.info.id},
                         {"kind", kind_name(piece.kind)},
                         {"name", piece.info.display_name},
                         {"family", piece.info.family},
                         {"source", piece.info.source},
                         {"description", piece.info.description},
                         {"params", params}});
        }
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      Table t({"id", "kind", "name", "parameters", "source"});
      for (const auto& piece : registry_pieces())
        t.add({piece.info.id, kind_name(piece.kind), piece.info.display_name,
               param_list(piece.info),
               piece.info.source.size() > 60 ? piece.info.source.substr(0, 57) + "..."
                                             : piece.info.source});
      t.print();
      return 0;
    };
  });
}

}  // namespace attn::cli

#include "compute/fallback.h"

#include "compute/error.h"

namespace attn {

FallbackBackend::FallbackBackend(std::unique_ptr<Backend> preferred,
                                 std::unique_ptr<Backend> fallback)
    : preferred_(std::move(preferred)), fallback_(std::move(fallback)) {}

bool FallbackBackend::supports(const Variant& v, const Problem& p, std::string* why) const {
  return preferred_->supports(v, p, nullptr) || fallback_->supports(v, p, why);
}

void FallbackBackend::note(const std::string& why) {
  for (const auto& n : notes_)
    if (n == why) return;
  notes_.push_back(why);
}

bool FallbackBackend::select(const Variant& v, const Problem& p, Layout* layout,
                             SelectStats* stats) {
  if (!preferred_->supports(v, p, nullptr)) return fallback_->select(v, p, layout, stats);
  try {
    return preferred_->select(v, p, layout, stats);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Device) throw;
    note(preferred_->name() + " could not select for " + v.spec() + " (" + e.what() +
         "); selected on the CPU");
    return false;
  }
}

Result FallbackBackend::execute(const Variant& v, const Problem& p, const Layout& layout,
                                const RunOptions& opt) {
  std::string why;
  if (preferred_->supports(v, p, &why)) {
    try {
      return preferred_->execute(v, p, layout, opt);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Device) throw;
      why = e.what();
    }
  }
  note(preferred_->name() + " could not run " + v.spec() + " (" + why + "); ran on " +
       fallback_->name());
  return fallback_->execute(v, p, layout, opt);
}

std::unique_ptr<Backend> make_backend_with_fallback(const std::string& name) {
  if (name == "cpu" || name == "reference") return make_backend(name);
  return std::make_unique<FallbackBackend>(make_backend(name), make_backend("cpu"));
}

}  // namespace attn

#include "app/figures/figure.h"

#include <unistd.h>

#include <QGuiApplication>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "app/core/head_metrics.h"
#include "app/figures/presets.h"
#include "compute/error.h"
#include "render/colormap.h"

namespace attn {

FigureFormat figure_format(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  if (ext == ".png") return FigureFormat::Png;
  if (ext == ".svg") return FigureFormat::Svg;
  if (ext == ".pdf") return FigureFormat::Pdf;
  throw Error(ErrorCode::InvalidArgument,
              path + ": unknown figure format '" + ext + "' (use .png, .svg or .pdf)");
}

void check_figure_settings(const FigureData& d) {
  render::colormap_from_name(d.settings.colormap);
  if (d.view == View::Grid) core::head_metric_index(d.settings.grid_metric);
  if (d.view == View::Tradeoff) {
    static const std::vector<std::string> x = {"density", "seconds", "flops"};
    static const std::vector<std::string> y = {"rel_error", "mass_recall", "row_kl",
                                               "next_token_kl", "top1_agreement"};
    auto check = [](const std::string& v, const std::vector<std::string>& known, const char* key) {
      if (v.empty() || std::find(known.begin(), known.end(), v) != known.end()) return;
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error(ErrorCode::InvalidArgument,
                  std::string("unknown ") + key + " '" + v + "' (known: " + list + ")");
    };
    check(d.settings.tradeoff_x, x, "view.tradeoff_x");
    check(d.settings.tradeoff_y, y, "view.tradeoff_y");
  }
}

double paint_figure(QPainter& p, const FigureData& d, double w_pt, double h_pt,
                    const FigureStyle& style) {
  check_figure_settings(d);  // before the painter saves any state: an error leaves it clean
  fig::FigurePainter c(p, style);
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setRenderHint(QPainter::TextAntialiasing, true);
  p.fillRect(QRectF(0, 0, w_pt, h_pt), Qt::white);
  const double m = style.margin_pt;
  const QRectF all(m, m, w_pt - 2 * m, h_pt - 2 * m);
  const double th = fig::draw_title(c, all, d.title, d.subtitle);
  const QRectF area(all.left(), all.top() + th, all.width(), all.height() - th);
  double bottom = area.top();
  switch (d.view) {
    case View::Heatmap:
    case View::Variants:
      bottom = fig::paint_heatmaps(c, area, d);
      break;
    case View::Grid:
      bottom = fig::paint_head_grids(c, area, d);
      break;
    case View::Sinks:
      bottom = fig::paint_sinks(c, area, d);
      break;
    case View::Image:
      bottom = fig::paint_images(c, area, d);
      break;
    case View::Tradeoff:
      bottom = fig::paint_tradeoff(c, area, d);
      break;
    case View::Tokens:
      bottom = fig::paint_tokens(c, area, d);
      break;
  }
  p.restore();
  return bottom + m;
}

FigureSize fit_height(const FigureData& d, FigureSize size, const FigureStyle& style) {
  if (size.height > 0) return size;
  const double w = size.width * 72.0 / size.dpi;
  double h = w * 0.5;
  if (d.view != View::Sinks && d.view != View::Tradeoff) {
    ensure_gui_app();
    QImage probe(1, 1, QImage::Format_RGB32);  // a 72-dpi device: painter units are points
    probe.setDotsPerMeterX(int(std::lround(72 / 0.0254)));
    probe.setDotsPerMeterY(int(std::lround(72 / 0.0254)));
    QPainter p(&probe);
    h = paint_figure(p, d, w, w * 3, style);
  }
  size.height = std::max(1, int(std::ceil(h * size.dpi / 72.0)));
  return size;
}

namespace {
void check_size(const FigureSize& s) {
  require(s.width > 0 && s.height > 0 && s.width <= 20000 && s.height <= 20000 && s.dpi >= 10 &&
              s.dpi <= 2400,
          ErrorCode::InvalidArgument,
          "figure size must be 1..20000 pixels per side at 10..2400 dpi (got " +
              std::to_string(s.width) + "x" + std::to_string(s.height) + " at " +
              std::to_string(s.dpi) + " dpi)");
}
double pt(int px, double dpi) {
  return px * 72.0 / dpi;
}
}  // namespace

QImage render_figure_image(const FigureData& d, const FigureSize& size0, const FigureStyle& style) {
  const FigureSize size = fit_height(d, size0, style);
  check_size(size);
  ensure_gui_app();
  QImage img(size.width, size.height, QImage::Format_ARGB32_Premultiplied);
  const int dpm = int(std::lround(size.dpi / 0.0254));
  img.setDotsPerMeterX(dpm);
  img.setDotsPerMeterY(dpm);
  img.fill(Qt::white);
  QPainter p(&img);
  p.scale(size.dpi / 72.0, size.dpi / 72.0);
  paint_figure(p, d, pt(size.width, size.dpi), pt(size.height, size.dpi), style);
  p.end();
  return img.convertToFormat(QImage::Format_RGB32);
}

void export_figure(const FigureData& d, const std::string& path, const FigureSize& size0,
                   const FigureStyle& style) {
  check_figure_settings(d);  // no file is started for settings no figure knows
  const FigureSize size = fit_height(d, size0, style);
  check_size(size);
  const FigureFormat fmt = figure_format(path);
  ensure_gui_app();
  const QString qpath = QString::fromStdString(path);
  const std::string tmp = path + ".tmp-" + std::to_string(QCoreApplication::applicationPid()) +
                          std::filesystem::path(path).extension().string();
  const QString qtmp = QString::fromStdString(tmp);
  const double w = pt(size.width, size.dpi), h = pt(size.height, size.dpi);
  bool ok = false;
  if (fmt == FigureFormat::Png) {
    const QImage img = render_figure_image(d, size, style);
    ok = img.save(qtmp, "PNG");
  } else if (fmt == FigureFormat::Svg) {
    QSvgGenerator svg;
    svg.setFileName(qtmp);
    svg.setResolution(72);  // one SVG user unit = one point
    svg.setSize(QSize(int(std::lround(w)), int(std::lround(h))));
    svg.setViewBox(QRectF(0, 0, w, h));
    svg.setTitle(QString::fromStdString(d.title));
    svg.setDescription("attnscope figure: " + QString(core::view_name(d.view)));
    QPainter p;
    ok = p.begin(&svg);
    if (ok) {
      paint_figure(p, d, w, h, style);
      ok = p.end();
    }
  } else {
    QPdfWriter pdf(qtmp);
    pdf.setResolution(72);  // one painter unit = one point
    pdf.setPageSize(QPageSize(QSizeF(w, h), QPageSize::Point, QString(), QPageSize::ExactMatch));
    pdf.setPageMargins(QMarginsF(0, 0, 0, 0), QPageLayout::Point);
    pdf.setTitle(QString::fromStdString(d.title));
    pdf.setCreator("attnscope");
    QPainter p;
    ok = p.begin(&pdf);
    if (ok) {
      paint_figure(p, d, w, h, style);
      ok = p.end();
    }
  }
  std::error_code ec;
  if (!ok || !std::filesystem::exists(tmp, ec)) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::Io, path + ": cannot write figure");
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::Io, path + ": cannot write figure: " + ec.message());
  }
  (void)qpath;
}

std::string sidecar_path(const std::string& figure_path) {
  return figure_path + core::kSessionSuffix;
}

void write_sidecar(const Session& s, const std::string& session_path,
                   const std::string& figure_path, View view, const FigureSize& size) {
  namespace fs = std::filesystem;
  Session copy = s;
  const fs::path dir = fs::absolute(fs::path(figure_path)).parent_path();
  auto rebase = [&](std::string& p) {
    if (p.empty() || fs::path(p).is_absolute()) return;
    const fs::path abs =
        fs::absolute(core::resolve_session_path(session_path, p)).lexically_normal();
    p = abs.lexically_relative(dir).string();
  };
  if (copy.input.kind == "image") rebase(copy.input.image);
  if (copy.input.kind == "tensors") rebase(copy.input.tensors);
  if (copy.model.id.rfind("default-", 0) != 0) rebase(copy.model.id);
  copy.view.view = core::view_name(view);
  copy.figure = size;
  copy.extra["figure"] = {
      {"file", std::filesystem::path(figure_path).filename().string()},
      {"view", core::view_name(view)},
      {"regenerate", "attnscope render --session " +
                         std::filesystem::path(sidecar_path(figure_path)).filename().string() +
                         " --view " + core::view_name(view) + " --out " +
                         std::filesystem::path(figure_path).filename().string()}};
  core::save_session(copy, sidecar_path(figure_path));
}

FigureSize export_view(const core::Analysis& a, View view, const std::string& path,
                       FigureSize size) {
  figure_format(path);  // a bad extension fails before any work
  const FigureData d = core::collect_figure(a, view);
  size = fit_height(d, size);
  Session record = a.session;
  core::fill_hashes(record, a.session_path);
  export_figure(d, path, size);
  write_sidecar(record, a.session_path, path, view, size);
  return size;
}

void ensure_gui_app() {
  if (QGuiApplication::instance()) return;
  if (std::getenv("QT_QPA_PLATFORM") == nullptr) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  if (std::getenv("XDG_RUNTIME_DIR") == nullptr) {  // Qt wants a private runtime folder
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("attnscope-runtime-" + std::to_string(getuid())))
            .string();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, ec);
    if (!ec) setenv("XDG_RUNTIME_DIR", dir.c_str(), 1);
  }
  static int argc = 1;
  static char name[] = "attnscope";
  static char* argv[] = {name, nullptr};
  static QGuiApplication* app = new QGuiApplication(argc, argv);
  (void)app;
}

}  // namespace attn

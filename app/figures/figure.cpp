#include "app/figures/figure.h"

#include <unistd.h>

#include <QFile>
#include <QGuiApplication>
#include <QPdfWriter>
#include <QSvgGenerator>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "app/core/export/data_export.h"
#include "app/core/heads/head_metrics.h"
#include "app/figures/figure_painter.h"
#include "app/figures/presets.h"
#include "compute/error.h"
#include "render/colormap.h"

namespace attn::fig {

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
    static const std::vector<std::string> x = {"density", "seconds", "select_seconds",
                                               "kernel_seconds", "flops"};
    static const std::vector<std::string> y = {"rel_error",     "mass_recall",    "row_kl",
                                               "next_token_kl", "top1_agreement", "accuracy",
                                               "loss"};
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
                    const FigureStyle& style, FigureLayout* layout) {
  check_figure_settings(d);  // before the painter saves any state: an error leaves it clean
  const bool free_height = !(h_pt > 0);
  const double h = free_height ? w_pt * 3 : h_pt;  // a free height: a tall canvas, measured
  if (layout) *layout = FigureLayout{QRectF(0, 0, w_pt, h), {}, {}};
  FigurePainter c(p, style, layout, free_height);
  p.save();
  p.setRenderHint(QPainter::Antialiasing, true);
  p.setRenderHint(QPainter::TextAntialiasing, true);
  p.fillRect(QRectF(0, 0, w_pt, h), Qt::white);
  const double m = style.margin_pt;
  const QRectF all(m, m, w_pt - 2 * m, h - 2 * m);
  const double th = draw_title(c, all, d.title, d.subtitle);
  const QRectF area(all.left(), all.top() + th, all.width(), all.height() - th);
  double bottom = area.top();
  switch (d.view) {
    case View::Heatmap:
    case View::Variants:
      bottom = paint_heatmaps(c, area, d);
      break;
    case View::Grid:
      bottom = paint_head_grids(c, area, d);
      break;
    case View::Sinks:
      bottom = paint_sinks(c, area, d);
      break;
    case View::Image:
      bottom = paint_images(c, area, d);
      break;
    case View::Tradeoff:
      bottom = paint_tradeoff(c, area, d);
      break;
    case View::Tokens:
      bottom = paint_tokens(c, area, d);
      break;
    case View::Stream:
      bottom = paint_stream(c, area, d);
      break;
    case View::Cache:
      bottom = paint_cache(c, area, d);
      break;
    case View::Decode:
      bottom = paint_decode(c, area, d);
      break;
    case View::Heads:
    case View::Patch:
      bottom = paint_value_grids(c, area, d);
      break;
    case View::Attribution:
      bottom = paint_attribution(c, area, d);
      break;
    case View::Qk:
      bottom = paint_qk(c, area, d);
      break;
    case View::Steps:
      bottom = paint_steps(c, area, d);
      break;
  }
  p.restore();
  if (layout && free_height) layout->page.setHeight(bottom + m);
  return bottom + m;
}

FigureSize fit_height(const FigureData& d, FigureSize size, const FigureStyle& style) {
  if (size.height > 0) return size;
  const double w = size.width * 72.0 / size.dpi;
  ensure_gui_app();
  // Measured on an image of the figure's resolution, as render_figure_image paints it, so that
  // text measures the same (the painter's units are points).
  QImage probe(1, 1, QImage::Format_RGB32);
  const int dpm = int(std::lround(size.dpi / 0.0254));
  probe.setDotsPerMeterX(dpm);
  probe.setDotsPerMeterY(dpm);
  QPainter p(&probe);
  p.scale(size.dpi / 72.0, size.dpi / 72.0);
  const double h = paint_figure(p, d, w, 0, style);
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

QImage render_figure_image(const FigureData& d, const FigureSize& size0, const FigureStyle& style,
                           FigureLayout* layout) {
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
  paint_figure(p, d, pt(size.width, size.dpi), pt(size.height, size.dpi), style, layout);
  p.end();
  return img.convertToFormat(QImage::Format_RGB32);
}

namespace {
// Paints the figure into the open `file` in `fmt`; false when Qt's writer fails.
bool write_figure(const FigureData& d, FigureFormat fmt, QFile& file, const FigureSize& size,
                  double w, double h, const FigureStyle& style) {
  if (fmt == FigureFormat::Png) return render_figure_image(d, size, style).save(&file, "PNG");
  QSvgGenerator svg;
  std::unique_ptr<QPdfWriter> pdf;
  QPaintDevice* device = &svg;
  if (fmt == FigureFormat::Svg) {
    svg.setOutputDevice(&file);
    svg.setResolution(72);  // one SVG user unit = one point
    svg.setSize(QSize(int(std::lround(w)), int(std::lround(h))));
    svg.setViewBox(QRectF(0, 0, w, h));
    svg.setTitle(QString::fromStdString(d.title));
    svg.setDescription("attnscope figure: " + QString(core::view_name(d.view)));
  } else {
    pdf = std::make_unique<QPdfWriter>(&file);
    pdf->setResolution(72);  // one painter unit = one point
    pdf->setPageSize(QPageSize(QSizeF(w, h), QPageSize::Point, QString(), QPageSize::ExactMatch));
    pdf->setPageMargins(QMarginsF(0, 0, 0, 0), QPageLayout::Point);
    pdf->setTitle(QString::fromStdString(d.title));
    pdf->setCreator("attnscope");
    device = pdf.get();
  }
  QPainter p;
  if (!p.begin(device)) return false;
  paint_figure(p, d, w, h, style);
  return p.end();
}
}  // namespace

void check_figure_path(const std::string& path) {
  figure_format(path);
  core::check_output_path(path);
}

void export_figure(const FigureData& d, const std::string& path, const FigureSize& size0,
                   const FigureStyle& style) {
  check_figure_settings(d);  // no file is started for settings no figure knows
  const FigureSize size = fit_height(d, size0, style);
  check_size(size);
  const FigureFormat fmt = figure_format(path);
  check_figure_path(path);
  ensure_gui_app();
  const std::string tmp = path + ".tmp-" + std::to_string(QCoreApplication::applicationPid()) +
                          std::filesystem::path(path).extension().string();
  std::error_code ec;
  // The file is opened here, not by Qt's writers: a failure is one clear error, and Qt prints
  // no warning of its own.
  QFile file(QString::fromStdString(tmp));
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate))
    throw Error(ErrorCode::Io, path + ": cannot write figure: " + file.errorString().toStdString());
  const double w = pt(size.width, size.dpi), h = pt(size.height, size.dpi);
  bool ok = false;
  try {
    ok = write_figure(d, fmt, file, size, w, h, style);
  } catch (...) {
    file.close();
    std::filesystem::remove(tmp, ec);
    throw;
  }
  file.close();
  if (!ok || file.error() != QFileDevice::NoError) {
    const std::string why = file.error() != QFileDevice::NoError
                                ? ": " + file.errorString().toStdString()
                                : std::string();
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::Io, path + ": cannot write figure" + why);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorCode::Io, path + ": cannot write figure: " + ec.message());
  }
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

}  // namespace attn::fig

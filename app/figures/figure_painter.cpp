#include "app/figures/figure_painter.h"

#include <QFontMetricsF>
#include <QImage>
#include <QLinearGradient>
#include <QPaintDevice>
#include <algorithm>
#include <cmath>

#include "app/core/labels.h"

namespace attn::fig {

QColor series_color(int i) {
  // Colour-blind-safe qualitative palette (Okabe & Ito 2008).
  static const QColor c[] = {{0, 114, 178}, {213, 94, 0},   {0, 158, 115}, {204, 121, 167},
                             {230, 159, 0}, {86, 180, 233}, {0, 0, 0},     {240, 228, 66}};
  return c[size_t(i) % (sizeof c / sizeof c[0])];
}

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

QFont FigurePainter::font(double pt, bool bold) const {
  QFont f(s_.family);
  // The painter's units are points; a device of D dpi turns a point size P into P * D / 72
  // device units before the painter's transform, so ask for pt * 72 / D.
  const int dpi = p_.device() ? p_.device()->logicalDpiY() : 72;
  f.setPointSizeF(pt * 72.0 / double(dpi > 0 ? dpi : 72));
  f.setBold(bold);
  f.setHintingPreference(QFont::PreferNoHinting);
  f.setKerning(true);
  return f;
}

double FigurePainter::text_width(const QString& t, double pt, bool bold) const {
  return QFontMetricsF(font(pt, bold), p_.device()).horizontalAdvance(t);
}

double FigurePainter::line_height(double pt) const {
  const QFontMetricsF m(font(pt), p_.device());
  return m.ascent() + m.descent();
}

void FigurePainter::text(QPointF at, const QString& t, double pt, int halign, int valign, QColor c,
                         bool bold, double deg) {
  const QFont f = font(pt, bold);
  const QFontMetricsF m(f, p_.device());
  const double w = m.horizontalAdvance(t);
  const double x = halign < 0 ? 0 : halign == 0 ? -w / 2 : -w;
  const double y = valign < 0    ? m.ascent()
                   : valign == 0 ? (m.ascent() - m.descent()) / 2
                                 : -m.descent();
  p_.save();
  p_.translate(at);
  if (deg != 0) p_.rotate(deg);
  p_.setFont(f);
  p_.setPen(c);
  p_.drawText(QPointF(x, y), t);
  p_.restore();
}

QString FigurePainter::elide(const QString& t, double pt, double max_w, bool bold) const {
  return QFontMetricsF(font(pt, bold), p_.device()).elidedText(t, Qt::ElideRight, max_w);
}

void FigurePainter::line(QPointF a, QPointF b, QColor c, double w) {
  p_.save();
  QPen pen(c, w < 0 ? s_.line_pt : w);
  pen.setCapStyle(Qt::FlatCap);
  p_.setPen(pen);
  p_.drawLine(a, b);
  p_.restore();
}

void FigurePainter::rect_outline(const QRectF& r, QColor c, double w) {
  p_.save();
  QPen pen(c, w < 0 ? s_.line_pt : w);
  pen.setJoinStyle(Qt::MiterJoin);
  p_.setPen(pen);
  p_.setBrush(Qt::NoBrush);
  p_.drawRect(r);
  p_.restore();
}

std::vector<double> nice_ticks(double lo, double hi, int max_n) {
  std::vector<double> out;
  if (!(hi > lo) || max_n < 2) return {lo};
  const double raw = (hi - lo) / double(max_n - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double v = first; v <= hi + step * 1e-9; v += step)
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  if (!(lo > 0) || !(hi > lo)) return out;
  // A tolerance of 1e-6 decades keeps 10^k when rounding put an end a hair past it.
  for (int k = int(std::ceil(std::log10(lo) - 1e-6)); k <= int(std::floor(std::log10(hi) + 1e-6));
       ++k)
    out.push_back(std::pow(10.0, k));
  return out;
}

QString tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e4 || a < 1e-3) {
    const int e = int(std::floor(std::log10(a) + 1e-9));
    const double m = v / std::pow(10.0, e);
    if (std::abs(m - std::round(m)) < 1e-6)
      return (std::round(m) == 1 ? QString() : QString::number(int(std::round(m))) + "\u00d7") +
             "10" + QString::fromUtf8(e < 0 ? "\u207b" : "") + [&] {
               static const char* sup[] = {"\u2070", "\u00b9", "\u00b2", "\u00b3", "\u2074",
                                           "\u2075", "\u2076", "\u2077", "\u2078", "\u2079"};
               QString s;
               for (QChar ch : QString::number(std::abs(e)))
                 s += QString::fromUtf8(sup[ch.digitValue()]);
               return s;
             }();
    return QString::number(v, 'g', 3);
  }
  return QString::number(v, 'g', 4);
}

std::vector<int> thinned(int n, double length, double each) {
  std::vector<int> out;
  if (n <= 0) return out;
  int stride = std::max(1, int(std::ceil(each * n / std::max(length, 1.0))));
  // Prefer round strides so labels land on multiples a reader can count.
  for (int s : {1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 200, 250, 256, 500, 1000})
    if (s >= stride) {
      stride = s;
      break;
    }
  for (int i = 0; i < n; i += stride) out.push_back(i);
  return out;
}

QString token_label(const std::string& s, int max_chars) {
  QString t = QString::fromUtf8(s.data(), qsizetype(s.size()));
  QString out;
  for (QChar ch : t) {
    if (ch == '\n')
      out += QString::fromUtf8("\u21b5");
    else if (ch == '\t')
      out += QString::fromUtf8("\u2192");
    else if (ch.isPrint() || ch == ' ')
      out += ch;
    else
      out += QString::fromUtf8("\u00b7");
  }
  if (out.size() > max_chars) out = out.left(max_chars - 1) + QString::fromUtf8("\u2026");
  return out;
}

void draw_cells(FigurePainter& c, const QRectF& r, const CellSource& src, render::Colormap cmap,
                double vmax, bool log_scale) {
  QPainter& p = c.painter();
  const int rows = src.rows, cols = src.cols;
  if (rows <= 0 || cols <= 0) return;
  const std::vector<float>& v = *src.values;
  auto color = [&](int y, int x) {
    const size_t i = size_t(y) * size_t(cols) + size_t(x);
    if (!src.hidden.empty() && src.hidden[i]) return kHidden;
    const render::Rgb8 k =
        render::colormap_rgb8(cmap, render::color_position(v[i], vmax, log_scale));
    return QColor(k.r, k.g, k.b);
  };
  p.save();
  p.setRenderHint(QPainter::Antialiasing, false);
  if (int64_t(rows) * cols > c.style().max_rect_cells) {
    QImage img(cols, rows, QImage::Format_RGB32);
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x) img.setPixelColor(x, y, color(y, x));
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(r, img);
  } else {
    const double cw = r.width() / cols, ch = r.height() / rows;
    p.setPen(Qt::NoPen);
    for (int y = 0; y < rows; ++y) {
      // Runs of equal colour become one rectangle (smaller SVG/PDF, no seams inside a run).
      int x0 = 0;
      QColor run = color(y, 0);
      for (int x = 1; x <= cols; ++x) {
        const QColor next = x < cols ? color(y, x) : QColor();
        if (x == cols || next != run) {
          // Slight overlap hides hairline seams between neighbours in vector viewers.
          const double ov = x < cols ? cw * 0.02 : 0;
          p.fillRect(QRectF(r.left() + x0 * cw, r.top() + y * ch, (x - x0) * cw + ov,
                            ch + (y + 1 < rows ? ch * 0.02 : 0)),
                     run);
          x0 = x;
          run = next;
        }
      }
    }
  }
  p.restore();
}

double colorbar_width(const FigurePainter& c) {
  const FigureStyle& s = c.style();
  return 8 + 3 + c.text_width("0.000", s.tick_pt) + 4 + c.line_height(s.label_pt);
}

double draw_colorbar(FigurePainter& c, const QRectF& r, render::Colormap cmap, double vmax,
                     bool log_scale, const QString& title) {
  const FigureStyle& s = c.style();
  QPainter& p = c.painter();
  QLinearGradient g(r.bottomLeft(), r.topLeft());
  // The table's own anchors: the vector gradient matches the cells exactly.
  const std::vector<render::Rgb8> stops = render::colormap_stops(cmap);
  const int n = int(stops.size());
  for (int i = 0; i < n; ++i) {
    const render::Rgb8 k = stops[size_t(i)];
    g.setColorAt(double(i) / (n - 1), QColor(k.r, k.g, k.b));
  }
  p.save();
  p.setPen(Qt::NoPen);
  p.fillRect(r, QBrush(g));
  p.restore();
  c.rect_outline(r);
  std::vector<double> ticks;
  if (log_scale) {
    ticks = log_ticks(vmax * 1e-4, vmax);
  } else {
    ticks = nice_ticks(0, vmax, 6);
  }
  double label_w = 0;
  for (double t : ticks) {
    const double pos = render::color_position(t, vmax, log_scale);
    const double y = r.bottom() - pos * r.height();
    c.line({r.right(), y}, {r.right() + 2.5, y});
    const QString lab = tick_label(t);
    c.text({r.right() + 3.5, y}, lab, s.tick_pt, -1, 0, kText);
    label_w = std::max(label_w, c.text_width(lab, s.tick_pt));
  }
  const double tx = r.right() + 3.5 + label_w + 3;
  c.text({tx, r.center().y()}, title, s.label_pt, 0, -1, kText, false, -90);
  return tx + c.line_height(s.label_pt) - r.right();
}

double caption_height(const FigurePainter& c) {
  return c.line_height(c.style().label_pt) + c.line_height(c.style().tick_pt) + 3;
}

void draw_caption(FigurePainter& c, QPointF at, double width, const std::string& spec,
                  const QString& fallback) {
  const FigureStyle& s = c.style();
  const core::VariantLabel l = core::variant_label(spec);
  c.text(at, c.elide(qs(l.name), s.label_pt, width, true), s.label_pt, -1, -1, kText, true);
  const QString sub = l.params.empty() ? fallback : qs(l.params);
  c.text({at.x(), at.y() + c.line_height(s.label_pt) + 1}, c.elide(sub, s.tick_pt, width),
         s.tick_pt, -1, -1, kMuted);
}

std::vector<QString> wrap_segments(const FigurePainter& c, const std::vector<QString>& segments,
                                   double pt, double width, int max_lines) {
  std::vector<QString> lines;
  QString cur;
  for (const QString& seg : segments) {
    const QString joined = cur.isEmpty() ? seg : cur + " \u00b7 " + seg;
    if (cur.isEmpty() || c.text_width(joined, pt) <= width) {
      cur = joined;
    } else {
      lines.push_back(cur);
      cur = seg;
    }
  }
  if (!cur.isEmpty()) lines.push_back(cur);
  if (int(lines.size()) > max_lines) lines.resize(size_t(max_lines));
  for (QString& l : lines) l = c.elide(l, pt, width);
  return lines;
}

double draw_title(FigurePainter& c, const QRectF& area, const std::string& title,
                  const std::string& subtitle) {
  const FigureStyle& s = c.style();
  double y = area.top();
  if (!title.empty()) {
    c.text({area.left(), y}, c.elide(qs(title), s.title_pt, area.width()), s.title_pt, -1, -1,
           kText, true);
    y += c.line_height(s.title_pt) + 1.5;
  }
  if (!subtitle.empty()) {
    c.text({area.left(), y}, c.elide(qs(subtitle), s.tick_pt + 0.5, area.width()), s.tick_pt + 0.5,
           -1, -1, kMuted);
    y += c.line_height(s.tick_pt + 0.5);
  }
  return y - area.top() + (y > area.top() ? 5 : 0);
}

}  // namespace attn::fig

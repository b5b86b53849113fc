#include "app/figures/figure_painter.h"

#include <QFontMetricsF>
#include <QImage>
#include <QLinearGradient>
#include <QPaintDevice>
#include <algorithm>
#include <cmath>

#include "app/core/session/labels.h"
#include "render/number_format.h"

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

FigurePainter::FigurePainter(QPainter& p, const FigureStyle& s, FigureLayout* record,
                             bool free_height)
    : p_(p), s_(s), record_(record), free_height_(free_height) {
  to_page_ = p.worldTransform().inverted();
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
                         bool bold, double deg, double room) {
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
  if (record_) {
    const QRectF local(x, y - m.ascent(), w, m.ascent() + m.descent());
    record_->texts.push_back({t, to_page_.mapRect(p_.worldTransform().mapRect(local)), w, room});
  }
  p_.restore();
}

void FigurePainter::mark(const QRectF& m, const QRectF& axes) {
  if (!record_) return;
  const QTransform t = p_.worldTransform() * to_page_;
  record_->marks.push_back({t.mapRect(m), t.mapRect(axes)});
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

namespace {
constexpr double kSteps[] = {1.0, 2.0, 5.0, 10.0};
}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int max_n) {
  std::vector<double> out;
  if (!(hi > lo) || max_n < 2) return {lo};
  const double raw = (hi - lo) / double(max_n - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag * 10;
  for (double m : kSteps)
    if (m * mag >= raw * (1 - 1e-9)) {
      step = m * mag;
      break;
    }
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    const double v = first + i * step;
    if (v > hi + step * 1e-9) break;
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return out;
}

std::vector<double> cover_ticks(double lo, double hi, int max_n) {
  max_n = std::max(max_n, 2);
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  const double raw = (hi - lo) / double(max_n - 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)) - 1);
  for (int guard = 0; guard < 12; ++guard, mag *= 10)
    for (double m : kSteps) {
      const double step = m * mag;
      const double first = std::floor(lo / step + 1e-9) * step;
      const double last = std::ceil(hi / step - 1e-9) * step;
      const int n = int(std::lround((last - first) / step)) + 1;
      if (n > max_n) continue;
      std::vector<double> out;
      for (int i = 0; i < n; ++i) {
        const double v = first + i * step;
        out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
      }
      return out;
    }
  return {lo, hi};
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

QString num_fixed(double x, int decimals) {
  return qs(render::format_fixed(x, decimals));
}

QString num_sig(double x, int digits, double resolution) {
  return qs(render::format_number(x, digits, resolution));
}

QString tick_label(double v) {
  // Rounding noise (3.1e-13 where an axis or scale means 0) prints as 0.
  if (std::abs(v) < 1e-9) return "0";
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
    if (!src.dropped.empty() && src.dropped[i]) return kDropped;
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

namespace {

std::vector<double> colorbar_ticks(const FigurePainter& c, const Colorbar& b, double height) {
  const double lh = c.line_height(c.style().tick_pt);
  std::vector<double> ticks;
  if (b.log_scale) {
    ticks = log_ticks(b.vmax * 1e-4 * (1 - 1e-9), b.vmax * (1 + 1e-9));
    // Every other decade (keeping the top) while the labels would crowd.
    while (ticks.size() > 2 && height / double(ticks.size() - 1) < lh * 1.3) {
      std::vector<double> kept;
      for (size_t i = ticks.size() % 2 == 0 ? 1 : 0; i < ticks.size(); i += 2)
        kept.push_back(ticks[i]);
      ticks = kept;
    }
  } else {
    const int n = std::clamp(int(height / (lh * 1.3)) + 1, 2, 6);
    ticks = nice_ticks(0, b.vmax, n);
  }
  return ticks;
}

double colorbar_label_width(const FigurePainter& c, const std::vector<double>& ticks) {
  double w = 0;
  for (double t : ticks) w = std::max(w, c.text_width(tick_label(t), c.style().tick_pt));
  return w;
}

}  // namespace

double colorbar_width(const FigurePainter& c, const Colorbar& b, double height, double title_room) {
  const FigureStyle& s = c.style();
  const double label_w = colorbar_label_width(c, colorbar_ticks(c, b, height));
  const size_t lines = b.title.isEmpty()
                           ? 0
                           : wrap_text(c, b.title, s.label_pt, std::max(height, title_room)).size();
  return kColorbarBar + 3.5 + label_w + 3 + double(lines) * c.line_height(s.label_pt);
}

void draw_colorbar(FigurePainter& c, const QRectF& r, const Colorbar& b, double title_room) {
  const FigureStyle& s = c.style();
  QPainter& p = c.painter();
  QLinearGradient g(r.bottomLeft(), r.topLeft());
  // The table's own anchors: the vector gradient matches the cells exactly.
  const std::vector<render::Rgb8> stops = render::colormap_stops(b.cmap);
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
  const std::vector<double> ticks = colorbar_ticks(c, b, r.height());
  for (double t : ticks) {
    const double pos = render::color_position(t, b.vmax, b.log_scale);
    const double y = r.bottom() - pos * r.height();
    c.line({r.right(), y}, {r.right() + 2.5, y});
    c.text({r.right() + 3.5, y}, tick_label(t), s.tick_pt, -1, 0, kText);
  }
  if (b.title.isEmpty()) return;
  const double tx = r.right() + 3.5 + colorbar_label_width(c, ticks) + 3;
  const double room = std::max(r.height(), title_room);
  draw_vertical_lines(c, {tx, r.center().y()}, wrap_text(c, b.title, s.label_pt, room), s.label_pt,
                      kText, room);
}

std::vector<QString> wrap_text(const FigurePainter& c, const QString& t, double pt, double width,
                               bool bold) {
  std::vector<QString> lines;
  auto fits = [&](const QString& x) { return c.text_width(x, pt, bold) <= width + 1e-6; };
  QString cur;
  for (const QString& word : t.split(' ', Qt::SkipEmptyParts)) {
    const QString joined = cur.isEmpty() ? word : cur + ' ' + word;
    if (fits(joined)) {
      cur = joined;
      continue;
    }
    if (!cur.isEmpty()) lines.push_back(cur);
    cur = word;
    // A word longer than a line: broken after a hyphen, slash, comma or underscore when one
    // leaves a head that fits, else between letters with a hyphen.
    while (!fits(cur) && cur.size() > 1) {
      qsizetype cut = 0;
      for (qsizetype i = cur.size() - 1; i >= 1 && cut == 0; --i) {
        const QChar ch = cur[i - 1];
        if ((ch == '-' || ch == '/' || ch == ',' || ch == '_' || ch == ';') && fits(cur.left(i)))
          cut = i;
      }
      if (cut > 0) {
        lines.push_back(cur.left(cut));
        cur = cur.mid(cut);
        continue;
      }
      qsizetype n = 1;
      while (n + 1 < cur.size() && fits(cur.left(n + 1) + '-')) ++n;
      const bool hyphen = n >= 2 && cur[n - 1].isLetter() && cur[n].isLetter();
      lines.push_back(cur.left(n) + (hyphen ? "-" : ""));
      cur = cur.mid(n);
    }
  }
  if (!cur.isEmpty() || lines.empty()) lines.push_back(cur);
  return lines;
}

std::vector<QString> wrap_segments(const FigurePainter& c, const std::vector<QString>& segments,
                                   double pt, double width) {
  std::vector<QString> lines;
  QString cur;
  for (const QString& seg : segments) {
    const QString joined = cur.isEmpty() ? seg : cur + " \u00b7 " + seg;
    if (c.text_width(joined, pt) <= width + 1e-6) {
      cur = joined;
      continue;
    }
    if (!cur.isEmpty()) lines.push_back(cur);
    cur.clear();
    std::vector<QString> parts = wrap_text(c, seg, pt, width);
    cur = parts.back();
    parts.pop_back();
    lines.insert(lines.end(), parts.begin(), parts.end());
  }
  if (!cur.isEmpty()) lines.push_back(cur);
  return lines;
}

double draw_lines(FigurePainter& c, QPointF at, const std::vector<QString>& lines, double pt,
                  int halign, QColor col, bool bold, double room) {
  const double lh = c.line_height(pt);
  for (size_t i = 0; i < lines.size(); ++i)
    c.text({at.x(), at.y() + double(i) * lh}, lines[i], pt, halign, -1, col, bold, 0, room);
  return double(lines.size()) * lh;
}

void draw_vertical_lines(FigurePainter& c, QPointF at, const std::vector<QString>& lines, double pt,
                         QColor col, double room) {
  const double lh = c.line_height(pt);
  for (size_t i = 0; i < lines.size(); ++i)
    c.text({at.x() + double(i) * lh, at.y()}, lines[i], pt, 0, -1, col, false, -90, room);
}

int choose_columns(const FigurePainter& c, int k, const std::function<double(int)>& side) {
  if (k <= 1) return 1;
  if (c.free_height()) return k <= 4 ? k : (k + 1) / 2;
  int best = k, last = 0;
  double best_side = -1;
  for (int rows = 1; rows <= k; ++rows) {
    const int cols = (k + rows - 1) / rows;
    if (cols == last) continue;
    last = cols;
    // Fewer rows win ties (within 3%): a row reads more easily than a block.
    const double s = side(cols);
    if (s > best_side * 1.03) {
      best = cols;
      best_side = s;
    }
  }
  return best;
}

Caption text_caption(const FigurePainter& c, const QString& name, const QString& sub,
                     double width) {
  const FigureStyle& s = c.style();
  Caption cap;
  cap.name = wrap_text(c, name, s.label_pt, width, true);
  if (!sub.isEmpty()) cap.params = wrap_text(c, sub, s.tick_pt, width);
  return cap;
}

Caption make_caption(const FigurePainter& c, const std::string& spec, const QString& fallback,
                     double width) {
  const core::VariantLabel l = core::variant_label(spec);
  return text_caption(c, qs(l.name), l.params.empty() ? fallback : qs(l.params), width);
}

double caption_height(const FigurePainter& c, const Caption& cap) {
  const FigureStyle& s = c.style();
  return double(cap.name.size()) * c.line_height(s.label_pt) + 1 +
         double(cap.params.size()) * c.line_height(s.tick_pt) + 3;
}

void draw_caption(FigurePainter& c, QPointF at, double width, const Caption& cap) {
  const FigureStyle& s = c.style();
  const double h = draw_lines(c, at, cap.name, s.label_pt, -1, kText, true, width);
  draw_lines(c, {at.x(), at.y() + h + 1}, cap.params, s.tick_pt, -1, kMuted, false, width);
}

void draw_marker(QPainter& p, QPointF at, int shape, QColor col, double r) {
  p.save();
  p.setPen(QPen(Qt::white, 0.4));
  p.setBrush(col);
  switch (shape % 4) {
    case 0:
      p.drawEllipse(at, r, r);
      break;
    case 1:
      p.drawRect(QRectF(at.x() - r * 0.9, at.y() - r * 0.9, r * 1.8, r * 1.8));
      break;
    case 2: {
      const QPointF tri[3] = {{at.x(), at.y() - r * 1.15},
                              {at.x() - r, at.y() + r * 0.75},
                              {at.x() + r, at.y() + r * 0.75}};
      p.drawPolygon(tri, 3);
      break;
    }
    default: {
      const QPointF dia[4] = {{at.x(), at.y() - r * 1.2},
                              {at.x() + r, at.y()},
                              {at.x(), at.y() + r * 1.2},
                              {at.x() - r, at.y()}};
      p.drawPolygon(dia, 4);
    }
  }
  p.restore();
}

double draw_legend(FigurePainter& c, QPointF top_left, double width,
                   const std::vector<LegendItem>& items, bool draw) {
  const FigureStyle& s = c.style();
  const double pt = s.tick_pt, lh = c.line_height(pt);
  double x = 0, y = 0, row_h = 0;
  for (const LegendItem& it : items) {
    const double kw = it.kind == LegendItem::Dashed ? 10 : 6, gap = 3;
    std::vector<QString> lines = {it.text};
    if (kw + gap + c.text_width(it.text, pt) > width - x && x > 0) {  // to the next line
      x = 0;
      y += row_h + 2;
      row_h = 0;
    }
    const double room = width - x - kw - gap;
    if (c.text_width(it.text, pt) > room) lines = wrap_text(c, it.text, pt, room);
    double tw = 0;
    for (const QString& l : lines) tw = std::max(tw, c.text_width(l, pt));
    if (draw) {
      const QPointF key(top_left.x() + x, top_left.y() + y + lh / 2);
      QPainter& p = c.painter();
      if (it.kind == LegendItem::Swatch) {
        p.fillRect(QRectF(key.x(), key.y() - 3, 6, 6), it.color);
      } else if (it.kind == LegendItem::Marker) {
        draw_marker(p, {key.x() + 3, key.y()}, it.shape, it.color, 2.6);
      } else {
        p.save();
        p.setPen(QPen(it.color, s.line_pt, Qt::DashLine));
        p.drawLine(key, {key.x() + kw, key.y()});
        p.restore();
      }
      draw_lines(c, {top_left.x() + x + kw + gap, top_left.y() + y}, lines, pt, -1, kText, false,
                 room);
    }
    x += kw + gap + tw + 12;
    row_h = std::max(row_h, double(lines.size()) * lh);
  }
  return y + row_h;
}

double draw_title(FigurePainter& c, const QRectF& area, const std::string& title,
                  const std::string& subtitle, bool draw) {
  const FigureStyle& s = c.style();
  const double w = area.width();
  double y = area.top();
  if (!title.empty()) {
    const auto lines = wrap_text(c, qs(title), s.title_pt, w, true);
    if (draw) draw_lines(c, {area.left(), y}, lines, s.title_pt, -1, kText, true, w);
    y += double(lines.size()) * c.line_height(s.title_pt) + 1.5;
  }
  if (!subtitle.empty()) {
    const double pt = s.tick_pt + 0.5;
    const auto lines = wrap_text(c, qs(subtitle), pt, w);
    if (draw) draw_lines(c, {area.left(), y}, lines, pt, -1, kMuted, false, w);
    y += double(lines.size()) * c.line_height(pt);
  }
  return y - area.top() + (y > area.top() ? 5 : 0);
}

}  // namespace attn::fig

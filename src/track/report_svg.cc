// The line chart, histogram, bar chart and stacked bar chart of `kiln report` (report_svg.h).
#include "track/report_svg.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "track/report_html.h"
#include "track/report_svg_frame.h"

namespace kiln::track::svg {
namespace {

bool finite(const Point& point) {
  return std::isfinite(point.x) && std::isfinite(point.y);
}

// The runs of consecutive finite points: a non-finite value breaks the line rather than
// being joined over.
std::vector<std::vector<Point>> segments(const std::vector<Point>& points) {
  std::vector<std::vector<Point>> out(1);
  for (const Point& point : points) {
    if (finite(point)) {
      out.back().push_back(point);
    } else if (!out.back().empty()) {
      out.emplace_back();
    }
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// More points than pixel columns only make the file bigger: keep, per column, the first,
// lowest, highest and last point, so that spikes stay visible.
std::vector<Point> thin(const std::vector<Point>& points, const Scale& x) {
  if (points.size() <= 4 * static_cast<size_t>(std::abs(x.to - x.from))) return points;
  std::vector<Point> out;
  size_t begin = 0;
  while (begin < points.size()) {
    long column = std::lround(x(points[begin].x));
    size_t end = begin;
    size_t low = begin;
    size_t high = begin;
    while (end < points.size() && std::lround(x(points[end].x)) == column) {
      if (points[end].y < points[low].y) low = end;
      if (points[end].y > points[high].y) high = end;
      ++end;
    }
    std::vector<size_t> keep = {begin, low, high, end - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t index : keep) out.push_back(points[index]);
    begin = end;
  }
  return out;
}

std::string series_path(const LineSeries& series, const Scale& x, const Scale& y) {
  std::string d;
  for (const std::vector<Point>& segment : segments(series.points)) {
    std::vector<Point> kept = thin(segment, x);
    for (size_t i = 0; i < kept.size(); ++i) {
      d += fmt::format("{}{} {}", i == 0 ? "M" : "L", px(x(kept[i].x)), px(y(kept[i].y)));
    }
    if (kept.size() == 1) d += "h0";  // a lone point: the round cap draws it as a dot
  }
  return fmt::format("<path class=\"series\" d=\"{}\" stroke=\"{}\"{}/>\n", d,
                     html::escape(series.color), series.dashed ? " stroke-dasharray=\"6 4\"" : "");
}

std::string markers(const LineSeries& series, const Scale& x, const Scale& y) {
  std::string out;
  for (const Point& point : series.points) {
    if (!finite(point)) continue;
    out += fmt::format("<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>\n",
                       px(x(point.x)), px(y(point.y)), html::escape(series.color));
  }
  return out;
}

}  // namespace

std::string line_chart(std::string_view plot, const Axes& axes,
                       const std::vector<LineSeries>& series) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  int64_t nonfinite = 0;
  size_t drawn = 0;
  for (const LineSeries& line : series) {
    for (const Point& point : line.points) {
      if (!finite(point)) {
        ++nonfinite;
        continue;
      }
      ++drawn;
      x_lo = std::min(x_lo, point.x);
      x_hi = std::max(x_hi, point.x);
      y_lo = std::min(y_lo, point.y);
      y_hi = std::max(y_hi, point.y);
    }
  }
  if (drawn == 0) {
    std::string why = nonfinite ? "no data: " + nonfinite_note(nonfinite) : "no data";
    return empty_chart(plot, axes.title, why);
  }
  Layout layout;
  // The x axis ends with the data (a run's last step), the y axis at a tick.
  Scale x = nice_scale(x_lo, x_hi, layout.left, layout.left + layout.width, false,
                       axes.integer_x ? 1 : 0);
  Scale y = nice_scale(y_lo, y_hi, layout.top + layout.height, layout.top, true);
  std::vector<LegendEntry> entries;
  for (const LineSeries& line : series) {
    if (!line.label.empty()) entries.push_back({line.label, line.color, line.dashed, false});
  }
  double height = layout.axes_bottom() + kLegendRow * static_cast<double>(entries.size()) + 6;
  std::string svg = open_svg(plot, axes.title, layout.total_width(), height);
  svg += frame(layout, x, y, axes);
  for (const LineSeries& line : series) {
    svg += series_path(line, x, y);
    if (drawn <= 60) svg += markers(line, x, y);  // few points: show where they are
  }
  svg += legend(entries, layout.left, layout.axes_bottom());
  std::vector<std::string> notes;
  if (nonfinite) notes.push_back(nonfinite_note(nonfinite));
  return figure(svg + "</svg>\n", notes);
}

std::string bar_chart(std::string_view plot, std::string_view title, std::string_view unit,
                      const std::vector<Bar>& bars) {
  if (bars.empty()) return empty_chart(plot, title, "no data");
  size_t longest = 0;
  double highest = 0;
  for (const Bar& bar : bars) {
    longest = std::max(longest, bar.label.size());
    if (std::isfinite(bar.value)) highest = std::max(highest, bar.value);
  }
  Layout layout;
  double label_width = std::clamp(6.6 * static_cast<double>(longest) + 14, 60.0, 300.0);
  double bar_width = layout.total_width() - label_width - 96;
  constexpr double kRow = 22;
  double height = 34 + kRow * static_cast<double>(bars.size()) + 8;
  std::string svg = open_svg(plot, title, layout.total_width(), height);
  std::string unit_text(unit);
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& bar = bars[i];
    double top = 34 + kRow * static_cast<double>(i);
    double length = std::isfinite(bar.value) && bar.value >= 0 && highest > 0
                        ? bar.value / highest * bar_width
                        : 0;
    svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                       px(label_width - 6), px(top + 12), html::escape(bar.label));
    if (std::isfinite(bar.value) && bar.value >= 0) {
      svg += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"14\" fill=\"{}\"/>",
          px(label_width), px(top + 2), px(std::max(length, 0.5)), html::escape(bar.color));
    }
    svg += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{}</text>\n",
                       px(label_width + length + 6), px(top + 12),
                       html::escape(with_unit(bar.value, unit_text)));
  }
  return figure(svg + "</svg>\n", {});
}

std::string stacked_bar_chart(std::string_view plot, std::string_view title, std::string_view unit,
                              const std::vector<StackedBar>& bars) {
  auto shown = [](const Bar& part) { return std::isfinite(part.value) && part.value >= 0; };
  size_t longest = 0;
  double highest = 0;
  std::vector<LegendEntry> entries;
  std::set<std::string> named;
  for (const StackedBar& bar : bars) {
    longest = std::max(longest, bar.label.size());
    double total = 0;
    for (const Bar& part : bar.parts) {
      if (!shown(part)) continue;
      total += part.value;
      if (named.insert(part.label).second) entries.push_back({part.label, part.color, false, true});
    }
    highest = std::max(highest, total);
  }
  if (entries.empty()) return empty_chart(plot, title, "no data");
  Layout layout;
  double label_width = std::clamp(6.6 * static_cast<double>(longest) + 14, 60.0, 300.0);
  double bar_width = layout.total_width() - label_width - 96;
  constexpr double kRow = 26;
  double rows_bottom = 34 + kRow * static_cast<double>(bars.size());
  double height = rows_bottom + 8 + kLegendRow * static_cast<double>(entries.size()) + 6;
  std::string svg = open_svg(plot, title, layout.total_width(), height);
  std::string unit_text(unit);
  for (size_t i = 0; i < bars.size(); ++i) {
    const StackedBar& bar = bars[i];
    double top = 34 + kRow * static_cast<double>(i);
    svg += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                       px(label_width - 6), px(top + 13), html::escape(bar.label));
    double at = label_width;
    double total = 0;
    for (const Bar& part : bar.parts) {
      if (!shown(part)) continue;
      double length = highest > 0 ? part.value / highest * bar_width : 0;
      svg += fmt::format(
          "<rect class=\"bar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"16\" fill=\"{}\">"
          "<title>{}: {}</title></rect>",
          px(at), px(top + 2), px(std::max(length, 0.5)), html::escape(part.color),
          html::escape(part.label), html::escape(with_unit(part.value, unit_text)));
      at += length;
      total += part.value;
    }
    svg += fmt::format("<text class=\"value\" x=\"{}\" y=\"{}\">{}</text>\n", px(at + 6),
                       px(top + 13), html::escape(with_unit(total, unit_text)));
  }
  svg += legend(entries, label_width, rows_bottom + 8);
  return figure(svg + "</svg>\n", {});
}

}  // namespace kiln::track::svg

// Scales, ticks, axes, legends and empty charts shared by the report's charts.
#include "track/report_svg_frame.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "track/report_html.h"

namespace kiln::track::svg {

std::string palette_color(size_t index) {
  // Tableau's ten, less the gray and olive that read poorly on white.
  static constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                            "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return kColors[index % std::size(kColors)];
}

Scale nice_scale(double lo, double hi, double from, double to, bool widen, double min_step) {
  if (!(hi > lo)) {
    double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / 6;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double fraction = raw / magnitude;
  double step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude;
  step = std::max(step, min_step);
  if (widen) {
    lo = std::floor(lo / step) * step;
    hi = std::ceil(hi / step) * step;
  }
  Scale scale{lo, hi, from, to, step, {}};
  // Integer multiples of the step, so that rounding errors do not accumulate along the axis.
  double first = std::ceil(lo / step - 1e-9);
  for (double i = first; i * step <= hi + step * 1e-9; ++i) {
    double value = i * step;
    scale.ticks.push_back(std::abs(value) < step * 1e-9 ? 0.0 : value);
  }
  return scale;
}

std::string tick_label(double value, double step) {
  int decimals =
      step >= 1 ? 0 : std::min(12, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

std::string px(double value) {
  return fmt::format("{:.1f}", value + 0.0);
}

std::string open_svg(std::string_view plot, std::string_view title, double width, double height) {
  return fmt::format(
      "<svg class=\"chart\" data-plot=\"{0}\" viewBox=\"0 0 {1} {2}\" width=\"{1}\" "
      "height=\"{2}\" role=\"img\" aria-label=\"{3}\">\n"
      "<text class=\"title\" x=\"{4}\" y=\"18\">{3}</text>\n",
      html::escape(plot), px(width), px(height), html::escape(title), px(8));
}

std::string frame(const Layout& layout, const Scale& x, const Scale& y, const Axes& axes) {
  double right = layout.left + layout.width;
  double bottom = layout.top + layout.height;
  std::string out = "<g class=\"frame\">\n";
  for (double tick : y.ticks) {
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        px(layout.left), px(right), px(y(tick)), px(layout.left - 6), px(y(tick) + 4),
        tick_label(tick, y.step));
  }
  for (double tick : x.ticks) {
    out += fmt::format(
        "<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(x(tick)), px(bottom), px(bottom + 5), px(bottom + 18), tick_label(tick, x.step));
  }
  return out + axes_and_labels(layout, axes) + "</g>\n";
}

std::string axes_and_labels(const Layout& layout, const Axes& axes) {
  double right = layout.left + layout.width;
  double bottom = layout.top + layout.height;
  std::string out = fmt::format(
      "<line class=\"axis\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
      "<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{3}\" y2=\"{2}\"/>\n",
      px(layout.left), px(right), px(bottom), px(layout.top));
  out +=
      fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  px(layout.left + layout.width / 2), px(bottom + 36), html::escape(axes.x_label));
  out += fmt::format(
      "<text class=\"label\" transform=\"translate({},{}) rotate(-90)\" "
      "text-anchor=\"middle\">{}</text>\n",
      px(14), px(layout.top + layout.height / 2), html::escape(axes.y_label));
  return out;
}

std::string legend(const std::vector<LegendEntry>& entries, double left, double top) {
  if (entries.empty()) return {};
  std::string out = "<g class=\"legend\">\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& entry = entries[i];
    double y = top + kLegendRow * static_cast<double>(i) + kLegendRow / 2;
    std::string color = html::escape(entry.color);
    if (entry.box) {
      out += fmt::format(
          "<rect class=\"legend-key\" x=\"{}\" y=\"{}\" width=\"12\" height=\"10\" "
          "fill=\"{}\"/>",
          px(left), px(y - 5), color);
    } else {
      out += fmt::format(
          "<line class=\"legend-key\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" "
          "stroke-width=\"2\"{4}/>",
          px(left), px(left + 24), px(y), color, entry.dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
    out += fmt::format("<text class=\"legend-label\" x=\"{}\" y=\"{}\">{}</text>\n", px(left + 32),
                       px(y + 4), html::escape(entry.label));
  }
  return out + "</g>\n";
}

std::string empty_chart(std::string_view plot, std::string_view title, std::string_view why) {
  Layout layout;
  std::string svg = open_svg(plot, title, layout.total_width(), 90);
  svg += fmt::format("<text class=\"empty\" x=\"{}\" y=\"56\" text-anchor=\"middle\">{}</text>\n",
                     px(layout.total_width() / 2), html::escape(why));
  return figure(svg + "</svg>\n", {});
}

std::string nonfinite_note(int64_t count) {
  if (count == 0) return {};
  return fmt::format("{} non-finite value{} (NaN or infinite) not drawn", count,
                     count == 1 ? "" : "s");
}

double quantile(const std::vector<double>& sorted, double q) {
  double position = q * static_cast<double>(sorted.size() - 1);
  size_t below = static_cast<size_t>(std::floor(position));
  size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

std::string with_unit(double value, std::string_view unit) {
  return html::number(value) + (unit.empty() ? "" : " " + std::string(unit));
}

std::string figure(const std::string& svg, const std::vector<std::string>& notes) {
  std::string out = "<figure>\n" + svg;
  if (!notes.empty()) {
    out += "<figcaption>";
    for (size_t i = 0; i < notes.size(); ++i) {
      out += (i ? "<br>" : "") + html::escape(notes[i]);
    }
    out += "</figcaption>\n";
  }
  return out + "</figure>\n";
}

}  // namespace kiln::track::svg

// The roofline chart of `kiln report` (report_svg.h): log-log axes by whole decades, the
// roof min(peak, bandwidth x intensity) with its ridge, and one mark per kernel.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "track/report_html.h"
#include "track/report_svg.h"
#include "track/report_svg_frame.h"

namespace kiln::track::svg {
namespace {

// A log10 map from whole decades [10^lo, 10^hi] to pixels [from, to].
struct LogScale {
  int lo = 0;
  int hi = 1;
  double from = 0;
  double to = 1;
  double operator()(double value) const {
    return from + (std::log10(value) - lo) / (hi - lo) * (to - from);
  }
  double min() const { return std::pow(10.0, lo); }
  double max() const { return std::pow(10.0, hi); }
};

LogScale decades(double lo, double hi, double from, double to) {
  LogScale scale{static_cast<int>(std::floor(std::log10(lo))),
                 static_cast<int>(std::ceil(std::log10(hi))), from, to};
  if (scale.hi <= scale.lo) scale.hi = scale.lo + 1;
  return scale;
}

// "0.01", "1", "1000", "1e+06": a decade as short as it can be written.
std::string decade_label(int power) {
  return fmt::format("{:g}", std::pow(10.0, power));
}

bool drawable(const RooflineMark& mark) {
  return std::isfinite(mark.intensity) && std::isfinite(mark.gflops) && mark.intensity > 0 &&
         mark.gflops > 0;
}

std::string log_frame(const Layout& layout, const LogScale& x, const LogScale& y,
                      const Axes& axes) {
  double right = layout.left + layout.width;
  double bottom = layout.top + layout.height;
  std::string out = "<g class=\"frame\">\n";
  for (int power = y.lo; power <= y.hi; ++power) {
    double at = y(std::pow(10.0, power));
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        px(layout.left), px(right), px(at), px(layout.left - 6), px(at + 4), decade_label(power));
  }
  for (int power = x.lo; power <= x.hi; ++power) {
    double at = x(std::pow(10.0, power));
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
        "<text class=\"tick\" x=\"{0}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        px(at), px(layout.top), px(bottom), px(bottom + 18), decade_label(power));
  }
  return out + axes_and_labels(layout, axes) + "</g>\n";
}

// The roof from the plot's left edge (or where the slope enters it from below) to the
// right edge, the ridge's dashed line, and what each part of the roof is.
std::string roof_lines(const Roof& roof, const LogScale& x, const LogScale& y) {
  double ridge = roof.peak_gflops / roof.bandwidth_gbs;
  double start = std::max(x.min(), y.min() / roof.bandwidth_gbs);
  std::string out = "<g class=\"roofline\">\n";
  std::string d = fmt::format("M{} {}", px(x(start)), px(y(roof.bandwidth_gbs * start)));
  if (ridge < x.max()) {
    d += fmt::format("L{} {}L{} {}", px(x(ridge)), px(y(roof.peak_gflops)), px(x(x.max())),
                     px(y(roof.peak_gflops)));
  } else {
    d += fmt::format("L{} {}", px(x(x.max())), px(y(roof.bandwidth_gbs * x.max())));
  }
  out += fmt::format(
      "<path class=\"roof\" d=\"{}\" fill=\"none\" stroke=\"#b03a2e\" stroke-width=\"2\"/>\n", d);
  if (ridge > x.min() && ridge < x.max()) {
    out += fmt::format(
        "<line class=\"ridge\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#b03a2e\" "
        "stroke-dasharray=\"4 3\"/>"
        "<text class=\"tick\" x=\"{3}\" y=\"{4}\">ridge {5} FLOP/B</text>\n",
        px(x(ridge)), px(y(roof.peak_gflops)), px(y.from), px(x(ridge) + 4), px(y.from - 6),
        html::number(ridge));
  }
  out += fmt::format(
      "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">peak {} GFLOP/s</text>\n",
      px(x.to - 4), px(y(roof.peak_gflops) - 6), html::number(roof.peak_gflops));
  out += fmt::format("<text class=\"tick\" x=\"{}\" y=\"{}\">{} GB/s x intensity</text>\n",
                     px(x(start) + 6), px(y(roof.bandwidth_gbs * start) - 8),
                     html::number(roof.bandwidth_gbs));
  return out + "</g>\n";
}

std::string mark_shapes(const std::vector<RooflineMark>& marks, const LogScale& x,
                        const LogScale& y) {
  std::string out;
  for (const RooflineMark& mark : marks) {
    if (!drawable(mark)) continue;
    std::string color = html::escape(mark.color);
    std::string shape =
        mark.whole_step
            ? fmt::format(
                  "<circle class=\"point step\" cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"none\" "
                  "stroke=\"{}\" stroke-width=\"2\">",
                  px(x(mark.intensity)), px(y(mark.gflops)), color)
            : fmt::format(
                  "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\" "
                  "fill-opacity=\"0.8\">",
                  px(x(mark.intensity)), px(y(mark.gflops)), color);
    out += shape + "<title>" + html::escape(mark.tooltip) + "</title></circle>";
    if (!mark.label.empty()) {
      out +=
          fmt::format("<text class=\"mark-label\" x=\"{}\" y=\"{}\">{}</text>",
                      px(x(mark.intensity) + 6), px(y(mark.gflops) - 5), html::escape(mark.label));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

std::string roofline_chart(std::string_view plot, std::string_view title, const Roof& roof,
                           const std::vector<RooflineMark>& marks) {
  bool has_roof = std::isfinite(roof.peak_gflops) && std::isfinite(roof.bandwidth_gbs) &&
                  roof.peak_gflops > 0 && roof.bandwidth_gbs > 0;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  size_t left_out = 0;
  for (const RooflineMark& mark : marks) {
    if (!drawable(mark)) {
      ++left_out;
      continue;
    }
    x_lo = std::min(x_lo, mark.intensity);
    x_hi = std::max(x_hi, mark.intensity);
    y_lo = std::min(y_lo, mark.gflops);
    y_hi = std::max(y_hi, mark.gflops);
  }
  if (left_out == marks.size()) {
    return empty_chart(plot, title,
                       marks.empty() ? "no data" : "no data: no kernel has both FLOPs and bytes");
  }
  if (has_roof) {
    // The ridge and the peak stay in view, with room on both sides of the ridge.
    double ridge = roof.peak_gflops / roof.bandwidth_gbs;
    x_lo = std::min(x_lo, ridge / 10);
    x_hi = std::max(x_hi, ridge * 10);
    y_hi = std::max(y_hi, roof.peak_gflops);
    y_lo = std::min(y_lo, roof.peak_gflops / 100);  // two decades of the slope in view
  }
  Layout layout;
  LogScale x = decades(x_lo, x_hi, layout.left, layout.left + layout.width);
  LogScale y = decades(y_lo, y_hi * 1.5, layout.top + layout.height, layout.top);
  Axes axes{std::string(title), "arithmetic intensity (FLOP per byte)", "achieved GFLOP/s", "",
            false};
  std::vector<LegendEntry> entries;
  std::set<std::string> groups;
  for (const RooflineMark& mark : marks) {
    if (!mark.group.empty() && groups.insert(mark.group).second) {
      entries.push_back({mark.group, mark.color, false, !mark.whole_step});
    }
  }
  double height = layout.axes_bottom() + kLegendRow * static_cast<double>(entries.size()) + 6;
  std::string svg = open_svg(plot, title, layout.total_width(), height);
  svg += log_frame(layout, x, y, axes);
  if (has_roof) svg += roof_lines(roof, x, y);
  svg += mark_shapes(marks, x, y);
  svg += legend(entries, layout.left, layout.axes_bottom());
  std::vector<std::string> notes;
  if (!has_roof) notes.push_back("no machine peaks recorded (kiln bench machine): no roof drawn");
  if (left_out) {
    notes.push_back(
        fmt::format("{} kernel{} with no FLOPs (data movement only) not drawn on "
                    "log axes; the table lists {}",
                    left_out, left_out == 1 ? "" : "s", left_out == 1 ? "it" : "them"));
  }
  return figure(svg + "</svg>\n", notes);
}

}  // namespace kiln::track::svg

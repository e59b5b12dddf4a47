// The histogram of `kiln report` (report_svg.h): samples overlaid in shared bins, a dashed
// median per sample, and the rare slow values in a bar of their own at the right.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "track/report_html.h"
#include "track/report_svg.h"
#include "track/report_svg_frame.h"

namespace kiln::track::svg {
namespace {

constexpr double kOverflowWidth = 60;  // pixels at the right of the plot for the slow bar

struct Binned {
  Scale x;  // over the bins, not the slow bar
  int bins = 1;
  double width = 1;
  bool clipped = false;
  double fence = 0;                          // with clipped: slower values are in the slow bar
  std::vector<std::vector<int64_t>> counts;  // per sample, per bin
  std::vector<int64_t> slow;                 // per sample
  int64_t highest = 1;
};

// The occasional slow value (an evaluation between epochs, a recompilation, a savepoint)
// would squeeze the bulk into one or two bins; values above Tukey's far-out fence
// (q3 + 3 IQR) get a bar of their own instead.
Binned bin(const std::vector<std::vector<double>>& sorted, const std::vector<double>& all,
           const Layout& layout) {
  Binned out;
  double lo = all.front();
  double hi = all.back();
  double q1 = quantile(all, 0.25);
  double q3 = quantile(all, 0.75);
  double fence = q3 + 3 * (q3 - q1);
  out.clipped = fence < hi && fence > lo;
  if (out.clipped) hi = out.fence = fence;
  double right = layout.left + layout.width - (out.clipped ? kOverflowWidth : 0);
  out.x = nice_scale(lo, hi, layout.left, right, false);
  size_t inside = std::count_if(all.begin(), all.end(), [&](double v) { return v <= hi; });
  out.bins = hi > lo ? std::clamp(static_cast<int>(std::lround(std::sqrt(inside))), 10, 40) : 1;
  out.width = (out.x.hi - out.x.lo) / out.bins;
  for (const std::vector<double>& values : sorted) {
    out.counts.emplace_back(out.bins, 0);
    out.slow.push_back(0);
    for (double value : values) {
      int64_t& count =
          out.clipped && value > out.fence
              ? out.slow.back()
              : out.counts.back()[std::clamp(
                    static_cast<int>(std::floor((value - out.x.lo) / out.width)), 0, out.bins - 1)];
      out.highest = std::max(out.highest, ++count);
    }
  }
  return out;
}

std::string bar(double left, double width, double top, double bottom, const std::string& color,
                double opacity, bool slow) {
  return fmt::format(
      "<rect class=\"bar{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
      "fill-opacity=\"{}\"/>\n",
      slow ? " slow" : "", px(left), px(top), px(std::max(0.5, width)), px(bottom - top), color,
      opacity);
}

std::string sample_note(const Sample& sample, const std::vector<double>& sorted,
                        std::string_view unit) {
  return fmt::format("{}{} values: median {}, p90 {}, max {}",
                     sample.label.empty() ? "" : sample.label + ": ", sorted.size(),
                     with_unit(quantile(sorted, 0.5), unit), with_unit(quantile(sorted, 0.9), unit),
                     with_unit(sorted.back(), unit));
}

}  // namespace

std::string histogram(std::string_view plot, const Axes& axes, const std::vector<Sample>& samples) {
  std::vector<std::vector<double>> sorted;
  std::vector<double> all;
  int64_t nonfinite = 0;
  for (const Sample& sample : samples) {
    sorted.emplace_back();
    for (double value : sample.values) {
      if (std::isfinite(value)) {
        sorted.back().push_back(value);
      } else {
        ++nonfinite;
      }
    }
    std::sort(sorted.back().begin(), sorted.back().end());
    all.insert(all.end(), sorted.back().begin(), sorted.back().end());
  }
  if (all.empty()) {
    return empty_chart(plot, axes.title,
                       nonfinite ? "no data: " + nonfinite_note(nonfinite) : "no data");
  }
  std::sort(all.begin(), all.end());
  Layout layout;
  Binned binned = bin(sorted, all, layout);
  const Scale& x = binned.x;
  Scale y = nice_scale(0, static_cast<double>(binned.highest), layout.top + layout.height,
                       layout.top, true, 1);
  std::vector<LegendEntry> entries;
  for (const Sample& sample : samples) {
    if (!sample.label.empty()) entries.push_back({sample.label, sample.color, false, true});
  }
  double height = layout.axes_bottom() + kLegendRow * static_cast<double>(entries.size()) + 6;
  std::string svg = open_svg(plot, axes.title, layout.total_width(), height);
  svg += frame(layout, x, y, axes);
  double slow_left = layout.left + layout.width - kOverflowWidth + 10;
  if (binned.clipped) {
    svg += fmt::format(
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">&gt; {}</text>\n",
        px(slow_left + (kOverflowWidth - 14) / 2), px(layout.top + layout.height + 18),
        tick_label(binned.fence, x.step));
  }
  double opacity = samples.size() > 1 ? 0.55 : 0.85;
  std::vector<std::string> notes;
  for (size_t s = 0; s < samples.size(); ++s) {
    std::string color = html::escape(samples[s].color);
    double pixels = x(x.lo + binned.width) - x(x.lo);
    for (int b = 0; b < binned.bins; ++b) {
      int64_t count = binned.counts[s][b];
      if (count == 0) continue;
      svg += bar(x(x.lo + b * binned.width) + 0.5, pixels - 1, y(static_cast<double>(count)), y(0),
                 color, opacity, false);
    }
    if (binned.slow[s] > 0) {
      svg += bar(slow_left, kOverflowWidth - 14, y(static_cast<double>(binned.slow[s])), y(0),
                 color, opacity, true);
    }
    if (sorted[s].empty()) continue;
    double median = quantile(sorted[s], 0.5);
    svg += fmt::format(
        "<line class=\"median\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"{3}\" "
        "stroke-dasharray=\"4 3\"/>\n",
        px(x(std::min(median, x.hi))), px(layout.top), px(y(0)),
        samples.size() > 1 ? color : "#1d2330");  // one sample: dark, to stand out from its bars
    notes.push_back(sample_note(samples[s], sorted[s], axes.unit));
  }
  svg += legend(entries, layout.left, layout.axes_bottom());
  notes.push_back("dashed lines: the medians");
  if (binned.clipped) {
    int64_t slow =
        std::count_if(all.begin(), all.end(), [&](double v) { return v > binned.fence; });
    notes.push_back(
        fmt::format("the bar at the right counts the {} value{} above {} (q3 + 3 IQR), up to {}",
                    slow, slow == 1 ? "" : "s", with_unit(binned.fence, axes.unit),
                    with_unit(all.back(), axes.unit)));
  }
  if (nonfinite) notes.push_back(nonfinite_note(nonfinite));
  return figure(svg + "</svg>\n", notes);
}

}  // namespace kiln::track::svg

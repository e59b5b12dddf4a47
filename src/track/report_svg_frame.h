// What the charts of report_svg.h share: the plot area's layout, scales with "nice" ticks,
// the frame (title, axes, ticks, grid, labels), the legend and the empty chart.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "track/report_svg.h"

namespace kiln::track::svg {

// Pixel layout of a chart: the plot area is [left, left + width] x [top, top + height].
struct Layout {
  double left = 78;
  double top = 34;
  double width = 446;
  double height = 240;
  double total_width() const { return left + width + 16; }
  double axes_bottom() const { return top + height + 44; }  // below the x label
};

// A linear map from [lo, hi] to pixels [from, to], with tick values inside [lo, hi].
struct Scale {
  double lo = 0;
  double hi = 1;
  double from = 0;
  double to = 1;
  double step = 0.2;  // between ticks
  std::vector<double> ticks;
  double operator()(double value) const { return from + (value - lo) / (hi - lo) * (to - from); }
};

// About six ticks, at 1, 2 or 5 times a power of ten and at least `min_step` apart. With
// `widen` the range grows to the outer ticks; a range of one value is first widened
// around it.
Scale nice_scale(double lo, double hi, double from, double to, bool widen, double min_step = 0);

// A tick value with as many decimals as the tick step needs ("0.25", "1500").
std::string tick_label(double value, double step);

// A pixel coordinate as SVG text (one decimal, so the output is stable).
std::string px(double value);

// <svg ...> with the data-plot name and size, and the title.
std::string open_svg(std::string_view plot, std::string_view title, double width, double height);

// Grid lines, the axes, tick marks and labels, and the axis labels.
std::string frame(const Layout& layout, const Scale& x, const Scale& y, const Axes& axes);

// The two axis lines along the plot area's left and bottom edges, and the axis labels:
// what frame() and charts with their own ticks (the roofline's decades) share.
std::string axes_and_labels(const Layout& layout, const Axes& axes);

struct LegendEntry {
  std::string label;
  std::string color;
  bool dashed = false;
  bool box = false;  // a filled square (histogram bars) instead of a line sample
};

inline constexpr double kLegendRow = 18;

// The legend as rows starting at `top`; its height is kLegendRow per entry.
std::string legend(const std::vector<LegendEntry>& entries, double left, double top);

// A complete chart that says "no data".
std::string empty_chart(std::string_view plot, std::string_view title, std::string_view why);

// "3 non-finite values (NaN or infinite) not drawn"; empty for 0.
std::string nonfinite_note(int64_t count);

// The q-quantile (0..1) of sorted values, interpolated between neighbours; not empty.
double quantile(const std::vector<double>& sorted, double q);

// "24.1 ms"
std::string with_unit(double value, std::string_view unit);

// <figure>svg<figcaption>notes</figcaption></figure>; no caption without notes.
std::string figure(const std::string& svg, const std::vector<std::string>& notes);

}  // namespace kiln::track::svg

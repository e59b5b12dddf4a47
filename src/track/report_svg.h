// The charts of `kiln report`, as inline SVG (no script, nothing fetched): a line chart
// with axes, ticks and a legend, a histogram, a horizontal bar chart, a stacked bar chart
// and a log-log roofline. Each returns a
// <figure> holding one <svg data-plot="NAME"> whose data marks have a class a test can
// count (path.series, circle.point, rect.bar), and a caption with what the picture leaves
// out (non-finite values, the slow tail of a histogram). With nothing to draw the svg says
// "no data" instead of drawing empty axes. Output depends only on the arguments.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::track::svg {

// One color per run, in order, repeating after eight.
std::string palette_color(size_t index);

struct Axes {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::string unit;        // of the values a histogram counts ("ms"), for its caption
  bool integer_x = false;  // steps, epochs: no ticks between whole numbers
};

struct Point {
  double x = 0;
  double y = 0;
};

struct LineSeries {
  std::string label;  // in the legend; the legend is left out for one unlabelled series
  std::string color;
  bool dashed = false;
  std::vector<Point> points;  // in x order; a non-finite point is a gap in the line
};

std::string line_chart(std::string_view plot, const Axes& axes,
                       const std::vector<LineSeries>& series);

struct Sample {
  std::string label;
  std::string color;
  std::vector<double> values;  // non-finite values are counted, not drawn
};

// The samples share their bins and overlay (translucent); a dashed line marks each median.
std::string histogram(std::string_view plot, const Axes& axes, const std::vector<Sample>& samples);

struct Bar {
  std::string label;
  double value = 0;  // a bar is drawn for a finite value >= 0; the value is printed anyway
  std::string color;
};

std::string bar_chart(std::string_view plot, std::string_view title, std::string_view unit,
                      const std::vector<Bar>& bars);

// Bars made of parts laid end to end (a memory estimate by what the bytes hold beside the
// observed peak), one scale for all rows; a part's color names it in the legend.
struct StackedBar {
  std::string label;
  std::vector<Bar> parts;  // parts with a non-finite or negative value are left out
};

std::string stacked_bar_chart(std::string_view plot, std::string_view title, std::string_view unit,
                              const std::vector<StackedBar>& bars);

// The machine's roof for a roofline chart: attainable GFLOP/s = min(peak, bandwidth x
// intensity); the ridge is where the two meet.
struct Roof {
  double peak_gflops = 0;
  double bandwidth_gbs = 0;
};

struct RooflineMark {
  std::string label;    // beside the mark: the row number of the table that lists it
  std::string tooltip;  // <title>: name and figures
  std::string group;    // the legend's name for marks of this color ("memory bound")
  std::string color;
  double intensity = 0;     // FLOP per byte
  double gflops = 0;        // achieved
  bool whole_step = false;  // the step as a whole: a larger, hollow mark
};

// Log-log: arithmetic intensity (x) against achieved GFLOP/s (y), under the roof with the
// ridge marked. A mark with no FLOPs or no bytes has no place on log axes: the caption
// counts those instead.
std::string roofline_chart(std::string_view plot, std::string_view title, const Roof& roof,
                           const std::vector<RooflineMark>& marks);

}  // namespace kiln::track::svg

// The charts of `kiln report`, as inline SVG (no script, nothing fetched): a line chart
// with axes, ticks and a legend, a histogram, a horizontal bar chart. Each returns a
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

}  // namespace kiln::track::svg

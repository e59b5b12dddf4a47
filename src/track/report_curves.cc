// The chart sections of `kiln report`: curves per step and per epoch, and step times.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "track/report_html.h"
#include "track/report_sections.h"
#include "track/report_svg.h"

namespace kiln::track::report {
namespace {

// One value of the records of `kind` against the step, or against the epoch.
std::vector<svg::Point> points_of(const RunData& run, const std::string& kind,
                                  const std::string& value, bool by_epoch) {
  std::vector<svg::Point> points;
  for (const MetricsLine& record : run.metrics) {
    if (record.kind != kind) continue;
    auto found = record.values.find(value);
    if (found == record.values.end()) continue;
    double x = static_cast<double>(by_epoch ? record.epoch : record.step);
    points.push_back({x, found->second});
  }
  return points;
}

// The legend names a run only when there are several; `what` tells curves of one run apart.
std::string series_label(const RunData& run, bool several, const std::string& what) {
  if (!several) return what;
  return what.empty() ? run.key() : run.key() + " " + what;
}

std::string per_step_chart(const std::vector<RunData>& runs, const std::string& plot,
                           const std::string& value, const svg::Axes& axes) {
  std::vector<svg::LineSeries> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    series.push_back({series_label(runs[i], runs.size() > 1, ""), run_color(i), false,
                      points_of(runs[i], "train", value, false)});
  }
  return svg::line_chart(plot, axes, series);
}

// The evaluation's test (solid) and train (dashed) curves of one quantity.
std::string per_epoch_chart(const std::vector<RunData>& runs, const std::string& plot,
                            const std::string& quantity, const svg::Axes& axes) {
  std::vector<svg::LineSeries> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    bool several = runs.size() > 1;
    series.push_back({series_label(runs[i], several, "test"), run_color(i), false,
                      points_of(runs[i], "eval", "test_" + quantity, true)});
    series.push_back({series_label(runs[i], several, "train"), run_color(i), true,
                      points_of(runs[i], "eval", "train_" + quantity, true)});
  }
  return svg::line_chart(plot, axes, series);
}

std::string torn_notes(const std::vector<RunData>& runs) {
  std::string out;
  for (const RunData& run : runs) {
    if (!run.torn_last_line) continue;
    out += fmt::format(
        "<p class=\"note\">{}: the last line of metrics.jsonl is torn (the run stopped while "
        "writing it) and is left out.</p>\n",
        html::escape(run.key()));
  }
  return out;
}

// The layers that have `statistic` in a run's telemetry lines, in the order of their
// positions in the model ("dense_1" before "relu_2" before "dense_10").
std::vector<std::string> telemetry_layers(const RunData& run, const std::string& statistic) {
  std::vector<std::pair<int64_t, std::string>> found;
  const std::string suffix = "/" + statistic;
  for (const MetricsLine& record : run.metrics) {
    if (record.kind != "telemetry") continue;
    for (const auto& [name, value] : record.values) {
      if (name.size() <= suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      std::string layer = name.substr(0, name.size() - suffix.size());
      size_t underscore = layer.rfind('_');
      int64_t position =
          underscore == std::string::npos ? -1 : std::atoll(layer.c_str() + underscore + 1);
      std::pair<int64_t, std::string> entry{position, layer};
      if (std::find(found.begin(), found.end(), entry) == found.end()) found.push_back(entry);
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> layers;
  for (auto& [position, layer] : found) layers.push_back(layer);
  return layers;
}

// One statistic of [telemetry], a line per layer (and per run when there are several).
std::string telemetry_chart(const std::vector<RunData>& runs, const std::string& plot,
                            const std::string& statistic, const svg::Axes& axes) {
  std::vector<svg::LineSeries> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<std::string> layers = telemetry_layers(runs[i], statistic);
    for (size_t l = 0; l < layers.size(); ++l) {
      series.push_back({series_label(runs[i], runs.size() > 1, layers[l]),
                        svg::palette_color(runs.size() > 1 ? i : l), runs.size() > 1 && l % 2,
                        points_of(runs[i], "telemetry", layers[l] + "/" + statistic, false)});
    }
  }
  if (series.empty()) return "";
  return svg::line_chart(plot, axes, series);
}

}  // namespace

std::string telemetry_section(const std::vector<RunData>& runs) {
  std::string charts =
      telemetry_chart(runs, "telemetry_grad_norm", "grad_norm",
                      {"Gradient norm per layer", "step", "L2 norm", "", true}) +
      telemetry_chart(runs, "telemetry_update_ratio", "update_ratio",
                      {"Update / parameter norm per layer", "step", "ratio", "", true}) +
      telemetry_chart(runs, "telemetry_dead", "dead_fraction",
                      {"Dead ReLU units", "step", "fraction of units", "", true}) +
      telemetry_chart(runs, "telemetry_saturated", "saturated_fraction",
                      {"Saturated sigmoid / tanh outputs", "step", "fraction", "", true}) +
      telemetry_chart(runs, "telemetry_activation_std", "activation_std",
                      {"Activation standard deviation per layer", "step", "std", "", true});
  if (charts.empty()) return "";
  return "<section id=\"telemetry\">\n<h2>Layers</h2>\n"
         "<p class=\"help\">[telemetry] every N steps, on that step's batch: a gradient norm "
         "that grows without bound or collapses, an update ratio far from about 1e-3, ReLU "
         "units that no example activates, or saturated sigmoid and tanh outputs are where "
         "training goes wrong.</p>\n<div class=\"charts\">\n" +
         charts + "</div>\n</section>\n";
}

std::string run_color(size_t index) {
  return svg::palette_color(index);
}

std::string curves_section(const std::vector<RunData>& runs) {
  std::string out =
      "<section id=\"curves\">\n<h2>Training and evaluation</h2>\n"
      "<p class=\"help\">The training loss is each step's batch, so it is noisy; the "
      "evaluation runs over the whole test split (solid) and training split (dashed) after "
      "each epoch. A test curve that turns up while the training curve keeps falling is "
      "overfitting.</p>\n";
  out += torn_notes(runs);
  out += "<div class=\"charts\">\n";
  out += per_step_chart(runs, "train_loss", "loss",
                        {"Training loss per step", "step", "loss", "", true});
  out += per_epoch_chart(runs, "accuracy", "accuracy",
                         {"Accuracy per epoch", "epoch", "accuracy", "", true});
  out += per_epoch_chart(runs, "eval_loss", "loss",
                         {"Evaluation loss per epoch", "epoch", "loss", "", true});
  out += per_step_chart(runs, "learning_rate", "lr",
                        {"Learning rate per step", "step", "learning rate", "", true});
  return out + "</div>\n</section>\n";
}

std::string step_time_section(const std::vector<RunData>& runs) {
  std::vector<svg::Sample> samples;
  for (size_t i = 0; i < runs.size(); ++i) {
    svg::Sample sample{runs.size() > 1 ? runs[i].key() : "", run_color(i), {}};
    for (const MetricsLine& record : runs[i].metrics) {
      auto found = record.values.find("step_ms");
      // The first step of a process (step 1, or the first after a resume) has no previous
      // step to be timed from and is recorded as 0.
      if (record.kind != "train" || found == record.values.end() || record.step == 1 ||
          found->second == 0) {
        continue;
      }
      sample.values.push_back(found->second);
    }
    samples.push_back(std::move(sample));
  }
  std::string out =
      "<section id=\"step-time\">\n<h2>Step time</h2>\n"
      "<p class=\"help\">Wall time from one step's result to the next, in milliseconds: the "
      "step itself plus any wait for data. One narrow peak is a steady run; a second peak or "
      "a long tail is work that happens only sometimes (recompilation for a smaller last "
      "batch, savepoints, another process on the machine).</p>\n";
  out += svg::histogram("step_time", {"Train step time", "step time (ms)", "steps", "ms", false},
                        samples);
  return out + "</section>\n";
}

}  // namespace kiln::track::report

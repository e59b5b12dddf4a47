// Parsing and printing the text forms of spmd_text.h.
#include "prims/spmd_text.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/error.h"

namespace kiln::spmd {
namespace {

[[noreturn]] void malformed(std::string_view what, std::string_view text, std::string_view why) {
  fail(kUnknownSite, fmt::format("shard_map: {} '{}' is malformed: {}", what, text, why));
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::vector<AxisText> parse_mesh(std::string_view text) {
  std::vector<AxisText> axes;
  for (const std::string& item : split_axes(text)) {
    size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      malformed("mesh", text, "each axis is name=size");
    }
    AxisText axis{item.substr(0, equals), 0};
    const char* first = item.data() + equals + 1;
    const char* last = item.data() + item.size();
    auto [end, error] = std::from_chars(first, last, axis.size);
    if (error != std::errc() || end != last || axis.size < 1) {
      malformed("mesh", text, fmt::format("axis {} has no positive size", axis.name));
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::string format_mesh(const std::vector<AxisText>& axes) {
  std::vector<std::string> items;
  for (const AxisText& axis : axes) items.push_back(fmt::format("{}={}", axis.name, axis.size));
  return fmt::format("{}", fmt::join(items, ","));
}

std::vector<std::string> split_axes(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string join_axes(const std::vector<std::string>& axes) {
  return fmt::format("{}", fmt::join(axes, ","));
}

std::vector<ShardingSpec> parse_specs(std::string_view text) {
  std::vector<ShardingSpec> specs;
  size_t at = 0;
  auto skip_spaces = [&] {
    while (at < text.size() && text[at] == ' ') ++at;
  };
  auto name = [&] {
    size_t start = at;
    while (at < text.size() && is_name_char(text[at])) ++at;
    if (at == start) malformed("spec list", text, fmt::format("expected an axis name at {}", at));
    return std::string(text.substr(start, at - start));
  };
  auto expect = [&](char c) {
    if (at >= text.size() || text[at] != c) {
      malformed("spec list", text, fmt::format("expected '{}' at {}", c, at));
    }
    ++at;
  };
  skip_spaces();
  while (at < text.size()) {
    ShardingSpec spec;
    spec.sharded = true;
    expect('{');
    while (at < text.size() && text[at] != '}') {
      if (!spec.dims.empty()) expect(',');
      std::vector<std::string> axes;
      if (at < text.size() && text[at] == '_') {
        ++at;
      } else if (at < text.size() && text[at] == '(') {
        ++at;
        axes.push_back(name());
        while (at < text.size() && text[at] == ',') {
          ++at;
          axes.push_back(name());
        }
        expect(')');
      } else {
        axes.push_back(name());
      }
      spec.dims.push_back(std::move(axes));
    }
    expect('}');
    specs.push_back(std::move(spec));
    skip_spaces();
  }
  return specs;
}

std::string format_specs(const std::vector<ShardingSpec>& specs) {
  std::vector<std::string> items;
  for (const ShardingSpec& spec : specs) {
    ShardingSpec printed = spec;
    printed.sharded = true;
    items.push_back(printed.to_string());
  }
  return fmt::format("{}", fmt::join(items, " "));
}

ShardingSpec full_rank(ShardingSpec spec, int64_t rank) {
  spec.sharded = true;
  spec.dims.resize(static_cast<size_t>(rank));
  return spec;
}

int64_t parts(const std::vector<AxisText>& mesh, const ShardingSpec& spec, size_t dim) {
  if (dim >= spec.dims.size()) return 1;
  int64_t product = 1;
  for (const std::string& axis : spec.dims[dim]) {
    auto found =
        std::find_if(mesh.begin(), mesh.end(), [&](const AxisText& a) { return a.name == axis; });
    if (found != mesh.end()) product *= found->size;
  }
  return product;
}

Shape block_shape(const std::vector<AxisText>& mesh, const Shape& shape, const ShardingSpec& spec) {
  Dims dims;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    dims.push_back(shape[d] / parts(mesh, spec, static_cast<size_t>(d)));
  }
  return Shape(dims);
}

}  // namespace kiln::spmd

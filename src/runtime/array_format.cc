// Array::to_string: values printed like numpy (nested brackets, long axes elided with
// "..."), preceded by the array's type.
#include <fmt/format.h>

#include "kiln/array.h"

namespace kiln {
namespace {

// numpy elides arrays above 1000 elements, showing 3 entries at each end of every axis.
constexpr int64_t kElideAbove = 1000;
constexpr int64_t kEdgeItems = 3;

std::string format_element(const HostArray& host, int64_t index) {
  DType dtype = host.aval.dtype;
  if (dtype == DType::bool_) return host.element<bool>(index) ? "true" : "false";
  if (is_floating(dtype)) return fmt::format("{}", host.element<double>(index));
  if (is_unsigned(dtype)) return fmt::format("{}", host.element<uint64_t>(index));
  return fmt::format("{}", host.element<int64_t>(index));
}

void format_axis(const HostArray& host, const Dims& strides, int64_t axis, int64_t offset,
                 bool elide, std::string& out) {
  const Shape& shape = host.aval.shape;
  int64_t rank = shape.rank();
  if (axis == rank) {
    out += format_element(host, offset);
    return;
  }
  out += "[";
  int64_t size = shape[axis];
  for (int64_t i = 0; i < size; ++i) {
    if (elide && size > 2 * kEdgeItems && i == kEdgeItems) {
      out += axis + 1 == rank ? "..., " : fmt::format("...,\n{:{}}", "", axis + 1);
      i = size - kEdgeItems - 1;
      continue;
    }
    format_axis(host, strides, axis + 1, offset + i * strides[static_cast<size_t>(axis)], elide,
                out);
    if (i + 1 < size) {
      out += axis + 1 == rank
                 ? ", "
                 : fmt::format(",\n{}{:{}}", axis + 2 < rank ? "\n" : "", "", axis + 1);
    }
  }
  out += "]";
}

}  // namespace

std::string Array::to_string(CallSite site) const {
  HostArray host = to_host(site);
  std::string out = aval().to_string() + "\n";
  format_axis(host, shape().strides(), 0, 0, size() > kElideAbove, out);
  return out;
}

std::ostream& operator<<(std::ostream& out, const Array& x) {
  return out << x.to_string();
}

}  // namespace kiln

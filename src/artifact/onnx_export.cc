// Translating an inference program to ONNX (onnx_export.h).
//
// One function per primitive (or family of one-to-one elementwise primitives) appends the
// ONNX nodes that compute it. kiln's layouts are translated where ONNX has others: a
// convolution or pooling window runs on NHWC in kiln and NCHW in ONNX, so it is wrapped in
// transposes (ONNX Runtime folds the ones that cancel); a dot_general becomes transposes
// and reshapes around one batched MatMul. Every intermediate value is declared with kiln's
// type, so ONNX's shape inference, run strictly at the end, checks each translation
// against kiln's own abstract evaluation.
#include "artifact/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/program.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/version.h"
#include "prims/registry.h"

namespace kiln::artifact {
namespace {

constexpr int64_t kOpset = 17;
constexpr int64_t kIrVersion = 8;  // the IR version of opset 17 (ONNX 1.12)

int32_t onnx_type(DType dtype) {
  switch (dtype) {
    case DType::bool_:
      return onnx::TensorProto::BOOL;
    case DType::u8:
      return onnx::TensorProto::UINT8;
    case DType::i32:
      return onnx::TensorProto::INT32;
    case DType::i64:
      return onnx::TensorProto::INT64;
    case DType::u32:
      return onnx::TensorProto::UINT32;
    case DType::f16:
      return onnx::TensorProto::FLOAT16;
    case DType::bf16:
      return onnx::TensorProto::BFLOAT16;
    case DType::f32:
      return onnx::TensorProto::FLOAT;
    case DType::f64:
      return onnx::TensorProto::DOUBLE;
  }
  return onnx::TensorProto::UNDEFINED;
}

void set_type(onnx::ValueInfoProto& info, const AbstractValue& aval) {
  onnx::TypeProto_Tensor& tensor = *info.mutable_type()->mutable_tensor_type();
  tensor.set_elem_type(onnx_type(aval.dtype));
  onnx::TensorShapeProto& shape = *tensor.mutable_shape();
  for (int64_t dim : aval.shape.dims()) shape.add_dim()->set_dim_value(dim);
}

void set_attribute(onnx::NodeProto& node, const char* name, int64_t value) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(value);
}

void set_attribute(onnx::NodeProto& node, const char* name, std::span<const int64_t> values) {
  onnx::AttributeProto& a = *node.add_attribute();
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values) a.add_ints(value);
}

std::vector<int64_t> to_vector(const Dims& dims) {
  return {dims.begin(), dims.end()};
}

// The graph being written: values by name, the kiln variables they hold, and fresh names.
class GraphWriter {
 public:
  explicit GraphWriter(onnx::GraphProto& graph) : graph_(graph) {}

  const std::string& value(VarId var) const { return values_.at(var); }
  void bind(VarId var, std::string name) { values_[var] = std::move(name); }
  void bind_input(VarId var, const std::string& name) {
    declared_.insert(name);
    bind(var, name);
  }
  int node_count() const { return graph_.node_size(); }
  // Names the nodes from `first` on after the kiln scope they compute, for readers.
  void document_since(int first, const std::string& scope) {
    for (int i = first; i < graph_.node_size(); ++i) graph_.mutable_node(i)->set_doc_string(scope);
  }
  std::string fresh() { return fmt::format("t{}", next_++); }

  // Appends `op` of `inputs`; its output is `output` (a fresh name when empty).
  onnx::NodeProto& node(std::string_view op, std::vector<std::string> inputs,
                        std::string output = {}) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(std::string(op));
    n.set_name(fmt::format("{}_{}", op, graph_.node_size()));
    for (std::string& input : inputs) n.add_input(std::move(input));
    n.add_output(output.empty() ? fresh() : std::move(output));
    return n;
  }
  // The single output of a node just appended.
  static const std::string& out(const onnx::NodeProto& n) { return n.output(0); }

  void initializer(const std::string& name, const Array& value) {
    HostArray host = value.to_host();
    onnx::TensorProto& t = *graph_.add_initializer();
    declared_.insert(name);
    t.set_name(name);
    t.set_data_type(onnx_type(host.aval.dtype));
    for (int64_t dim : host.aval.shape.dims()) t.add_dims(dim);
    t.set_raw_data(host.bytes.data(), host.bytes.size());
  }
  // A constant int64 vector (shapes, axes, pads), as ONNX takes them.
  std::string int64s(std::span<const int64_t> values) {
    std::string name = fresh();
    initializer(name, from_host<int64_t>(std::vector<int64_t>(values.begin(), values.end()),
                                         Shape{static_cast<int64_t>(values.size())}));
    return name;
  }
  std::string scalar(double value, DType dtype) {
    std::string name = fresh();
    initializer(name, full(Shape{}, value, dtype));
    return name;
  }
  // Declares `name` to hold a value of type `aval` (for shape inference to check), unless
  // it is a graph input, an initializer or declared already.
  void declare(const std::string& name, const AbstractValue& aval) {
    if (!declared_.insert(name).second) return;
    onnx::ValueInfoProto& info = *graph_.add_value_info();
    info.set_name(name);
    set_type(info, aval);
  }

 private:
  onnx::GraphProto& graph_;
  std::map<VarId, std::string> values_;
  std::set<std::string> declared_;
  int64_t next_ = 0;
};

// One equation being translated.
struct Step {
  GraphWriter& g;
  const Program& program;
  const Equation& eq;

  std::string in(size_t i) const { return g.value(eq.inputs.at(i)); }
  std::vector<std::string> ins() const {
    std::vector<std::string> names;
    for (VarId var : eq.inputs) names.push_back(g.value(var));
    return names;
  }
  const AbstractValue& in_aval(size_t i) const { return program.aval(eq.inputs.at(i)); }
  const AbstractValue& out_aval() const { return program.aval(eq.outputs.at(0)); }
  template <typename P>
  const P& params() const {
    return std::get<P>(eq.params);
  }
  // The equation's result is the output of `n`.
  void result(const onnx::NodeProto& n) const { g.bind(eq.outputs.at(0), GraphWriter::out(n)); }
  [[noreturn]] void refuse(const std::string& why) const {
    fail(kUnknownSite,
         fmt::format("ONNX export: {}{} {} has no ONNX translation: {}", prim_name(eq.prim),
                     eq.scope.empty() ? "" : fmt::format(" (in {})", eq.scope),
                     out_aval().to_string(), why),
         fmt::format("the exporter translates {}; export without --onnx to keep kiln's form",
                     fmt::join(onnx_translated_primitives(), ", ")));
  }
  void floating_only() const {
    if (!is_floating(in_aval(0).dtype)) refuse("only floating-point operands are translated");
  }
  void bool_only() const {
    if (in_aval(0).dtype != DType::bool_) refuse("only bool operands are translated");
  }
};

using Translate = void (*)(Step&);

// The one-to-one elementwise primitives: same operands, same broadcasting.
const std::map<std::string_view, std::string_view>& elementwise_ops() {
  static const std::map<std::string_view, std::string_view> ops = {
      {"abs", "Abs"},
      {"add", "Add"},
      {"ceil", "Ceil"},
      {"cos", "Cos"},
      {"eq", "Equal"},
      {"erf", "Erf"},
      {"exp", "Exp"},
      {"floor", "Floor"},
      {"ge", "GreaterOrEqual"},
      {"gt", "Greater"},
      {"le", "LessOrEqual"},
      {"log", "Log"},
      {"logistic", "Sigmoid"},
      {"lt", "Less"},
      {"max", "Max"},
      {"min", "Min"},
      {"mul", "Mul"},
      {"neg", "Neg"},
      {"pow", "Pow"},
      {"select", "Where"},
      {"sign", "Sign"},
      {"sin", "Sin"},
      {"sqrt", "Sqrt"},
      {"stop_gradient", "Identity"},
      {"checkpoint_name", "Identity"},
      {"sub", "Sub"},
      {"tanh", "Tanh"},
  };
  return ops;
}

void translate_elementwise(Step& s) {
  s.result(s.g.node(elementwise_ops().at(prim_name(s.eq.prim)), s.ins()));
}

void translate_div(Step& s) {
  // Integer division rounds differently across frameworks: only floats are translated.
  s.floating_only();
  s.result(s.g.node("Div", {s.in(0), s.in(1)}));
}

void translate_rem(Step& s) {
  onnx::NodeProto& n = s.g.node("Mod", {s.in(0), s.in(1)});
  set_attribute(n, "fmod", 1);  // the sign of the dividend, as C's fmod and kiln's rem
  s.result(n);
}

void translate_rsqrt(Step& s) {
  s.result(s.g.node("Reciprocal", {GraphWriter::out(s.g.node("Sqrt", {s.in(0)}))}));
}

void translate_expm1(Step& s) {
  const std::string& e = GraphWriter::out(s.g.node("Exp", {s.in(0)}));
  s.result(s.g.node("Sub", {e, s.g.scalar(1, s.in_aval(0).dtype)}));
}

void translate_log1p(Step& s) {
  const std::string& sum =
      GraphWriter::out(s.g.node("Add", {s.in(0), s.g.scalar(1, s.in_aval(0).dtype)}));
  s.result(s.g.node("Log", {sum}));
}

void translate_ne(Step& s) {
  s.result(s.g.node("Not", {GraphWriter::out(s.g.node("Equal", {s.in(0), s.in(1)}))}));
}

void translate_logical(Step& s) {
  s.bool_only();  // ONNX's And/Or/Xor/Not are logical; kiln's are bitwise on integers
  static const std::map<std::string_view, std::string_view> ops = {
      {"and", "And"}, {"or", "Or"}, {"xor", "Xor"}, {"not", "Not"}};
  s.result(s.g.node(ops.at(prim_name(s.eq.prim)), s.ins()));
}

void translate_is_finite(Step& s) {
  DType dtype = s.in_aval(0).dtype;
  if (dtype != DType::f32 && dtype != DType::f64) s.refuse("ONNX's IsInf takes f32 and f64 only");
  const std::string& inf = GraphWriter::out(s.g.node("IsInf", {s.in(0)}));
  const std::string& nan = GraphWriter::out(s.g.node("IsNaN", {s.in(0)}));
  s.result(s.g.node("Not", {GraphWriter::out(s.g.node("Or", {inf, nan}))}));
}

void translate_convert(Step& s) {
  onnx::NodeProto& n = s.g.node("Cast", {s.in(0)});
  set_attribute(n, "to", onnx_type(s.params<ConvertParams>().new_dtype));
  s.result(n);
}

// ONNX's Reshape, with 0 meaning a dimension of 0 (not "copy the input's").
std::string reshape(GraphWriter& g, const std::string& x, std::span<const int64_t> shape) {
  onnx::NodeProto& n = g.node("Reshape", {x, g.int64s(shape)});
  set_attribute(n, "allowzero", 1);
  return GraphWriter::out(n);
}

std::string transpose(GraphWriter& g, const std::string& x, std::span<const int64_t> perm) {
  onnx::NodeProto& n = g.node("Transpose", {x});
  set_attribute(n, "perm", perm);
  return GraphWriter::out(n);
}

void translate_reshape(Step& s) {
  std::vector<int64_t> shape = to_vector(s.params<ReshapeParams>().new_sizes.dims());
  s.g.bind(s.eq.outputs[0], reshape(s.g, s.in(0), shape));
}

void translate_broadcast_in_dim(Step& s) {
  const auto& p = s.params<BroadcastInDimParams>();
  std::vector<int64_t> target = to_vector(p.shape.dims());
  // The operand's axes placed where broadcast_dimensions says, ones elsewhere: then numpy
  // broadcasting (Expand) does the rest.
  std::vector<int64_t> aligned(target.size(), 1);
  const Dims& operand = s.in_aval(0).shape.dims();
  for (size_t i = 0; i < operand.size(); ++i) {
    aligned[static_cast<size_t>(p.broadcast_dimensions[i])] = operand[i];
  }
  std::string x = s.in(0);
  if (!operand.empty()) x = reshape(s.g, x, aligned);
  s.result(s.g.node("Expand", {x, s.g.int64s(target)}));
}

void translate_transpose(Step& s) {
  std::vector<int64_t> perm = to_vector(s.params<TransposeParams>().permutation);
  s.g.bind(s.eq.outputs[0], transpose(s.g, s.in(0), perm));
}

void translate_slice(Step& s) {
  const auto& p = s.params<SliceParams>();
  std::vector<int64_t> starts = to_vector(p.start_indices), ends = to_vector(p.limit_indices);
  std::vector<int64_t> steps =
      p.strides.empty() ? std::vector<int64_t>(starts.size(), 1) : to_vector(p.strides);
  std::vector<int64_t> axes(starts.size());
  std::iota(axes.begin(), axes.end(), 0);
  s.result(s.g.node("Slice", {s.in(0), s.g.int64s(starts), s.g.int64s(ends), s.g.int64s(axes),
                              s.g.int64s(steps)}));
}

void translate_concatenate(Step& s) {
  onnx::NodeProto& n = s.g.node("Concat", s.ins());
  set_attribute(n, "axis", s.params<ConcatenateParams>().dimension);
  s.result(n);
}

void translate_pad(Step& s) {
  const auto& p = s.params<PadParams>();
  auto negative = [](int64_t v) { return v < 0; };
  if (std::any_of(p.interior.begin(), p.interior.end(), [](int64_t v) { return v != 0; }) ||
      std::any_of(p.low.begin(), p.low.end(), negative) ||
      std::any_of(p.high.begin(), p.high.end(), negative)) {
    s.refuse("only padding without interior or negative (cropping) amounts is translated");
  }
  std::vector<int64_t> pads = to_vector(p.low);
  pads.insert(pads.end(), p.high.begin(), p.high.end());
  s.result(s.g.node("Pad", {s.in(0), s.g.int64s(pads), s.in(1)}));
}

void translate_iota(Step& s) {
  const auto& p = s.params<IotaParams>();
  std::string name = s.g.fresh();
  s.g.initializer(name, iota(p.shape, p.dtype, p.dimension));
  s.g.bind(s.eq.outputs[0], name);
}

void translate_reduce(Step& s) {
  std::vector<int64_t> axes = to_vector(s.params<ReduceParams>().axes);
  if (axes.empty()) {  // ONNX would reduce every axis
    s.result(s.g.node("Identity", {s.in(0)}));
    return;
  }
  std::string_view name = prim_name(s.eq.prim);
  if (name == "reduce_sum") {  // opset 13 takes ReduceSum's axes as an input...
    onnx::NodeProto& n = s.g.node("ReduceSum", {s.in(0), s.g.int64s(axes)});
    set_attribute(n, "keepdims", 0);
    s.result(n);
    return;
  }
  static const std::map<std::string_view, std::string_view> ops = {
      {"reduce_max", "ReduceMax"}, {"reduce_min", "ReduceMin"}, {"reduce_prod", "ReduceProd"}};
  onnx::NodeProto& n = s.g.node(ops.at(name), {s.in(0)});  // ...the others as an attribute
  set_attribute(n, "axes", axes);
  set_attribute(n, "keepdims", 0);
  s.result(n);
}

void translate_arg_reduce(Step& s) {
  const auto& p = s.params<ArgReduceParams>();
  onnx::NodeProto& n = s.g.node(prim_name(s.eq.prim) == "argmax" ? "ArgMax" : "ArgMin", {s.in(0)});
  set_attribute(n, "axis", p.axis);
  set_attribute(n, "keepdims", 0);  // select_last_index = 0: the first, as kiln
  if (p.index_dtype == DType::i64) {
    s.result(n);
    return;
  }
  onnx::NodeProto& cast = s.g.node("Cast", {GraphWriter::out(n)});
  set_attribute(cast, "to", onnx_type(p.index_dtype));
  s.result(cast);
}

void translate_cumsum(Step& s) {
  const auto& p = s.params<CumsumParams>();
  onnx::NodeProto& n =
      s.g.node("CumSum", {s.in(0), s.g.scalar(static_cast<double>(p.axis), DType::i64)});
  set_attribute(n, "reverse", p.reverse ? 1 : 0);
  s.result(n);
}

// dot_general as one batched MatMul: each operand transposed to (batch, free, contracting)
// or (batch, contracting, free) and flattened to three axes, the product unflattened to
// (batch..., lhs free..., rhs free...). The 2-D matrix product needs none of it.
void translate_dot_general(Step& s) {
  const auto& p = s.params<DotGeneralParams>();
  const Dims& lhs = s.in_aval(0).shape.dims();
  const Dims& rhs = s.in_aval(1).shape.dims();
  std::string a = s.in(0), b = s.in(1);
  if (p.preferred_element_type && *p.preferred_element_type != s.in_aval(0).dtype) {
    for (std::string* operand : {&a, &b}) {
      onnx::NodeProto& cast = s.g.node("Cast", {*operand});
      set_attribute(cast, "to", onnx_type(*p.preferred_element_type));
      *operand = GraphWriter::out(cast);
    }
  }
  auto free_axes = [](const Dims& shape, const Dims& batch, const Dims& contracting) {
    std::vector<int64_t> axes;
    for (int64_t axis = 0; axis < static_cast<int64_t>(shape.size()); ++axis) {
      bool used = std::find(batch.begin(), batch.end(), axis) != batch.end() ||
                  std::find(contracting.begin(), contracting.end(), axis) != contracting.end();
      if (!used) axes.push_back(axis);
    }
    return axes;
  };
  auto product = [](const Dims& shape, std::span<const int64_t> axes) {
    int64_t n = 1;
    for (int64_t axis : axes) n *= shape[static_cast<size_t>(axis)];
    return n;
  };
  std::vector<int64_t> lhs_free = free_axes(lhs, p.lhs_batch, p.lhs_contracting);
  std::vector<int64_t> rhs_free = free_axes(rhs, p.rhs_batch, p.rhs_contracting);
  // lhs as (batch..., free..., contracting...), rhs as (batch..., contracting..., free...).
  std::vector<int64_t> lhs_perm = to_vector(p.lhs_batch);
  lhs_perm.insert(lhs_perm.end(), lhs_free.begin(), lhs_free.end());
  lhs_perm.insert(lhs_perm.end(), p.lhs_contracting.begin(), p.lhs_contracting.end());
  std::vector<int64_t> rhs_perm = to_vector(p.rhs_batch);
  rhs_perm.insert(rhs_perm.end(), p.rhs_contracting.begin(), p.rhs_contracting.end());
  rhs_perm.insert(rhs_perm.end(), rhs_free.begin(), rhs_free.end());
  auto arranged = [&](std::string x, const Dims& shape, const std::vector<int64_t>& perm,
                      std::vector<int64_t> flat) {
    std::vector<int64_t> identity(perm.size());
    std::iota(identity.begin(), identity.end(), 0);
    if (perm != identity) x = transpose(s.g, x, perm);
    if (flat != to_vector(shape) || perm != identity) x = reshape(s.g, x, flat);
    return x;
  };
  const int64_t batch = product(lhs, p.lhs_batch);
  const int64_t m = product(lhs, lhs_free), k = product(lhs, p.lhs_contracting);
  const int64_t n = product(rhs, rhs_free);
  bool batched = !p.lhs_batch.empty();
  std::vector<int64_t> lhs_flat =
      batched ? std::vector<int64_t>{batch, m, k} : std::vector<int64_t>{m, k};
  std::vector<int64_t> rhs_flat =
      batched ? std::vector<int64_t>{batch, k, n} : std::vector<int64_t>{k, n};
  a = arranged(a, lhs, lhs_perm, lhs_flat);
  b = arranged(b, rhs, rhs_perm, rhs_flat);
  std::string y = GraphWriter::out(s.g.node("MatMul", {a, b}));
  std::vector<int64_t> out = to_vector(s.out_aval().shape.dims());
  std::vector<int64_t> flat_out =
      batched ? std::vector<int64_t>{batch, m, n} : std::vector<int64_t>{m, n};
  if (out != flat_out) y = reshape(s.g, y, out);
  s.g.bind(s.eq.outputs[0], y);
}

constexpr int64_t kToChannelsFirst[] = {0, 3, 1, 2};
constexpr int64_t kToChannelsLast[] = {0, 2, 3, 1};

void translate_conv(Step& s) {
  const auto& p = s.params<ConvParams>();
  auto above_one = [](int64_t v) { return v != 1; };
  if (std::any_of(p.lhs_dilation.begin(), p.lhs_dilation.end(), above_one)) {
    s.refuse("a transposed convolution (lhs_dilation > 1) is not translated");
  }
  auto negative = [](int64_t v) { return v < 0; };
  if (std::any_of(p.padding_low.begin(), p.padding_low.end(), negative) ||
      std::any_of(p.padding_high.begin(), p.padding_high.end(), negative)) {
    s.refuse("negative padding is not translated");
  }
  constexpr int64_t kHwioToOihw[] = {3, 2, 0, 1};
  std::string x = transpose(s.g, s.in(0), kToChannelsFirst);
  std::string w = transpose(s.g, s.in(1), kHwioToOihw);
  onnx::NodeProto& conv = s.g.node("Conv", {x, w});
  std::vector<int64_t> pads = to_vector(p.padding_low);
  pads.insert(pads.end(), p.padding_high.begin(), p.padding_high.end());
  set_attribute(conv, "strides", to_vector(p.window_strides));
  set_attribute(conv, "pads", pads);
  set_attribute(conv, "dilations", to_vector(p.rhs_dilation));
  set_attribute(conv, "group", p.feature_group_count);
  s.g.bind(s.eq.outputs[0], transpose(s.g, GraphWriter::out(conv), kToChannelsLast));
}

// Max and sum pooling over the spatial axes of an NHWC array.
void translate_reduce_window(Step& s) {
  const auto& p = s.params<ReduceWindowParams>();
  bool spatial = p.window_dimensions.size() == 4 && p.window_dimensions[0] == 1 &&
                 p.window_dimensions[3] == 1 && p.window_strides[0] == 1 &&
                 p.window_strides[3] == 1 && p.padding_low[0] == 0 && p.padding_low[3] == 0 &&
                 p.padding_high[0] == 0 && p.padding_high[3] == 0;
  if (!spatial) s.refuse("only windows over the two middle axes of an NHWC array are translated");
  bool max = prim_name(s.eq.prim) == "reduce_window_max";
  std::string x = transpose(s.g, s.in(0), kToChannelsFirst);
  onnx::NodeProto& pool = s.g.node(max ? "MaxPool" : "AveragePool", {x});
  set_attribute(pool, "kernel_shape",
                std::vector<int64_t>{p.window_dimensions[1], p.window_dimensions[2]});
  set_attribute(pool, "strides", std::vector<int64_t>{p.window_strides[1], p.window_strides[2]});
  set_attribute(pool, "pads",
                std::vector<int64_t>{p.padding_low[1], p.padding_low[2], p.padding_high[1],
                                     p.padding_high[2]});
  std::string y = GraphWriter::out(pool);
  if (!max) {  // a sum is the mean over the whole window, padding counted, times its size
    set_attribute(pool, "count_include_pad", 1);
    double size = static_cast<double>(p.window_dimensions[1] * p.window_dimensions[2]);
    y = GraphWriter::out(s.g.node("Mul", {y, s.g.scalar(size, s.out_aval().dtype)}));
  }
  s.g.bind(s.eq.outputs[0], transpose(s.g, y, kToChannelsLast));
}

void translate_gather(Step& s) {
  const auto& p = s.params<GatherParams>();
  if (p.batch_dims != 0) s.refuse("only gather without batch dimensions (take) is translated");
  if (p.mode == IndexMode::kFill) s.refuse("gather's fill mode is not translated");
  std::string indices = s.in(1);
  if (p.mode == IndexMode::kClip) {
    DType index_dtype = s.in_aval(1).dtype;
    double last = static_cast<double>(s.in_aval(0).shape[p.axis] - 1);
    indices = GraphWriter::out(
        s.g.node("Clip", {indices, s.g.scalar(0, index_dtype), s.g.scalar(last, index_dtype)}));
  }
  onnx::NodeProto& n = s.g.node("Gather", {s.in(0), indices});
  set_attribute(n, "axis", p.axis);
  s.result(n);
}

// Each output is its operand.
void translate_optimization_barrier(Step& s) {
  for (size_t i = 0; i < s.eq.outputs.size(); ++i) s.g.bind(s.eq.outputs[i], s.in(i));
}

const std::map<std::string_view, Translate>& translations() {
  static const std::map<std::string_view, Translate> table = [] {
    std::map<std::string_view, Translate> t;
    for (const auto& [prim, op] : elementwise_ops()) t[prim] = translate_elementwise;
    t["div"] = translate_div;
    t["rem"] = translate_rem;
    t["rsqrt"] = translate_rsqrt;
    t["expm1"] = translate_expm1;
    t["log1p"] = translate_log1p;
    t["ne"] = translate_ne;
    for (const char* prim : {"and", "or", "xor", "not"}) t[prim] = translate_logical;
    t["is_finite"] = translate_is_finite;
    t["convert_element_type"] = translate_convert;
    t["reshape"] = translate_reshape;
    t["broadcast_in_dim"] = translate_broadcast_in_dim;
    t["transpose"] = translate_transpose;
    t["slice"] = translate_slice;
    t["concatenate"] = translate_concatenate;
    t["pad"] = translate_pad;
    t["iota"] = translate_iota;
    for (const char* prim : {"reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}) {
      t[prim] = translate_reduce;
    }
    t["argmax"] = translate_arg_reduce;
    t["argmin"] = translate_arg_reduce;
    t["cumsum"] = translate_cumsum;
    t["dot_general"] = translate_dot_general;
    t["conv_general_dilated"] = translate_conv;
    t["reduce_window_max"] = translate_reduce_window;
    t["reduce_window_sum"] = translate_reduce_window;
    t["gather"] = translate_gather;
    t["optimization_barrier"] = translate_optimization_barrier;
    return t;
  }();
  return table;
}

// The program's constants as initializers: the rank-0 ones by variable, the others as
// "constants/<n>", the names the artifact's weights file gives them.
void add_constants(GraphWriter& g, const Program& program) {
  int64_t next = 0;
  for (size_t i = 0; i < program.constants.size(); ++i) {
    const Array& value = program.constant_values.at(i);
    if (!value.defined()) {
      fail(kUnknownSite, "ONNX export: the program has a constant without a value",
           "this is a bug in kiln's exporter; please report it");
    }
    std::string name = value.rank() == 0 ? fmt::format("c{}", program.constants[i])
                                         : fmt::format("constants/{}", next++);
    g.initializer(name, value);
    g.bind(program.constants[i], name);
  }
}

// ONNX's checker and its strict shape inference, which compares every node's inferred
// type with the one declared from kiln's program.
void check(onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
    onnx::ModelProto inferred = model;
    onnx::shape_inference::InferShapes(inferred, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    fail(kUnknownSite, fmt::format("ONNX export: ONNX's checker rejects the model: {}", e.what()),
         "this is a bug in kiln's ONNX translation; please report it with the program text");
  }
}

}  // namespace

std::vector<std::string> onnx_translated_primitives() {
  std::vector<std::string> names;
  for (const auto& [prim, translate] : translations()) names.emplace_back(prim);
  return names;
}

std::string onnx_model(const Program& program, const OnnxGraph& graph) {
  if (program.outputs.size() != 1 || graph.weights.size() + 1 != program.inputs.size() ||
      graph.weight_names.size() != graph.weights.size()) {
    fail(kUnknownSite,
         fmt::format("ONNX export: the program takes {} inputs and gives {} outputs; the "
                     "translation takes weights and one input and gives one output",
                     program.inputs.size(), program.outputs.size()));
  }
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("kiln");
  model.set_producer_version(kVersion);
  model.set_doc_string(graph.doc);
  onnx::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  onnx::GraphProto& out = *model.mutable_graph();
  out.set_name(graph.name);
  GraphWriter g(out);
  for (size_t i = 0; i < graph.weights.size(); ++i) {
    g.initializer(graph.weight_names[i], graph.weights[i]);
    g.bind(program.inputs[i], graph.weight_names[i]);
  }
  VarId input = program.inputs.back();
  onnx::ValueInfoProto& input_info = *out.add_input();
  input_info.set_name("input");
  set_type(input_info, program.aval(input));
  g.bind_input(input, "input");
  add_constants(g, program);
  for (const Equation& eq : program.equations) {
    Step step{g, program, eq};
    auto found = translations().find(prim_name(eq.prim));
    if (found == translations().end()) step.refuse("the exporter has no translation of it");
    int first = g.node_count();
    found->second(step);
    if (!eq.scope.empty()) g.document_since(first, eq.scope);
    for (VarId result : eq.outputs) g.declare(g.value(result), program.aval(result));
  }
  g.node("Identity", {g.value(program.outputs[0])}, "output");
  onnx::ValueInfoProto& output_info = *out.add_output();
  output_info.set_name("output");
  set_type(output_info, program.aval(program.outputs[0]));
  check(model);
  std::string bytes;
  model.SerializeToString(&bytes);
  return bytes;
}

}  // namespace kiln::artifact

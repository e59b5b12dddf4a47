// A layer type of your own in kiln's config files: `residual_mlp`, x + W2 relu(W1 x + b1)
// + b2, written as an nn::Layer and registered for [[model.layers]]; the program is then
// kiln's whole command line, knowing it:
//
//   custom_layer train examples/fashion_mnist_residual.toml
//   custom_layer resume runs/fashion_mnist_residual/<run-id>
//   custom_layer export runs/fashion_mnist_residual/<run-id>
//
// The exported artifact holds the traced program, not this code: `kiln predict` serves it
// without the registration. docs/training.md, *Layer types of your own*.
#include <kiln/kiln.h>

#include <memory>
#include <string>

namespace {

using kiln::AbstractValue;
using kiln::Array;
namespace nn = kiln::nn;

// A container: its body depends on the input's width (the second Dense restores it), so it
// is built for each input type and called with this layer's own scope. Its params are the
// body's: {dense_0: {kernel, bias}, dense_2: {kernel, bias}}.
class ResidualMlp final : public nn::Layer {
 public:
  explicit ResidualMlp(int64_t hidden) : hidden_(hidden) {}

  std::string_view kind() const override { return "residual_mlp"; }
  std::string describe() const override { return "ResidualMlp(" + std::to_string(hidden_) + ")"; }

  AbstractValue output_type(const AbstractValue& input,
                            const nn::LayerScope& scope) const override {
    return body(input).layer().output_type(input, scope);
  }
  nn::LayerInit init(const Array& key, const AbstractValue& input,
                     const nn::LayerScope& scope) const override {
    return body(input).layer().init(key, input, scope);
  }
  nn::ApplyResult apply(const nn::Variables& variables, const Array& x,
                        const nn::ApplyOptions& options,
                        const nn::LayerScope& scope) const override {
    return body(x.aval()).layer().apply(variables, x, options, scope);
  }
  int64_t count_params(const AbstractValue& input, const nn::LayerScope& scope) const override {
    return body(input).layer().count_params(input, scope);
  }

 private:
  nn::Module body(const AbstractValue& input) const {
    int64_t width = input.shape.rank() == 0 ? 1 : input.shape[input.shape.rank() - 1];
    return nn::Residual(nn::Sequential({nn::Dense(hidden_), nn::Relu(), nn::Dense(width)}));
  }

  int64_t hidden_;
};

}  // namespace

int main(int argc, char** argv) {
  kiln::train::register_layer_type(
      {.name = "residual_mlp",
       .help = "x + dense(relu(dense(x))): `features` hidden units, the input's width kept",
       .required = {"features"},
       .build = [](const kiln::train::LayerConfig& layer) {
         return nn::Module(std::make_shared<ResidualMlp>(layer.features));
       }});
  return kiln::train::command_line_main(argc, argv);
}

// An inference program as an ONNX model (`kiln export --onnx`, docs/artifacts.md).
//
// Each equation becomes one ONNX node or a few (opset 17), the program's inputs but the
// last become initializers under their artifact names ("params/dense_1/kernel"), and the
// last is the graph's input "input" with the program's fixed shape: the ONNX model takes
// what Artifact::run takes, one batch of the signature's size at a time, and gives
// "output". The model is checked with ONNX's own checker before it is returned. A program
// that uses a primitive (or a form of one) with no ONNX translation here is refused, naming
// the primitive, its scope and what is translated.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kiln/array.h"

namespace kiln {
class Program;
}

namespace kiln::artifact {

struct OnnxGraph {
  std::string name;  // the graph's name (the artifact's)
  std::string doc;   // where it came from, for people reading the model
  // The program's inputs but the last, by name, with their values.
  std::vector<std::string> weight_names;
  std::vector<Array> weights;
};

// The serialized ModelProto (bytes of a .onnx file). Every constant of `program` must have
// its value.
std::string onnx_model(const Program& program, const OnnxGraph& graph);

// The primitives onnx_model translates, sorted, for messages and docs.
std::vector<std::string> onnx_translated_primitives();

}  // namespace kiln::artifact

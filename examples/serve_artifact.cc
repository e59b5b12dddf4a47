// A model artifact embedded in a service: the shape of a prediction worker behind a queue
// or a pipe. The artifact is loaded once at start (every file checked against its
// manifest, the program parsed, verified and compiled); then raw records arrive on stdin,
// each as the training data held one (for Fashion-MNIST, 784 bytes of u8 pixels), and
// each gets one line on stdout: the predicted class and its softmax probability. Nothing
// here reads a run directory or any training code: the artifact alone is the model.
//
//   serve_artifact artifacts/fashion_mnist_mlp/1.0.0+0123456789ab < images.u8
//
// Records are answered in groups of the model's batch size as they arrive, and what is
// left at the end of the input (a partial record is an error).
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// One line per row of `logits`: the largest logit's class and its softmax probability.
void answer(const kiln::Array& logits) {
  kiln::HostArray host = logits.astype(kiln::DType::f32).to_host();
  std::span<const float> values = host.as<float>();
  const int64_t classes = host.aval.shape[host.aval.shape.rank() - 1];
  for (size_t row = 0; row * static_cast<size_t>(classes) < values.size(); ++row) {
    std::span<const float> z =
        values.subspan(row * static_cast<size_t>(classes), static_cast<size_t>(classes));
    size_t best = 0;
    for (size_t c = 1; c < z.size(); ++c) best = z[c] > z[best] ? c : best;
    double total = 0;
    for (float v : z) total += std::exp(static_cast<double>(v - z[best]));
    std::printf("%zu\t%.6f\n", best, 1.0 / total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s ARTIFACT < records\n", argv[0]);
    return 2;
  }
  try {
    const kiln::Artifact model = kiln::Artifact::load(argv[1]);
    const kiln::artifact::Manifest& m = model.manifest();
    int64_t record_bytes = kiln::dtype_size(m.raw_dtype);
    for (int64_t dim : m.raw_shape) record_bytes *= dim;
    const int64_t batch = m.input.shape.at(0);
    std::fprintf(stderr, "serving %s %s: %s records of %lld bytes, in batches of %lld\n",
                 m.name.c_str(), m.version.c_str(),
                 std::string(kiln::dtype_name(m.raw_dtype)).c_str(),
                 static_cast<long long>(record_bytes), static_cast<long long>(batch));

    std::vector<std::byte> buffer(static_cast<size_t>(batch * record_bytes));
    int64_t served = 0;
    while (true) {
      size_t got = std::fread(buffer.data(), 1, buffer.size(), stdin);
      const int64_t records = static_cast<int64_t>(got) / record_bytes;
      if (static_cast<int64_t>(got) % record_bytes != 0) {
        std::fprintf(stderr, "error: the input ends inside record %lld (%zu stray bytes)\n",
                     static_cast<long long>(served + records), got % record_bytes);
        return 1;
      }
      if (records > 0) {
        std::vector<int64_t> dims = {records};
        dims.insert(dims.end(), m.raw_shape.begin(), m.raw_shape.end());
        kiln::Array raw = kiln::from_host_bytes(
            buffer.data(),
            kiln::AbstractValue(kiln::Shape{std::span<const int64_t>(dims)}, m.raw_dtype), nullptr,
            kiln::CallSite());
        answer(model.predict(raw));
        served += records;
      }
      if (got < buffer.size()) break;
    }
    std::fprintf(stderr, "served %lld records\n", static_cast<long long>(served));
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Cost: the work and memory traffic of one primitive application, as each primitive's
// `cost` rule reports it (src/prims/cost_rules*.cc) and kiln::cost_analysis sums it
// (kiln/cost.h). A separate small header so that the registry can use it without the
// transformation templates.
#pragma once

namespace kiln {

// FLOPs are counted as XLA counts them: one multiply-add is 2 FLOPs (a dot product of
// length K is 2K), every other arithmetic, comparison or logic op on one element is 1.
// Transcendental functions (exp, log, tanh, sin, sqrt...) are counted apart, one per
// element, and not as FLOPs. Bytes are what the primitive reads from its operands and
// writes to its results; a value that aliases its operand (reshape) moves nothing.
struct Cost {
  double flops = 0;
  double transcendentals = 0;
  double bytes_read = 0;
  double bytes_written = 0;

  double bytes() const { return bytes_read + bytes_written; }
  // FLOPs per byte moved (0 when nothing moves): the x axis of a roofline plot.
  double arithmetic_intensity() const { return bytes() > 0 ? flops / bytes() : 0.0; }

  Cost& operator+=(const Cost& other) {
    flops += other.flops;
    transcendentals += other.transcendentals;
    bytes_read += other.bytes_read;
    bytes_written += other.bytes_written;
    return *this;
  }
  friend Cost operator+(Cost a, const Cost& b) { return a += b; }
  friend Cost operator*(Cost a, double times) {
    a.flops *= times;
    a.transcendentals *= times;
    a.bytes_read *= times;
    a.bytes_written *= times;
    return a;
  }
  friend bool operator==(const Cost&, const Cost&) = default;
};

}  // namespace kiln

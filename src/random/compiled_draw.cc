// Eager draws as compiled programs (random_internal.h, compiled_draw).
#include "kiln/jit.h"
#include "random/random_internal.h"

namespace kiln::random::detail {

Array compiled_draw(DrawBody body, const Array& key, DrawSpec spec, CallSite site) {
  if (kiln::detail::JitCore::tracing()) return body(key, spec, site);
  // One cache for every sampler: the body is part of the signature. Compiling a new
  // (body, shape, dtype) takes about a millisecond.
  static const auto compiled =
      jit([](const Array& k, DrawBody b, const DrawSpec& s) { return b(k, s, CallSite()); },
          JitOptions().named("random"));
  return compiled(key, body, spec);
}

}  // namespace kiln::random::detail

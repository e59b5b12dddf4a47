// JSON text for the records kiln writes (run.json, metrics.jsonl, manifests, --json
// output). Text from outside kiln reaches them: a file name, a tensor name read from a
// damaged savepoint, a message quoting either. nlohmann's dump throws on bytes that are not
// UTF-8, and the record being written was then lost with a message naming nothing; here
// each such byte becomes U+FFFD and the record is written.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace kiln::io {

// `value` as JSON text: compact for indent < 0, else pretty with `indent` spaces.
std::string json_text(const nlohmann::json& value, int indent = -1);

}  // namespace kiln::io

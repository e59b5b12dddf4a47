// io::json_text: a record with bytes that are not UTF-8 (from a file name, a damaged
// file's text quoted in a message) is still written, each such byte as U+FFFD, where
// nlohmann's dump would throw and lose the record (issue 43, defect 10).
#include "io/json_text.h"

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::io {
namespace {

TEST(JsonText, WritesCompactOrIndentedAsDump) {
  nlohmann::json record = {{"step", 3}, {"status", "completed"}};
  EXPECT_EQ(json_text(record), record.dump());
  EXPECT_EQ(json_text(record, 2), record.dump(2));
}

TEST(JsonText, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  nlohmann::json record = {{"error", std::string("tensor 'dense_1/bia\xff' is not in the model")}};
  EXPECT_THROW((void)record.dump(), nlohmann::json::type_error);
  std::string text = json_text(record);
  EXPECT_EQ(nlohmann::json::parse(text)["error"],
            "tensor 'dense_1/bia\xef\xbf\xbd' is not in the model");
}

}  // namespace
}  // namespace kiln::io

// Reading records to predict on (records.h).
#include "artifact/records.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/csv.h"
#include "data/idx.h"
#include "data/npy.h"
#include "io/bounded_read.h"
#include "kiln/error.h"

namespace kiln::artifact {

data::RawArray read_records(const std::filesystem::path& path, const Manifest& model) {
  std::string name = path.filename().string();
  if (path.extension() == ".csv") {
    if (!model.csv) {
      fail(kUnknownSite,
           fmt::format("{}: model {} {} was not trained on CSV records, so it has no column "
                       "layout to read them with",
                       io::printable_path(path), model.name, model.version),
           fmt::format("give its records as a .npy file of {}[n,{}]", dtype_name(model.raw_dtype),
                       fmt::join(model.raw_shape, ",")));
    }
    data::CsvOptions options;
    options.header = model.csv->header;
    options.skip_lines = model.csv->skip_lines;
    return data::read_csv_records(path, options, model.csv->feature_columns);
  }
  if (name.find(".idx") != std::string::npos || name.find("-idx") != std::string::npos) {
    return data::read_idx_records(path);
  }
  return data::read_npy(path);
}

}  // namespace kiln::artifact

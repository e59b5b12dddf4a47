// Fashion-MNIST from its four IDX files (see idx.h): shapes, counts and label range are
// checked here so that the training loop can trust them. The two splits are read on two
// threads: decompressing the 47 MB of training images is most of the start-up time.
#include <future>
#include <string_view>

#include <fmt/format.h>

#include "data/idx.h"
#include "kiln/error.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kInstallHint =
    "install the Debian package dataset-fashion-mnist (scripts/setup does), or set data.dir "
    "to a directory holding the four files";
constexpr int64_t kImageSide = 28;

// The .gz file, or an uncompressed copy of it when only that exists.
fs::path find_file(const fs::path& dir, std::string_view stem) {
  fs::path gz = dir / fmt::format("{}.gz", stem);
  if (fs::exists(gz)) return gz;
  fs::path plain = dir / stem;
  if (fs::exists(plain)) return plain;
  fail(kUnknownSite,
       fmt::format("load_fashion_mnist: '{}' does not exist{}", gz.string(),
                   fs::is_directory(dir) ? "" : fmt::format(" (no directory '{}')", dir.string())),
       std::string(kInstallHint));
}

ImageSplit load_split(const fs::path& dir, std::string_view prefix, int64_t limit,
                      int64_t num_classes) {
  fs::path images_path = find_file(dir, fmt::format("{}-images-idx3-ubyte", prefix));
  fs::path labels_path = find_file(dir, fmt::format("{}-labels-idx1-ubyte", prefix));
  ImageSplit split{read_idx(images_path, limit), read_idx(labels_path, limit)};
  const auto& image_dims = split.images.dims;
  if (image_dims.size() != 3 || image_dims[1] != kImageSide || image_dims[2] != kImageSide) {
    fail(kUnknownSite,
         fmt::format("load_fashion_mnist: '{}' holds images of dims {}, expected [n,28,28]",
                     images_path.string(), dims_to_string(image_dims)));
  }
  if (split.labels.dims.size() != 1) {
    fail(kUnknownSite, fmt::format("load_fashion_mnist: '{}' holds labels of dims {}, expected [n]",
                                   labels_path.string(), dims_to_string(split.labels.dims)));
  }
  if (split.images.rows_in_file != split.labels.rows_in_file) {
    fail(kUnknownSite, fmt::format("load_fashion_mnist: {} images in '{}' but {} labels in '{}'",
                                   split.images.rows_in_file, images_path.string(),
                                   split.labels.rows_in_file, labels_path.string()));
  }
  // A split without examples would train no step or divide an evaluation by zero.
  if (split.images.rows_in_file == 0) {
    fail(kUnknownSite,
         fmt::format("load_fashion_mnist: '{}' holds no examples (its header says 0 images); "
                     "training needs at least one training and one test example",
                     images_path.string()),
         std::string(kInstallHint));
  }
  for (size_t i = 0; i < split.labels.values.size(); ++i) {
    if (split.labels.values[i] >= num_classes) {
      fail(kUnknownSite,
           fmt::format("load_fashion_mnist: label {} of example {} in '{}' is not "
                       "a class (expected 0 to {})",
                       split.labels.values[i], i, labels_path.string(), num_classes - 1));
    }
  }
  return split;
}

}  // namespace

FashionMnist load_fashion_mnist(const fs::path& dir, int64_t train_limit, int64_t test_limit) {
  if (train_limit < 0 || test_limit < 0) {
    fail(kUnknownSite,
         fmt::format("load_fashion_mnist: limits must be >= 0 (0 keeps every example), got "
                     "train_limit {} and test_limit {}",
                     train_limit, test_limit));
  }
  FashionMnist data;
  // Missing files are reported before any decompression starts.
  for (std::string_view prefix : {"train", "t10k"}) {
    find_file(dir, fmt::format("{}-images-idx3-ubyte", prefix));
    find_file(dir, fmt::format("{}-labels-idx1-ubyte", prefix));
  }
  auto test = std::async(std::launch::async,
                         [&] { return load_split(dir, "t10k", test_limit, data.num_classes); });
  // If the training split throws, the future's destructor waits for the test thread.
  data.train = load_split(dir, "train", train_limit, data.num_classes);
  data.test = test.get();
  return data;
}

}  // namespace kiln::data

// Writing, finding, verifying and pruning savepoints (see savepoint.h and
// docs/savepoints.md for the commit protocol).
#include "io/savepoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/bounded_read.h"
#include "io/json_fields.h"
#include "io/json_text.h"
#include "io/sha256.h"
#include "kiln/error.h"
#include "kiln/ops.h"

namespace kiln::savepoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kFormat = "kiln savepoint";
constexpr int kVersion = 1;
constexpr std::string_view kStepPrefix = "step-";

std::mutex hook_mutex;
CommitHook& hook() {
  static auto* commit_hook = new CommitHook();
  return *commit_hook;
}

void reached(std::string_view stage) {
  CommitHook copy;
  {
    std::lock_guard lock(hook_mutex);
    copy = hook();
  }
  if (copy) copy(stage);
}

[[noreturn]] void fail_write(const fs::path& path, std::string_view what, int error = 0) {
  fail(kUnknownSite,
       fmt::format("savepoint: cannot {} '{}'{}", what, path.string(),
                   error ? fmt::format(": {}", std::strerror(error)) : ""),
       error == ENOSPC || error == EDQUOT ? "free space on that file system" : "");
}

[[noreturn]] void fail_load(const fs::path& path, std::string_view what) {
  fail(kUnknownSite, fmt::format("savepoint '{}': {}", path.string(), what));
}

void fsync_path(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_write(path, "open the directory", errno);
  int synced = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (synced != 0) fail_write(path, "fsync the directory", error);
}

// The step of a "step-<digits>" name, or -1.
int64_t step_of(const std::string& name) {
  if (!name.starts_with(kStepPrefix)) return -1;
  std::string_view digits = std::string_view(name).substr(kStepPrefix.size());
  int64_t step = -1;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (error != std::errc() || end != digits.data() + digits.size() || digits.empty()) return -1;
  return step;
}

bool is_tree_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A manifest or marker: small JSON files, read within the records' limit.
std::string read_record(const fs::path& path) {
  try {
    return io::read_regular_file(path, io::kMaxRecordBytes);
  } catch (const Error& error) {
    fail_load(path.parent_path(), error.what());
  }
}

// JSON of the savepoint's own files, nested no deeper than kiln writes it.
json parse_record(const fs::path& dir, std::string_view name, const std::string& text) {
  try {
    return io::parse_json(text, name);
  } catch (const Error& error) {
    fail_load(dir, error.what());
  }
}

// Removing a savepoint: the marker first, durably, so a crash part-way leaves an unmarked
// directory (ignored, and removed later) rather than a marked, half-deleted one.
void unmark_and_remove(const fs::path& path, std::string_view stage = {}) {
  std::error_code error;
  if (fs::remove(path / kMarkerName, error)) fsync_path(path);
  if (error) fail_write(path / kMarkerName, "remove", error.value());
  if (!stage.empty()) reached(stage);
  fs::remove_all(path, error);
  if (error) fail_write(path, "remove", error.value());
}

json shape_json(const Array& array) {
  json shape = json::array();
  for (int64_t dim : array.shape().dims()) shape.push_back(dim);
  return shape;
}

json leaf_record(const std::pair<std::string, Array>& leaf) {
  return {{"path", leaf.first},
          {"dtype", dtype_name(leaf.second.dtype())},
          {"shape", shape_json(leaf.second)}};
}

// One of a Snapshot's JSON texts as the manifest holds it: an object, or the save fails.
json object_from_text(const fs::path& temporary, std::string_view name, const std::string& text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) {
    fail_write(temporary, fmt::format("save {} that is not a JSON object into", name));
  }
  return value;
}

// Checks the manifest's shape and returns it; every problem names the manifest.
json parse_manifest(const fs::path& dir, const std::string& text) {
  json manifest = parse_record(dir, kManifestName, text);
  auto require = [&](const char* key, bool ok, std::string_view expected) {
    if (!manifest.is_object() || !manifest.contains(key) || !ok) {
      fail_load(dir, fmt::format("{}: \"{}\" must be {}", kManifestName, key, expected));
    }
  };
  require("format", io::string_field(manifest, "format") == kFormat,
          fmt::format("\"{}\"", kFormat));
  require("version", manifest["version"].is_number_integer(), "an integer");
  if (manifest["version"].get<int64_t>() != kVersion) {
    fail_load(dir, fmt::format("{} has version {}; this kiln reads version {}", kManifestName,
                               manifest["version"].get<int64_t>(), kVersion));
  }
  require("step",
          manifest["step"].is_number_unsigned() &&
              manifest["step"].get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX),
          "a non-negative integer below 2^63");
  require("trees", manifest["trees"].is_object(), "an object");
  require("files", manifest["files"].is_object(), "an object");
  require("state", manifest["state"].is_object(), "an object");
  require("identity", manifest["identity"].is_object(), "an object");
  if (manifest.contains("run_id")) require("run_id", manifest["run_id"].is_string(), "a string");
  return manifest;
}

// The member `key` of `object`, or null when there is none: a const json's operator[] must
// not be asked for a key it lacks (an assertion, or undefined behaviour without them).
const json& member(const json& object, const char* key) {
  static const json kNone;
  if (!object.is_object()) return kNone;
  auto found = object.find(key);
  return found == object.end() ? kNone : *found;
}

// A name the manifest gives a file or a tree must stay inside the savepoint: a plain
// name, not a path ("/etc/passwd" or "../x" would make `dir / name` point elsewhere).
void check_plain_name(const fs::path& dir, std::string_view what, const std::string& name) {
  bool plain = !name.empty() && name.front() != '.' && name.find('/') == std::string::npos &&
               name.find('\0') == std::string::npos;
  if (!plain) {
    fail_load(dir, fmt::format("{}: {} \"{}\" is not a plain name inside the savepoint",
                               kManifestName, what, name));
  }
}

void check_file(const fs::path& dir, const std::string& name, const json& record) {
  check_plain_name(dir, "the file", name);
  fs::path path = dir / name;
  const json& bytes = member(record, "bytes");
  const json& sha256 = member(record, "sha256");
  if (!sha256.is_string() || !bytes.is_number_unsigned()) {
    fail_load(dir, fmt::format("{}: the entry of \"files\" for {} must hold \"bytes\" and "
                               "\"sha256\"",
                               kManifestName, name));
  }
  std::error_code error;
  if (!fs::is_regular_file(path, error)) {
    fail_load(dir, fmt::format("{} is missing (the manifest lists it)", name));
  }
  uint64_t size = fs::file_size(path, error);
  uint64_t expected = bytes.get<uint64_t>();
  if (error || size != expected) {
    fail_load(dir, fmt::format("{} has {} bytes, the manifest says {} (truncated or replaced?)",
                               name, size, expected));
  }
  std::string digest = io::sha256_file(path);
  if (digest != sha256.get<std::string>()) {
    fail_load(dir, fmt::format("{}: SHA-256 {} differs from the manifest's {} (the file is "
                               "damaged)",
                               name, digest, sha256.get<std::string>()));
  }
}

NamedArrays load_tree(const fs::path& dir, const std::string& name, const json& record,
                      const json& files) {
  const json& leaves = member(record, "leaves");
  if (!leaves.is_array()) {
    fail_load(dir,
              fmt::format("{}: tree \"{}\" must hold a \"leaves\" array", kManifestName, name));
  }
  check_plain_name(dir, "the tree", name);
  NamedArrays arrays;
  if (leaves.empty()) return arrays;
  std::string file = name + ".safetensors";
  if (!files.contains(file)) {
    fail_load(dir, fmt::format("{}: tree \"{}\" has leaves but \"files\" has no {}", kManifestName,
                               name, file));
  }
  SafetensorsFile loaded = load_safetensors(dir / file);
  std::map<std::string, Array> by_name(loaded.arrays.begin(), loaded.arrays.end());
  for (const json& leaf : leaves) {
    if (!member(leaf, "path").is_string()) {
      fail_load(dir, fmt::format("{}: a leaf of tree \"{}\" has no \"path\"", kManifestName, name));
    }
    std::string path = member(leaf, "path").get<std::string>();
    auto found = by_name.find(path);
    if (found == by_name.end()) {
      fail_load(dir, fmt::format("{} has no tensor '{}' (the manifest lists it)", file, path));
    }
    const Array& array = found->second;
    // Compared as JSON: a dtype or shape of the wrong JSON type is a mismatch, not an
    // exception of the JSON library.
    const json& dtype = member(leaf, "dtype");
    const json& shape = member(leaf, "shape");
    if (dtype != json(std::string(dtype_name(array.dtype()))) || shape != shape_json(array)) {
      fail_load(dir, fmt::format("{}: tensor '{}' is {}, the manifest says {}{}", file, path,
                                 array.aval().to_string(), dtype.dump(), shape.dump()));
    }
    arrays.emplace_back(path, array);
    by_name.erase(found);
  }
  if (!by_name.empty()) {
    fail_load(dir, fmt::format("{} holds tensor '{}', which the manifest does not list", file,
                               by_name.begin()->first));
  }
  return arrays;
}

}  // namespace

SnapshotTree copy_tree(const std::string& name, const Tree& tree) {
  if (tree.is_leaf()) {
    fail(kUnknownSite,
         fmt::format("savepoint: the tree '{}' is a single leaf, which has no path to name it",
                     name));
  }
  SnapshotTree copy;
  copy.structure = tree.structure().to_string();
  Array always = full(Shape{}, 1.0, DType::bool_);
  for (auto& [path, leaf] : tree.leaves_with_paths()) {
    // A select copies bits exactly (x + 0 would turn -0.0 into +0.0).
    copy.leaves.emplace_back(path, where(always, leaf, leaf));
  }
  return copy;
}

int64_t Snapshot::size_bytes() const {
  int64_t total = 0;
  for (const auto& [name, tree] : trees) {
    for (const auto& [path, leaf] : tree.leaves) total += leaf.size_bytes();
  }
  return total;
}

fs::path savepoint_path(const fs::path& dir, int64_t step) {
  return dir / fmt::format("{}{:08d}", kStepPrefix, step);
}

fs::path write(const fs::path& dir, const Snapshot& snapshot) {
  if (snapshot.step < 0) fail_write(dir, fmt::format("save step {} (negative)", snapshot.step));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail_write(dir, "create the directory", error.value());
  fs::path final_path = savepoint_path(dir, snapshot.step);
  fs::path temporary =
      dir / fmt::format(".{}.tmp-{}", final_path.filename().string(), static_cast<int>(::getpid()));
  fs::remove_all(temporary, error);  // left by an earlier crash of a process with our pid
  if (!fs::create_directory(temporary, error) || error) {
    fail_write(temporary, "create the directory", error.value());
  }
  try {
    json manifest = {
        {"format", kFormat},
        {"version", kVersion},
        {"step", snapshot.step},
        {"state", object_from_text(temporary, "a state", snapshot.state_json)},
        {"identity", object_from_text(temporary, "an identity", snapshot.identity_json)},
        {"trees", json::object()},
        {"files", json::object()}};
    if (!snapshot.run_id.empty()) manifest["run_id"] = snapshot.run_id;
    for (const auto& [name, tree] : snapshot.trees) {
      if (!is_tree_name(name) || manifest["trees"].contains(name)) {
        fail_write(temporary, fmt::format("save a tree named '{}' (names are unique, of letters, "
                                          "digits and '_')",
                                          name));
      }
      json leaves = json::array();
      for (const auto& leaf : tree.leaves) leaves.push_back(leaf_record(leaf));
      manifest["trees"][name] = {{"structure", tree.structure}, {"leaves", leaves}};
      if (tree.leaves.empty()) continue;
      std::string file = name + ".safetensors";
      // One leaf at a time on the host.
      save_safetensors(
          temporary / file, tree.leaves,
          {{"format", "kiln savepoint"}, {"tree", name}, {"step", std::to_string(snapshot.step)}});
      manifest["files"][file] = {{"bytes", fs::file_size(temporary / file)},
                                 {"sha256", io::sha256_file(temporary / file)}};
      reached("file " + file);
    }
    std::string manifest_text = io::json_text(manifest, 2) + "\n";
    io::write_file_atomically(temporary / kManifestName, manifest_text);
    reached("manifest");
    fsync_path(temporary);
    // A savepoint of this step from before (damaged, being redone) makes way; it is
    // unmarked first, so a crash here leaves no marked directory with other contents.
    if (fs::exists(final_path, error)) unmark_and_remove(final_path);
    if (::rename(temporary.c_str(), final_path.c_str()) != 0) {
      fail_write(final_path, "rename the temporary directory to", errno);
    }
    fsync_path(dir);
    reached("renamed");
    json marker = {{"manifest_sha256", io::sha256_hex(manifest_text)}};
    try {
      io::write_file_atomically(final_path / kMarkerName, marker.dump() + "\n");
    } catch (...) {
      fs::remove_all(final_path, error);  // renamed but never committed: not a savepoint
      throw;
    }
    reached("committed");
  } catch (...) {
    fs::remove_all(temporary, error);
    throw;
  }
  return final_path;
}

std::vector<Committed> list_committed(const fs::path& dir) {
  std::vector<Committed> found;
  std::error_code error;
  if (!fs::exists(fs::symlink_status(dir, error))) return found;  // none written yet
  // Anything else in its place is an error, not "no savepoints": a resume that took it for
  // none would start again from step 0 and cut metrics.jsonl back to nothing.
  if (!fs::is_directory(dir, error)) {
    fail_load(dir,
              "is not a directory (savepoints/ holds one directory per savepoint); move "
              "it away to start the run again from step 0");
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    int64_t step = step_of(entry.path().filename().string());
    std::error_code entry_error;
    if (step < 0 || !entry.is_directory(entry_error)) continue;
    if (!fs::is_regular_file(entry.path() / kMarkerName, entry_error)) continue;
    found.push_back({step, entry.path()});
  }
  if (error) fail_load(dir, fmt::format("cannot be listed: {}", error.message()));
  std::sort(found.begin(), found.end(),
            [](const Committed& a, const Committed& b) { return a.step < b.step; });
  return found;
}

const NamedArrays& Loaded::tree(std::string_view name) const {
  for (const auto& [tree_name, arrays] : trees) {
    if (tree_name == name) return arrays;
  }
  fail_load(path, fmt::format("holds no tree \"{}\"", name));
}

Loaded load(const fs::path& savepoint_dir) {
  const fs::path& dir = savepoint_dir;
  std::error_code error;
  if (!fs::is_regular_file(dir / kMarkerName, error)) {
    fail_load(dir, fmt::format("has no {} marker: the save never finished", kMarkerName));
  }
  if (!fs::is_regular_file(dir / kManifestName, error)) {
    fail_load(dir, fmt::format("{} is missing", kManifestName));
  }
  std::string manifest_text = read_record(dir / kManifestName);
  json marker = parse_record(dir, kMarkerName, read_record(dir / kMarkerName));
  if (!marker.is_object() || !marker["manifest_sha256"].is_string()) {
    fail_load(dir, fmt::format("{} must hold \"manifest_sha256\"", kMarkerName));
  }
  if (marker["manifest_sha256"].get<std::string>() != io::sha256_hex(manifest_text)) {
    fail_load(dir, fmt::format("{} does not match the SHA-256 in {} (the manifest is damaged)",
                               kManifestName, kMarkerName));
  }
  json manifest = parse_manifest(dir, manifest_text);
  for (const auto& [name, record] : manifest["files"].items()) check_file(dir, name, record);
  Loaded loaded;
  loaded.step = manifest["step"].get<int64_t>();
  loaded.path = dir;
  loaded.run_id = manifest.value("run_id", "");
  loaded.state_json = io::json_text(manifest["state"]);
  loaded.identity_json = io::json_text(manifest["identity"]);
  for (const auto& [name, record] : manifest["trees"].items()) {
    loaded.trees.emplace_back(name, load_tree(dir, name, record, manifest["files"]));
  }
  return loaded;
}

Loaded load_latest(const fs::path& dir, std::vector<std::string>* skipped,
                   const std::function<void(const Loaded&)>& usable) {
  std::vector<Committed> committed = list_committed(dir);
  std::vector<std::string> problems;
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    try {
      Loaded loaded = load(it->path);
      if (usable) usable(loaded);
      return loaded;
    } catch (const std::exception& error) {
      // Any failure, not only kiln's own errors: a savepoint whose names are not UTF-8 made
      // nlohmann throw, and resume stopped instead of falling back to the one before.
      problems.push_back(fmt::format("{}: {}", it->path.filename().string(), error.what()));
      if (skipped) skipped->push_back(problems.back());
    }
  }
  std::string detail;
  for (const std::string& problem : problems) detail += "\n  " + problem;
  fail(kUnknownSite,
       fmt::format("no usable savepoint in '{}'{}", dir.string(),
                   problems.empty() ? " (none was committed)"
                                    : fmt::format("; every committed one is damaged:{}", detail)));
}

Tree restore_tree(const Loaded& loaded, const std::string& tree_name, const Tree& like) {
  const NamedArrays& arrays = loaded.tree(tree_name);
  auto expected = like.leaves_with_paths();
  auto describe = [](const std::pair<std::string, Array>& leaf) {
    return fmt::format("'{}' {}", leaf.first, leaf.second.aval().to_string());
  };
  for (size_t i = 0; i < std::max(arrays.size(), expected.size()); ++i) {
    std::string saved = i < arrays.size() ? describe(arrays[i]) : "nothing";
    std::string wanted = i < expected.size() ? describe(expected[i]) : "nothing";
    if (saved != wanted) {
      fail_load(loaded.path,
                fmt::format("tree \"{}\" does not fit this run: leaf {} is {} in the savepoint, "
                            "{} in the model of the config",
                            tree_name, i, saved, wanted));
    }
  }
  std::vector<Array> leaves;
  for (const auto& [path, array] : arrays) leaves.push_back(array);
  return unflatten(like.structure(), leaves);
}

std::vector<int64_t> apply_retention(const fs::path& dir, const Retention& retention) {
  std::vector<Committed> committed = list_committed(dir);
  size_t keep_last = static_cast<size_t>(std::max<int64_t>(retention.keep_last, 1));
  std::vector<int64_t> removed;
  for (size_t i = 0; i + keep_last < committed.size(); ++i) {
    int64_t step = committed[i].step;
    if (retention.keep_every_steps > 0 && step % retention.keep_every_steps == 0) continue;
    unmark_and_remove(committed[i].path, fmt::format("unmarked {}", step));
    removed.push_back(step);
  }
  return removed;
}

void remove_uncommitted(const fs::path& dir) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) return;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    bool temporary = name.starts_with(".step-") && name.find(".tmp-") != std::string::npos;
    bool unmarked = step_of(name) >= 0 && !fs::exists(entry.path() / kMarkerName, error);
    if ((temporary || unmarked) && entry.is_directory(error)) stale.push_back(entry.path());
  }
  std::sort(stale.begin(), stale.end());
  for (const fs::path& path : stale) fs::remove_all(path, error);
}

void set_commit_hook_for_testing(CommitHook commit_hook) {
  std::lock_guard lock(hook_mutex);
  hook() = std::move(commit_hook);
}

}  // namespace kiln::savepoint

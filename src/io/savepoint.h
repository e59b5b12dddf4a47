// Savepoints: the complete train state of a run at a step boundary (params, optimizer and
// model state, RNG keys, data position, counters), written so that a crash at any moment
// leaves every earlier savepoint intact and nothing a reader would take for a new one.
// (kiln::checkpoint is rematerialisation, as in JAX; train-state saves are savepoints.)
//
// On disk, under a run's savepoints/ directory:
//   step-00000042/             one committed savepoint
//     <tree>.safetensors       one file per tree (params, opt_state, ...), leaves by path
//     manifest.json            step, state, identity, each tree's leaves, each file's SHA-256
//     COMMITTED                the commit marker: the manifest's SHA-256
//   .step-00000043.tmp-<pid>/  a save in progress (or abandoned by a crash): ignored
// The protocol (write()): files into the temporary directory, each fsynced; the manifest;
// fsync the directory; rename it to step-N; fsync savepoints/; then the marker, written
// atomically. Readers take only step-N directories holding a marker that matches their
// manifest; the latest savepoint is found by scanning them, never through a pointer file.
// See docs/savepoints.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/safetensors.h"
#include "kiln/tree.h"

namespace kiln::savepoint {

// One tree of the train state as a savepoint holds it: private copies of its leaves in
// flatten order under their paths, and its structure (TreeDef::to_string, recorded in the
// manifest for people).
struct SnapshotTree {
  std::string structure;
  NamedArrays leaves;
};

// Queues a copy of each of `tree`'s leaves (a select of the leaf with itself: the same
// bits, into a buffer of its own) and returns at once. The copies are the snapshot: the
// next step may donate and overwrite the originals, never these, and any thread may read
// them. A tree that is a single leaf has no path: it is an error naming `name`.
SnapshotTree copy_tree(const std::string& name, const Tree& tree);

// The train state at a step boundary, so that another thread can write it while training
// goes on. It holds one copy of the state's arrays; writing brings one leaf at a time to
// the host.
struct Snapshot {
  int64_t step = 0;
  // Tree name (a file stem: letters, digits and '_') -> leaves. Empty trees are kept in
  // the manifest without a file.
  std::vector<std::pair<std::string, SnapshotTree>> trees;
  // Two objects the manifest holds as given, as JSON text (so that this header needs no
  // JSON library): the data position and counters, and what makes the run this run.
  // write() refuses text that is not a JSON object.
  std::string state_json = "{}";
  std::string identity_json = "{}";
  // The run whose state this is (its directory's name), so that a savepoint copied into
  // another run's directory is known as such; "" for none.
  std::string run_id;
  int64_t size_bytes() const;
};

inline constexpr std::string_view kManifestName = "manifest.json";
inline constexpr std::string_view kMarkerName = "COMMITTED";

// dir/step-00000042 (at least 8 digits, so names sort by step).
std::filesystem::path savepoint_path(const std::filesystem::path& dir, int64_t step);

// Writes `snapshot` as a committed savepoint under `dir` (created when missing) and returns
// its directory. A savepoint of the same step already there (a damaged one being redone)
// is replaced. On error (a full disk, a failed write) the temporary is removed and every
// other savepoint is as it was; the error names the file and the reason.
std::filesystem::path write(const std::filesystem::path& dir, const Snapshot& snapshot);

struct Committed {
  int64_t step = 0;
  std::filesystem::path path;
};
// The committed savepoints under `dir` (by their marker; contents not checked), oldest
// first. Temporaries, unmarked directories and other names are ignored; a missing `dir`
// has none; a `dir` that is not a directory, or cannot be listed, is an error.
std::vector<Committed> list_committed(const std::filesystem::path& dir);

struct Loaded {
  int64_t step = 0;
  std::filesystem::path path;
  std::string run_id;  // "" in a savepoint that names no run (kiln before issue 43)
  // The manifest's "state" and "identity" objects as compact JSON text (Snapshot's fields).
  std::string state_json;
  std::string identity_json;
  // Tree name -> its leaves, in the manifest's (flatten) order.
  std::vector<std::pair<std::string, NamedArrays>> trees;
  const NamedArrays& tree(std::string_view name) const;
};

// Reads one committed savepoint, checking the marker against the manifest, each file's
// size and SHA-256 against the manifest, and each tensor's name, dtype and shape against
// the manifest's leaves. Errors name the savepoint, the file and what is wrong.
Loaded load(const std::filesystem::path& savepoint_dir);

// The newest committed savepoint under `dir` that loads and that `usable` (when given)
// accepts by returning; each newer one that does not load, or that `usable` throws for, is
// skipped, with a line in `skipped` saying which and why ("step-00000042: ..."). An error
// when there is none (naming `dir`, and every damaged one).
Loaded load_latest(const std::filesystem::path& dir, std::vector<std::string>* skipped,
                   const std::function<void(const Loaded&)>& usable = {});

// The leaves of `tree_name` arranged as `like` (the freshly initialised tree of the same
// config): every path, dtype and shape must match; an error names the first that does not.
Tree restore_tree(const Loaded& loaded, const std::string& tree_name, const Tree& like);

// Which committed savepoints to keep: the `keep_last` newest (at least 1), and every one
// whose step is a multiple of `keep_every_steps` (0: none kept for that reason).
struct Retention {
  int64_t keep_last = 3;
  int64_t keep_every_steps = 0;
};
// Deletes the others, oldest first: the marker goes first (made durable), so an
// interrupted deletion leaves an unmarked directory, never a damaged committed one. Returns
// the steps deleted.
std::vector<int64_t> apply_retention(const std::filesystem::path& dir, const Retention& retention);

// Removes temporaries and unmarked step directories left by a crash. Only the run's own
// process may call it (a save of another process would be removed).
void remove_uncommitted(const std::filesystem::path& dir);

// A test seam for crash tests: called with each step of the protocol as it completes
// ("file <name>", "manifest", "renamed", "committed", "unmarked <step>"), so a test can end
// the process there. An empty hook (the default) does nothing.
using CommitHook = std::function<void(std::string_view stage)>;
void set_commit_hook_for_testing(CommitHook hook);

}  // namespace kiln::savepoint

// The background savepoint writer: at a step boundary the trainer takes a Snapshot
// (private copies of the state's arrays, queued behind the step, so it does not wait for
// them) and hands it over; one thread brings each leaf to the host, writes it with the
// commit protocol and applies the retention rule, while training goes on. At most one save
// is in flight: start() waits for the previous one, so memory holds at most one extra copy
// of the state (and one leaf on its way to the file). A save that fails is reported by the
// next take_outcomes() (the trainer asks each step), and since a failed save only ever
// removes its own temporary, earlier savepoints stay.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "base/background_worker.h"
#include "io/savepoint.h"

namespace kiln::savepoint {

// How a finished save went.
struct Outcome {
  int64_t step = 0;
  std::filesystem::path path;          // the committed savepoint (empty on error)
  std::string error;                   // empty on success
  std::vector<int64_t> removed_steps;  // by the retention rule
  double seconds = 0;                  // writing, committing and pruning
};

class AsyncWriter {
 public:
  AsyncWriter(std::filesystem::path dir, Retention retention);
  ~AsyncWriter();  // waits for the save in flight
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;

  // Waits for the save in flight (if any), then starts writing `snapshot`.
  void start(Snapshot snapshot);
  // Blocks until no save is in flight.
  void wait();
  bool busy() const;
  // The outcomes of the saves finished since the last call, oldest first.
  std::vector<Outcome> take_outcomes();

 private:
  // Writes each snapshot in turn; a failure becomes its outcome, not an error.
  BatchProgress save(std::vector<Snapshot>& snapshots);

  std::filesystem::path dir_;
  Retention retention_;
  std::mutex outcomes_mutex_;
  std::vector<Outcome> outcomes_;
  // One snapshot at most, queued or being written (capacity 1).
  BackgroundWorker<Snapshot> worker_;  // last: its thread uses the members above
};

}  // namespace kiln::savepoint

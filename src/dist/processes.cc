// The MPI job (processes.h). all_gather is built from non-blocking point-to-point
// messages rather than MPI_Allgather: a blocking collective cannot be given a deadline,
// and only per-peer messages tell which rank is missing when one is.
#include "dist/processes.h"

// The C API only: Open MPI's deprecated C++ bindings stay out.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "kiln/error.h"

namespace kiln::dist {
namespace {

struct Job {
  bool started = false;
  int rank = 0;
  int size = 1;
  int64_t exchanges = 0;  // all_gather calls so far: the sequence number of the last one
  int64_t bytes_sent = 0;
  bool exit_together = false;  // exit_together() was called
};

Job& job() {
  static Job state;
  return state;
}

bool launched_by_mpirun() {
  // Open MPI's launcher sets these in every process it starts (PMIx's for its newer ones).
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

void check_mpi(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(kUnknownSite, fmt::format("{} failed: {}", call, std::string_view(text, length)));
}

// KILN_DIST_FAULT=hang:RANK:N or exit:RANK:N makes rank RANK hang (sleep) or exit with
// status 9 on entering its N-th exchange (from 1): how the tests show that a dead or hung
// rank stops the job with its name.
void inject_fault(int64_t exchange) {
  const char* text = std::getenv("KILN_DIST_FAULT");
  if (text == nullptr || *text == '\0') return;
  char kind[8] = {};
  int rank = -1;
  long long at = -1;
  if (std::sscanf(text, "%7[a-z]:%d:%lld", kind, &rank, &at) != 3 ||
      (std::strcmp(kind, "hang") != 0 && std::strcmp(kind, "exit") != 0)) {
    fail(kUnknownSite, fmt::format("KILN_DIST_FAULT={} is not a fault", text),
         "write hang:RANK:EXCHANGE or exit:RANK:EXCHANGE (tests only)");
  }
  if (rank != job().rank || at != exchange) return;
  std::fprintf(stderr, "rank %d: KILN_DIST_FAULT: %s at exchange %lld\n", rank, kind, at);
  std::fflush(stderr);
  if (std::strcmp(kind, "exit") == 0) std::_Exit(9);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// A message: the exchange's sequence number and name, then the payload; the receiver
// checks the first two, so that ranks that have diverged say so instead of mixing up
// their data.
std::string framed(int64_t sequence, std::string_view what, std::string_view payload) {
  std::string out(sizeof(sequence), '\0');
  std::memcpy(out.data(), &sequence, sizeof(sequence));
  out.append(what);
  out.push_back('\0');
  out.append(payload);
  return out;
}

std::string unframed(const std::string& message, int64_t sequence, std::string_view what,
                     int from) {
  int64_t theirs = -1;
  size_t name_end = message.find('\0', sizeof(theirs));
  if (message.size() < sizeof(theirs) || name_end == std::string::npos) {
    fail(kUnknownSite,
         fmt::format("a malformed message from rank {} in exchange '{}'", from, what));
  }
  std::memcpy(&theirs, message.data(), sizeof(theirs));
  std::string_view their_what(message.data() + sizeof(theirs), name_end - sizeof(theirs));
  if (theirs != sequence || their_what != what) {
    fail(kUnknownSite,
         fmt::format("rank {} is in exchange #{} '{}' while rank {} is in #{} '{}': the ranks "
                     "have diverged",
                     from, theirs, their_what, job().rank, sequence, what),
         "every rank must run the same command with the same config and data");
  }
  return message.substr(name_end + 1);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

void start_if_launched(int* argc, char*** argv) {
  if (job().started || !launched_by_mpirun()) return;
  int provided = 0;
  // Only the main thread calls MPI; device and worker threads never do.
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  job().started = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &job().rank);
  MPI_Comm_size(MPI_COMM_WORLD, &job().size);
}

void stop() {
  if (!job().started) return;
  job().started = false;
  MPI_Finalize();
}

bool active() {
  return job().started;
}

int rank() {
  return job().rank;
}

int size() {
  return job().size;
}

int64_t bytes_sent() {
  return job().bytes_sent;
}

double timeout_seconds() {
  const char* text = std::getenv("KILN_DIST_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return 300;
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0)) {
    fail(kUnknownSite, fmt::format("KILN_DIST_TIMEOUT_S={} is not a positive number", text),
         "give the seconds one exchange between ranks may wait, e.g. KILN_DIST_TIMEOUT_S=60");
  }
  return seconds;
}

namespace {

// One exchange: `payload(peer)` to each other rank, and what each sent this rank, in rank
// order (this rank's own entry is `own`).
std::vector<std::string> exchange(std::string_view what, std::string own,
                                  const std::function<std::string_view(int peer)>& payload) {
  Job& j = job();
  const int64_t sequence = ++j.exchanges;
  std::vector<std::string> out(static_cast<size_t>(j.size));
  out[static_cast<size_t>(j.rank)] = std::move(own);
  if (!j.started || j.size == 1) return out;
  inject_fault(sequence);

  // Tags keep consecutive exchanges apart (MPI guarantees tags up to 32767).
  const int tag = static_cast<int>(sequence % 32767);
  std::vector<std::string> messages;  // alive until every send has completed
  std::vector<MPI_Request> sends;
  for (int peer = 0; peer < j.size; ++peer) {
    if (peer == j.rank) continue;
    messages.push_back(framed(sequence, what, payload(peer)));
    const std::string& message = messages.back();
    if (message.size() > static_cast<size_t>(INT_MAX)) {
      fail(kUnknownSite, fmt::format("exchange '{}' holds {} bytes; one message carries at most {}",
                                     what, message.size(), INT_MAX));
    }
  }
  size_t next = 0;
  for (int peer = 0; peer < j.size; ++peer) {
    if (peer == j.rank) continue;
    const std::string& message = messages[next++];
    MPI_Request request;
    check_mpi(MPI_Isend(message.data(), static_cast<int>(message.size()), MPI_BYTE, peer, tag,
                        MPI_COMM_WORLD, &request),
              "MPI_Isend");
    sends.push_back(request);
    j.bytes_sent += static_cast<int64_t>(message.size());
  }

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds()));
  std::vector<int> waiting;
  for (int peer = 0; peer < j.size; ++peer) {
    if (peer != j.rank) waiting.push_back(peer);
  }
  int idle_polls = 0;
  while (!waiting.empty()) {
    bool progressed = false;
    for (size_t k = 0; k < waiting.size();) {
      int peer = waiting[k], found = 0;
      MPI_Status status;
      check_mpi(MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &found, &status), "MPI_Iprobe");
      if (!found) {
        ++k;
        continue;
      }
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      std::string received(static_cast<size_t>(count), '\0');
      check_mpi(
          MPI_Recv(received.data(), count, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
      out[static_cast<size_t>(peer)] = unframed(received, sequence, what, peer);
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(k));
      progressed = true;
    }
    if (waiting.empty()) break;
    if (Clock::now() > deadline) {
      fail(kUnknownSite,
           fmt::format("nothing from rank {} within {} s in exchange #{} '{}': {} died or hangs",
                       rank_list(waiting), timeout_seconds(), sequence, what,
                       waiting.size() == 1 ? "it" : "they"),
           "the job stops; the last committed savepoint is intact (kiln resume continues from "
           "it). KILN_DIST_TIMEOUT_S sets the wait");
    }
    // Spin briefly (a step's exchange is usually answered within microseconds), then
    // yield the core to the device threads.
    idle_polls = progressed ? 0 : idle_polls + 1;
    if (idle_polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // The peers received everything (each of them got ours to get this far only if they
  // sent theirs; ours may still be in flight, so wait for it, with the same deadline).
  for (;;) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE),
              "MPI_Testall");
    if (done) break;
    if (Clock::now() > deadline) {
      fail(kUnknownSite, fmt::format("exchange #{} '{}': a rank did not take this rank's "
                                     "message within {} s",
                                     sequence, what, timeout_seconds()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return out;
}

}  // namespace

std::vector<std::string> all_gather(std::string_view what, std::string_view mine) {
  return exchange(what, std::string(mine), [mine](int) { return mine; });
}

std::vector<std::string> all_to_all(std::string_view what,
                                    const std::vector<std::string>& to_each) {
  if (to_each.size() != static_cast<size_t>(size())) {
    fail(kUnknownSite,
         fmt::format("exchange '{}': {} payloads for {} ranks", what, to_each.size(), size()));
  }
  return exchange(what, to_each[static_cast<size_t>(rank())], [&to_each](int peer) {
    return std::string_view(to_each[static_cast<size_t>(peer)]);
  });
}

void exit_together() {
  job().exit_together = true;
}

bool exiting_together() {
  return job().exit_together;
}

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (job().started) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace kiln::dist

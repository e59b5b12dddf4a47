// The processes of one job that mpirun (Open MPI) started: which one this is, how many
// there are, and the exchanges training needs between them: every rank's bytes to every
// rank (all_gather), and a payload of its own to each rank (all_to_all). The exchange is bounded in
// time, so that a rank that died or hangs stops the whole job with a message naming it, instead of
// leaving the others waiting forever (docs/distributed.md).
//
// A kiln started without mpirun never touches MPI: rank 0 of 1, and all_gather returns its
// own bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::dist {

// Starts MPI when mpirun started this process (Open MPI's environment says so). Called
// once, first thing in main(), before any thread starts.
void start_if_launched(int* argc, char*** argv);
// MPI_Finalize, when start_if_launched started MPI. Every rank calls it on the way out.
void stop();

// Whether this process is a rank of an MPI job (also under `mpirun -np 1`).
bool active();
int rank();
int size();

// Every rank's `mine`, in rank order. `what` names the exchange in errors; every rank must
// be in the same exchange (the same `what`, the same count of exchanges before it), else
// the ranks have diverged and this is an error naming both. A rank from which nothing
// arrives within timeout_seconds() is named in the error (kiln::Error), which the caller
// reports before abort_job stops the others.
std::vector<std::string> all_gather(std::string_view what, std::string_view mine);

// `to_each[peer]` to each rank (to_each has one entry per rank; this rank's own is returned
// as is), and what each rank sent this one, in rank order: the first half of a
// reduce-scatter. Errors, deadline and ordering as all_gather.
std::vector<std::string> all_to_all(std::string_view what, const std::vector<std::string>& to_each);

// The bytes this rank has sent to other ranks in all_gather and all_to_all so far (every message to
// every peer, framing included).
int64_t bytes_sent();

// KILN_DIST_TIMEOUT_S (default 300): how long one exchange waits for the slowest rank.
double timeout_seconds();

// Stops every process of the job with `code`: after an error that only this rank saw, so
// that no other rank waits for it.
[[noreturn]] void abort_job(int code);

// Marks this process's coming exit as one that every rank reaches at the same point (a
// stop they agreed on, a non-finite loss they all computed): the job then ends with
// stop() on every rank, not abort_job, which would kill rank 0 while it still writes the
// run's last savepoint and run.json.
void exit_together();
bool exiting_together();

}  // namespace kiln::dist

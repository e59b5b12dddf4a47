// What the ranks of an MPI job agree on before and while they train (docs/distributed.md):
// one run identity, rank 0's view of the run directory, a stop request seen by any rank,
// and, at the end, the same params on every rank. Outside an MPI job each is a no-op (one
// rank agrees with itself).
#pragma once

#include <string>
#include <string_view>

#include "kiln/tree.h"
#include "train/run_identity.h"

namespace kiln::train {

// Fails on every rank, naming each rank whose identity (run_identity) differs from rank
// 0's and how ("rank 1: config train.epochs: 2 -> 3"), before anything is written.
void agree_on_identity(const RunIdentity& identity);

// Rank 0's `text` on every rank (the others' own is ignored).
std::string from_rank_zero(std::string_view what, const std::string& text);

// The stop signal any rank received (its first nonzero one, by rank order), else 0: every
// rank stops after the same step.
int agreed_stop_signal(int mine);

// Fails on every rank when the params' bytes differ between ranks (data-parallel replicas
// must stay bit-identical; a difference means the ranks did not compute the same update).
void agree_on_params(const Tree& params);

}  // namespace kiln::train

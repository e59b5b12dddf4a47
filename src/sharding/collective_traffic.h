// The bytes the collectives move between logical devices, per device: what
// kiln::collective_traffic() (kiln/sharding.h) reports and traces show.
#pragma once

#include <cstdint>

namespace kiln::spmd {

// One transfer of `bytes` from device `from` to device `to` (ids).
void count_transfer(int from, int to, int64_t bytes);
// The bytes every device has sent so far, summed (for a collective's trace event).
int64_t total_bytes_sent();

}  // namespace kiln::spmd

// The ranks' agreements (rank_agreement.h), each one exchange (dist::all_gather).
#include "train/rank_agreement.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "dist/processes.h"
#include "io/sha256.h"
#include "kiln/error.h"
#include "train/run_identity.h"
#include "train/train_step.h"

namespace kiln::train {

void agree_on_identity(const RunIdentity& identity) {
  std::vector<std::string> every = dist::all_gather("run identity", identity_json_text(identity));
  RunIdentity first = parse_identity(every[0]);
  std::string problems;
  for (size_t r = 1; r < every.size(); ++r) {
    for (const std::string& change : identity_differences(first, parse_identity(every[r]))) {
      problems += fmt::format("\n  rank {}: {}", r, change);
    }
  }
  if (problems.empty()) return;
  fail(kUnknownSite,
       fmt::format("the ranks of this job do not have one run identity (rank 0's -> theirs):{}",
                   problems),
       "every rank must run the same config (the same --set options) on the same data with "
       "the same kiln build and KILN_KERNELS");
}

std::string from_rank_zero(std::string_view what, const std::string& text) {
  return dist::all_gather(what, dist::rank() == 0 ? text : std::string())[0];
}

int agreed_stop_signal(int mine) {
  std::string bytes(sizeof(mine), '\0');
  std::memcpy(bytes.data(), &mine, sizeof(mine));
  for (const std::string& theirs : dist::all_gather("stop request", bytes)) {
    int signal = 0;
    std::memcpy(&signal, theirs.data(), sizeof(signal));
    if (signal != 0) return signal;
  }
  return 0;
}

void agree_on_params(const Tree& params) {
  if (dist::size() == 1) return;
  std::string bytes;
  for (const Array& leaf : on_one_device(params).leaves()) {
    HostArray host = leaf.to_host();
    bytes.append(reinterpret_cast<const char*>(host.bytes.data()), host.bytes.size());
  }
  std::vector<std::string> every = dist::all_gather("final params", io::sha256_hex(bytes));
  std::string problems;
  for (size_t r = 1; r < every.size(); ++r) {
    if (every[r] != every[0])
      problems += fmt::format("\n  rank {}: {} (rank 0: {})", r, every[r], every[0]);
  }
  if (problems.empty()) return;
  fail(kUnknownSite,
       fmt::format("the ranks finished with different params (sha256 of their bytes):{}", problems),
       "a kiln defect: please report it with the config and the mpirun command");
}

}  // namespace kiln::train

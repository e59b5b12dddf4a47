// One group of a collective: each member's value on its device, in group-index order, and
// the one way data moves between members (send), which counts the bytes each device sends
// and receives (collective_traffic.h).
#pragma once

#include <cstdint>
#include <vector>

#include "kiln/array.h"
#include "kiln/device.h"

namespace kiln::spmd {

class Group {
 public:
  Group(std::vector<Array> values, std::vector<Device*> devices, CallSite site)
      : values_(std::move(values)), devices_(std::move(devices)), site_(site) {}

  int64_t size() const { return static_cast<int64_t>(values_.size()); }
  const Array& value(int64_t member) const { return values_[static_cast<size_t>(member)]; }
  Device& device(int64_t member) const { return *devices_[static_cast<size_t>(member)]; }
  CallSite site() const { return site_; }

  // `x`, which member `from` holds, copied to member `to`'s device (asynchronously, as
  // device_put); its bytes count as sent by `from` and received by `to`.
  Array send(const Array& x, int64_t from, int64_t to) const;
  // `x` committed to member `to`'s device, where it already is (no bytes move).
  Array keep(const Array& x, int64_t to) const;

 private:
  std::vector<Array> values_;
  std::vector<Device*> devices_;
  CallSite site_;
};

}  // namespace kiln::spmd

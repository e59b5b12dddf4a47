// Traffic counters (collective_traffic.h, kiln::collective_traffic in kiln/sharding.h).
// A mutex, not atomics: a transfer is a copy of a block, which costs far more than a lock,
// and the table grows with the device ids it sees.
#include "sharding/collective_traffic.h"

#include <mutex>
#include <vector>

#include "kiln/sharding.h"
#include "sharding/collective_group.h"

namespace kiln {
namespace {

struct Table {
  std::mutex mutex;
  std::vector<DeviceTraffic> devices;
  int64_t total_sent = 0;

  DeviceTraffic& of(int id) {
    while (devices.size() <= static_cast<size_t>(id)) {
      devices.push_back(DeviceTraffic{static_cast<int>(devices.size()), 0, 0, 0, 0});
    }
    return devices[static_cast<size_t>(id)];
  }
};

Table& table() {
  static Table instance;
  return instance;
}

}  // namespace

namespace spmd {

void count_transfer(int from, int to, int64_t bytes) {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  DeviceTraffic& sender = t.of(from);
  sender.bytes_sent += bytes;
  ++sender.sends;
  DeviceTraffic& receiver = t.of(to);
  receiver.bytes_received += bytes;
  ++receiver.receives;
  t.total_sent += bytes;
}

int64_t total_bytes_sent() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.total_sent;
}

Array Group::send(const Array& x, int64_t from, int64_t to) const {
  Device& target = device(to);
  if (from != to) count_transfer(device(from).id(), target.id(), x.size_bytes());
  return device_put(x, target, site_);
}

Array Group::keep(const Array& x, int64_t to) const {
  return device_put(x, device(to), site_);
}

}  // namespace spmd

std::vector<DeviceTraffic> collective_traffic() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  std::vector<DeviceTraffic> out = t.devices;
  for (size_t id = out.size(); id < devices().size(); ++id) {
    out.push_back(DeviceTraffic{static_cast<int>(id), 0, 0, 0, 0});
  }
  return out;
}

void reset_collective_traffic() {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  t.devices.clear();
  t.total_sent = 0;
}

}  // namespace kiln

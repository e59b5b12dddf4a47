// The trace recorder: nothing is kept while off, a recording is bounded and says what it
// dropped, spans land on their thread's track with their arguments.
#include "base/trace_events.h"

#include <gtest/gtest.h>

#include <thread>

namespace kiln::trace {
namespace {

TEST(TraceEvents, NothingIsKeptWhileNoRecordingIsOn) {
  ASSERT_FALSE(recording());
  { Span span("test", "unseen"); }
  record(Event{});
  begin_recording();
  Recording recording = end_recording();
  EXPECT_TRUE(recording.events.empty());
  EXPECT_EQ(recording.dropped, 0);
}

TEST(TraceEvents, ASpanRecordsItsThreadsTrackNameAndArguments) {
  begin_recording();
  std::thread worker([] {
    set_thread_track(data_loader_track(2));
    Span span("data", "assemble batch");
    span.arg("batch", 7);
  });
  worker.join();
  { Span span("sync", "host sync"); }
  Recording recording = end_recording();
  ASSERT_EQ(recording.events.size(), 2u);
  const Event& batch = recording.events[0];
  EXPECT_EQ(batch.track, data_loader_track(2));
  EXPECT_EQ(batch.name, "assemble batch");
  EXPECT_EQ(batch.category, "data");
  ASSERT_EQ(batch.args.size(), 1u);
  EXPECT_EQ(batch.args[0].first, "batch");
  EXPECT_EQ(batch.args[0].second, 7);
  EXPECT_GE(batch.duration_ns, 0);
  EXPECT_EQ(recording.events[1].track, Track::kTrainingLoop);
  EXPECT_LE(recording.events[1].start_ns + recording.events[1].duration_ns, recording.duration_ns);
}

TEST(TraceEvents, ARecordingKeepsAtMostItsBoundAndCountsTheRest) {
  begin_recording(/*max_events=*/3);
  for (int i = 0; i < 10; ++i) record_counter(device_track(0), "live bytes", "cpu:0", i);
  Recording recording = end_recording();
  EXPECT_EQ(recording.events.size(), 3u);
  EXPECT_EQ(recording.dropped, 7);
  EXPECT_EQ(recording.events[2].args[0].second, 2);
}

TEST(TraceEvents, TracksHaveTheNamesAUserReads) {
  EXPECT_EQ(track_name(Track::kTrainingLoop), "training loop");
  EXPECT_EQ(track_name(Track::kSavepointWriter), "savepoint writer");
  EXPECT_EQ(track_name(data_loader_track(0)), "data loader 0");
  EXPECT_EQ(track_name(device_track(3)), "device cpu:3");
}

}  // namespace
}  // namespace kiln::trace

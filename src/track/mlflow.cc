#include "track/mlflow.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <mutex>
#include <optional>
#include <span>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/background_worker.h"
#include "track/mlflow_client.h"

namespace kiln::track {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// MLflow's limits per log-batch call (mlflow/utils/validation.py).
constexpr size_t kMetricsPerBatch = 1000;
constexpr size_t kParamsOrTagsPerBatch = 100;
constexpr size_t kMaxKeyLength = 250;
// A report lists the first problems; the rest are usually the same cause again.
constexpr size_t kMaxProblems = 6;

struct Param {
  std::string key, value;
};
struct Tag {
  std::string key, value;
};
// The variant's order is the order of MlflowCounts' fields (see count()).
using Record = std::variant<MlflowMetric, Param, Tag, MlflowArtifact>;

void count(MlflowCounts& counts, const Record& record, int64_t n = 1) {
  int64_t* fields[] = {&counts.metrics, &counts.params, &counts.tags, &counts.artifacts};
  *fields[record.index()] += n;
}

MlflowCounts operator+(MlflowCounts a, const MlflowCounts& b) {
  a.metrics += b.metrics;
  a.params += b.params;
  a.tags += b.tags;
  a.artifacts += b.artifacts;
  return a;
}

std::string plural(int64_t n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// MLflow refuses a whole batch for one bad key, so keys are checked as they are logged and
// only the bad record is lost. Its rule: letters, digits and _ - . : / and spaces, and a
// path that normalizes to itself (no empty, '.' or '..' segment, no leading '/').
std::string path_problem(std::string_view path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = std::min(path.find('/', start), path.size());
    auto segment = path.substr(start, slash - start);
    if (segment.empty() || segment == "." || segment == "..") {
      return "has an empty, '.' or '..' path segment";
    }
    start = slash + 1;
  }
  return {};
}

std::string key_problem(const std::string& key) {
  if (key.empty()) return "is empty";
  if (key.size() > kMaxKeyLength) {
    return fmt::format("has {} characters, more than MLflow's {}", key.size(), kMaxKeyLength);
  }
  for (unsigned char c : key) {
    bool allowed = c >= 0x80 || std::isalnum(c) ||
                   std::string_view("_-.:/ ").find(c) != std::string_view::npos;
    if (!allowed) return "holds a character other than letters, digits, _ - . : / and space";
  }
  return path_problem(key);
}

struct RecordCheck {
  std::string operator()(const MlflowMetric& m) const { return said("metric", m.key); }
  std::string operator()(const Param& p) const { return said("param", p.key); }
  std::string operator()(const Tag& t) const { return said("tag", t.key); }
  std::string operator()(const MlflowArtifact& a) const {
    if (a.artifact_path.empty()) return {};  // the file's own name
    std::string why =
        a.artifact_path.front() == '/' ? "is absolute" : path_problem(a.artifact_path);
    if (why.empty()) return why;
    return fmt::format("artifact path '{}' {}: not sent", a.artifact_path, why);
  }
  static std::string said(const char* what, const std::string& key) {
    std::string why = key_problem(key);
    if (why.empty()) return why;
    return fmt::format("{} '{}' {}, which MLflow refuses: not sent", what, key, why);
  }
};

// Protobuf's JSON spelling of the doubles that JSON itself lacks.
json metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

// The artifact proxy's path for a run whose artifact_uri is `uri`, or nullopt when the
// server keeps the run's artifacts somewhere kiln cannot reach through it (s3://, a path).
std::optional<std::string> proxied_artifact_path(const std::string& uri) {
  constexpr std::string_view kScheme = "mlflow-artifacts:";
  constexpr std::string_view kRoute = "/api/2.0/mlflow-artifacts/artifacts/";
  if (uri.rfind(kScheme, 0) == 0) {
    std::string_view rest = std::string_view(uri).substr(kScheme.size());
    if (rest.rfind("//", 0) == 0) {  // mlflow-artifacts://host:port/path
      size_t path = rest.find('/', 2);
      rest = path == std::string_view::npos ? std::string_view() : rest.substr(path);
    }
    while (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
    return MlflowClient::escape_path(rest);
  }
  if (size_t route = uri.find(kRoute);
      route != std::string::npos &&
      (uri.rfind("http://", 0) == 0 || uri.rfind("https://", 0) == 0)) {
    return uri.substr(route + kRoute.size());
  }
  return std::nullopt;
}

struct Opening {
  std::string run_name;
  int64_t start_time_ms = 0;
  std::string existing_run_id;
};

struct Closing {
  MlflowStatus status = MlflowStatus::kFinished;
  int64_t end_time_ms = 0;
};

// The run's coordinates, known once it is opened.
struct RunPlace {
  std::string experiment_id;
  std::string run_id;
  std::optional<std::string> artifact_path;  // under the artifact proxy
  std::string artifact_uri;                  // for the message when there is no proxy path
};

// What the sender's worker queues, in the order it is sent: the run's opening, its records
// as they were logged, and the closing, which only finish() queues.
using Work = std::variant<Opening, Record, Closing>;

MlflowCounts record_counts(std::span<const Work> work) {
  MlflowCounts counts;
  for (const Work& item : work) {
    if (const auto* record = std::get_if<Record>(&item)) count(counts, *record);
  }
  return counts;
}

// One call to make, taken from the front of the worker's batch under the lock and then made
// without it.
struct Step {
  enum class Kind { kOpen, kSend, kClose } kind = Kind::kSend;
  Opening opening;
  Closing closing;
  RunPlace place;
  std::span<const Work> records;  // kSend: records of one kind, still in the batch
};

struct Outcome {
  MlflowCallResult result;
  RunPlace place;  // what an opening found
};

// What the handler made of the front of its batch.
struct Turn {
  size_t handled = 0;
  bool again = false;  // the front stays, and is tried again after `delay`
  std::chrono::milliseconds delay{0};
};

// The sender the mirror and push_run_to_mlflow share: the run's state and its counts behind
// one mutex, and a BackgroundWorker whose handler makes the calls, one at a time from the
// front of its batch, until everything is sent, the deadline passes, the server proves
// unusable or the owner stops it. The handler is the only user of the client, so network
// calls happen outside the lock.
class Courier {
 public:
  Courier(const MlflowOptions& options, size_t max_queued)
      : options_(options),
        max_queued_(max_queued),
        client_(options.uri, options.request_timeout, &cancel_),
        backoff_(options.retry.first_delay) {}
  // Stops at once, whatever is queued, unless finish() has returned.
  ~Courier();
  Courier(const Courier&) = delete;
  Courier& operator=(const Courier&) = delete;

  // Starts the worker's thread; throws if it cannot.
  void start();
  // Bounds every call from now on, and the wait of finish().
  void set_deadline(Clock::time_point deadline, std::chrono::seconds budget);
  void open(Opening opening);
  // `bounded`: subject to the queue's limit (the run's own start tags are not).
  void enqueue(Record record, bool bounded = true);
  // Queues the closing, sends until done or the deadline set before, and reports.
  MlflowReport finish(Closing closing);
  void fail(std::string problem);

 private:
  void abandon();
  Clock::time_point close(Closing closing);
  BatchProgress handle(std::vector<Work>& batch) noexcept;
  Turn take_turn(std::span<Work> rest);
  bool go_on(size_t remaining) const;
  bool stopping() const;
  Step next_step(std::span<const Work> rest);
  size_t take_records(std::span<const Work> rest);
  size_t give_up(std::span<const Work> rest);
  bool apply(const Step& step, const Outcome& outcome);
  std::chrono::milliseconds back_off();
  void note(std::string problem);
  std::string summary(const MlflowCounts& unsent) const;
  MlflowReport report() const;  // under the lock

  Outcome perform(const Step& step, MlflowDeadline deadline);
  Outcome open_run(const Opening& opening, MlflowDeadline deadline);
  MlflowCallResult find_experiment(std::string& id, MlflowDeadline deadline);
  MlflowCallResult send_batch(const Step& step, MlflowDeadline deadline);
  MlflowCallResult send_artifact(const RunPlace& place, const MlflowArtifact& artifact,
                                 MlflowDeadline deadline);
  MlflowCallResult close_run(const Step& step, MlflowDeadline deadline);

  const MlflowOptions options_;
  const size_t max_queued_;
  std::atomic<bool> cancel_{false};  // read by curl's progress callback during a request
  MlflowClient client_;              // the handler's alone

  mutable std::mutex mutex_;
  // Records logged before start_run, queued behind the opening when it comes.
  std::vector<Work> waiting_;
  size_t queued_ = 0;   // records waiting or queued, not counting those of the call in hand
  size_t in_call_ = 0;  // the records of the call in hand, kept across its retries
  MlflowDeadline deadline_;
  std::chrono::seconds budget_{0};
  bool started_ = false;
  std::optional<Closing> closing_;
  bool opened_ = false;
  bool closed_ = false;
  bool stop_ = false;
  bool fatal_ = false;
  RunPlace place_;
  std::string last_failure_;  // the latest failure worth retrying, cleared by a success
  std::vector<std::string> problems_;
  MlflowCounts sent_, in_flight_, dropped_, rejected_;
  MlflowCounts abandoned_;  // given up once sending had stopped for good
  MlflowCounts unsent_;     // left queued or waiting when finish() stopped the worker
  std::chrono::milliseconds backoff_;
  std::optional<BackgroundWorker<Work>> worker_;  // last: its thread uses the members above
};

Courier::~Courier() {
  abandon();
  if (worker_) worker_->drain(Clock::now());
}

void Courier::start() {
  // Records gather into batches while training runs; a full call's worth goes at once. No
  // capacity: enqueue() bounds the queue itself, dropping rather than making a producer wait.
  worker_.emplace([this](std::vector<Work>& batch) { return handle(batch); },
                  BackgroundWorkerOptions{.batch_window = options_.flush_interval,
                                          .batch_ready = kMetricsPerBatch});
}

void Courier::set_deadline(Clock::time_point deadline, std::chrono::seconds budget) {
  std::lock_guard lock(mutex_);
  deadline_ = deadline;
  budget_ = budget;
}

void Courier::open(Opening opening) {
  std::lock_guard lock(mutex_);
  if (started_) {
    note("start_run was called twice: the second call was ignored");
    return;
  }
  started_ = true;
  if (fatal_ || closing_ || stop_) return;  // what waits is reported unsent
  worker_->push(std::move(opening));
  for (Work& record : waiting_) worker_->push(std::move(record));
  waiting_.clear();
  // Everything else waits for the run, so the opening does not wait for company.
  worker_->hurry();
}

void Courier::enqueue(Record record, bool bounded) {
  std::string invalid = std::visit(RecordCheck{}, record);
  std::lock_guard lock(mutex_);
  if (!invalid.empty()) {
    count(rejected_, record);
    note(std::move(invalid));
  } else if (closing_ || stop_) {
    count(dropped_, record);
    note("records logged after finish were dropped");
  } else if (fatal_) {
    count(abandoned_, record);  // nothing more will be sent: not worth queueing
  } else if (bounded && queued_ >= max_queued_) {
    // Dropped here rather than waited for: a producer must never wait on the network.
    count(dropped_, record);
  } else {
    ++queued_;
    if (started_) {
      worker_->push(std::move(record));
    } else {
      waiting_.emplace_back(std::move(record));
    }
  }
}

MlflowReport Courier::finish(Closing closing) {
  Clock::time_point deadline = close(closing);
  std::vector<Work> left;
  if (worker_) {
    // drain() stops the worker at the deadline; a request begun before the deadline was set
    // may still be waiting on its own, longer timeout, and abandon() cuts it short.
    left = worker_->drain(deadline, [this] { abandon(); });
  }
  std::lock_guard lock(mutex_);
  unsent_ = record_counts(left) + record_counts(waiting_);
  return report();
}

// Stops taking records and queues the closing behind the last of them; returns the
// deadline.
Clock::time_point Courier::close(Closing closing) {
  std::lock_guard lock(mutex_);
  closing_ = closing;
  if (!started_ && !fatal_) note("start_run was never called: nothing was sent to MLflow");
  if (started_ && !fatal_ && !stop_) worker_->push(closing);
  return deadline_.value_or(Clock::now());
}

void Courier::abandon() {
  std::lock_guard lock(mutex_);
  stop_ = true;
  cancel_ = true;
}

void Courier::fail(std::string problem) {
  std::lock_guard lock(mutex_);
  fatal_ = true;
  note(std::move(problem));
}

void Courier::note(std::string problem) {
  if (problems_.size() >= kMaxProblems) return;
  if (std::find(problems_.begin(), problems_.end(), problem) != problems_.end()) return;
  problems_.push_back(std::move(problem));
}

// The worker's handler: calls one after another from the front of the batch, as long as the
// rest is worth sending at once.
BatchProgress Courier::handle(std::vector<Work>& batch) noexcept {
  size_t done = 0;
  try {
    while (done < batch.size()) {
      Turn turn = take_turn(std::span(batch).subspan(done));
      done += turn.handled;
      if (turn.again) {
        // A call to retry waits for its backoff alone: it was due already, and does not
        // wait for company as well.
        worker_->hurry();
        return {done, turn.delay};
      }
      if (!go_on(batch.size() - done)) break;
    }
  } catch (const std::exception& e) {
    fail(fmt::format("the MLflow sender stopped: {}", e.what()));
  } catch (...) {
    fail("the MLflow sender stopped on an unknown error");
  }
  // After a failure, what is left is given up on the next turn.
  return {done};
}

// Makes the call that the work at the front of `rest` needs, or gives the work up.
Turn Courier::take_turn(std::span<Work> rest) {
  std::unique_lock lock(mutex_);
  if (fatal_) return {give_up(rest)};
  // drain() is about to stop the worker and report what is left: the wait ends then.
  if (stopping()) return {0, true, std::chrono::seconds(1)};
  Step step = next_step(rest);
  MlflowDeadline deadline = deadline_;
  lock.unlock();
  Outcome outcome = perform(step, deadline);
  lock.lock();
  if (apply(step, outcome)) return {0, true, back_off()};
  return {step.kind == Step::Kind::kSend ? step.records.size() : 1};
}

// Whether the rest of a batch goes at once: when the run is finishing or the rest fills a
// call. Otherwise it waits for the batching window, with what is logged meanwhile.
bool Courier::go_on(size_t remaining) const {
  std::lock_guard lock(mutex_);
  return closing_ || fatal_ || remaining >= kMetricsPerBatch;
}

bool Courier::stopping() const {
  return stop_ || fatal_ || (deadline_ && Clock::now() >= *deadline_);
}

Step Courier::next_step(std::span<const Work> rest) {
  Step step;
  step.place = place_;
  if (const auto* opening = std::get_if<Opening>(&rest.front())) {
    step.kind = Step::Kind::kOpen;
    step.opening = *opening;
  } else if (const auto* closing = std::get_if<Closing>(&rest.front())) {
    step.kind = Step::Kind::kClose;
    step.closing = *closing;
  } else {
    step.kind = Step::Kind::kSend;
    step.records = rest.first(take_records(rest));
  }
  return step;
}

// How many records at the front one call carries: the longest run of one kind that fits,
// since kinds are not mixed so that a record MLflow refuses costs only its own kind's batch.
// A call being retried carries the same records again.
size_t Courier::take_records(std::span<const Work> rest) {
  if (in_call_ > 0) return in_call_;
  const Record& first = std::get<Record>(rest.front());
  size_t limit = std::holds_alternative<MlflowMetric>(first)     ? kMetricsPerBatch
                 : std::holds_alternative<MlflowArtifact>(first) ? 1
                                                                 : kParamsOrTagsPerBatch;
  size_t n = 0;
  while (n < rest.size() && n < limit) {
    const auto* record = std::get_if<Record>(&rest[n]);
    if (record == nullptr || record->index() != first.index()) break;
    ++n;
  }
  in_call_ = n;
  queued_ -= n;
  in_flight_ = {};
  count(in_flight_, first, static_cast<int64_t>(n));
  return n;
}

// Nothing more will be sent: `rest` is counted as unsent and taken off the queue, so that
// finish() need not wait for it.
size_t Courier::give_up(std::span<const Work> rest) {
  abandoned_ = abandoned_ + record_counts(rest);
  in_call_ = 0;
  in_flight_ = {};
  return rest.size();
}

// Records what a call did; returns whether to retry it.
bool Courier::apply(const Step& step, const Outcome& outcome) {
  const MlflowCallResult& result = outcome.result;
  if (result.outcome == MlflowCallOutcome::kRetry) {
    // Past the deadline a request ends as "no time left" or "abandoned": the failure that
    // kept it from going earlier says more.
    if (last_failure_.empty() || !stopping()) last_failure_ = result.message;
    return true;
  }
  backoff_ = options_.retry.first_delay;
  if (result.ok()) last_failure_.clear();
  bool ok = result.ok();
  if (result.outcome == MlflowCallOutcome::kFatal) {
    fatal_ = true;
    ok = false;
  }
  switch (step.kind) {
    case Step::Kind::kOpen:
      // Without a run nothing else can go: a refused opening ends the session.
      opened_ = ok;
      fatal_ = !ok;
      if (ok) place_ = outcome.place;
      break;
    case Step::Kind::kSend:
      if (ok) {
        sent_ = sent_ + in_flight_;
      } else if (fatal_) {
        abandoned_ = abandoned_ + in_flight_;
      } else {
        rejected_ = rejected_ + in_flight_;
      }
      in_flight_ = {};
      in_call_ = 0;
      break;
    case Step::Kind::kClose:
      closed_ = ok;
      break;
  }
  if (!ok) note(result.message);
  return false;
}

// The delay before a call is retried, which grows with each failure in a row.
std::chrono::milliseconds Courier::back_off() {
  std::chrono::milliseconds delay = backoff_;
  auto grown =
      std::chrono::duration_cast<std::chrono::milliseconds>(backoff_ * options_.retry.factor);
  backoff_ = std::clamp(grown, options_.retry.first_delay, options_.retry.max_delay);
  return delay;
}

Outcome Courier::perform(const Step& step, MlflowDeadline deadline) {
  switch (step.kind) {
    case Step::Kind::kOpen:
      return open_run(step.opening, deadline);
    case Step::Kind::kSend:
      return {send_batch(step, deadline), {}};
    case Step::Kind::kClose:
      return {close_run(step, deadline), {}};
  }
  return {};
}

MlflowCallResult not_mlflow(const MlflowClient& client, const char* call, const char* field) {
  MlflowCallResult result;
  result.outcome = MlflowCallOutcome::kFatal;
  result.message = fmt::format("{} is not an MLflow server: its answer to {} has no {}",
                               client.uri(), call, field);
  return result;
}

// The string at `path` in an answer's JSON text, or "" when there is none.
std::string nested_string(const std::string& body, std::initializer_list<const char*> path) {
  json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const json* node = &answer;
  for (const char* key : path) {
    auto it = node->find(key);
    if (it == node->end()) return {};
    node = &*it;
  }
  return node->is_string() ? node->get<std::string>() : std::string();
}

MlflowCallResult Courier::find_experiment(std::string& id, MlflowDeadline deadline) {
  const std::string& name = options_.experiment;
  for (int attempt = 0; attempt < 2; ++attempt) {
    MlflowCallResult found =
        client_.get("experiments/get-by-name", {{"experiment_name", name}}, deadline);
    if (found.ok()) {
      id = nested_string(found.body, {"experiment", "experiment_id"});
      if (id.empty()) return not_mlflow(client_, "experiments/get-by-name", "experiment_id");
      if (nested_string(found.body, {"experiment", "lifecycle_stage"}) == "deleted") {
        found.outcome = MlflowCallOutcome::kFatal;
        found.message = fmt::format(
            "the MLflow experiment '{}' at {} is deleted: restore it (mlflow experiments "
            "restore) or choose another experiment name",
            name, client_.uri());
      }
      return found;
    }
    if (found.error_code != "RESOURCE_DOES_NOT_EXIST") return found;
    MlflowCallResult created = client_.post("experiments/create", {{"name", name}}, deadline);
    // Another client may have created it in between: then look it up again.
    if (created.error_code == "RESOURCE_ALREADY_EXISTS") continue;
    if (created.ok()) {
      id = nested_string(created.body, {"experiment_id"});
      if (id.empty()) return not_mlflow(client_, "experiments/create", "experiment_id");
    }
    return created;
  }
  return client_.get("experiments/get-by-name", {{"experiment_name", name}}, deadline);
}

Outcome Courier::open_run(const Opening& opening, MlflowDeadline deadline) {
  Outcome outcome;
  RunPlace& place = outcome.place;
  outcome.result = find_experiment(place.experiment_id, deadline);
  if (!outcome.result.ok()) return outcome;
  MlflowCallResult& run = outcome.result;
  const char* call = opening.existing_run_id.empty() ? "runs/create" : "runs/get";
  if (opening.existing_run_id.empty()) {
    json body = {{"experiment_id", place.experiment_id},
                 {"run_name", opening.run_name},
                 {"start_time", opening.start_time_ms}};
    run = client_.post("runs/create", body, deadline);
  } else {
    run = client_.get("runs/get", {{"run_id", opening.existing_run_id}}, deadline);
  }
  if (!run.ok()) return outcome;
  place.run_id = nested_string(run.body, {"run", "info", "run_id"});
  if (place.run_id.empty()) return {not_mlflow(client_, call, "run_id"), {}};
  place.artifact_uri = nested_string(run.body, {"run", "info", "artifact_uri"});
  place.artifact_path = proxied_artifact_path(place.artifact_uri);
  return outcome;
}

json key_values(std::span<const Work> records) {
  json list = json::array();
  for (const Work& work : records) {
    const Record& record = std::get<Record>(work);
    if (const auto* param = std::get_if<Param>(&record)) {
      list.push_back({{"key", param->key}, {"value", param->value}});
    } else if (const auto* tag = std::get_if<Tag>(&record)) {
      list.push_back({{"key", tag->key}, {"value", tag->value}});
    }
  }
  return list;
}

MlflowCallResult Courier::send_batch(const Step& step, MlflowDeadline deadline) {
  const Record& first = std::get<Record>(step.records.front());
  if (const auto* artifact = std::get_if<MlflowArtifact>(&first)) {
    return send_artifact(step.place, *artifact, deadline);
  }
  json body = {{"run_id", step.place.run_id}};
  if (std::holds_alternative<MlflowMetric>(first)) {
    json& metrics = body["metrics"] = json::array();
    for (const Work& work : step.records) {
      const auto& metric = std::get<MlflowMetric>(std::get<Record>(work));
      metrics.push_back({{"key", metric.key},
                         {"value", metric_value(metric.value)},
                         {"timestamp", metric.timestamp_ms},
                         {"step", metric.step}});
    }
  } else {
    body[std::holds_alternative<Param>(first) ? "params" : "tags"] = key_values(step.records);
  }
  return client_.post("runs/log-batch", body, deadline);
}

MlflowCallResult Courier::send_artifact(const RunPlace& place, const MlflowArtifact& artifact,
                                        MlflowDeadline deadline) {
  if (!place.artifact_path) {
    MlflowCallResult result;
    result.outcome = MlflowCallOutcome::kRejected;
    result.message = fmt::format(
        "MLflow at {} keeps this run's artifacts at '{}', which kiln cannot upload to: start "
        "the server with --serve-artifacts (its default) so that it proxies them",
        client_.uri(), place.artifact_uri);
    return result;
  }
  std::string target = artifact.artifact_path.empty() ? artifact.local_path.filename().string()
                                                      : artifact.artifact_path;
  return client_.put_file(*place.artifact_path + "/" + MlflowClient::escape_path(target),
                          artifact.local_path, deadline);
}

MlflowCallResult Courier::close_run(const Step& step, MlflowDeadline deadline) {
  json body = {{"run_id", step.place.run_id}, {"status", mlflow_status_name(step.closing.status)}};
  if (step.closing.status != MlflowStatus::kRunning) body["end_time"] = step.closing.end_time_ms;
  return client_.post("runs/update", body, deadline);
}

// The last problem: what did not get to MLflow and, when known, why.
std::string Courier::summary(const MlflowCounts& unsent) const {
  bool out_of_time = deadline_ && Clock::now() >= *deadline_;
  std::string reason;
  if (!last_failure_.empty()) {
    reason = last_failure_;
  } else if (out_of_time && !fatal_) {
    reason = fmt::format("sending needed more than the {} s allowed", budget_.count());
  }
  std::string lost = unsent.total() > 0 ? unsent.describe() + " not sent" : std::string();
  std::string what;
  if (!opened_) {
    what = lost.empty() ? "the run was not created in MLflow"
                        : "the run was not created in MLflow: " + lost;
  } else if (!lost.empty()) {
    what = lost;
  } else {
    what = fmt::format("run {} was not marked {}", place_.run_id,
                       mlflow_status_name(closing_ ? closing_->status : MlflowStatus::kFinished));
  }
  return reason.empty() ? what : reason + "; " + what;
}

MlflowReport Courier::report() const {
  MlflowReport report;
  report.sent = sent_;
  report.unsent = unsent_ + abandoned_;
  report.dropped = dropped_;
  report.rejected = rejected_;
  report.experiment_id = place_.experiment_id;
  report.run_id = place_.run_id;
  report.problems = problems_;
  if (dropped_.total() > 0) {
    report.problems.push_back(
        fmt::format("the queue of {} records waiting for MLflow was full: {} dropped", max_queued_,
                    dropped_.describe()));
  }
  bool all_sent = report.unsent.total() == 0;
  if (!closed_ || !all_sent) report.problems.push_back(summary(report.unsent));
  report.complete =
      closed_ && all_sent && dropped_.total() == 0 && rejected_.total() == 0 && !fatal_;
  return report;
}

MlflowReport failed_report(const char* what) {
  MlflowReport report;
  report.problems.push_back(fmt::format("the MLflow {} failed: out of memory", what));
  return report;
}

}  // namespace

const char* mlflow_status_name(MlflowStatus status) {
  switch (status) {
    case MlflowStatus::kRunning:
      return "RUNNING";
    case MlflowStatus::kFinished:
      return "FINISHED";
    case MlflowStatus::kFailed:
      return "FAILED";
    case MlflowStatus::kKilled:
      return "KILLED";
  }
  return "FAILED";
}

std::string MlflowCounts::describe() const {
  std::vector<std::string> parts;
  if (metrics > 0) parts.push_back(plural(metrics, "metric"));
  if (params > 0) parts.push_back(plural(params, "param"));
  if (tags > 0) parts.push_back(plural(tags, "tag"));
  if (artifacts > 0) parts.push_back(plural(artifacts, "artifact"));
  if (parts.empty()) return "nothing";
  std::string text = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) text += ", " + parts[i];
  return text;
}

struct MlflowMirror::Impl {
  explicit Impl(const MlflowOptions& options) : courier(options, options.max_queued) {}
  Courier courier;
  std::mutex finish_mutex;  // one finish at a time; the first one's report is kept
  std::optional<MlflowReport> report;
};

MlflowMirror::MlflowMirror(MlflowOptions options) {
  try {
    impl_ = std::make_unique<Impl>(options);
    impl_->courier.start();
  } catch (const std::exception& e) {
    if (impl_) impl_->courier.fail(fmt::format("the MLflow mirror could not start: {}", e.what()));
  }
}

// The courier stops at once unless finish() has stopped it.
MlflowMirror::~MlflowMirror() = default;

void MlflowMirror::start_run(std::string run_name, int64_t start_time_ms,
                             std::map<std::string, std::string> tags) noexcept {
  if (!impl_) return;
  try {
    impl_->courier.open({std::move(run_name), start_time_ms, {}});
    for (auto& [key, value] : tags) impl_->courier.enqueue(Tag{key, std::move(value)}, false);
  } catch (const std::exception&) {
    impl_->courier.fail("the MLflow mirror ran out of memory");
  }
}

void MlflowMirror::log_params(const std::map<std::string, std::string>& params) noexcept {
  if (!impl_) return;
  try {
    for (const auto& [key, value] : params) impl_->courier.enqueue(Param{key, value});
  } catch (const std::exception&) {
    impl_->courier.fail("the MLflow mirror ran out of memory");
  }
}

void MlflowMirror::log_metric(std::string key, double value, int64_t step,
                              int64_t timestamp_ms) noexcept {
  if (!impl_) return;
  try {
    impl_->courier.enqueue(MlflowMetric{std::move(key), value, step, timestamp_ms});
  } catch (const std::exception&) {
    impl_->courier.fail("the MLflow mirror ran out of memory");
  }
}

void MlflowMirror::set_tag(std::string key, std::string value) noexcept {
  if (!impl_) return;
  try {
    impl_->courier.enqueue(Tag{std::move(key), std::move(value)});
  } catch (const std::exception&) {
    impl_->courier.fail("the MLflow mirror ran out of memory");
  }
}

void MlflowMirror::log_artifact(std::filesystem::path local_path,
                                std::string artifact_path) noexcept {
  if (!impl_) return;
  try {
    impl_->courier.enqueue(MlflowArtifact{std::move(local_path), std::move(artifact_path)});
  } catch (const std::exception&) {
    impl_->courier.fail("the MLflow mirror ran out of memory");
  }
}

MlflowReport MlflowMirror::finish(MlflowStatus status, int64_t end_time_ms,
                                  std::chrono::seconds max_wait) noexcept {
  if (!impl_) return failed_report("mirror");
  try {
    std::lock_guard lock(impl_->finish_mutex);
    if (impl_->report) return *impl_->report;
    impl_->courier.set_deadline(Clock::now() + max_wait, max_wait);
    impl_->report = impl_->courier.finish({status, end_time_ms});
    return *impl_->report;
  } catch (const std::exception&) {
    return failed_report("mirror");
  }
}

MlflowReport push_run_to_mlflow(const MlflowOptions& options, const MlflowRunRecord& run,
                                std::chrono::seconds max_wait) noexcept {
  try {
    Courier courier(options, SIZE_MAX);
    courier.start();
    // Set first, so that the deadline bounds every call, the opening's too.
    courier.set_deadline(Clock::now() + max_wait, max_wait);
    courier.open({run.run_name, run.start_time_ms, run.mlflow_run_id});
    for (const auto& [key, value] : run.params) courier.enqueue(Param{key, value});
    for (const auto& [key, value] : run.tags) courier.enqueue(Tag{key, value});
    for (const MlflowMetric& metric : run.metrics) courier.enqueue(metric);
    for (const MlflowArtifact& artifact : run.artifacts) courier.enqueue(artifact);
    return courier.finish({run.status, run.end_time_ms});
  } catch (const std::exception&) {
    return failed_report("push");
  }
}

}  // namespace kiln::track

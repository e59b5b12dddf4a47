// A synchronous client of MLflow's REST API over libcurl (docs/tracking.md, "MLflow"): one
// request at a time, each bounded by a timeout, and every answer sorted into what the
// sender should do next. It never throws: whatever goes wrong becomes a MlflowCallResult with a
// sentence that names the server and the call, since that sentence ends up in front of a
// user who only set `tracking.mlflow_uri`.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kiln::track {

// What the sender does after a call.
enum class MlflowCallOutcome {
  kOk,
  kRetry,     // unreachable, timed out, 5xx, 429: the same call may work later
  kRejected,  // MLflow refused this request (a 4xx with an MLflow error): retrying cannot help
  kFatal,     // the server is not MLflow, refuses access, or the URI is unusable: stop
};

struct MlflowCallResult {
  MlflowCallOutcome outcome = MlflowCallOutcome::kOk;
  std::string message;     // empty for kOk
  std::string error_code;  // MLflow's error_code ("RESOURCE_DOES_NOT_EXIST") when it sent one
  long http_status = 0;    // 0 when no answer came
  std::string body;        // the answer, JSON text of an object, for kOk on the JSON API
  bool ok() const { return outcome == MlflowCallOutcome::kOk; }
};

struct MlflowExchange;  // one request and its answer (mlflow_client.cc)

// No deadline: only the client's own timeout bounds a request.
using MlflowDeadline = std::optional<std::chrono::steady_clock::time_point>;

class MlflowClient {
 public:
  // `uri` is the tracking server's base address ("http://host:5000", a trailing slash or a
  // path prefix allowed). A request takes at most `timeout` (connect plus answer), or less
  // when the call's deadline is nearer. `cancel`, when given, aborts a request in flight
  // once it reads true, so an owner giving up need not wait out a slow server.
  MlflowClient(std::string uri, std::chrono::milliseconds timeout,
               const std::atomic<bool>* cancel = nullptr);
  ~MlflowClient();
  MlflowClient(const MlflowClient&) = delete;
  MlflowClient& operator=(const MlflowClient&) = delete;

  const std::string& uri() const { return uri_; }

  // `api` is the path under /api/2.0/mlflow/ ("experiments/get-by-name").
  MlflowCallResult get(std::string_view api,
                       const std::vector<std::pair<std::string, std::string>>& query,
                       MlflowDeadline deadline);
  MlflowCallResult post(std::string_view api, const nlohmann::json& body, MlflowDeadline deadline);
  // Uploads `file` to the artifact proxy at /api/2.0/mlflow-artifacts/artifacts/`path`
  // (`path` already escaped, see escape_path). Large files are streamed, and a stall of
  // `timeout`, rather than the whole upload, is what times out.
  MlflowCallResult put_file(std::string_view path, const std::filesystem::path& file,
                            MlflowDeadline deadline);

  // `path` with each segment percent-escaped, the slashes kept.
  static std::string escape_path(std::string_view path);

 private:
  MlflowCallResult call(MlflowExchange& exchange, MlflowDeadline deadline);
  MlflowCallResult classify(const MlflowExchange& exchange, void* curl) const;
  MlflowCallResult transport_failure(const MlflowExchange& exchange, int curl_code,
                                     const char* detail, std::chrono::milliseconds limit) const;

  std::string uri_;   // as the user wrote it, for messages
  std::string base_;  // without the trailing slash
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>* cancel_;
  void* curl_ = nullptr;  // one CURL handle, kept so that calls reuse the connection
};

}  // namespace kiln::track

#include "track/mlflow_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kiln::track {
namespace {

// A misbehaving server could send anything; no MLflow answer to kiln's calls comes near this.
constexpr size_t kMaxAnswerBytes = size_t{8} << 20;
// MLflow's own messages can quote a whole rejected batch.
constexpr size_t kMaxQuotedChars = 300;

// curl_global_init is not thread-safe in every libcurl build, and the mirror calls from a
// thread of its own: do it once, first.
void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return fmt::format("{} s", ms.count() / 1000);
  return fmt::format("{:.1f} s", static_cast<double>(ms.count()) / 1000.0);
}

std::string clipped(std::string_view text) {
  if (text.size() <= kMaxQuotedChars) return std::string(text);
  return std::string(text.substr(0, kMaxQuotedChars)) + "...";
}

std::string string_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

std::string escape(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (is_unreserved(c)) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

MlflowCallResult failure(MlflowCallOutcome outcome, std::string message, long status = 0) {
  MlflowCallResult result;
  result.outcome = outcome;
  result.message = std::move(message);
  result.http_status = status;
  return result;
}

size_t append_answer(char* data, size_t size, size_t count, void* user) {
  auto* answer = static_cast<std::string*>(user);
  size_t bytes = size * count;
  if (answer->size() + bytes > kMaxAnswerBytes) return 0;  // curl fails with a write error
  answer->append(data, bytes);
  return bytes;
}

size_t read_upload(char* buffer, size_t size, size_t count, void* user) {
  return std::fread(buffer, size, count, static_cast<std::FILE*>(user));
}

int check_cancel(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel != nullptr && cancel->load() ? 1 : 0;
}

struct HeaderList {
  curl_slist* list = nullptr;
  ~HeaderList() { curl_slist_free_all(list); }
  void add(const char* header) {
    if (curl_slist* grown = curl_slist_append(list, header)) list = grown;
  }
};

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

// One request: what to send and, once performed, what came back.
struct MlflowExchange {
  std::string label;  // "POST runs/log-batch", for messages
  std::string url;
  bool expect_json = true;
  std::string body;             // a POST's JSON
  std::FILE* upload = nullptr;  // a PUT's file
  curl_off_t upload_bytes = 0;
  std::string answer;
};

MlflowClient::MlflowClient(std::string uri, std::chrono::milliseconds timeout,
                           const std::atomic<bool>* cancel)
    : uri_(std::move(uri)), base_(uri_), timeout_(timeout), cancel_(cancel) {
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
  init_curl_once();
  curl_ = curl_easy_init();
}

MlflowClient::~MlflowClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

std::string MlflowClient::escape_path(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = std::min(path.find('/', start), path.size());
    if (start > 0) out += '/';
    out += escape(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

MlflowCallResult MlflowClient::get(std::string_view api,
                                   const std::vector<std::pair<std::string, std::string>>& query,
                                   MlflowDeadline deadline) {
  MlflowExchange exchange;
  exchange.label = fmt::format("GET {}", api);
  exchange.url = fmt::format("{}/api/2.0/mlflow/{}", base_, api);
  char separator = '?';
  for (const auto& [key, value] : query) {
    exchange.url += fmt::format("{}{}={}", separator, escape(key), escape(value));
    separator = '&';
  }
  return call(exchange, deadline);
}

MlflowCallResult MlflowClient::post(std::string_view api, const nlohmann::json& body,
                                    MlflowDeadline deadline) {
  MlflowExchange exchange;
  exchange.label = fmt::format("POST {}", api);
  exchange.url = fmt::format("{}/api/2.0/mlflow/{}", base_, api);
  // Keys and values come from the user's config and data: invalid UTF-8 is replaced rather
  // than thrown about.
  exchange.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return call(exchange, deadline);
}

MlflowCallResult MlflowClient::put_file(std::string_view path, const std::filesystem::path& file,
                                        MlflowDeadline deadline) {
  std::error_code error;
  auto bytes = std::filesystem::file_size(file, error);
  std::unique_ptr<std::FILE, FileCloser> handle(error ? nullptr : std::fopen(file.c_str(), "rb"));
  if (handle == nullptr) {
    std::string reason = error ? error.message() : std::string("cannot be opened");
    return failure(MlflowCallOutcome::kRejected,
                   fmt::format("artifact file {}: {}", file.string(), reason));
  }
  MlflowExchange exchange;
  exchange.label = fmt::format("PUT artifact {}", file.filename().string());
  exchange.url = fmt::format("{}/api/2.0/mlflow-artifacts/artifacts/{}", base_, path);
  exchange.expect_json = false;
  exchange.upload = handle.get();
  exchange.upload_bytes = static_cast<curl_off_t>(bytes);
  return call(exchange, deadline);
}

namespace {

// Configures how long the request may take: the client's timeout, cut to the deadline.
// Uploads are bounded by progress instead, so that a large file on a slow link still goes.
void set_time_limits(CURL* curl, std::chrono::milliseconds limit, bool upload,
                     std::chrono::milliseconds timeout, MlflowDeadline deadline) {
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(limit.count()));
  if (!upload) {
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
    return;
  }
  long stall_seconds = std::max<long>(1, static_cast<long>((timeout.count() + 999) / 1000));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, stall_seconds);
  if (deadline) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
}

std::string transport_text(CURLcode code, const char* detail) {
  // For refused and unresolvable addresses curl's detail only repeats the URI; for TLS and
  // the rest it holds the reason.
  if (code == CURLE_COULDNT_CONNECT || code == CURLE_COULDNT_RESOLVE_HOST || detail[0] == '\0') {
    return curl_easy_strerror(code);
  }
  return detail;
}

// Sets up `curl` for `exchange`; `detail` receives curl's error text.
void prepare(CURL* curl, MlflowExchange& exchange, char* detail, HeaderList& headers,
             const std::atomic<bool>* cancel) {
  curl_easy_setopt(curl, CURLOPT_URL, exchange.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // signals would hit the training threads
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, detail);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_answer);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &exchange.answer);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, check_cancel);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, cancel);
  if (exchange.upload != nullptr) {
    headers.add("Content-Type: application/octet-stream");
    headers.add("Expect:");  // servers without 100-continue would cost a second per file
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_upload);
    curl_easy_setopt(curl, CURLOPT_READDATA, exchange.upload);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, exchange.upload_bytes);
  } else if (!exchange.body.empty()) {
    headers.add("Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, exchange.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(exchange.body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
}

}  // namespace

MlflowCallResult MlflowClient::call(MlflowExchange& exchange, MlflowDeadline deadline) {
  if (base_.rfind("http://", 0) != 0 && base_.rfind("https://", 0) != 0) {
    return failure(MlflowCallOutcome::kFatal,
                   fmt::format("the MLflow URI '{}' is not an http:// or https:// address", uri_));
  }
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) {
    return failure(MlflowCallOutcome::kFatal, "libcurl could not start a session");
  }
  auto limit = timeout_;
  if (deadline) {
    auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return failure(MlflowCallOutcome::kRetry,
                     fmt::format("MLflow at {}: no time left for {}", uri_, exchange.label));
    }
    limit = std::min(limit, left);
  }

  char detail[CURL_ERROR_SIZE] = {};
  HeaderList headers;
  prepare(curl, exchange, detail, headers, cancel_);
  set_time_limits(curl, limit, exchange.upload != nullptr, timeout_, deadline);
  CURLcode code = curl_easy_perform(curl);
  MlflowCallResult result = code == CURLE_OK ? classify(exchange, curl)
                                             : transport_failure(exchange, code, detail, limit);
  // The handle points at this call's buffers, headers and cancel flag: none may outlive it.
  curl_easy_reset(curl);
  return result;
}

MlflowCallResult MlflowClient::transport_failure(const MlflowExchange& exchange, int error,
                                                 const char* detail,
                                                 std::chrono::milliseconds limit) const {
  auto code = static_cast<CURLcode>(error);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    return failure(MlflowCallOutcome::kRetry,
                   fmt::format("MLflow at {} did not answer {} within {}", uri_, exchange.label,
                               seconds_text(limit)));
  }
  if (code == CURLE_ABORTED_BY_CALLBACK) {
    return failure(MlflowCallOutcome::kRetry,
                   fmt::format("MLflow at {}: {} abandoned at the deadline", uri_, exchange.label));
  }
  if (code == CURLE_WRITE_ERROR) {
    return failure(MlflowCallOutcome::kFatal,
                   fmt::format("{} is not an MLflow server: {} answered more than {} MiB", uri_,
                               exchange.label, kMaxAnswerBytes >> 20));
  }
  if (code == CURLE_URL_MALFORMAT || code == CURLE_UNSUPPORTED_PROTOCOL) {
    return failure(MlflowCallOutcome::kFatal, fmt::format("the MLflow URI '{}' is not usable: {}",
                                                          uri_, transport_text(code, detail)));
  }
  return failure(MlflowCallOutcome::kRetry,
                 fmt::format("MLflow at {} unreachable: {}", uri_, transport_text(code, detail)));
}

MlflowCallResult MlflowClient::classify(const MlflowExchange& exchange, void* handle) const {
  auto* curl = static_cast<CURL*>(handle);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  char* content_type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &content_type);
  auto parsed = nlohmann::json::parse(exchange.answer, nullptr, false);
  bool is_object = !parsed.is_discarded() && parsed.is_object();
  std::string code = is_object ? string_field(parsed, "error_code") : std::string();
  std::string said = is_object ? clipped(string_field(parsed, "message")) : std::string();
  std::string colon_said = said.empty() ? std::string() : ": " + said;

  if (status >= 200 && status < 300 && (is_object || !exchange.expect_json)) {
    MlflowCallResult result;
    result.http_status = status;
    if (is_object) result.body = exchange.answer;
    return result;
  }
  if (status >= 500 || status == 429 || status == 408) {
    return failure(
        MlflowCallOutcome::kRetry,
        fmt::format("MLflow at {} answered {} to {}{}", uri_, status, exchange.label, colon_said),
        status);
  }
  if (status == 401 || status == 403) {
    return failure(MlflowCallOutcome::kFatal,
                   fmt::format("MLflow at {} refused {} with {}{} (kiln sends no credentials)",
                               uri_, exchange.label, status, colon_said),
                   status);
  }
  if (status >= 400 && !code.empty()) {
    MlflowCallResult result = failure(
        MlflowCallOutcome::kRejected,
        fmt::format("MLflow at {} refused {}: {}{}", uri_, exchange.label, code, colon_said),
        status);
    result.error_code = code;
    return result;
  }
  char* location = nullptr;
  curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location);
  std::string what = location != nullptr       ? fmt::format("a redirect to {}", location)
                     : content_type != nullptr ? fmt::format("{}", content_type)
                                               : std::string("no content type");
  return failure(MlflowCallOutcome::kFatal,
                 fmt::format("{} is not an MLflow server: {} answered {} ({}) where MLflow "
                             "answers JSON; check the MLflow URI",
                             uri_, exchange.label, status, what),
                 status);
}

}  // namespace kiln::track

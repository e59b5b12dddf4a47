// run.json's codec (run_info.h). Decoding is tolerant by design: run.json may have been
// edited, damaged or written by another kiln, and every reader (resume, report, reindex)
// should judge a run on what its record does hold. A key whose value does not have the
// field's type is kept as a section, so that writing the record back changes nothing the
// reader did not understand.
#include "track/run_info.h"

#include <cmath>
#include <system_error>
#include <utility>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/bounded_read.h"
#include "io/json_text.h"
#include "kiln/error.h"

namespace kiln::track {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Each decoder takes a value and either fills its field (true) or leaves it (false: the
// value goes to the sections).
bool decode(const json& value, std::string& field) {
  if (!value.is_string()) return false;
  field = value.get<std::string>();
  return true;
}

bool decode(const json& value, int64_t& field) {
  if (!value.is_number_integer()) return false;
  field = value.get<int64_t>();
  return true;
}

bool decode(const json& value, bool& field) {
  if (!value.is_boolean()) return false;
  field = value.get<bool>();
  return true;
}

bool decode(const json& value, std::optional<int64_t>& field) {
  int64_t number = 0;
  if (!decode(value, number)) return false;
  field = number;
  return true;
}

// A number, or null: nlohmann writes a NaN or an infinity as null.
bool decode_real(const json& value, double& field) {
  if (value.is_null()) {
    field = NAN;
    return true;
  }
  if (!value.is_number()) return false;
  field = value.get<double>();
  return true;
}

bool decode(const json& value, std::optional<double>& field) {
  double number = 0;
  if (!decode_real(value, number)) return false;
  field = number;
  return true;
}

bool decode(const json& value, std::vector<std::string>& field) {
  if (!value.is_array()) return false;
  std::vector<std::string> items;
  for (const json& item : value) {
    if (!item.is_string()) return false;
    items.push_back(item.get<std::string>());
  }
  field = std::move(items);
  return true;
}

// The members of `object` named in `fields`, each decoded into its field; false (and the
// record left as it was) when `object` is not an object or a member has another type.
template <typename Record, typename Fields>
bool decode_members(const json& object, Record& record, const Fields& fields) {
  if (!object.is_object()) return false;
  Record decoded;
  for (const auto& [name, field] : fields(decoded)) {
    auto found = object.find(name);
    if (found != object.end() && !std::visit([&](auto* f) { return decode(*found, *f); }, field))
      return false;
  }
  record = std::move(decoded);
  return true;
}

using MemberField = std::variant<std::string*, int64_t*, bool*, std::vector<std::string>*>;

std::vector<std::pair<const char*, MemberField>> identity_members(RunIdentityRecord& r) {
  return {{"config_sha256", &r.config_sha256},
          {"data_sha256", &r.data_sha256},
          {"kernels", &r.kernels},
          {"kiln_version", &r.kiln_version}};
}

std::vector<std::pair<const char*, MemberField>> resume_members(ResumeRecord& r) {
  return {{"at", &r.at},
          {"from_step", &r.from_step},
          {"previous_status", &r.previous_status},
          {"savepoint", &r.savepoint},
          {"skipped_savepoints", &r.skipped_savepoints},
          {"changed", &r.changed}};
}

std::vector<std::pair<const char*, MemberField>> mlflow_members(MlflowMirrorRecord& r) {
  return {{"uri", &r.uri},
          {"experiment_id", &r.experiment_id},
          {"run_id", &r.run_id},
          {"complete", &r.complete}};
}

bool decode(const json& value, std::optional<MlflowMirrorRecord>& field) {
  MlflowMirrorRecord mirror;
  if (!decode_members(value, mirror, mlflow_members)) return false;
  field = std::move(mirror);
  return true;
}

bool decode(const json& value, std::optional<RunIdentityRecord>& field) {
  RunIdentityRecord identity;
  if (!decode_members(value, identity, identity_members)) return false;
  field = std::move(identity);
  return true;
}

bool decode(const json& value, std::vector<ResumeRecord>& field) {
  if (!value.is_array()) return false;
  std::vector<ResumeRecord> resumes;
  for (const json& item : value) {
    ResumeRecord resume;
    if (!decode_members(item, resume, resume_members)) return false;
    if (auto environment = item.find("environment"); environment != item.end()) {
      resume.environment = io::json_text(*environment);
    }
    resumes.push_back(std::move(resume));
  }
  field = std::move(resumes);
  return true;
}

bool decode(const json& value, std::optional<FinalMetrics>& field) {
  if (!value.is_object()) return false;
  // A figure that is missing (a record of an older kiln) reads as NaN: not known.
  FinalMetrics final_metrics{NAN, NAN, NAN};
  for (auto [name, member] : {std::pair{"test_accuracy", &final_metrics.test_accuracy},
                              std::pair{"test_loss", &final_metrics.test_loss},
                              std::pair{"train_loss", &final_metrics.train_loss}}) {
    auto found = value.find(name);
    if (found != value.end() && !decode_real(*found, *member)) return false;
  }
  field = final_metrics;
  return true;
}

// The typed fields by their key in run.json, for both directions.
using Field = std::variant<std::string*, std::optional<int64_t>*, std::optional<double>*,
                           std::optional<RunIdentityRecord>*, std::vector<ResumeRecord>*,
                           std::optional<FinalMetrics>*, std::optional<MlflowMirrorRecord>*>;

std::vector<std::pair<const char*, Field>> fields_of(RunInfo& info) {
  return {{"experiment", &info.experiment},
          {"run_id", &info.run_id},
          {"config_sha256", &info.config_sha256},
          {"status", &info.status},
          {"started_at", &info.started_at},
          {"finished_at", &info.finished_at},
          {"pid", &info.pid},
          {"host", &info.host},
          {"pid_start_ticks", &info.pid_start_ticks},
          {"error", &info.error},
          {"signal", &info.signal},
          {"crash_detected_at", &info.crash_detected_at},
          {"kiln_version", &info.kiln_version},
          {"kernels", &info.kernels},
          {"seed", &info.seed},
          {"identity", &info.identity},
          {"resumes", &info.resumes},
          {"steps", &info.steps},
          {"skipped_steps", &info.skipped_steps},
          {"params_file", &info.params_file},
          {"params_sha256", &info.params_sha256},
          {"state_file", &info.state_file},
          {"last_savepoint", &info.last_savepoint},
          {"seconds", &info.seconds},
          {"median_step_ms", &info.median_step_ms},
          {"first_step_seconds", &info.first_step_seconds},
          {"final", &info.final_metrics},
          {"mlflow", &info.mlflow}};
}

// Encoders: each adds its field under `name` when it is present.
void encode(json& out, const char* name, const std::string& field) {
  if (!field.empty()) out[name] = field;
}
void encode(json& out, const char* name, const std::optional<int64_t>& field) {
  if (field) out[name] = *field;
}
void encode(json& out, const char* name, const std::optional<double>& field) {
  if (field) out[name] = *field;
}
void encode(json& out, const char* name, const std::vector<std::string>& field) {
  if (!field.empty()) out[name] = field;
}

void encode(json& out, const char* name, const std::optional<RunIdentityRecord>& field) {
  if (!field) return;
  json identity = json::object();
  RunIdentityRecord record = *field;
  for (const auto& [member, value] : identity_members(record)) {
    identity[member] = *std::get<std::string*>(value);  // all four, even when empty
  }
  out[name] = identity;
}

void encode(json& out, const char* name, const std::vector<ResumeRecord>& field) {
  if (field.empty()) return;
  json resumes = json::array();
  for (ResumeRecord resume : field) {
    json record = json::object();
    record["at"] = resume.at;
    record["from_step"] = resume.from_step;
    record["previous_status"] = resume.previous_status;
    encode(record, "savepoint", resume.savepoint);
    encode(record, "skipped_savepoints", resume.skipped_savepoints);
    encode(record, "changed", resume.changed);
    if (!resume.environment.empty()) {
      record["environment"] = io::parse_json(resume.environment, "a resume's environment");
    }
    resumes.push_back(std::move(record));
  }
  out[name] = resumes;
}

void encode(json& out, const char* name, const std::optional<MlflowMirrorRecord>& field) {
  if (!field) return;
  out[name] = {{"uri", field->uri},
               {"experiment_id", field->experiment_id},
               {"run_id", field->run_id},
               {"complete", field->complete}};
}

void encode(json& out, const char* name, const std::optional<FinalMetrics>& field) {
  if (!field) return;
  out[name] = {{"test_accuracy", field->test_accuracy},
               {"test_loss", field->test_loss},
               {"train_loss", field->train_loss}};
}

json to_json(const RunInfo& info) {
  json out = json::object();
  for (const auto& [name, text] : info.sections) {
    out[name] = io::parse_json(text, fmt::format("run.json's section \"{}\"", name));
  }
  RunInfo copy = info;  // fields_of hands out pointers to a mutable record
  for (const auto& [name, field] : fields_of(copy)) {
    std::visit([&, name = name](auto* f) { encode(out, name, *f); }, field);
  }
  return out;
}

}  // namespace

std::string RunInfo::section(std::string_view name) const {
  auto found = sections.find(std::string(name));
  return found == sections.end() ? std::string() : found->second;
}

std::string run_info_text(const RunInfo& info, int indent) {
  return io::json_text(to_json(info), indent);
}

RunInfo parse_run_info(std::string_view text, const std::string& where) {
  json document = io::parse_json(text, where);
  if (!document.is_object()) {
    fail(kUnknownSite, fmt::format("{}:1: not a run record (a JSON object)", where));
  }
  RunInfo info;
  std::vector<std::pair<const char*, Field>> fields = fields_of(info);
  for (const auto& [name, value] : document.items()) {
    bool typed = false;
    for (const auto& [field_name, field] : fields) {
      if (name != field_name) continue;
      typed = std::visit([&, &value = value](auto* f) { return decode(value, *f); }, field);
      break;
    }
    if (!typed) info.sections[name] = io::json_text(value);
  }
  return info;
}

RunInfo read_run_info(const fs::path& run_dir) {
  fs::path path = run_dir / "run.json";
  std::optional<std::string> text = io::read_regular_file_if_present(path, io::kMaxRecordBytes);
  if (!text) {
    std::error_code error;
    fail(kUnknownSite,
         fs::is_directory(run_dir, error)
             ? fmt::format("{} is not a run directory: it has no run.json", run_dir.string())
             : fmt::format("no run directory at {}", run_dir.string()),
         "a run directory is <runs_dir>/<experiment>/<run-id>, the one `kiln train` printed "
         "last (`kiln runs list` shows them)");
  }
  return parse_run_info(*text, path.string());
}

}  // namespace kiln::track

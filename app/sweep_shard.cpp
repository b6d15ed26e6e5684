#include "app/sweep_shard.hpp"

#include "app/child_process.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "sim/files.hpp"
#include "app/scenario.hpp"

namespace exasim {

namespace {

bool read_text(const std::string& path, std::string& text) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && read_text_file(path, text).empty();
}

// A shell word: single-quoted, its single quotes written '\''.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

ShardSpec parse_shard(const std::string& text, const std::string& flag) {
  static const std::regex re("([0-9]{1,9})/([0-9]{1,9})");
  std::smatch m;
  ShardSpec s;
  if (std::regex_match(text, m, re)) {
    s.index = std::stoul(m[1]);
    s.count = std::stoul(m[2]);
    if (s.count >= 1 && s.index >= 1 && s.index <= s.count) return s;
  }
  throw ScenarioError(flag, "", "expected i/N with 1 <= i <= N (shard i of N, e.g. 3/8), got '" + text + "'");
}

double simulate_within_percent(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos == 0 || pos != text.size() || !(v > 0 && v <= 100))
    throw ScenarioError("--simulate-within", "",
                        "expected a percentage of the best estimate above 0 and at most 100, got '" + text + "'");
  return v;
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("exasim") : p.string();
}

void check_slurm_time(const std::string& t) {
  static const std::regex re(
      "UNLIMITED|infinite|[0-9]+|[0-9]+:[0-9]{1,2}|[0-9]+:[0-9]{1,2}:[0-9]{1,2}|"
      "[0-9]+-[0-9]{1,2}|[0-9]+-[0-9]{1,2}:[0-9]{1,2}|[0-9]+-[0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}");
  if (!std::regex_match(t, re))
    throw ScenarioError("--time", "",
                        "expected a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS), got '" +
                            t + "'");
}

std::string slurm_script(const std::string& sweep_arg, const SweepSpec& s, const SweepOptions& o,
                         const SlurmOptions& so, size_t tasks) {
  namespace fs = std::filesystem;
  const std::string out = fs::absolute(o.out_dir).lexically_normal().string();
  std::string sweep = sweep_arg;
  std::error_code ec;
  if (fs::exists(sweep_arg, ec)) sweep = fs::absolute(sweep_arg).lexically_normal().string();
  std::string text = "#!/bin/bash\n";
  text += fmt::format("# exasim sweep {} ({} plans) in {} shards; written by exasim sweep --slurm.\n", s.name,
                      s.plan_count(), tasks);
  text += fmt::format("# Each task runs one shard into {}/shard-<i>; a task run again continues its shard\n", out);
  text += fmt::format("# (--resume). Then: exasim sweep --merge {}/shard-* --out {}/merged\n", out, out);
  text += "#SBATCH --job-name=" + shell_quote("exasim-" + s.name) + "\n";
  text += fmt::format("#SBATCH --array=1-{}\n", tasks);
  text += "#SBATCH --ntasks=1\n";
  text += fmt::format("#SBATCH --cpus-per-task={}\n", std::max(1, o.jobs));
  text += "#SBATCH --output=" + out + "/slurm/shard-%a.log\n";
  if (!so.partition.empty()) text += "#SBATCH --partition=" + so.partition + "\n";
  if (!so.time.empty()) text += "#SBATCH --time=" + so.time + "\n";
  text += "set -euo pipefail\n";
  std::string cmd = shell_quote(so.exe) + " sweep " + shell_quote(sweep) + fmt::format(" --shard \"$SLURM_ARRAY_TASK_ID/{}\"", tasks);
  cmd += " --out " + shell_quote(out) + "/shard-\"$SLURM_ARRAY_TASK_ID\" --resume";
  cmd += fmt::format(" --jobs {}", std::max(1, o.jobs));
  if (o.analytic) cmd += " --analytic";
  if (o.formula) cmd += " --formula";
  if (o.refine_top > 0) cmd += fmt::format(" --refine-top {}", o.refine_top);
  if (o.simulate_top > 0) cmd += fmt::format(" --simulate-top {}", o.simulate_top);
  if (o.simulate_within_percent > 0) cmd += fmt::format(" --simulate-within {}", o.simulate_within_percent);
  if (o.isolate) cmd += " --isolate";
  if (!o.profile_arg.empty()) cmd += " --profile " + shell_quote(fs::absolute(o.profile_arg).string());
  if (o.predict.max_graph_ops != kDefaultMaxGraphOps) cmd += fmt::format(" --max-graph-ops {}", o.predict.max_graph_ops);
  return text + "exec " + cmd + "\n";
}

int write_slurm_job(const std::string& sweep_arg, const SweepSpec& s, const SweepOptions& o, const SlurmOptions& so,
                    std::ostream& out) {
  namespace fs = std::filesystem;
  if (!so.time.empty()) check_slurm_time(so.time);
  const size_t tasks = so.array_size > 0 ? so.array_size : std::min<size_t>(64, s.plan_count());
  if (tasks > s.plan_count())
    throw ScenarioError("--array-size", "",
                        fmt::format("expected at most {} tasks (the sweep's plans), got {}", s.plan_count(), tasks));
  const std::string script = slurm_script(sweep_arg, s, o, so, tasks);
  const fs::path dir = fs::path(o.out_dir) / "slurm";
  if (so.submit) {
    // sbatch judges the options first (--test-only): a refused one leaves nothing behind.
    const fs::path probe = fs::temp_directory_path() / fmt::format("exasim-sbatch-{}.sh", getpid());
    { std::ofstream(probe) << script; }
    std::string said;
    const int rc = run_child({{"sbatch", "--test-only", probe.string()}, {}, &said});
    fs::remove(probe);
    if (rc == 127) throw ScenarioError("--submit", "", "expected sbatch on the PATH (Slurm's client): not found");
    if (rc != 0) throw ScenarioError("--slurm", "", "sbatch refused the job: " + said);
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create '" + dir.string() + "': " + ec.message());
  write_files_atomically(dir.string(), {{"sweep.sbatch", script}});
  const std::string path = (dir / "sweep.sbatch").string();
  out << fmt::format("wrote {}: a {}-task array, shard i of {} in {}/shard-i\n", path, tasks, tasks, o.out_dir);
  if (!so.submit) {
    out << "submit it with: sbatch " << path << "\n";
    return 0;
  }
  std::string said;
  const int rc = run_child({{"sbatch", "--parsable", path}, {}, &said});
  if (rc != 0) {
    fs::remove(path);
    throw ScenarioError("--slurm", "", "sbatch refused the job: " + said);
  }
  out << "submitted job " << said;
  return 0;
}

namespace {

struct ShardFolder {
  std::string dir;
  ojson meta;
  ShardSpec shard;
  JsonlContents rows;
};

ShardFolder read_shard_folder(const std::string& dir) {
  namespace fs = std::filesystem;
  ShardFolder f;
  f.dir = dir;
  const std::string meta_path = (fs::path(dir) / "sweep.json").string();
  std::string text;
  if (!read_text(meta_path, text))
    throw ScenarioError(meta_path, "", "expected the sweep.json of a sweep's (or shard's) output folder");
  try {
    f.meta = ojson::parse(text);
  } catch (const ojson::exception& e) {
    throw ScenarioError(meta_path, "", std::string("expected valid JSON: ") + e.what());
  }
  for (const char* key : {"fingerprint", "name", "mode"})
    if (!f.meta.is_object() || !f.meta.contains(key) || !f.meta[key].is_string())
      throw ScenarioError(meta_path, std::string("/") + key, "expected a string (written by exasim sweep)");
  if (!f.meta.contains("dimensions") || !f.meta["dimensions"].is_array())
    throw ScenarioError(meta_path, "/dimensions", "expected the sweep's dimensions (written by exasim sweep)");
  f.shard = parse_shard(f.meta.value("shard", std::string("1/1")), meta_path + "#/shard");
  const std::string jsonl = (fs::path(dir) / "results.jsonl").string();
  if (!read_text(jsonl, text)) throw ScenarioError(jsonl, "", "expected the shard's rows (results.jsonl)");
  f.rows = read_results_jsonl(text, jsonl);  // a torn last line (a killed shard) is left out
  return f;
}

// Every folder a shard of the first one's sweep, made the same way, no shard twice.
void check_same_sweep_shards(const std::vector<ShardFolder>& fs) {
  const ShardFolder& a = fs.front();
  std::set<size_t> seen;
  for (const ShardFolder& f : fs) {
    const std::string where = f.dir + "/sweep.json";
    if (f.meta["fingerprint"] != a.meta["fingerprint"])
      throw ScenarioError(where, "/fingerprint",
                          fmt::format("expected {} (the sweep of {}: {}), got {} (sweep {}): the folders hold shards of "
                                      "different sweep files",
                                      a.meta["fingerprint"].get<std::string>(), a.dir, a.meta["name"].get<std::string>(),
                                      f.meta["fingerprint"].get<std::string>(), f.meta["name"].get<std::string>()));
    if (f.meta["mode"] != a.meta["mode"])
      throw ScenarioError(where, "/mode",
                          fmt::format("expected \"{}\" (as {}), got \"{}\": shards made in different modes",
                                      a.meta["mode"].get<std::string>(), a.dir, f.meta["mode"].get<std::string>()));
    if (f.shard.count != a.shard.count)
      throw ScenarioError(where, "/shard",
                          fmt::format("expected a shard of {} (as {}), got {}", a.shard.count, a.dir, f.shard.text()));
    if (!seen.insert(f.shard.index).second)
      throw ScenarioError(where, "/shard", "expected each shard once, got shard " + f.shard.text() + " twice");
  }
}

}  // namespace

int merge_shards(const std::vector<std::string>& dirs, const std::string& out_dir, std::ostream& out) {
  namespace fs = std::filesystem;
  if (dirs.empty()) throw ScenarioError("--merge", "", "expected one or more shard folders");
  std::vector<ShardFolder> folders;
  for (const auto& d : dirs) folders.push_back(read_shard_folder(d));
  check_same_sweep_shards(folders);
  const SweepSpec s = spec_from_meta(folders.front().meta, folders.front().dir + "/sweep.json");
  std::map<size_t, ojson> rows;
  for (const ShardFolder& f : folders) {
    size_t line = 0;
    for (const ojson& r : f.rows.rows) {
      ++line;
      const size_t id = r["plan"].get<size_t>();
      if (id >= s.plan_count() || !f.shard.holds(id))
        throw ScenarioError(f.dir + "/results.jsonl", "line " + std::to_string(line),
                            fmt::format("a row of shard {} (plan {} is not one of its plans)", f.shard.text(), id));
      rows[id] = r;  // a later row of the same plan (its simulation after its estimate) replaces it
    }
  }
  std::set<size_t> present;
  for (const auto& f : folders) present.insert(f.shard.index);
  std::string missing_shards;
  for (size_t i = 1; i <= folders.front().shard.count; ++i)
    if (!present.count(i)) missing_shards += (missing_shards.empty() ? "" : ", ") + std::to_string(i);
  const size_t missing = s.plan_count() - rows.size();
  ojson meta = folders.front().meta;
  meta.erase("shard");
  meta["merged_shards"] = folders.size();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("cannot create output directory '" + out_dir + "': " + ec.message());
  write_sweep_results(out_dir, s, rows);
  write_files_atomically(out_dir, {{"sweep.json", meta.dump(1) + "\n"}});
  print_sweep_summary(s, rows, out);
  out << fmt::format("merged {} shard folder(s) of {}: {} rows\n", folders.size(), folders.front().shard.count,
                     rows.size());
  if (missing > 0)
    out << fmt::format("incomplete: {} plans have no row{}; run their shards again (with --resume) and merge again\n",
                       missing, missing_shards.empty() ? "" : " (shards not given: " + missing_shards + ")");
  out << fmt::format("wrote {}/results.jsonl and {}/results.csv\n", out_dir, out_dir);
  return missing > 0 ? 1 : 0;
}

}  // namespace exasim

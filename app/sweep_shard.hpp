// Spreading a sweep over a cluster: disjoint shards of its plans (--shard i/N), a Slurm job
// array whose tasks run the shards (--slurm), and the merge of the shards' folders into one
// ranked result (--merge).
//
// Shard i of N (1 <= i <= N) holds the plan ids p with p % N == i - 1: round robin, so that the
// expensive plans (usually neighbours in the product) spread over the shards. Each shard writes
// its own folder, with the sweep's fingerprint and its shard in DIR/sweep.json; --resume works
// per shard as for a whole sweep. The merge checks that every folder holds a shard of the same
// sweep (same fingerprint, same N, same mode), no shard twice, rows only of its own shard's
// plans, and writes the union sorted by plan id.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "app/sweep.hpp"

namespace exasim {

// "i/N" with 1 <= i <= N; throws ScenarioError naming `flag` otherwise.
ShardSpec parse_shard(const std::string& text, const std::string& flag = "--shard");

// --simulate-within P: a percentage above 0 and at most 100; throws ScenarioError otherwise.
double simulate_within_percent(const std::string& text);
// This executable's absolute path (/proc/self/exe), which a Slurm job's tasks run.
std::string self_executable();

struct SlurmOptions {
  size_t array_size = 0;  // tasks (= shards); 0: as many as the sweep has plans, at most 64
  std::string partition;  // empty: the cluster's default
  std::string time;       // empty: the partition's default; else a Slurm time ("30", "1:00:00", "2-00:00:00")
  bool submit = false;    // run sbatch on the script
  std::string exe;        // the exasim executable the tasks run (absolute)
};

// Checks a Slurm time limit's syntax (sbatch --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
// D-HH:MM:SS, or UNLIMITED. Throws ScenarioError naming --time.
void check_slurm_time(const std::string& t);

// The job-array script: task i runs `exasim sweep SWEEP --shard i/N --out DIR/shard-i --resume`
// with the sweep's mode flags, so that a task re-run after a kill continues its shard.
std::string slurm_script(const std::string& sweep_arg, const SweepSpec& s, const SweepOptions& o,
                         const SlurmOptions& so, size_t tasks);

// Writes DIR/slurm/sweep.sbatch (and with so.submit submits it with sbatch, printing the job id).
// A refused submission (sbatch exits non-zero) throws ScenarioError with sbatch's message and
// leaves no script behind. Returns the exit status.
int write_slurm_job(const std::string& sweep_arg, const SweepSpec& s, const SweepOptions& o, const SlurmOptions& so,
                    std::ostream& out);

// Joins the shard folders' rows into out_dir (results.jsonl, results.csv, sweep.json) and prints
// the ranked summary. Throws ScenarioError (exit 2, nothing written) for folders of different
// sweeps, modes or shard counts, a shard given twice, or a row outside its shard. Returns 0 when
// every plan has a row, 1 when some shards' plans are missing (the rows there are written).
int merge_shards(const std::vector<std::string>& dirs, const std::string& out_dir, std::ostream& out);

}  // namespace exasim

#include "sim/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace exasim {

namespace {

namespace fs = std::filesystem;

std::string os_error(int err) { return std::strerror(err); }

void create_dir(const fs::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw OutputError("cannot create the output folder '" + dir.string() + "': " + ec.message());
  if (!fs::is_directory(dir, ec)) throw OutputError("cannot use '" + dir.string() + "' as an output folder: not a folder");
}

// Opens a new file named `.NAME.tmp.PID.N` beside `final_path` (O_EXCL: never one another process
// or call of this process uses). Returns the descriptor and sets `tmp`.
int open_unique_temporary(const fs::path& final_path, fs::path& tmp) {
  static std::atomic<unsigned long> counter{0};
  const fs::path dir = final_path.has_parent_path() ? final_path.parent_path() : fs::path(".");
  for (int attempt = 0; attempt < 1000; ++attempt) {
    tmp = dir / ("." + final_path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                 std::to_string(counter++));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    if (errno != EEXIST) throw OutputError("cannot create '" + tmp.string() + "': " + os_error(errno));
  }
  throw OutputError("cannot find a free temporary name beside '" + final_path.string() + "'");
}

void write_all(int fd, const std::string& data, const fs::path& tmp) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw OutputError("cannot write '" + tmp.string() + "': " + os_error(errno));
    done += static_cast<size_t>(n);
  }
}

// Writes one file's content to its temporary name (synced to disk when asked); returns that name.
fs::path stage(const OutputFile& f, bool sync_to_disk) {
  fs::path tmp;
  const int fd = open_unique_temporary(fs::path(f.path), tmp);
  try {
    write_all(fd, f.content, tmp);
    if (sync_to_disk && ::fsync(fd) != 0) throw OutputError("cannot write '" + tmp.string() + "': " + os_error(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw OutputError("cannot write '" + tmp.string() + "': " + os_error(err));
  }
  return tmp;
}

}  // namespace

std::string read_text_file(const std::string& path, std::string& text) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "it is a directory";
  std::ifstream in(path, std::ios::binary);
  if (!in) return os_error(errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return "read error";
  text = ss.str();
  return "";
}

void write_outputs(const std::vector<OutputFile>& files, bool sync_to_disk) {
  for (const OutputFile& f : files) check_writable_file(f.path);  // what rename would refuse, refused first
  for (const OutputFile& f : files) create_dir(fs::path(f.path).parent_path());
  std::vector<fs::path> staged;
  try {
    for (const OutputFile& f : files) staged.push_back(stage(f, sync_to_disk));
  } catch (...) {
    for (const fs::path& tmp : staged) ::unlink(tmp.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i)
    if (::rename(staged[i].c_str(), files[i].path.c_str()) != 0) {
      const int err = errno;
      for (size_t j = i; j < staged.size(); ++j) ::unlink(staged[j].c_str());
      throw OutputError("cannot rename '" + staged[i].string() + "' to '" + files[i].path + "': " + os_error(err));
    }
}

void write_files_atomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<OutputFile> out;
  for (const auto& [name, content] : files) out.push_back({(fs::path(dir) / name).string(), content});
  if (out.empty()) create_dir(dir);
  write_outputs(out);
}

void check_writable_dir(const std::string& dir) {
  // The nearest folder that exists must be a folder we may write in: creating the rest then works.
  // Nothing is created here, so a command that fails later leaves no empty folder behind.
  fs::path p = fs::absolute(fs::path(dir.empty() ? "." : dir)).lexically_normal();
  std::error_code ec;
  while (!fs::exists(fs::symlink_status(p, ec)) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    throw OutputError("cannot create the output folder '" + dir + "': '" + p.string() + "': " + os_error(ENOTDIR));
  if (::access(p.c_str(), W_OK | X_OK) != 0)
    throw OutputError("cannot write in the output folder '" + dir + "': '" + p.string() + "': " + os_error(errno));
}

void check_writable_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw OutputError("cannot write '" + path + "': " + os_error(EISDIR));
  check_writable_dir(parent_dir(path));
}

std::string parent_dir(const std::string& file_path) {
  const fs::path p(file_path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

}  // namespace exasim

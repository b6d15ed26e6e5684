// Files in and out, one way each (every layer above sim/ uses these, none has its own).
//
// A file is read whole, or the reason it cannot be is returned (read_text_file).
//
// Output files are written whole or not at all: each goes to a temporary name unique to this
// process (so that two runs into one folder never share one), and every file of a command is
// renamed into place only after all of them have been written. A failure removes the temporary
// files, leaves no final file of the set written, and names the OS error.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace exasim {

// An output that cannot be written (a folder that cannot be created, a full disk): the message
// names the path and the OS error (strerror).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OutputFile {
  std::string path;  // where it ends up; its folder is created if missing
  std::string content;
};

// Reads the whole file at `path` into `text`. Returns "" when it did, else why it could not, in
// words for an error message: "it is a directory", the OS error (strerror) or "read error".
std::string read_text_file(const std::string& path, std::string& text);

// Writes every file to a unique temporary name beside its final path, then renames them all into
// place. Throws OutputError; on a failure before the renames, no final file is touched. With
// `sync_to_disk`, each file's data reaches the disk (fsync) before its rename.
void write_outputs(const std::vector<OutputFile>& files, bool sync_to_disk = false);

// The same for (relative name, content) pairs in one folder.
void write_files_atomically(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);

// Checks, without creating anything, that `dir` is or can be created as a folder this process may
// write in (its nearest existing ancestor is a writable folder), so that a command finds an
// unwritable output before its long work. Throws OutputError with the OS error.
void check_writable_dir(const std::string& dir);

// The same for a file: its folder as above, and the path itself not a folder.
void check_writable_file(const std::string& path);

// The folder a file path is written into ("." for a bare name).
std::string parent_dir(const std::string& file_path);

}  // namespace exasim

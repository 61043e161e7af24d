// The job secret: every TCP connection of a job (to the rendezvous store and
// between ranks) proves that it knows it. Where it comes from:
//   - RINGCC_SECRET, or the file RINGCC_SECRET_FILE names (ringrun sets
//     RINGCC_SECRET for every job; multi-host jobs under other launchers
//     must provide one);
//   - for a job whose ranks all run on one host, a file in a directory that
//     only this user can write to (SecretFile), made by whichever rank
//     comes first;
//   - through MPI, when the job meets through MPI.
// A multi-host job without one refuses to start unless RINGCC_INSECURE=1.
#pragma once

#include <sys/types.h>

#include <string>

namespace ringcc {

// RINGCC_SECRET, else the contents of the file RINGCC_SECRET_FILE names
// (surrounding white space removed); "" when neither is set. Raises
// Error(kInvalidArgument) when the file cannot be read or holds nothing.
std::string secret_from_env();

// RINGCC_INSECURE=1: a job whose ranks span hosts may start without a
// secret (its rendezvous store then runs unauthenticated).
bool insecure_allowed();

// Logs, once per process, the warning that goes with RINGCC_INSECURE=1.
void warn_insecure(const std::string& why);

// The directory that holds this user's secret files: one no other user can
// have made or write to (owned by us, mode 0700, not a symbolic link). The
// first of /dev/shm/ringcc-u<uid>, $XDG_RUNTIME_DIR/ringcc and
// ~/.cache/ringcc/secrets that is (or can be made) so; a name another user
// took first is passed over. Raises Error(kInvalidArgument) when none is.
std::string secret_directory();

// Removes the secret files whose creator, in this pid namespace, has exited
// (killed before it could remove its own). Best effort, never raises.
void remove_stale_secret_files();

// A job secret kept in a file of secret_directory(): mode 0600, owned by
// us, never followed through a symbolic link. The file records its
// creator's pid, so a file left by a killed process is recognised as stale
// and removed, and the job it belongs to. The object that made a file
// removes it when destroyed: its rank drops it once every rank has read
// it (a rank's join ends only after every rank posted where it runs, which
// each did after reading the file).
class SecretFile {
 public:
  SecretFile() = default;
  ~SecretFile() { remove(); }
  SecretFile(SecretFile&& other) noexcept;
  SecretFile& operator=(SecretFile&& other) noexcept;
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;

  // The file of a single-host job, named after `key` (the rendezvous
  // store's port and the launcher's job identity): the first rank to get
  // here creates it with a fresh secret, the others read it. A file whose
  // creator has exited is replaced.
  static SecretFile find_or_create(const std::string& key);
  // A new file under an unguessable name, for ranks that meet through a
  // store anyone may read: the path may be published there, the secret
  // stays in the file. It names `job`, the job it belongs to.
  static SecretFile create_unique(const std::string& job);
  // Reads a file that a peer made for `job` (its path came through the
  // store): raises Error(kInvalidArgument) unless it is a private file of
  // this user in its secret directory, in the expected format, made for
  // that job.
  static std::string read(const std::string& path, const std::string& job);

  const std::string& secret() const { return secret_; }
  // The file's path when this object made it, else "".
  const std::string& path() const { return path_; }
  // Removes the file this object made, if it is still the one it made.
  void remove();

 private:
  static SecretFile from(const std::string& path, const std::string& secret, dev_t dev, ino_t ino);

  std::string path_;
  std::string secret_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace ringcc

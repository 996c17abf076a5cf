#include "core/run_program.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace psbed {

std::string ProgramStatus::describe() const {
  if (!started) return "could not be started (" + error + ")";
  if (signal != 0) return "was killed by signal " + std::to_string(signal);
  return "exited with status " + std::to_string(exit_code);
}

ProgramStatus run_program(const std::vector<std::string>& argv, const ProgramOptions& options) {
  ProgramStatus status;
  if (argv.empty() || argv[0].empty()) {
    status.error = "no program named";
    return status;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // This process's environment with options.env set over it (an entry of the same name replaced).
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::size_t equals = entry.find('=');
    bool replaced = false;
    if (equals != std::string::npos) {  // an entry without '=' names nothing to replace
      const std::string name = entry.substr(0, equals + 1);
      for (const std::string& mine : options.env) replaced = replaced || mine.rfind(name, 0) == 0;
    }
    if (!replaced) env_text.push_back(entry);
  }
  for (const std::string& mine : options.env) env_text.push_back(mine);
  std::vector<char*> env;
  for (const std::string& e : env_text) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.stdout_to_stderr)
    posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  // glibc's posix_spawnp reports a program that cannot be executed (not found, not executable)
  // here, from the child, rather than as an exit status 127 a shell would give.
  const int rc = posix_spawnp(&pid, argv[0].c_str(), &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    status.error = argv[0] + ": " + std::strerror(rc);
    return status;
  }
  status.started = true;
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno == EINTR) continue;
    status.started = false;
    status.error = std::string("waiting for ") + argv[0] + ": " + std::strerror(errno);
    return status;
  }
  if (WIFEXITED(wstatus)) status.exit_code = WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) status.signal = WTERMSIG(wstatus);
  return status;
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=/.,:@%") == std::string::npos;
    std::string q = "'";
    for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + (plain ? a : q + "'");
  }
  return out;
}

}  // namespace psbed

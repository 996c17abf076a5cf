// Runs another program (a plot script, the PyTorch reference) with an argument vector and no
// shell in between: a path holding quotes, `;` or `$(...)` reaches the program as one argument
// and runs nothing else, which a command line pasted together for std::system cannot promise.
#pragma once
#include <string>
#include <vector>

namespace psbed {

struct ProgramOptions {
  // NAME=value entries set for the program on top of this process's environment.
  std::vector<std::string> env;
  // The program's standard output goes to this process's standard error, so that what it
  // prints stays out of a table or JSON this process writes to stdout.
  bool stdout_to_stderr = false;
};

struct ProgramStatus {
  bool started = false;  // false: it could not be run at all, `error` says why
  int exit_code = -1;    // its exit status where it exited, else -1
  int signal = 0;        // the signal that ended it, else 0
  std::string error;     // why it could not be started
  bool ok() const { return started && signal == 0 && exit_code == 0; }
  bool exited_with(int code) const { return started && signal == 0 && exit_code == code; }
  // "exited with status 3", "was killed by signal 9", "could not be started (No such file ...)".
  std::string describe() const;
};

// Runs argv[0] (looked up on PATH unless it holds a '/') with arguments argv[1...], its output
// and errors going where this process's go, and waits for it to end. Never throws for the
// program's own failure: that is in the status.
ProgramStatus run_program(const std::vector<std::string>& argv, const ProgramOptions& options = {});

// The command as one would type it in a shell, each argument quoted where it needs it: for
// messages that show what was run, never to be run.
std::string command_text(const std::vector<std::string>& argv);

}  // namespace psbed

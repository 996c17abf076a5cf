#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/run_program.hpp"

using namespace psbed;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name)
      : dir(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// The attack a command line pasted for a shell let through: `validate --out "x';touch y;'"`
// ran touch. Here the same text is one argument: the file of that odd name is made, nothing
// else runs.
TEST_CASE("run_program hands a path with quotes and ; to the program intact",
          "[core][run_program]") {
  const Scratch tmp("psbed-run-program");
  // Through a shell, `touch 'ODD'` would touch INJECTED in the working folder, twice over.
  const std::string injected = "psbed-injected-" + std::to_string(::getpid());
  const std::string odd = (tmp.dir / ("x';touch " + injected + ";'y $(touch " + injected +
                                      ") `touch " + injected + "` \"q\""))
                              .string();
  const ProgramStatus s = run_program({"touch", odd});
  INFO(s.describe());
  CHECK(s.ok());
  CHECK(fs::exists(odd));
  CHECK_FALSE(fs::exists(injected));

  // Each argument arrives as given, spaces and all.
  const fs::path out = tmp.dir / "args";
  REQUIRE(
      run_program({"/bin/sh", "-c", "printf '%s|' \"$@\" > \"$0\"", out.string(), odd, "a b", ""})
          .ok());
  CHECK(read(out) == odd + "|a b||");
  CHECK_FALSE(fs::exists(injected));
}

TEST_CASE("run_program reports how the program ended", "[core][run_program]") {
  const ProgramStatus three = run_program({"/bin/sh", "-c", "exit 3"});
  CHECK(three.started);
  CHECK(three.exited_with(3));
  CHECK_FALSE(three.ok());
  CHECK(three.describe() == "exited with status 3");

  const ProgramStatus killed = run_program({"/bin/sh", "-c", "kill -9 $$"});
  CHECK(killed.started);
  CHECK(killed.signal == 9);
  CHECK(killed.describe() == "was killed by signal 9");

  const ProgramStatus missing = run_program({"/nonexistent/psbed-no-such-program", "x"});
  CHECK_FALSE(missing.started);
  CHECK_FALSE(missing.ok());
  CHECK_THAT(missing.describe(), Catch::Matchers::Contains("could not be started") &&
                                     Catch::Matchers::Contains("psbed-no-such-program"));
  CHECK_FALSE(run_program({}).started);
}

TEST_CASE("run_program sets the environment it is given and can send stdout to stderr",
          "[core][run_program]") {
  const Scratch tmp("psbed-run-program-env");
  const fs::path out = tmp.dir / "env";
  ProgramOptions o;
  o.env = {"PSBED_RUN_PROGRAM_TEST=one", "HOME=/psbed-home"};
  REQUIRE(
      run_program({"/bin/sh", "-c", "printf '%s %s' \"$PSBED_RUN_PROGRAM_TEST\" \"$HOME\" > \"$0\"",
                   out.string()},
                  o)
          .ok());
  CHECK(read(out) == "one /psbed-home");

  // This process's stderr pointed at a file for the call: the program's stdout lands there.
  const fs::path err = tmp.dir / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  { std::ofstream create(err); }
  const int fd = ::open(err.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  ::dup2(fd, STDERR_FILENO);
  ::close(fd);
  o = {};
  o.stdout_to_stderr = true;
  const ProgramStatus s = run_program({"/bin/sh", "-c", "echo to-stdout"}, o);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  CHECK(s.ok());
  CHECK(read(err) == "to-stdout\n");
}

TEST_CASE("command_text quotes what a shell would split", "[core][run_program]") {
  CHECK(command_text({"python3", "/a/b.py", "--x", "1"}) == "python3 /a/b.py --x 1");
  CHECK(command_text({"python3", "a b", "it's", ""}) == "python3 'a b' 'it'\\''s' ''");
}

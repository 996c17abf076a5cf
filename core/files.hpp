// Output paths checked before long work: a run, a benchmark or a simulation that ends unable to
// write its results has lost them, so every command that writes a file checks where first.
#pragma once
#include <cstdint>
#include <string>

namespace psbed {

// Creates folder `dir` (with its parents) and checks that a file can be written in it. Errors
// (psbed::Error) name `flag`, the folder and the system's reason. Nothing to do for "".
void ensure_writable_dir(const std::string& dir, const std::string& flag);

// Checks that file `path` can be written, its folder created; an existing file is left as it is.
// Nothing to do for "".
void ensure_writable_file(const std::string& path, const std::string& flag);

// Writes `text` to `path` (replacing it); the error names the file and the system's reason.
void write_text_file(const std::string& path, const std::string& text);

// The memory the kernel says could be had without swapping (MemAvailable in /proc/meminfo), in
// bytes; 0 where it cannot be read. For refusing, with a clear line, work that would be killed
// for memory halfway.
std::uint64_t available_memory_bytes();

// "1.5 GiB", "300.0 MiB": a byte count for an error line.
std::string format_memory(std::uint64_t bytes);

}  // namespace psbed

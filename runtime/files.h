// Files written whole or not at all.
#pragma once
#include <string>

namespace ocrt {

// Writes bytes to path atomically: a temporary file beside it (path + ".tmp." + the process
// id), flushed to disk, then renamed over path, so that a reader or a crash never sees half a
// file. Throws a one-line error naming the file; the temporary file is removed on failure.
// Callers that write one path from several threads of a process at once must serialise them.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace ocrt

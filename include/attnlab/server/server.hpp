// `attnlab serve`: the lab's page (compiled into the binary) and the JSON API over HTTP.
#pragma once
#include <memory>
#include <string>

namespace attnlab {

class LabServer {
 public:
  LabServer();
  ~LabServer();

  // Binds to host:port (port 0 picks a free one) and returns the port bound. Throws
  // InputError when the address cannot be used (in use, not an address of this machine).
  int bind(const std::string& host, int port);
  // Serves until stop() is called (from another thread or a signal watcher).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnlab

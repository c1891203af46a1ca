#include "tests/support/client_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace pglock::testing {

ClientProcess::ClientProcess(const std::vector<std::string>& argv,
                             const std::vector<std::string>& env) {
  char path[] = "/tmp/pglock-client-XXXXXX";
  const int out = mkstemp(path);
  if (out < 0) return;
  output_path_ = path;
  int in[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    close(out);
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data()) == 0) pid_ = pid;
  posix_spawn_file_actions_destroy(&actions);
  close(in[0]);
  close(out);
  stdin_fd_ = in[1];
}

ClientProcess::~ClientProcess() {
  if (pid_ > 0 && Wait(0) == -1) Kill(SIGKILL);
  CloseInput();
  if (!output_path_.empty()) unlink(output_path_.c_str());
}

bool ClientProcess::Write(const std::string& text) {
  if (stdin_fd_ < 0) return false;
  // A client that died makes the write fail, not the test binary.
  signal(SIGPIPE, SIG_IGN);
  return write(stdin_fd_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void ClientProcess::CloseInput() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

void ClientProcess::Kill(int signal) {
  if (pid_ <= 0 || status_ != -1) return;
  kill(pid_, signal);
  Wait(10);
}

int ClientProcess::Wait(double seconds) {
  if (pid_ <= 0) return -1;
  if (status_ != -1) return status_;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = status;
      return status_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (std::chrono::steady_clock::now() < until);
  return -1;
}

std::string ClientProcess::Output() const {
  std::ifstream in(output_path_);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pglock::testing

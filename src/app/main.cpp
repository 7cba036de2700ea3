// mpt's entry point: the CLI table (app/cli.h) parsed, the subcommand run, its errors turned into the documented exit
// codes with one escaped line each.
#include <c10/util/Exception.h>

#include <csignal>
#include <filesystem>
#include <iostream>

#include "app/cli.h"
#include "common/echo.h"
#include "common/error.h"
#include "hardware/hardware.h"
#include "run/plugins.h"

namespace {

// A path the system refuses for what it is (too long, a file where a folder belongs, a loop, no permission) is
// the user's to fix; a disk that fails or fills is the run's failure.
bool is_path_mistake(const std::error_code& code) {
  for (std::errc mistake : {std::errc::filename_too_long, std::errc::not_a_directory, std::errc::is_a_directory,
                            std::errc::no_such_file_or_directory, std::errc::too_many_symbolic_link_levels,
                            std::errc::permission_denied, std::errc::file_exists})
    if (code == mistake) return true;
  return false;
}

// `mpt help [CMD]`, an unknown command named with the nearest one, and a bare "++" (which CLI11 takes for the end
// of a subcommand's arguments and drops), before CLI11 parses: an exit code, or -1 to go on.
int before_parsing(mpt::app::Cli& cli, int argc, char** argv) {
  for (int i = 2; i < argc; ++i)
    if (std::string(argv[i]) == "++") {
      std::cerr << "mpt: error: override '++': expected key=value (+key=value adds, ++key=value adds or sets, ~key "
                   "deletes), e.g. ++optimizer.lr=3e-4\n";
      return mpt::kExitUsage;
    }
  if (argc < 2 || argv[1][0] == '-') return -1;
  const bool help = std::string(argv[1]) == "help";
  const std::string command = help ? (argc >= 3 ? argv[2] : "") : argv[1];
  if (help && command.empty()) return std::cout << cli.app().help(), mpt::kExitOk;
  CLI::App* sub = cli.command(command);
  if (!sub) {
    std::cerr << "mpt: error: unknown command '" << mpt::echo(command) << "'" << cli.nearest_command(command)
              << "; `mpt --help` lists them\n";
    return mpt::kExitUsage;
  }
  if (help) return std::cout << sub->help(), mpt::kExitOk;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe or the file-size limit then fails the write with a message naming the file (EPIPE, EFBIG)
  // instead of killing mpt silently.
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGXFSZ, SIG_IGN);
  mpt::hardware::tune_host_allocator();
  mpt::run::install_plugins();
  mpt::app::Cli cli;
  if (const int code = before_parsing(cli, argc, argv); code >= 0) return code;
  try {
    cli.app().parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return cli.app().exit(e);  // --help, --version
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << cli.nearest_option(argc, argv) << "\n"
              << "Run with --help for more information.\n";
    return mpt::kExitUsage;  // CLI11's own codes (100-115) are not ours
  }
  try {
    return cli.run();
  } catch (const mpt::Error& e) {
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << "\n";
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "mpt: error: " << mpt::echo(e.path1().string(), 4096) << ": " << e.code().message() << "\n";
    return is_path_mistake(e.code()) ? mpt::kExitUsage : mpt::kExitRunFailed;
  } catch (const c10::Error& e) {
    std::cerr << "mpt: error: LibTorch: " << mpt::terminal_safe(e.what_without_backtrace()) << "\n";
    return mpt::kExitRunFailed;
  } catch (const std::bad_alloc&) {  // a file mpt did not bound, or a model too large for this machine
    std::cerr << "mpt: error: out of memory (std::bad_alloc): a smaller data.batch_size or model may fit\n";
    return mpt::kExitRunFailed;
  } catch (const std::exception& e) {
    std::cerr << "mpt: error: " << mpt::terminal_safe(e.what()) << "\n";
    return mpt::kExitRunFailed;
  }
}

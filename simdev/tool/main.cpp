// `simdev`: the simulated device's own tool. main only parses arguments and dispatches.
// Exit codes, as calrt's: 0 done, 1 the work failed, 2 usage or bad input. Logs and errors go
// to stderr; stdout carries only what scripts read (the preset list, serve's listening lines).
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "simdev/gen/generate.hpp"
#include "simdev/service/server/server.hpp"
#include "version/version.hpp"

namespace {

constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;

std::string joined_command_line(int argc, char** argv) {
  std::string command = "simdev";
  for (int i = 1; i < argc; ++i) {
    command += " ";
    command += argv[i];
  }
  return command;
}

int run_gen(simdev::gen::GenOptions options) {
  // The seed and every derived option come first, so any run can be replayed from its log.
  spdlog::info("gen: {} seed={} out={} golden={} long_cases={} force={}",
               options.config_file.empty() ? "preset=" + options.preset
                                           : "config=" + options.config_file.string(),
               options.seed, options.out_dir.string(), options.with_golden, options.long_cases,
               options.force);
  if (auto checked = simdev::gen::check_gen_options(options); !checked) {
    spdlog::error("gen: {}", checked.error().to_string());
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto manifest = simdev::gen::generate(options);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!manifest) {
    spdlog::error("gen failed: {}", manifest.error().to_string());
    spdlog::error("replay with: {}", options.command_line);
    return kExitFail;
  }
  spdlog::info("wrote {} ({} models, {} weight shards, {} files) in {:.2f} s",
               options.out_dir.string(), manifest->models.size(), manifest->weights.size(),
               manifest->files.size(), elapsed.count());
  return 0;
}

int run_presets() {
  for (const auto& preset : simdev::gen::presets()) {
    std::printf("%-16s %-11s %s\n", preset.name.c_str(),
                preset.functional ? "functional" : "timing", preset.description.c_str());
  }
  return 0;
}

int run_serve(const simdev::service::server::ServerOptions& options, const std::string& log_level) {
  // stdout carries the listening lines and the summary that scripts read; logs go to stderr.
  auto logger = spdlog::stderr_color_mt("simdev-serve");
  logger->set_level(spdlog::level::from_str(log_level));
  spdlog::set_default_logger(logger);
  // A decode step's answer carries its output row (303872 B for the reference model), made on
  // the device lane and freed on the io thread. glibc serves the first such block by mmap,
  // then raises its thresholds and trims the lane's heap as the blocks are freed: 245 page
  // faults per step (benchmarks/README.md, "The batch's wait on the device lane"). Fixed
  // thresholds keep them in the heaps; the daemon keeps at most 32 MiB per heap unreturned.
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  return simdev::service::server::run_server(options);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"simdev: the simulated Calculet NPU's tool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", calrt_version::line("simdev"));
  app.footer("Exit codes: 0 done; 1 the work failed; 2 usage or bad input.");

  simdev::gen::GenOptions gen_options;
  std::string out_dir;
  bool no_golden = false;
  bool no_long = false;
  CLI::App* gen = app.add_subcommand("gen", "write a calbin directory for a preset");
  CLI::Option* preset_option =
      gen->add_option("--preset", gen_options.preset, "preset name (see `simdev presets`)")
          ->capture_default_str();
  gen->add_option("--config", gen_options.config_file,
                  "the model from a file instead: a Hugging Face config.json (qwen3, qwen3_moe, "
                  "llama) or the project's YAML (simdev/gen/README.md)")
      ->excludes(preset_option);
  gen->add_option("--weights", gen_options.weights_dir,
                  "with --config: the weights from this Hugging Face checkpoint directory "
                  "(model.safetensors, or shards and model.safetensors.index.json; F32, BF16, "
                  "F16) instead of seeded ones");
  gen->add_option("--out", out_dir, "output calbin directory")->required();
  gen->add_option("--seed", gen_options.seed, "master seed of weights and golden prompts")
      ->capture_default_str();
  gen->add_flag("--no-golden", no_golden, "skip the golden set");
  gen->add_flag("--no-long", no_long, "skip the long golden prompts (4095 tokens and up)");
  gen->add_flag("--force", gen_options.force, "replace the output directory if it exists");
  gen->add_option("--threads", gen_options.threads, "golden threads (0: all cores)")
      ->capture_default_str();
  gen->add_option("--decode-top-k", gen_options.decode_top_k,
                  "a decode that ranks on the device: each row gives its K best token ids and "
                  "their logits instead of the full row (the model's decode_top_k)")
      ->check(CLI::Range(1u, 1u << 30));

  CLI::App* list = app.add_subcommand("presets", "list the presets gen knows");

  simdev::service::server::ServerOptions serve_options;
  uint32_t tcp_port = 0;
  std::string log_level = "info";
  CLI::App* serve = app.add_subcommand("serve", "serve the simulated device over a socket");
  CLI::Option* socket_option =
      serve->add_option("--socket", serve_options.socket_path,
                        "Unix socket path (created 0600); default RUNTIME_DIR/calrt.sock");
  serve
      ->add_option("--runtime-dir", serve_options.runtime_dir,
                   "the daemon's own directory for its socket, created 0700 (0711 with "
                   "--allow-*); default $XDG_RUNTIME_DIR/calrt")
      ->excludes(socket_option);
  serve
      ->add_option("--allow-uid", serve_options.allow_uids,
                   "another uid that may connect through the socket (repeatable; the socket "
                   "becomes 0666 and the kernel's peer credentials decide)")
      ->check(CLI::Range(0u, 4294967294u));
  serve
      ->add_option("--allow-gid", serve_options.allow_gids,
                   "a group whose members (by primary group) may connect (repeatable; the "
                   "socket becomes 0660 with the first one as its group)")
      ->check(CLI::Range(0u, 4294967294u));
  serve
      ->add_option("--control-uid", serve_options.control_uids,
                   "a uid that may connect and make device-wide calls (reset, parallel mode, "
                   "fault plan) like the daemon's own uid and root (repeatable)")
      ->check(CLI::Range(0u, 4294967294u));
  CLI::Option* tcp_option =
      serve
          ->add_option("--tcp", tcp_port,
                       "also listen on 127.0.0.1:PORT (0: any free port); needs --token-file")
          ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--token-file", serve_options.token_file,
                   "the secret TCP clients must send (their CALRT_TOKEN_FILE): a 0600 file of "
                   "this uid, at least 16 characters on its first line")
      ->needs(tcp_option);
  serve->add_flag("--allow-root", serve_options.allow_root,
                  "run even as root (root reads every file a client names under the roots)");
  serve->add_option("--device-config", serve_options.device_config,
                    "Device_Create config under every client's keys");
  serve->add_option("--max-clients", serve_options.max_clients, "concurrent clients")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  serve
      ->add_option("--calbin-root", serve_options.calbin_roots,
                   "a directory clients may load calbins from (repeatable; none: any path)")
      ->check(CLI::ExistingDirectory);
  serve
      ->add_option("--max-connections", serve_options.max_connections,
                   "open connections, those that have not said hello included")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  serve
      ->add_option("--handshake-timeout-ms", serve_options.handshake_timeout_ms,
                   "close a connection without hello and Device_Create after this long")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  serve
      ->add_option("--idle-timeout-ms", serve_options.idle_timeout_ms,
                   "close an attached session that sends nothing and awaits no answer for this "
                   "long (0: never)")
      ->check(CLI::Range(0u, 86400000u))
      ->capture_default_str();
  serve->add_option("--keepalive-ms", serve_options.keepalive_ms, "keepalive period")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  serve
      ->add_option("--configure-wait-ms", serve_options.configure_wait_ms,
                   "how long a Calbin_Configure waits for no job in flight")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  serve->add_option("--log-level", log_level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();

  // CLI11 would answer an unknown first word with "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    try {
      app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      std::fprintf(stderr, "simdev: unknown command '%s' (commands: %s; see simdev --help)\n",
                   argv[1], names.c_str());
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : kExitUsage;
  }
  auto logger = spdlog::stderr_color_st("simdev");
  logger->set_pattern("simdev: %^%l%$: %v");
  spdlog::set_default_logger(logger);

  if (serve->parsed()) {
    if (serve_options.max_connections < serve_options.max_clients) {
      spdlog::error(
          "serve: --max-connections {} is below --max-clients {}: the clients could "
          "never all connect",
          serve_options.max_connections, serve_options.max_clients);
      return kExitUsage;
    }
    if (tcp_option->count() > 0) {
      if (serve_options.token_file.empty()) {
        spdlog::error(
            "serve: --tcp {} needs --token-file: any local user can connect to a loopback "
            "port, and the token is what tells the daemon's clients from them",
            tcp_port);
        return kExitUsage;
      }
      serve_options.tcp_port = static_cast<uint16_t>(tcp_port);
    }
    if (::geteuid() == 0 && !serve_options.allow_root) {
      spdlog::error(
          "serve: running as root; run the daemon as an unprivileged user, or pass "
          "--allow-root to accept that clients' calbin paths are opened with root's rights");
      return kExitUsage;
    }
    return run_serve(serve_options, log_level);
  }

  if (gen->parsed()) {
    gen_options.out_dir = out_dir;
    gen_options.with_golden = !no_golden;
    gen_options.long_cases = !no_long;
    gen_options.command_line = joined_command_line(argc, argv);
    return run_gen(gen_options);
  }
  if (list->parsed()) {
    return run_presets();
  }
  return kExitUsage;  // unreachable: CLI11 requires one subcommand
}

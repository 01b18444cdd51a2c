#include "runner/scenario/recovery.hpp"

#include <spdlog/fmt/fmt.h>

namespace runner {

std::optional<nlohmann::json> Recovery::hang_report() {
  const auto diag = calrt::DeviceDiag::of(device_);
  if (!diag) {
    return std::nullopt;
  }
  try {
    const std::string text = diag.report();
    auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      return nlohmann::json{{"text", text}};
    }
    return parsed;
  } catch (const calrt::Error& error) {
    event_(fmt::format("hang report refused: {}", error.what()));
    return std::nullopt;
  }
}

SelfTest Recovery::self_test() {
  SelfTest test;
  try {
    const calrt::DeviceStatus status = device_.status();
    test.lost = status.state == calrt::DeviceState::lost;
    test.passed =
        status.state == calrt::DeviceState::open || status.state == calrt::DeviceState::configured;
    test.detail = fmt::format("state {}, chips", calrt::to_string(status.state));
    for (uint32_t c = 0; c < status.chip_count && c < CALRT_MAX_CHIPS; ++c) {
      const calrt::ChipHealth health = device_.chip_status(c).health;
      test.detail += fmt::format(" {}", calrt::to_string(health));
      test.passed =
          test.passed && (health == calrt::ChipHealth::ok || health == calrt::ChipHealth::degraded);
    }
  } catch (const calrt::Error& error) {
    test.passed = false;
    test.lost = error.code() == CALRT_DEVICE_LOST;
    test.detail = error.what();
  }
  return test;
}

calrt::DeviceState Recovery::reset(calrt::ResetLevel level) {
  ++resets_;
  return meter_.timed("Device_Reset", [&] { return device_.reset(level, kResetTimeout); });
}

LadderResult Recovery::climb(const std::function<void(calrt::ResetLevel)>& on_reset) {
  constexpr calrt::ResetLevel kLadder[] = {calrt::ResetLevel::job_abort, calrt::ResetLevel::cores,
                                           calrt::ResetLevel::chip, calrt::ResetLevel::full};
  LadderResult result;
  for (const calrt::ResetLevel level : kLadder) {
    try {
      reset(level);
    } catch (const calrt::Error& error) {
      on_reset(level);
      event_(fmt::format("reset {}: {}", to_string(level), error.what()));
      if (error.code() == CALRT_DEVICE_LOST) {
        result.lost = true;
        return result;
      }
      if (bug_ == PolicyBug::single_level) {
        result.level = level;
        return result;
      }
      continue;
    }
    on_reset(level);
    if (bug_ == PolicyBug::single_level) {
      event_(fmt::format("reset {}: assumed to have worked", to_string(level)));
      result.level = level;
      return result;
    }
    const SelfTest test = self_test();
    event_(fmt::format("reset {}: self-test {} ({})", to_string(level),
                       test.passed ? "passed" : "failed", test.detail));
    if (test.lost) {
      result.lost = true;
      return result;
    }
    if (test.passed) {
      result.level = level;
      return result;
    }
  }
  return result;
}

}  // namespace runner

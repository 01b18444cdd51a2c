// VER.5 (a too-small struct_size is STRUCT_TOO_SMALL) must try every entry that takes an args
// struct. The list of entries is read from the headers themselves, from their
// CALRT_*_ARGS_STRUCT_SIZE macros, so that an entry added to calrt.h or calrt_ext.h without
// a VER.5 check fails here instead of going unchecked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// "Clock_HostSpend" and "CLOCK_HOST_SPEND" name the same entry.
std::string key(std::string name) {
  std::erase(name, '_');
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return name;
}

std::set<std::string> matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    found.insert(key((*it)[1].str()));
  }
  return found;
}

// Entries VER.5 leaves out, and why.
const std::map<std::string, std::string>& exempt() {
  static const std::map<std::string, std::string> reasons = {
      {key("Error_Destroy"), "returns void: calrt.h says it never fails"},
      {key("Error_Message"), "returns void: calrt.h says it never fails"},
      {key("Error_GetCode"), "returns void: calrt.h says it never fails"},
  };
  return reasons;
}

TEST(StructSizeCoverage, Ver5TriesEveryArgsStructOfTheHeaders) {
  const std::regex macro(R"(#define CALRT_(\w+)_ARGS_STRUCT_SIZE)");
  std::set<std::string> entries = matches(read(CALRT_ABI_DIR "/calrt.h"), macro);
  const std::set<std::string> extension = matches(read(CALRT_ABI_DIR "/calrt_ext.h"), macro);
  entries.insert(extension.begin(), extension.end());
  ASSERT_GE(entries.size(), 40u) << "the headers lost their size macros";

  const std::string clause = read(CALRT_VER_CLAUSES);
  // The macro-driven checks, and the four written out first (they also try struct_size 0
  // or check that no out field was written).
  // Uses at the start of a line, not the macros' own #define lines.
  std::set<std::string> tried = matches(clause, std::regex(R"(\n\s+CONF_SMALL\w*\((\w+),)"));
  const std::set<std::string> written_out = matches(
      clause,
      std::regex(R"(args_of<Calrt_(Device_Create|Device_Status|Calbin_GetInfo|Job_Wait)_Args>)"));
  EXPECT_EQ(written_out.size(), 4u);
  tried.insert(written_out.begin(), written_out.end());
  for (const std::string& entry : entries) {
    if (exempt().contains(entry)) continue;
    EXPECT_TRUE(tried.contains(entry))
        << entry << " takes an args struct, and VER.5 does not try it with struct_size - 1";
  }
  for (const std::string& entry : tried) {
    EXPECT_TRUE(entries.contains(entry)) << entry << ": VER.5 tries an entry the headers lack";
  }
}

}  // namespace
